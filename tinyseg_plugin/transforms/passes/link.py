"""Slot edges: the data flow through storage made visible in the graph, for viewers and tools.

A slot (a tensor spilled to storage and read back later) flows through no tensor of the graph, so
a viewer that draws edges from tensors (Netron, tflite-tools) sees its writer as a sink and its
readers cut off from it. Here every writer of a slot (a Spill, a StreamChain that spills rows)
outputs a token, a tensor of zero elements, and every operator that reads the slot (a Fetching, a
FetchingConv2D, a StreamChain that fetches rows) takes the writer's token as an input. A
StreamChain is named after the layers it holds (``StreamChain[conv2d_1..conv2d_4]``), so the
operator has a name where tflite has none: its token carries the name, or, for a chain that writes
no slot, its first output when that is no graph output (a rename costs nothing; a token costs TFLM's
tensor records in the tail, and no StreamChain keeps a record of it; a chain whose outputs are all graph outputs keeps their names). TFLM plans no arena bytes for a tensor of zero bytes
(micro_allocation_info.cc: ``needs_allocating`` is false), so the head is unchanged; the kernels
take token inputs and outputs and never touch their data (docs/custom_ops.md)."""

from __future__ import annotations

from dataclasses import replace

from ...contract import customops
from ...ir import offline
from ...ir.graph import Graph
from . import PassResult, Rewrite, Skip
from .edit import Editor

CONV_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV")
TOKEN_SHAPE = (0,)


def layer_name(name: str, opcode: str = "") -> str:
    """The layer a converter's tensor name comes from: ``model/conv2d_1/convolution`` ->
    ``conv2d_1``. A fused name lists several (``relu;batchnorm;conv2d``): a convolution's own
    part is preferred, else the first."""
    parts = [p for p in name.split(";") if p] or [name]
    part = parts[0]
    if opcode in CONV_OPS:
        part = next((p for p in parts if "conv" in p.rsplit("/", 1)[0]), part)
    pieces = part.split("/")
    return pieces[1] if len(pieces) >= 3 else pieces[0]


def chain_name(graph: Graph, op, o: customops.StreamChainOptions) -> str:
    """``StreamChain[first..last]``: the layers of the chain's first and last stage."""
    local = list(op.inputs) + list(op.outputs)

    def stage_layer(st: customops.StreamStage) -> str:
        lid = st.outputs[0]
        if lid < len(local):
            name = graph.tensors[local[lid]].name
        else:
            name = o.tensors[lid - len(local)].name
        return layer_name(name, st.op)

    if not o.stages:
        return "StreamChain"
    first, last = stage_layer(o.stages[0]), stage_layer(o.stages[-1])
    return f"StreamChain[{first}]" if first == last else f"StreamChain[{first}..{last}]"


def is_token(graph: Graph, t: int) -> bool:
    """A tensor that carries no data: zero elements."""
    return t >= 0 and any(d == 0 for d in graph.tensors[t].shape)


def _writes(o) -> list[int]:
    if isinstance(o, customops.SpillOptions):
        return [o.slot]
    if isinstance(o, customops.StreamChainOptions):
        return [s for _, s in o.spill]
    return []


def _reads(o) -> list[int]:
    if isinstance(o, customops.FetchingOptions):
        return [f.slot for f in o.fetched]
    if isinstance(o, customops.FetchingConv2DOptions):
        return [f.slot for f in o.fetching.fetched]
    if isinstance(o, customops.StreamChainOptions):
        return [s for _, s in o.fetch]
    return []


