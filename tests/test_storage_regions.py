"""Spill slots in several storage regions, run by the real kernels: an optimized model whose slots are
moved to regions 1..3 (two RAM regions and the NOR flash simulator, tinyseg_run's --ram-region and
--flash-region) computes bit-identically to the original, each region holds the slots the options
name, and a model naming a region the Runtime lacks is refused in Prepare with one sentence.
Needs TFLM_DIR (as tests/test_real_kernels.py); the runner is built once and cached."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import regions
import synth

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.checks.verify import REAL_KERNELS, verify
from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.graph import Graph, build_graph
from tinyseg_plugin.ir.modelio import save_model
from tinyseg_plugin.transforms.optimizer import Options, search_plans

# Region 0 is the runner's --storage RAM; 1 and 2 RAM, 3 the NOR flash simulator.
REGION_ARGS = ["--ram-region", "1048576", "--ram-region", "1048576", "--flash-region", "1048576"]
MAPPINGS = {
    "ram-first": lambda s: (1, 2, 3, 0)[s % 4],
    "flash-first": lambda s: (3, 2, 1, 0)[s % 4],
}
# (seed, optimizer options): every TinySeg kernel that reaches storage.
CASES = {
    "StreamChain": (0, Options(smallest=True)),
    "FetchingConv2D": (0, Options(smallest=True, stream=False)),
    "Fetching": (2, Options(smallest=True, stream=False, scratch=False, layout=False)),
}


@pytest.fixture(scope="module")
def runner() -> Path:
    d = os.environ.get(real_kernels.ENV_TFLM)
    if not d:
        pytest.skip("set TFLM_DIR to a TFLM 90b983c tree with its third-party downloads")
    if not (Path(d) / "tensorflow/lite/micro/tools/make/downloads/flatbuffers").is_dir():
        pytest.skip(f"TFLM_DIR={d} lacks its third-party downloads")
    return real_kernels.prepare(d)


def _input(graph: Graph, seed: int) -> bytes:
    """Random bytes for the model's int8 inputs (every byte pattern is a valid int8)."""
    sub = graph.model.subgraphs[0]
    n = sum(int(np.prod(sub.tensors[i].shape)) for i in sub.inputs)
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def _run(exe: Path, graph: Graph, data: bytes, tmp: Path, *extra: str, prefix: tuple = ()):
    """The runner on one input; ``prefix`` runs it under an emulator (build_e2e.QEMU_M7), whose
    semihosting takes a short command line: names relative to ``tmp``."""
    save_model(graph.model, tmp / "model.tflite")
    (tmp / "in.bin").write_bytes(data)
    (tmp / "out.bin").unlink(missing_ok=True)
    if prefix:
        (tmp / "tinyseg_run").unlink(missing_ok=True)
        (tmp / "tinyseg_run").symlink_to(Path(exe).resolve())
        exe = Path("./tinyseg_run")
    proc = subprocess.run(
        [*prefix, str(exe), "model.tflite", "in.bin", "out.bin", *extra],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp,
    )
    out = tmp / "out.bin"
    stats = {}
    for line in proc.stdout.splitlines():
        name, _, value = line.partition(" ")
        if value.isdigit():
            stats[name] = int(value)
    return proc, (out.read_bytes() if out.exists() else None), stats


def _optimized(case: str, profile: str = "") -> tuple[Graph, Graph]:
    """The original random U-Net and its optimization (for ``profile``'s planner rules if given)."""
    seed, options = CASES[case]
    if profile:
        options = dataclasses.replace(options, build_profile=profile)
    graph = build_graph(synth.random_unet(seed, dtype="INT8"))
    opt = search_plans(graph, options).graph
    assert {op.opcode for op in opt.operators if customops.is_tinyseg_op(op)} >= {case}
    return graph, opt


