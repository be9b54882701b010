"""The check itself: renames through repeated spills, edge-case inputs."""

from __future__ import annotations

import numpy as np
from synth import ModelBuilder

from tinyseg_plugin.checks.verify import edge_inputs, verify
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.memory.coldrange import cold_ranges
from tinyseg_plugin.transforms.passes.lower import lower
from tinyseg_plugin.transforms.passes.spill import SpillPlan, apply_spill


def _respilled():
    """A tensor read at two late points: spilled, fetched, and the fetched copy spilled and fetched again."""
    b = ModelBuilder(dtype="INT8", seed=3)
    x = b.input([1, 8, 8, 4])
    a = b.conv(x, 4)
    c = b.conv(b.conv(a, 4), 4)
    d = b.add(c, a)
    f = b.conv(b.conv(d, 4), 4)
    g = b.add(f, a)
    orig = build_graph(b.build([g]))
    s1, e1 = cold_ranges(orig)[a].idle[0]
    g1 = apply_spill(orig, SpillPlan(a, s1, e1, slot=0)).graph
    fetched = next(t.index for t in g1.tensors if t.name.endswith("/fetched"))
    s2, e2 = max(cold_ranges(g1)[fetched].idle, key=lambda r: r[1] - r[0])
    return orig, apply_spill(g1, SpillPlan(fetched, s2, e2, slot=1)).graph


def test_a_fetched_tensor_spilled_again_verifies() -> None:
    orig, twice = _respilled()
    assert [op.opcode for op in twice.operators].count("Spill") == 2
    low = lower(twice).graph
    produced = {t for op in low.operators for t in op.outputs} | set(low.inputs)
    read = {
        t for op in low.operators for t in op.inputs if t >= 0 and not low.tensors[t].is_constant
    }
    assert read <= produced  # no tensor is left without a producer
    v = verify(orig, twice, runs=2)
    assert v.identical, v.detail


def test_a_wrong_rewrite_still_fails() -> None:
    """The same model with the second fetch reading the wrong slot computes something else."""
    from tinyseg_plugin.contract import customops
    from tinyseg_plugin.errors import TinySegError

    orig, twice = _respilled()
    fetches = [op for op in twice.operators if op.opcode == customops.FETCHING]
    raw = twice.model.subgraphs[0].operators[fetches[-1].index]
    o = customops.decode(fetches[-1])
    bad = customops.FetchingOptions(
        axis=o.axis, operands=o.operands, fetched=(customops.Fetched(0, 7, o.fetched[0].shape),)
    )
    raw.customOptions = list(customops.encode(bad))
    try:
        v = verify(orig, build_graph(twice.model), runs=1)
        assert not v.identical
    except TinySegError as exc:
        assert "slot 7" in str(exc)


def test_edge_inputs_are_min_max_and_alternating() -> None:
    details = [{"shape": (1, 2, 3), "dtype": "int8"}, {"shape": (4,), "dtype": "float32"}]
    lo, hi, alt = edge_inputs(details)
    assert (lo[0] == -128).all() and (hi[0] == 127).all()
    assert list(alt[0].ravel()) == [-128, 127] * 3
    assert lo[1].dtype == np.float32 and (lo[1] < 0).all() and (hi[1] > 0).all()
    orig, twice = _respilled()
    assert verify(orig, twice, runs=1).edge_cases == 3


def test_a_model_beyond_the_default_arena_is_checked() -> None:
    """The check sizes TFLM's arena from the plan: a 64 MiB head no longer fails for lack of arena."""
    import pytest

    from tinyseg_plugin.checks import interpreter
    from tinyseg_plugin.errors import TinySegError
    from tinyseg_plugin.ir.modelio import model_to_bytes
    from tinyseg_plugin.memory.planner import plan_graph

    b = ModelBuilder(dtype="INT8")
    y = b.conv(b.input([1, 1024, 1024, 16]), 48, k=1)
    g = build_graph(b.build([y]))
    assert plan_graph(g).total > interpreter.DEFAULT_ARENA
    with pytest.raises(TinySegError, match="cannot load"):
        interpreter.check_loads(model_to_bytes(g.model))
    assert verify(g, g, runs=1).identical


def _huge_input_model(path) -> None:
    """A model whose input declares 2 GiB (FLOAT32[1, 16384, 16384, 2]): only its shape is written."""
    from tinyseg_plugin.ir.modelio import save_model

    b = ModelBuilder(dtype="FLOAT32")
    save_model(b.build([b.relu(b.input([1, 16384, 16384, 2]))]), path)


def test_a_huge_declared_input_is_refused_before_anything_is_built(tmp_path) -> None:
    """verify (both checks) and optimize refuse in one line, exit 2, within a 3 GiB address space: the
    old check built every input first (24 GB resident before it was killed)."""
    import resource
    import subprocess
    import sys

    model = tmp_path / "huge.tflite"
    _huge_input_model(model)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    for args in (
        ["verify", str(model), str(model)],
        ["verify", str(model), str(model), "--tflm-dir", str(tmp_path)],
        ["optimize", str(model), "-o", str(tmp_path / "out.tflite")],
    ):
        p = subprocess.run(
            [sys.executable, "-m", "tinyseg_plugin.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=limited,
        )
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2, p.stderr
        assert len(lines) == 1 and "Traceback" not in p.stderr
        assert "2,147,483,648 B" in lines[0] and "--max-io-bytes" in lines[0]
    assert not (tmp_path / "out.tflite").exists()


def test_max_io_bytes_is_an_option(tmp_path, capsys) -> None:
    from tinyseg_plugin.cli import main
    from tinyseg_plugin.ir.modelio import save_model

    orig, _ = _respilled()
    path = tmp_path / "m.tflite"
    save_model(orig.model, path)
    assert main(["verify", str(path), str(path), "--max-io-bytes", "300"]) == 2  # 256 in + 256 out
    assert "over the --max-io-bytes limit of 300" in capsys.readouterr().err
    assert main(["verify", str(path), str(path), "--max-io-bytes", "512", "--runs", "1"]) == 0


def test_runs_go_to_tflm_in_groups_with_the_same_verdict(monkeypatch) -> None:
    """With groups of one run, each run is its own TFLM child: the verdict and counts do not change."""
    from tinyseg_plugin.checks import interpreter
    from tinyseg_plugin.checks import verify as verify_module

    calls: list[int] = []
    real = interpreter.run_models

    def counting(models, batches, *a, **kw):
        calls.append(len(batches))
        return real(models, batches, *a, **kw)

    monkeypatch.setattr(verify_module, "GROUP_IO_BYTES", 1)
    monkeypatch.setattr(interpreter, "run_models", counting)
    orig, twice = _respilled()
    v = verify(orig, twice, runs=2)
    assert v.identical and v.runs == 2 and v.edge_cases == 3
    assert calls == [1] * 5
    b = ModelBuilder(dtype="INT8", seed=4)  # the same graph with other weights: other outputs
    x = b.input([1, 8, 8, 4])
    a = b.conv(x, 4)
    c = b.conv(b.conv(a, 4), 4)
    d = b.add(c, a)
    f = b.conv(b.conv(d, 4), 4)
    other = build_graph(b.build([b.add(f, a)]))
    v = verify(orig, other, runs=2)
    assert not v.identical and "random input 0" in v.detail
