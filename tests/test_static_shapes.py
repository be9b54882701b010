"""The static-shapes pass (transforms/passes/static.py) on real Keras exports: an export with the batch
left unset is planned, optimized and streamed as the same network exported with batch_size=1, and
what the pass writes runs bit-identically in the tflite-micro wheel."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import synth
from conftest import ROOT

from tinyseg_plugin import pipeline
from tinyseg_plugin.checks import verify as check
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import model_to_bytes, parse_model
from tinyseg_plugin.memory.planner import plan_graph
from tinyseg_plugin.transforms import optimizer
from tinyseg_plugin.transforms.optimizer import Options
from tinyseg_plugin.transforms.passes import Rewrite, Skip
from tinyseg_plugin.transforms.passes.static import NOTHING, static_shapes

SHAPE_OPS = {"SHAPE", "STRIDED_SLICE", "PACK"}


@pytest.fixture(scope="session")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/keras_exports.py's models, built once per session (TensorFlow: make models-deps)."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed (make models-deps)")
    out = tmp_path_factory.mktemp("keras_exports")
    subprocess.run(
        [sys.executable, str(ROOT / "tests" / "keras_exports.py"), str(out)],
        check=True,
        capture_output=True,
        timeout=1800,
    )
    return out


def _load(path: Path):
    return pipeline.load(path.read_bytes(), path.name)


def _signatures(model) -> list:
    return [
        list(t.shapeSignature) for t in model.subgraphs[0].tensors if t.shapeSignature is not None
    ]


@pytest.mark.parametrize("name", ["tiny_unet", "reshape"])
def test_batch_unset_export_becomes_the_batch1_export(exports: Path, name: str) -> None:
    unset, one = _load(exports / f"{name}_batch_unset.tflite"), _load(exports / f"{name}.tflite")
    assert any(-1 in s for s in _signatures(unset.model)), "the export leaves the batch dynamic"
    assert SHAPE_OPS <= {op.opcode for op in unset.operators}, "and computes shapes at run time"
    fixed = static_shapes(unset)
    assert isinstance(fixed, Rewrite), fixed
    # The operators of the batch_size=1 export, in its order, and no dynamic dimension left.
    assert [op.opcode for op in fixed.graph.operators] == [op.opcode for op in one.operators]
    assert not any(-1 in s for s in _signatures(fixed.graph.model))
    for op in fixed.graph.operators:
        if op.opcode in ("TRANSPOSE_CONV", "RESHAPE"):
            shape = op.inputs[0 if op.opcode == "TRANSPOSE_CONV" else 1]
            assert fixed.graph.tensors[shape].is_constant
    assert plan_graph(fixed.graph).head == plan_graph(one).head < plan_graph(unset).head
    # Bit-identical in TFLM (the tflite-micro wheel) on random and edge-case inputs.
    v = check.verify(unset, fixed.graph, runs=2)
    assert v.identical, v.detail


def test_optimize_gives_the_batch1_head_and_verifies(exports: Path) -> None:
    """The whole pipeline, as `tinyseg optimize` runs it: same strategy, same head as the
    batch_size=1 export, and the written model passes the check."""
    path = exports / "tiny_unet_batch_unset.tflite"
    one = optimizer.search_plans(_load(exports / "tiny_unet.tflite"), Options(smallest=True))
    out = pipeline.optimize(
        path.read_bytes(), pipeline.Run(Options(smallest=True), runs=1), path.name
    )
    assert out.unchanged is None and out.verification is not None and out.verification.identical
    assert out.result.steps[1].technique == "static shapes"
    assert out.result.strategy == one.strategy == "streaming"
    assert out.result.plan.head == one.plan.head
    assert not any(-1 in s for s in _signatures(parse_model(out.data)))


def test_analyze_stream_gives_the_batch1_estimate_in_the_input_indices(exports: Path) -> None:
    unset, one = (
        _load(exports / "tiny_unet_batch_unset.tflite"),
        _load(exports / "tiny_unet.tflite"),
    )
    run = pipeline.Run()
    _, d = pipeline.analyze(unset, run, stream=True)
    _, d1 = pipeline.analyze(one, run, stream=True)
    assert (
        d["head"] == d1["head"]
        and d["storage_bytes_per_inference"] == d1["storage_bytes_per_inference"]
    )
    assert "static_shapes" in d and "static_shapes" not in d1
    for c in d["chains"]:  # indices of the model given: its opcodes and activations
        assert c["opcodes"] == [unset.operators[i].opcode for i in c["operators"]]
        assert all(unset.tensors[t].nbytes for t in c["reads"] + c["fetches"] + c["writes"])


def test_a_shape_tflm_would_not_compute_is_left_to_run(exports: Path) -> None:
    """A PACK constant that disagrees with the static output shape: the chain is not folded (the
    batch still is), so the value stays the one the model computes."""
    unset = _load(exports / "tiny_unet_batch_unset.tflite")
    model = parse_model(model_to_bytes(unset.model))
    g = build_graph(model)
    pack = next(op for op in g.operators if op.opcode == "PACK")
    height = next(t for t in pack.inputs if g.tensors[t].is_constant)
    buf = model.buffers[model.subgraphs[0].tensors[height].buffer]
    buf.data = np.array(buf.data, np.uint8)
    buf.data[0] += 1  # little-endian int32: the height, plus one
    g = build_graph(model)
    fixed = static_shapes(g)
    assert isinstance(fixed, Rewrite)
    assert [op.opcode for op in fixed.graph.operators].count("PACK") == 1
    assert f"op {pack.index + 1} TRANSPOSE_CONV" not in fixed.detail


def _dynamic(signature: list[int]):
    """A small convolution net whose input carries this shape_signature."""
    b = synth.ModelBuilder(seed=3)
    x = b.input([1, 8, 8, 4])
    model = b.build([b.conv(b.conv(x, 4), 4)])
    model.subgraphs[0].tensors[x].shapeSignature = signature
    return build_graph(parse_model(model_to_bytes(model)))


def test_a_dynamic_dimension_other_than_the_batch_is_a_skip_with_the_reason() -> None:
    g = _dynamic([-1, -1, 8, 4])
    result = static_shapes(g)
    assert isinstance(result, Skip)
    assert "dimension 1 is dynamic" in result.reason and "only a dynamic batch" in result.reason
    said: list[str] = []
    res = optimizer.search_plans(
        g, Options(smallest=True), said.append
    )  # the optimizer goes on without it
    assert all(s.technique != "static shapes" for s in res.steps)
    assert any(result.reason in line for line in said)


def test_a_dynamic_batch_alone_is_fixed_and_nothing_else_changes() -> None:
    g = _dynamic([-1, 8, 8, 4])
    fixed = static_shapes(g)
    assert isinstance(fixed, Rewrite) and fixed.detail == "batch fixed to 1 on 1 tensors"
    assert _signatures(fixed.graph.model) == []
    assert [op.opcode for op in fixed.graph.operators] == [op.opcode for op in g.operators]


def test_a_model_with_static_shapes_is_a_skip(tiny_unet: Path) -> None:
    g = _load(tiny_unet)
    assert static_shapes(g) == Skip(NOTHING)
    assert all(
        s.technique != "static shapes"
        for s in optimizer.search_plans(g, Options(smallest=True)).steps
    )
