"""Lowering: TinySeg's operators back to builtins, for the check in the tflite-micro wheel.

Spill is removed; a Fetching becomes CONCATENATION (or, with a single operand, disappears and its
readers read the spilled tensor again); FetchingConv2D becomes CONCATENATION then CONV_2D; a
StreamChain becomes its stages over whole tensors (a tensor it reads from a row source or hands to a
row sink becomes the graph input or output again, in place of its token); scratch markers are
dropped, and so are the slot edges' tokens (link.py): no operator is left to read them. The
OfflineMemoryAllocation layout is kept (tensor by tensor), so the check runs the arena layout the
optimizer wrote."""

from __future__ import annotations

from ...contract import bodies, customops
from ...errors import TinySegError
from ...ir import offline
from ...ir.graph import Graph
from . import Rewrite
from .edit import Editor, Op

_PAD = {v: k for k, v in customops.PADDING.items()}
_ACT = {v: k for k, v in customops.ACTIVATIONS.items()}
_BIAS = {v: k for k, v in customops.BIAS_TYPES.items()}


def lower(graph: Graph, request: None = None) -> Rewrite:
    """The builtin-only equivalent of an optimized graph (``request``: none; the pass contract's shape).
    Refused, as its kernels would refuse it, when a TinySeg operator is malformed: a lowering of it
    would compute something else. An estimate's chain may hold stages the kernel does not compute:
    only its structure is checked here."""
    bodies.validate_graph(graph, kernel=False)
    slots: dict[int, int] = {}
    for op in graph.operators:
        if op.opcode == customops.SPILL:
            slots[customops.decode(op, graph.memo.decoded).slot] = op.inputs[0]
    ed = Editor(graph)
    ed.drop_intermediates_named(customops.MARKER_NAME)
    layout = _layout_by_tensor(graph, set(slots.values()))
    new_ops: list[int | Op] = []  # kept operators by position, new ones as built
    renames: list[tuple[int, int, int]] = []  # (old, new, from this position of new_ops on)
    alias: dict[
        int, int
    ] = {}  # a removed single-operand Fetching's output -> the tensor it stands for

    def resolve(t: int) -> int:
        """Follow renames to the end: a fetched tensor that was spilled again is still the first tensor."""
        while t in alias:
            t = alias[t]
        return t

    for op in graph.operators:
        if op.opcode == customops.SPILL:
            continue
        if op.opcode == customops.STREAM_CHAIN:
            new_ops.extend(_lower_chain(ed, op, slots, resolve))
            continue
        if op.opcode in (customops.FETCHING, customops.FETCHING_CONV_2D):
            o = customops.decode(op, graph.memo.decoded)
            fo = o if isinstance(o, customops.FetchingOptions) else o.fetching
            operands = _fetched_operands(op, fo, slots, resolve)
            target = op.outputs[0]
            if op.opcode == customops.FETCHING and len(operands) == 1:
                alias[target] = operands[0]
                renames.append((target, operands[0], len(new_ops)))
                continue
            if op.opcode == customops.FETCHING:
                new_ops.append(ed.concatenation(operands, target, fo.axis))
                continue
            new_ops.extend(_lower_fetching_conv(ed, graph, op, o, operands))
            continue
        new_ops.append(op.index)
    ed.rebuild(new_ops)
    for old, new, start in renames:
        ed.rename_uses(old, new, start)
        ed.rename_outputs(old, new)
    if layout is not None:
        ed.offline_offsets(layout)
    return Rewrite.of(ed.commit(), "TinySeg operators lowered to builtins")


def _fetched_operands(op, fo, slots: dict[int, int], resolve) -> list[int]:
    """A Fetching's or FetchingConv2D's operands as graph tensors: each fetched one the tensor its
    slot's Spill wrote (followed through renames), the others as they are."""
    operands = []
    for src in customops.operand_sources(op, fo):
        if isinstance(src, customops.Fetched):
            if src.slot not in slots:
                raise TinySegError(
                    f"operator {op.index}: fetches slot {src.slot}, which no Spill fills"
                )
            operands.append(resolve(slots[src.slot]))
        else:
            operands.append(src)
    return operands


