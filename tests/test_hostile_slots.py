"""Slot mutants (tests/hostile_models.py SLOT_MUTATIONS): a fetch whose region, shape or size is not
what its slot's Spill wrote, or a slot nothing wrote. The kernels refuse each (CheckSlot at Invoke,
or Prepare's operand geometry); the fallback check lowers a fetch to the tensor spilled to its slot,
so without the contract's slot rule (contract/bodies.py validate_graph) it would check another
computation and call it bit-identical. Here `tinyseg analyze` and the fallback `tinyseg verify`
refuse each with exit 2 and one sentence naming the slot, and, with TFLM_DIR, the real-kernel
runner refuses each with every region the model names attached (so a region mutant meets the
kernels at Invoke, not a missing region at Prepare)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import hostile_models
import pytest

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.contract import bodies
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model

ROOT = Path(__file__).resolve().parents[1]
SLOT_MUTATIONS = [mu for mu in hostile_models.MUTATIONS if mu.name in hostile_models.SLOT_MUTATIONS]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return hostile_models.generate(tmp_path_factory.mktemp("slots"))


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != real_kernels.ENV_TFLM}  # the fallback check
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def _one_sentence(p: subprocess.CompletedProcess) -> str:
    """The refusal's line, or '' when the run was not one refusal of one line naming a slot."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    ok = p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr
    return lines[0] if ok and "slot" in lines[0] else ""


def test_the_generator_has_the_slot_mutants() -> None:
    assert len(SLOT_MUTATIONS) == len(hostile_models.SLOT_MUTATIONS) >= 6


def test_analyze_and_the_fallback_verify_refuse_every_slot_mutant(
    models: dict[str, Path], counts
) -> None:
    assert _cli("analyze", str(models["base_fetch"])).returncode == 0
    original = str(hostile_models.TINY_UNET)
    missed = {}
    for mu in SLOT_MUTATIONS:
        path = str(models[mu.name])
        analyzed, verified = _cli("analyze", path), _cli("verify", original, path)
        if not _one_sentence(analyzed) or not _one_sentence(verified) or verified.stdout.strip():
            missed[mu.name] = (analyzed.returncode, analyzed.stderr, verified.returncode, verified)
    line = (
        f"slot mutants: {len(SLOT_MUTATIONS)}, refused by analyze and the fallback verify: "
        f"{len(SLOT_MUTATIONS) - len(missed)}"
    )
    print("\n" + line)
    counts(line)
    assert not missed, missed


def _tflm_dir() -> str:
    d = os.environ.get(real_kernels.ENV_TFLM)
    if not d or not (Path(d) / "tensorflow/lite/micro/tools/make/downloads/flatbuffers").is_dir():
        pytest.skip("set TFLM_DIR to a TFLM 90b983c tree with its downloads (make test sets it)")
    return d


def test_the_real_kernels_refuse_every_slot_mutant(
    models: dict[str, Path], tmp_path: Path, counts
) -> None:
    """Region 0 and one RAM region more attached (every region a mutant names), so a mutant whose
    fetch names region 1 meets CheckSlot at Invoke; the bases run clean in the same set-up."""
    exe = real_kernels.prepare(_tflm_dir())
    inputs = tmp_path / "in.bin"
    refused, reasons = 0, {}
    for name in ["base_fetch", "base_stream", *(mu.name for mu in SLOT_MUTATIONS)]:
        base = build_graph(load_model(models["base_stream" if "stream" in name else "base_fetch"]))
        inputs.write_bytes(bytes(sum(base.tensors[t].nbytes for t in base.inputs)))
        p = subprocess.run(
            [str(exe), str(models[name]), str(inputs), str(tmp_path / "out.bin")]
            + ["--storage", str(1 << 24), "--ram-region", str(1 << 24)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if name.startswith("base_"):
            assert p.returncode == 0, (name, p.stderr[-2000:])
            continue
        reasons[name] = real_kernels.failure_reason(p.stderr)
        refused += p.returncode > 0
    line = f"slot mutants: {len(SLOT_MUTATIONS)}, refused by the real kernels: {refused}"
    print("\n" + line)
    for name, reason in reasons.items():
        print(f"  {name}: {reason}")
    counts(line)
    assert refused == len(SLOT_MUTATIONS), reasons


def test_a_slot_fetched_again_after_its_fetch_released_it_is_refused(
    models: dict[str, Path],
) -> None:
    """Runtime::release_after_fetch (on by default) frees a slot once a Fetching or FetchingConv2D
    has read it: a second FetchingConv2D of the same slot, no Spill in between, finds it empty."""
    model = load_model(models["base_fetch"])
    ops = model.subgraphs[0].operators
    codes = [c.customCode for c in model.operatorCodes]
    k = next(
        i
        for i, op in enumerate(ops)
        if codes[op.opcodeIndex] in (b"FetchingConv2D", "FetchingConv2D")
    )
    ops.insert(k + 1, copy.deepcopy(ops[k]))
    with pytest.raises(
        TinySegError, match=r"fetches slot 0, which operator \d+ \(FetchingConv2D\) already fetched"
    ):
        bodies.validate_graph(build_graph(model))
    bodies.validate_graph(build_graph(load_model(models["base_fetch"])))  # one reader: accepted