def check_regions(
    host: Path, exe: Path, tmp: Path, case: str, mapping: str, prefix: tuple = (), profile: str = ""
) -> dict[str, int]:
    """``case``'s model with its slots placed by ``mapping`` runs on ``exe`` (under ``prefix``) with
    REGION_ARGS bit-identically to the original on the ``host`` runner, each region holding exactly
    the slots the options put there; returns the run's statistics."""
    graph, opt = _optimized(case, profile)
    region_of = MAPPINGS[mapping]
    placed = regions.place(opt, region_of)
    data = _input(graph, 1)
    proc, want, _ = _run(host, graph, data, tmp)
    assert proc.returncode == 0, proc.stderr
    proc, got, stats = _run(exe, placed, data, tmp, *REGION_ARGS, prefix=prefix)
    assert proc.returncode == 0, proc.stderr
    assert got == want
    used = {region_of(s) for s in regions.slots(opt)}
    for r in range(4):
        assert (stats[f"region{r}_spilled_bytes"] > 0) == (r in used), (r, used, stats)
        assert (stats[f"region{r}_fetches"] > 0) == (r in used), (r, used, stats)
    assert sum(stats[f"region{r}_spilled_bytes"] for r in range(4)) == stats["spilled_bytes"]
    return stats


@pytest.mark.parametrize("mapping", sorted(MAPPINGS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_slots_in_several_regions_run_bit_identically(
    runner: Path, tmp_path: Path, case: str, mapping: str
) -> None:
    check_regions(runner, runner, tmp_path, case, mapping)


# Each kernel's Prepare, reached by moving one slot in that kernel's options alone: (kernel, case).
REFUSALS = {"Spill": "Fetching", **{k: k for k in CASES}}


@pytest.mark.parametrize("kernel", sorted(REFUSALS))
def test_a_region_the_runtime_lacks_is_refused_in_prepare(
    runner: Path, tmp_path: Path, kernel: str
) -> None:
    graph, opt = _optimized(REFUSALS[kernel])
    slot = min(regions.slots(opt))
    placed = regions.place(opt, lambda s: 2 if s == slot else 0, only=kernel)
    proc, _, _ = _run(runner, placed, _input(graph, 1), tmp_path, "--ram-region", "65536")
    assert proc.returncode == 1
    assert "AllocateTensors failed" in proc.stderr  # Prepare, before any inference
    assert (
        f"{kernel}: slot {slot} is in storage region 2, and the Runtime has no storage there; "
        "attach a SpillManager with Runtime::regions[2]"
    ) in proc.stderr
    assert real_kernels.failure_reason(proc.stderr).startswith("AllocateTensors failed: ")


def test_the_runner_refuses_an_eighth_region(runner: Path, tmp_path: Path) -> None:
    graph = build_graph(synth.random_unet(0, dtype="INT8"))
    proc, _, _ = _run(runner, graph, _input(graph, 1), tmp_path, *["--ram-region", "4096"] * 8)
    assert proc.returncode == 1
    assert "too many --ram-region/--flash-region options" in proc.stderr


def test_one_region_models_keep_their_bytes() -> None:
    """Region 0 everywhere writes no region key: plans in one region encode as before."""
    _, opt = _optimized("StreamChain")
    placed = regions.place(opt, lambda s: 0)
    for a, b in zip(opt.operators, placed.operators):
        assert a.custom_options == b.custom_options


@pytest.mark.parametrize("case", sorted(CASES))
def test_verify_attaches_the_regions_a_model_names(runner: Path, case: str) -> None:
    """The real-kernel check (tinyseg verify, optimize's check) gives the runner one RAM region per
    region the optimized model names, so a multi-region plan is checked, not refused."""
    graph, opt = _optimized(case)
    placed = regions.place(opt, MAPPINGS["flash-first"])
    assert real_kernels.storage_regions(opt) == 1
    assert real_kernels.storage_regions(placed) == 1 + max(
        MAPPINGS["flash-first"](s) for s in regions.slots(opt)
    )
    v = verify(graph, placed, runs=1, tflm_dir=os.environ[real_kernels.ENV_TFLM])
    assert v.check == REAL_KERNELS and v.identical, v.detail
