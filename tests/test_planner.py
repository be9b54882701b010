"""The planner's head and tail estimate equal the real TFLM interpreter's, byte for byte."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import synth
from conftest import SHARED_FIGURES, shared_model

from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, model_to_bytes
from tinyseg_plugin.ir.schema import fb
from tinyseg_plugin.memory.planner import (
    greedy_place,
    head_without,
    head_without_io,
    plan_graph,
    plan_model,
)


@pytest.mark.parametrize("name", sorted(SHARED_FIGURES))
def test_shared_models_match_tflm(name: str) -> None:
    path = shared_model(name)
    real = interpreter.arena_usage(path.read_bytes())
    head, total = SHARED_FIGURES[name]
    assert (real.head, real.total) == (head, total), (
        "the interpreter itself no longer gives the README figures"
    )
    plan = plan_model(load_model(path))
    assert plan.exact
    assert plan.head == real.head
    assert plan.tail.total == real.tail


def test_tiny_unet_matches_tflm(tiny_unet) -> None:
    real = interpreter.arena_usage(tiny_unet.read_bytes())
    assert real.head == 307_200  # the figure the issue was filed with
    plan = plan_model(load_model(tiny_unet))
    assert plan.head == real.head == 307_200
    assert plan.tail.total == real.tail


def test_property_random_unets_match_tflm() -> None:
    """200 random encoder/decoder models (int8 and float32, long skips): head and tail exact."""
    dtypes = {"INT8": 0, "FLOAT32": 0}
    for seed in range(200):
        m = synth.random_unet(seed)
        dtypes[fb_type(m)] += 1
        real = interpreter.arena_usage(model_to_bytes(m))
        plan = plan_model(m)
        assert plan.head == real.head, f"seed {seed}: planned {plan.head}, TFLM {real.head}"
        assert plan.tail.total == real.tail, f"seed {seed}: tail {plan.tail.total} vs {real.tail}"
    assert dtypes["INT8"] > 50 and dtypes["FLOAT32"] > 20


def fb_type(m: "fb.ModelT") -> str:
    return "INT8" if m.subgraphs[0].tensors[0].type == fb.TensorType.INT8 else "FLOAT32"


def test_greedy_tie_order_follows_tflm() -> None:
    """Equal sizes: TFLM's reversed fill + stable bubble sort places the later buffer first."""
    offsets = greedy_place([16, 16], [0, 0], [1, 1], [-1, -1])
    assert offsets == [16, 0]


def test_greedy_first_fit_gap() -> None:
    # a: 0-1 big, b: 2-3 big (can reuse a's space), c small overlapping both
    offsets = greedy_place([64, 64, 16], [0, 2, 0], [1, 3, 3], [-1, -1, -1])
    assert offsets[0] == 0 and offsets[1] == 0 and offsets[2] == 64


def _with_offline_plan(m: "fb.ModelT", offsets: list[int]) -> "fb.ModelT":
    data = struct.pack("<III", 1, 0, len(offsets)) + struct.pack(f"<{len(offsets)}i", *offsets)
    buf = fb.BufferT()
    buf.data = np.frombuffer(data, np.uint8).copy()
    m.buffers.append(buf)
    md = fb.MetadataT()
    md.name = b"OfflineMemoryAllocation"
    md.buffer = len(m.buffers) - 1
    m.metadata = [md]
    return m


def test_offline_planned_offsets_match_tflm() -> None:
    b = synth.ModelBuilder(seed=5)
    x = b.input([1, 8, 8, 4])
    y = b.conv(x, 4)
    z = b.conv(y, 4)
    m = b.build([z])
    n = len(m.subgraphs[0].tensors)
    offsets = [-1] * n
    offsets[x] = 1024  # put the input high in the arena by hand
    m = _with_offline_plan(m, offsets)
    plan = plan_model(m)
    real = interpreter.arena_usage(model_to_bytes(m))
    assert plan.tensor_buffer(x).offset == 1024 and plan.tensor_buffer(x).offline
    assert plan.head == real.head


@pytest.mark.parametrize("runtime", ["reference", "cmsis-nn"])
def test_a_model_with_tinyseg_operators_is_planned_as_installed(runtime: str) -> None:
    """An optimized model runs only in a TFLM with TinySeg installed, whose TRANSPOSE_CONV OpData
    carries the marker: every profile plans it so (tests/test_tflm_runtime.py checks the installed
    profile's tail against the real build), not only the *-tinyseg one."""
    from conftest import TINY_UNET

    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.memory.kernels import BuildProfile
    from tinyseg_plugin.transforms.optimizer import Options, search_plans

    g = build_graph(load_model(TINY_UNET))
    opt = search_plans(g, Options(smallest=True, kernel_set=runtime)).graph
    plain, installed = (
        BuildProfile("host64-make-recording", 8),
        BuildProfile("host64-make-recording-tinyseg", 8),
    )
    assert (
        plan_graph(opt, runtime, plain).tail.total == plan_graph(opt, runtime, installed).tail.total
    )
    if runtime == "reference":  # 80-byte OpData + 8-byte marker: one more 16-byte step per op
        n = sum(op.opcode == "TRANSPOSE_CONV" for op in g.operators)
        assert (
            plan_graph(g, runtime, installed).tail.total - plan_graph(g, runtime, plain).tail.total
            == 16 * n
        )


def _input_as_constant(m: "fb.ModelT") -> "fb.ModelT":
    """The model with its graph input turned into a constant: TFLM then holds no arena bytes for
    it, the model an application that streams its input in would run."""
    sg = m.subgraphs[0]
    t = sg.tensors[sg.inputs[0]]
    buf = fb.BufferT()
    buf.data = np.zeros(
        int(np.prod(t.shape)) * (4 if t.type == fb.TensorType.FLOAT32 else 1), np.uint8
    )
    m.buffers.append(buf)
    t.buffer = len(m.buffers) - 1
    sg.inputs = np.array([i for i in sg.inputs[1:]], dtype=np.int32)
    return m


def test_head_without_the_input_matches_tflm() -> None:
    """``head_without`` re-places every other buffer in TFLM's order: on 20 random U-Nets it equals
    TFLM's head for the same model whose input is a constant (no arena bytes)."""
    lower = 0
    for seed in range(20):
        m = synth.random_unet(seed)
        plan = plan_model(m)
        graph_input = plan.graph.inputs[0]
        real = interpreter.arena_usage(model_to_bytes(_input_as_constant(synth.random_unet(seed))))
        assert head_without(plan, {graph_input}) == real.head, f"seed {seed}"
        lower += real.head < plan.head
    assert lower > 0  # some of them peak while the input is live


def test_head_without_io_drops_inputs_and_outputs(tiny_unet) -> None:
    plan = plan_model(load_model(tiny_unet))
    io = set(plan.graph.inputs) | set(plan.graph.outputs)
    assert head_without_io(plan) == head_without(plan, io) <= plan.head