def link_slots(graph: Graph, request: None = None) -> PassResult:
    """Token edges from each slot's writer to its readers, and a named token on every
    StreamChain (``request``: none; the pass contract's shape). Options keep their meaning: a
    StreamChain's local ids move past the new node inputs and outputs, which join its tokens."""
    decoded = {
        op.index: customops.decode(op, graph.memo.decoded)
        for op in graph.operators
        if op.opcode in customops.TINYSEG_OPS
    }
    if not decoded:
        return Skip("no TinySeg operator")
    if any(
        is_token(graph, t)
        for i in decoded
        for t in list(graph.operators[i].inputs) + list(graph.operators[i].outputs)
    ):
        return Skip("the slots are linked already")
    ed = Editor(graph)
    token: dict[int, int] = {}  # writer operator -> its token
    writer: dict[int, int] = {}  # slot -> the operator that last wrote it
    read_from: dict[int, list[int]] = {}  # reader operator -> the tokens it takes
    for i, o in decoded.items():
        op = graph.operators[i]
        froms = list(dict.fromkeys(writer[s] for s in _reads(o) if s in writer))
        if froms:
            read_from[i] = [token[w] for w in froms]
        if isinstance(o, customops.StreamChainOptions) and o.spill:
            token[i] = ed.tensor(chain_name(graph, op, o), "INT8", TOKEN_SHAPE)
        elif isinstance(o, customops.StreamChainOptions):
            _name_first_output(ed, graph, op, chain_name(graph, op, o))
        elif isinstance(o, customops.SpillOptions):
            victim = graph.tensors[op.inputs[0]].name if op.inputs else ""
            name = f"Spill[{layer_name(victim)}]/slot {o.slot}"
            token[i] = ed.tensor(name, "INT8", TOKEN_SHAPE)
        for s in _writes(o):
            writer[s] = i
    for i, o in decoded.items():
        _link_operator(ed, graph.operators[i], o, read_from.get(i, []), token.get(i))
    layout = offline.of_subgraph(graph.model, graph.subgraph)
    if layout is not None:  # tokens are new tensors, planned online (as zero bytes: not at all)
        ed.offline_offsets(layout)
    edges = sum(len(v) for v in read_from.values())
    return Rewrite.of(ed.commit(), f"{len(token)} tokens, {edges} slot edges")


def _link_operator(ed: Editor, op, o, reads: list[int], own: int | None) -> None:
    """Operator ``op`` takes the tokens ``reads`` and outputs its own token ``own``."""
    inputs, outputs = list(op.inputs), list(op.outputs)
    if isinstance(o, customops.SpillOptions):
        outputs.append(own)
    elif isinstance(o, customops.FetchingOptions):
        inputs += reads
    elif isinstance(o, customops.FetchingConv2DOptions):
        inputs = inputs[:-2] + reads + inputs[-2:]  # [operands..., tokens..., filter, bias]
    elif isinstance(o, customops.StreamChainOptions):
        if not reads and own is None:
            return
        mine = [] if own is None else [own]
        shifted = _shifted(o, len(inputs), len(outputs), len(reads), len(mine))
        ed.set_custom_options(op.index, customops.encode(shifted))
        inputs += reads
        outputs += mine
    else:
        return
    ed.replace(op.index, ed.like(op.index, inputs, outputs))


def _name_first_output(ed: Editor, graph: Graph, op, name: str) -> None:
    """A chain without a token of its own is named by its first output, unless that is a graph
    output or input (their names belong to the application)."""
    ends = set(graph.inputs) | set(graph.outputs)
    if op.outputs and op.outputs[0] not in ends:
        ed.sg.tensors[op.outputs[0]].name = name.encode()


def _shifted(
    o: customops.StreamChainOptions, n_in: int, n_out: int, new_in: int, new_out: int
) -> customops.StreamChainOptions:
    """``o`` for the node with ``new_in`` more inputs and ``new_out`` more outputs: local ids of
    outputs move by ``new_in``, of body tensors by ``new_in + new_out``; the new ones are tokens."""

    def m(lid: int) -> int:
        if lid < 0 or lid < n_in:
            return lid
        return lid + new_in if lid < n_in + n_out else lid + new_in + new_out

    def pairs(ps: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
        return tuple((m(a), b) for a, b in ps)

    stages = tuple(
        replace(st, inputs=tuple(m(t) for t in st.inputs), outputs=tuple(m(t) for t in st.outputs))
        for st in o.stages
    )
    added = tuple(range(n_in, n_in + new_in)) + tuple(
        range(n_in + new_in + n_out, n_in + new_in + n_out + new_out)
    )
    return replace(
        o,
        stages=stages,
        spill=pairs(o.spill),
        fetch=pairs(o.fetch),
        rings=pairs(o.rings),
        source=pairs(o.source),
        sink=pairs(o.sink),
        tokens=tuple(m(t) for t in o.tokens) + added,
    )