def _lower_fetching_conv(ed: Editor, graph: Graph, op, o, operands: list[int]) -> list[Op]:
    """A FetchingConv2D as CONV_2D over its operands (concatenated first when more than one)."""
    out: list[Op] = []
    target = op.outputs[0]
    filt, bias = op.inputs[-2], op.inputs[-1]
    if len(operands) == 1:
        cat = operands[0]
    else:
        shape = list(graph.tensors[operands[0]].shape)
        shape[3] = graph.tensors[filt].shape[3]
        cat = ed.tensor_like(operands[0], f"{graph.tensors[target].name}/lowered_concat", shape)
        out.append(ed.concatenation(operands, cat, 3))
    c = o.conv
    out.append(
        ed.conv2d(
            [cat, filt] + ([bias] if bias >= 0 else []),
            target,
            padding=_PAD[c.padding],
            stride_h=c.stride_h,
            stride_w=c.stride_w,
            dilation_h=c.dilation_h,
            dilation_w=c.dilation_w,
            activation=_ACT[c.activation],
            quantized_bias_type=_BIAS[o.quantized_bias_type],
        )
    )  # int16 without bias: int32/int64 sums
    return out


def _lower_chain(ed: Editor, op, slots: dict[int, int], resolve) -> list[Op]:
    """A StreamChain's body as builtins: its tensors made whole, a fetched one being the tensor the
    chain that spilled it made (``slots``, filled here in operator order)."""
    o = customops.decode(op, ed.memo.decoded)
    try:
        return _lower_body(ed, op, o, slots, resolve)
    except (IndexError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TinySegError(f"operator {op.index} (StreamChain): malformed body ({exc})") from None


def _lower_body(
    ed: Editor, op, o: "customops.StreamChainOptions", slots: dict[int, int], resolve
) -> list[Op]:
    ids = list(op.inputs) + list(op.outputs)
    fetched = dict(o.fetch)
    for t in o.tensors:
        lid = len(ids)
        if lid in fetched:
            if fetched[lid] not in slots:
                raise TinySegError(
                    f"operator {op.index}: fetches slot {fetched[lid]}, which nothing before it spills"
                )
            ids.append(resolve(slots[fetched[lid]]))
        else:
            ids.append(
                ed.quantized_tensor(
                    t.name, t.dtype, t.shape, t.scales, t.zero_points, t.quantized_dimension
                )
            )
    for lid, slot in o.spill:
        slots[slot] = ids[lid]
    # A row source's (sink's) tensor is whole again, the graph's input (output) in place of the
    # token that stood for it there
    for pairs, ends in ((o.source, ed.sg.inputs), (o.sink, ed.sg.outputs)):
        for lid, k in pairs:
            ed.rename_graph_tensor(int(list(ends)[k]), ids[lid])
    return [
        ed.builtin(
            st.op,
            [ids[i] if i >= 0 else -1 for i in st.inputs],
            [ids[i] for i in st.outputs],
            st.options,
            dict(st.fields),
            st.version,
        )
        for st in o.stages
    ]


def _layout_by_tensor(graph: Graph, spilled: set[int]) -> dict[int, int] | None:
    """The optimized model's OfflineMemoryAllocation for this subgraph, by tensor index.

    The lowered model runs the layout the device runs, except for what the lowering itself changes:
    a spilled tensor stays in RAM until its lowered reader, and the lowered concatenation of a
    FetchingConv2D is new, so those are planned online (TFLM places them around the offline ones).
    None without the metadata."""
    offsets = offline.of_subgraph(graph.model, graph.subgraph)
    if offsets is None:
        return None
    return {i: off for i, off in offsets.items() if i not in spilled}
