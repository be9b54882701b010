"""Grouped convolutions stay unfused; int16 FetchingConv2D honours quantized_bias_type."""

from __future__ import annotations

import numpy as np
import pytest
import synth

from tinyseg_plugin.checks.verify import verify
from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.schema import fb
from tinyseg_plugin.memory.coldrange import cold_ranges
from tinyseg_plugin.transforms.optimizer import Options, search_plans
from tinyseg_plugin.transforms.passes import graph_or_none
from tinyseg_plugin.transforms.passes.fuse import ConvFusion, fuse_concat, fuse_conv
from tinyseg_plugin.transforms.passes.lower import lower
from tinyseg_plugin.transforms.passes.spill import SpillPlan, apply_spill


def grouped_conv(b: synth.ModelBuilder, x: int, out_ch: int, groups: int, k: int = 3) -> int:
    """CONV_2D whose filter sees 1/groups of the input channels (TF Conv2D(groups=...))."""
    n, h, w, c = b.shapes[x]
    i = len(b.operators)
    wt = b._weights([out_ch, k, k, c // groups], 0, f"gconv{i}/w")
    bt = b._bias(out_ch, x, wt, f"gconv{i}/b")
    y = b.activation([n, h, w, out_ch], f"gconv{i}")
    o = fb.Conv2DOptionsT()
    o.padding, o.strideH, o.strideW = synth.SAME, 1, 1
    o.dilationHFactor = o.dilationWFactor = 1
    o.fusedActivationFunction = fb.ActivationFunctionType.RELU
    b._op("CONV_2D", [x, wt, bt], [y], fb.BuiltinOptions.Conv2DOptions, o)
    return y


def grouped_after_skip(seed: int = 1):
    """A U-Net step whose decoder conv has groups=2 and reads the skip concatenation."""
    b = synth.ModelBuilder(dtype="INT8", seed=seed)
    x = b.input([1, 16, 16, 4])
    a = b.conv(x, 8)
    y = b.pool(a)
    for _ in range(3):
        y = b.conv(y, 16)
    cat = b.concat([a, b.transpose_conv(y, 8)])
    g = grouped_conv(b, cat, 8, groups=2)
    return build_graph(b.build([b.conv(g, 4, relu=False)])), a, g


def test_grouped_conv_is_not_fused() -> None:
    graph, a, gout = grouped_after_skip()
    cr = cold_ranges(graph)[a]
    g1 = apply_spill(graph, SpillPlan(a, cr.start, cr.end, slot=0)).graph
    fetch = next(op.index for op in g1.operators if op.opcode == customops.FETCHING)
    merged = graph_or_none(fuse_concat(g1, fetch))
    assert merged is not None  # the concatenation becomes a Fetching that feeds the grouped conv
    f2 = next(op for op in merged.operators if op.opcode == customops.FETCHING)
    conv = merged.operators[merged.consumers[f2.outputs[0]][0]]
    assert conv.opcode == "CONV_2D" and merged.tensors[conv.inputs[1]].shape[3] == 8
    assert graph_or_none(fuse_conv(merged, f2.index)) is None
    assert verify(graph, merged, runs=2).identical


def test_optimized_grouped_model_verifies_without_fetching_conv() -> None:
    graph, _, gout = grouped_after_skip()
    name = graph.tensors[gout].name
    r = search_plans(graph, Options(smallest=True, stream=False))
    assert any(op.opcode == customops.SPILL for op in r.graph.operators)  # the skip was spilled
    writer = next(
        op for op in r.graph.operators if any(r.graph.tensors[t].name == name for t in op.outputs)
    )
    assert writer.opcode == "CONV_2D"
    assert verify(graph, r.graph, runs=2).identical


# ---------------------------------------------------------------- point 5: int16 without bias


def _conv16(
    b: synth.ModelBuilder, x: int, out_ch: int, bias_type: int = 0, saturate: bool = False
) -> int:
    """An int16x8 CONV_2D without bias; ``saturate``: all weights 127, so all-maximum inputs overflow int32."""
    n, h, w, c = b.shapes[x]
    i = len(b.operators)
    data = (
        np.full([out_ch, 3, 3, c], 127, np.int8)
        if saturate
        else b.rng.integers(-127, 128, [out_ch, 3, 3, c], dtype=np.int8)
    )
    wt = b._tensor([out_ch, 3, 3, c], "INT8", f"c16_{i}/w", data, [0.001] * out_ch, [0] * out_ch, 0)
    y = b._tensor([n, h, w, out_ch], "INT16", f"c16_{i}", scales=[0.01], zps=[0])
    o = fb.Conv2DOptionsT()
    o.padding, o.strideH, o.strideW = synth.SAME, 1, 1
    o.dilationHFactor = o.dilationWFactor = 1
    o.quantizedBiasType = bias_type
    b._op("CONV_2D", [x, wt, -1], [y], fb.BuiltinOptions.Conv2DOptions, o)
    return y


def int16_no_bias(bias_type: int):
    """int16 U-Net step: the skip ``a`` and a deeper path concatenated into a bias-less conv."""
    b = synth.ModelBuilder(dtype="INT8", seed=7)
    x = b._tensor([1, 8, 8, 32], "INT16", "input0", scales=[0.01], zps=[0])
    b.inputs.append(x)
    a = _conv16(b, x, 32)
    y = _conv16(b, _conv16(b, a, 32), 32)
    cat = b._tensor([1, 8, 8, 64], "INT16", "cat", scales=[0.01], zps=[0])
    co = fb.ConcatenationOptionsT()
    co.axis = 3
    b._op("CONCATENATION", [a, y], [cat], fb.BuiltinOptions.ConcatenationOptions, co)
    return build_graph(b.build([_conv16(b, cat, 8, bias_type, saturate=True)])), a


def fused_int16(bias_type: int):
    graph, a = int16_no_bias(bias_type)
    cr = cold_ranges(graph)[a]
    g1 = apply_spill(graph, SpillPlan(a, cr.start, cr.end, slot=0)).graph
    merged = graph_or_none(
        fuse_concat(g1, next(op.index for op in g1.operators if op.opcode == customops.FETCHING))
    )
    f = next(op for op in merged.operators if op.opcode == customops.FETCHING)
    fused = graph_or_none(fuse_conv(merged, ConvFusion(f.index, 2)))
    assert fused is not None
    return graph, fused


@pytest.mark.parametrize("bias_type, name", [(2, "INT32"), (0, "NONE"), (4, "INT64")])
def test_int16_without_bias_keeps_the_accumulator(bias_type: int, name: str) -> None:
    """TFLM's CONV_2D sums int16 x int8 in int32 when quantized_bias_type is INT32, else in int64; with
    all-127 weights the all-maximum input overflows int32, so a check that loses the field fails."""
    graph, fused = fused_int16(bias_type)
    op = next(op for op in fused.operators if op.opcode == customops.FETCHING_CONV_2D)
    assert customops.decode(op).quantized_bias_type == name
    low = lower(fused).graph
    conv = [o for o in low.operators if o.opcode == "CONV_2D"][-1]
    assert conv.options.quantizedBiasType == bias_type
    assert verify(graph, fused, runs=1).identical


def test_int32_and_int64_sums_differ_here() -> None:
    """The case above is one where the accumulator matters: the two variants disagree in TFLM."""
    from tinyseg_plugin.checks import interpreter
    from tinyseg_plugin.checks.verify import edge_inputs
    from tinyseg_plugin.ir.modelio import model_to_bytes

    m32, m64 = (model_to_bytes(int16_no_bias(t)[0].model) for t in (2, 4))
    hi = edge_inputs(interpreter.input_details(m32))[1]
    y32, y64 = (interpreter.run(m, hi)[0] for m in (m32, m64))
    assert not np.array_equal(y32, y64)
