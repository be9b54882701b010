"""Fused fetching (Figure 8): a Fetching merges into the CONCATENATION that reads it, and a Fetching
(merged or not) into the CONV_2D that reads it, becoming FetchingConv2D. Each function returns the new
graph, or None when the pattern does not apply; the optimizer keeps a fusion only if it lowers the peak."""
from __future__ import annotations

from .. import customops
from ..graph import Graph, Operator
from .edit import Editor

PADDING = customops.PADDING
ACTIVATIONS = customops.ACTIVATIONS


def _sole_consumer(graph: Graph, t: int) -> Operator | None:
    users = graph.consumers.get(t, [])
    if len(users) != 1 or t in graph.outputs:
        return None
    op = graph.operators[users[0]]
    return op if sum(1 for i in op.inputs if i == t) == 1 else None


def _same_quantization(graph: Graph, tensors: list[int]) -> bool:
    qs = {(graph.tensors[t].scales, graph.tensors[t].zero_points, graph.tensors[t].dtype) for t in tensors}
    return len(qs) == 1


def fuse_concat(graph: Graph, fetch_index: int) -> Graph | None:
    """Fetching -> CONCATENATION becomes one Fetching that writes straight into the concatenation."""
    f = graph.operators[fetch_index]
    if f.opcode != customops.FETCHING:
        return None
    fo = customops.decode(f)
    c = _sole_consumer(graph, f.outputs[0])
    if c is None or c.opcode != "CONCATENATION" or c.index < f.index:
        return None
    if getattr(c.options, "fusedActivationFunction", 0) != 0:
        return None
    if not _same_quantization(graph, [i for i in c.inputs] + [c.outputs[0]]):
        return None
    rank = len(graph.tensors[c.outputs[0]].shape)
    axis = c.options.axis % rank
    if fo.operands > 1 and fo.axis != axis:
        return None
    in_ram: list[int] = []
    fetched: list[customops.Fetched] = []
    position = 0
    for t in c.inputs:
        if t == f.outputs[0]:
            inner_ram = iter(f.inputs)
            for k in range(fo.operands):
                hit = [x for x in fo.fetched if x.position == k]
                if hit:
                    fetched.append(customops.Fetched(position, hit[0].slot, hit[0].shape))
                else:
                    in_ram.append(next(inner_ram))
                position += 1
        else:
            in_ram.append(t)
            position += 1
    opts = customops.FetchingOptions(axis=axis, operands=position, fetched=tuple(fetched), block=fo.block)
    ed = Editor(graph)
    ed.replace(c.index, ed.make_op(customops.FETCHING, in_ram, [c.outputs[0]], custom_options=customops.encode(opts)))
    ed.remove(f.index)
    return ed.graph()


def fuse_conv(graph: Graph, fetch_index: int, band_rows: int = 1) -> Graph | None:
    """Fetching -> CONV_2D becomes FetchingConv2D, which convolves the virtual concatenation band by band."""
    f = graph.operators[fetch_index]
    if f.opcode != customops.FETCHING:
        return None
    fo = customops.decode(f)
    k = _sole_consumer(graph, f.outputs[0])
    if k is None or k.opcode != "CONV_2D" or k.inputs[0] != f.outputs[0] or k.index < f.index:
        return None
    out_shape = graph.tensors[f.outputs[0]].shape
    if len(out_shape) != 4 or (fo.operands > 1 and fo.axis != 3):
        return None
    o = k.options
    conv = customops.ConvParams(
        padding=PADDING.get(o.padding, "SAME"), stride_h=o.strideH, stride_w=o.strideW,
        dilation_h=o.dilationHFactor or 1, dilation_w=o.dilationWFactor or 1,
        activation=ACTIVATIONS.get(o.fusedActivationFunction, "NONE"),
    )
    if o.fusedActivationFunction not in ACTIVATIONS:
        return None
    fetching = customops.FetchingOptions(axis=3, operands=fo.operands, fetched=fo.fetched, block=fo.block)
    opts = customops.FetchingConv2DOptions(fetching, conv, band_rows)
    bias = k.inputs[2] if len(k.inputs) > 2 else -1
    ed = Editor(graph)
    ed.replace(k.index, ed.make_op(customops.FETCHING_CONV_2D, list(f.inputs) + [k.inputs[1], bias], [k.outputs[0]],
                                   custom_options=customops.encode(opts)))
    ed.remove(f.index)
    return ed.graph()
