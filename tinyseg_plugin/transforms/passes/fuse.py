"""Fused fetching (Figure 8): a Fetching merges into the CONCATENATION that reads it, and a Fetching
(merged or not) into the CONV_2D that reads it, becoming FetchingConv2D. Each function returns the new
graph as a Rewrite, or a Skip saying why the pattern does not apply; the optimizer keeps a fusion only
if it lowers the peak."""

from __future__ import annotations

from dataclasses import dataclass

from ...contract import customops
from ...ir.graph import Graph, Operator
from . import Rewrite, Skip
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
    qs = {
        (graph.tensors[t].scales, graph.tensors[t].zero_points, graph.tensors[t].dtype)
        for t in tensors
    }
    return len(qs) == 1


def _operands(graph: Graph, op: Operator) -> tuple[int, list[tuple[str, object]]] | None:
    """(axis, operands) of a CONCATENATION or Fetching: each operand ("ram", tensor) or ("fetched", Fetched)."""
    rank = len(graph.tensors[op.outputs[0]].shape)
    if op.opcode == "CONCATENATION":
        if getattr(op.options, "fusedActivationFunction", 0) != 0:
            return None
        return op.options.axis % rank, [("ram", t) for t in op.inputs]
    if op.opcode == customops.FETCHING:
        o = customops.decode(op, graph.memo.decoded)
        return o.axis, [
            ("fetched", s) if isinstance(s, customops.Fetched) else ("ram", s)
            for s in customops.operand_sources(op, o)
        ]
    return None


def fuse_concat(graph: Graph, fetch_index: int) -> Rewrite | Skip:
    """Fetching -> CONCATENATION (or -> another Fetching that concatenates) becomes one Fetching
    that writes every operand straight into the concatenation."""
    f = graph.operators[fetch_index]
    if f.opcode != customops.FETCHING:
        return Skip(f"operator {fetch_index} is {f.opcode}, not a Fetching")
    c = _sole_consumer(graph, f.outputs[0])
    if c is None or c.index < f.index or c.opcode not in ("CONCATENATION", customops.FETCHING):
        return Skip("the fetched tensor is not read once, later, by a concatenation")
    outer, inner = _operands(graph, c), _operands(graph, f)
    if outer is None or inner is None:
        return Skip("the concatenation has a fused activation")
    axis, items = outer
    if len(inner[1]) > 1 and inner[0] != axis:
        return Skip("the two concatenations run along different axes")
    ram_tensors = [t for kind, t in items if kind == "ram"] + [c.outputs[0]]
    if not _same_quantization(graph, ram_tensors + [graph.tensors[f.outputs[0]].index]):
        return Skip("the operands are quantized differently (a concatenation would requantize)")
    merged: list[tuple[str, object]] = []
    for kind, t in items:
        merged.extend(inner[1] if kind == "ram" and t == f.outputs[0] else [(kind, t)])
    in_ram = [t for kind, t in merged if kind == "ram"]
    fetched = tuple(
        customops.Fetched(k, x.slot, x.shape)
        for k, (kind, x) in enumerate(merged)
        if kind == "fetched"
    )
    block = customops.decode(f, graph.memo.decoded).block
    opts = customops.FetchingOptions(axis=axis, operands=len(merged), fetched=fetched, block=block)
    ed = Editor(graph)
    ed.replace(
        c.index,
        ed.custom(
            customops.FETCHING, in_ram, [c.outputs[0]], customops.encode(opts, graph.memo.encoded)
        ),
    )
    ed.remove(f.index)
    return Rewrite.of(ed.commit(), "Fetching+Concatenation")


@dataclass(frozen=True)
class ConvFusion:
    """Where to fuse: the Fetching at ``fetch_index`` into the CONV_2D reading it, ``band_rows`` output rows a band."""

    fetch_index: int
    band_rows: int = 1


def fuse_conv(graph: Graph, site: ConvFusion | int) -> Rewrite | Skip:
    """Fetching -> CONV_2D becomes FetchingConv2D, which convolves the virtual concatenation band by band."""
    if isinstance(site, int):
        site = ConvFusion(site)
    fetch_index, band_rows = site.fetch_index, site.band_rows
    f = graph.operators[fetch_index]
    if f.opcode != customops.FETCHING:
        return Skip(f"operator {fetch_index} is {f.opcode}, not a Fetching")
    fo = customops.decode(f, graph.memo.decoded)
    k = _sole_consumer(graph, f.outputs[0])
    if k is None or k.opcode != "CONV_2D" or k.inputs[0] != f.outputs[0] or k.index < f.index:
        return Skip("the fetched tensor is not the input of one later CONV_2D")
    out_shape = graph.tensors[f.outputs[0]].shape
    if len(out_shape) != 4 or (fo.operands > 1 and fo.axis != 3):
        return Skip(
            "the fetched tensor is not 4-D, or its operands are not concatenated along channels"
        )
    if graph.tensors[k.inputs[1]].shape[3] != out_shape[3]:
        return Skip(
            "a grouped convolution (filter depth below input depth): the kernel convolves all channels"
        )
    if not f.inputs and graph.tensors[f.outputs[0]].scales:
        return Skip("no operand in RAM to read the input quantization from (contract v1)")
    o = k.options
    conv = customops.ConvParams(
        padding=PADDING.get(o.padding, "SAME"),
        stride_h=o.strideH,
        stride_w=o.strideW,
        dilation_h=o.dilationHFactor or 1,
        dilation_w=o.dilationWFactor or 1,
        activation=ACTIVATIONS.get(o.fusedActivationFunction, "NONE"),
    )
    if o.fusedActivationFunction not in ACTIVATIONS:
        return Skip(
            f"fused activation {o.fusedActivationFunction} is not one FetchingConv2D applies"
        )
    out_rows = graph.tensors[k.outputs[0]].shape[1]
    if not 1 <= band_rows <= out_rows:
        return Skip(f"band_rows {band_rows} is not 1 to the output's {out_rows} rows")
    bias_type = customops.BIAS_TYPES.get(getattr(o, "quantizedBiasType", 0) or 0)
    if bias_type is None:
        return Skip("a quantized_bias_type the kernel does not know")
    bias = k.inputs[2] if len(k.inputs) > 2 and k.inputs[2] >= 0 else None
    if not customops.conv_types_supported(
        graph.tensors[k.outputs[0]].dtype,
        graph.tensors[k.inputs[1]].dtype,
        None if bias is None else graph.tensors[bias].dtype,
    ):
        return Skip("FetchingConv2D refuses these types in Prepare (the contract's dtype rules)")
    fetching = customops.FetchingOptions(
        axis=3, operands=fo.operands, fetched=fo.fetched, block=fo.block
    )
    opts = customops.FetchingConv2DOptions(fetching, conv, band_rows, bias_type)
    bias = k.inputs[2] if len(k.inputs) > 2 else -1
    ed = Editor(graph)
    ed.replace(
        k.index,
        ed.custom(
            customops.FETCHING_CONV_2D,
            list(f.inputs) + [k.inputs[1], bias],
            [k.outputs[0]],
            customops.encode(opts, graph.memo.encoded),
        ),
    )
    ed.remove(f.index)
    return Rewrite.of(ed.commit(), "Fetching+Conv2D -> FetchingConv2D")
