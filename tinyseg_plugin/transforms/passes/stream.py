"""The streaming pass: each chain becomes one StreamChain operator that reads its
inputs whole, writes its outputs whole, and holds only ring buffers in between; tensors that cross
chains as skips are spilled row by row by their producing chain and fetched row by row by the
reading one, so they take no arena bytes at all. The TFLM-exact planner measures the result, and
the StreamChain kernel (tflm_ops/kernels/tinyseg_stream.cc) runs it from the body encoded here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from ...contract import customops
from ...contract.requant import requantization
from ...errors import shown
from ...ir.graph import Graph, Tensor
from ...memory.kernels.tinyseg import stream_body_parts
from ..stream import ACCUMULATING, ChainCost, chain_op_scratch, simulate
from . import Rewrite, Skip
from .edit import Editor


@dataclass(frozen=True)
class ChainRequest:
    """Which chains to stream, and how.

    ``chains``: operator indices, each run in schedule order and at least two long. ``spilled``:
    tensors produced by one chain and read by later chains (and otherwise only by its own), moved
    through storage row by row instead of staying whole in the arena. ``op_scratch(i)``: the scratch operator i needs for one
    row step in the target kernel set (stream.row_step_scratch). ``measure``: stream.simulate, or a
    cached form of it (the chain search asks for the same chains many times). ``body=False`` leaves
    the chains' bodies out of the options (the planning form): the planner reads only the bytes a
    body takes, and encoding it is most of a search step. ``body_bytes`` keeps those bytes per
    chain across the requests of one search, so each chain's body is built once."""

    chains: list[list[int]]
    spilled: frozenset[int] = frozenset()
    op_scratch: Callable[[int], int] = lambda i: 0
    block: int = customops.BLOCK_BYTES
    measure: Callable[..., ChainCost] = simulate
    body: bool = True
    # Graph inputs read row by row from the Runtime's row sources, and graph outputs handed row by
    # row to its row sinks: the arena then holds neither, only a one-element token each that keeps
    # TFLM's graph input and output (``io_problem`` says which may).
    sourced: frozenset[int] = frozenset()
    sunk: frozenset[int] = frozenset()
    body_bytes: dict[tuple, int] = field(default_factory=dict, compare=False)


def row_slots(graph: Graph, spilled: frozenset[int]) -> dict[int, int]:
    """The storage slot of each tensor spilled row by row: after the slots the graph's Spills use."""
    used = [
        customops.decode(op, graph.memo.decoded).slot
        for op in graph.operators
        if op.opcode == customops.SPILL
    ]
    return {t: max(used, default=-1) + 1 + k for k, t in enumerate(sorted(spilled))}


def _problem(graph: Graph, request: ChainRequest) -> str | None:
    """Why the request cannot be streamed as asked, or None."""
    chains, spilled = request.chains, request.spilled
    if not chains:
        return "no chain to stream"
    position = {i: k for k, chain in enumerate(chains) for i in chain}
    for chain in chains:
        if len(chain) < 2 or chain != list(range(chain[0], chain[0] + len(chain))):
            return f"a chain must be 2+ consecutive operators: {chain}"
    if len(position) != sum(len(c) for c in chains):
        return "chains overlap"
    for t in sorted(request.sourced | request.sunk):
        problem = io_problem(graph, t, position)
        if problem is not None:
            return problem
    for t in spilled:
        source = graph.producers.get(t)
        if source is not None and graph.operators[source].opcode in ACCUMULATING:
            return f"tensor {t} is an accumulating stage's one pixel: it is written whole"
        readers = graph.consumers.get(t, [])
        if (
            source not in position
            or t in graph.outputs
            or not readers
            or any(position.get(r, -1) < position[source] for r in readers)
            or all(position[r] == position[source] for r in readers)
        ):
            return (
                f"tensor {t} is not produced by a chain and read by later chains "
                "(and otherwise only by its own)"
            )
    return None


def io_problem(graph: Graph, t: int, position: dict[int, int]) -> str | None:
    """Why graph input or output ``t`` cannot stream through a row source or sink of the chains at
    ``position`` (operator -> chain), or None. A source's rows are asked once each, top to
    bottom, so one chain must read every row; a sink's rows go out as its chain finishes them,
    so no other operator may read them again."""
    name = shown(graph.tensors[t].name)
    readers = graph.consumers.get(t, [])
    if t in graph.inputs:
        outside = [r for r in readers if r not in position]
        if outside:
            r = outside[0]
            return (
                f"graph input {name} feeds {graph.operators[r].opcode} (operator {r}), which no "
                "chain holds, so it cannot stream in"
            )
        if len({position[r] for r in readers}) != 1:
            return f"graph input {name} is read by several chains, so it cannot stream in"
        return None
    source = graph.producers.get(t)
    if t not in graph.outputs or source is None:
        return f"tensor {name} is not a graph output an operator produces, so it cannot stream out"
    if source not in position:
        return (
            f"graph output {name} comes from {graph.operators[source].opcode} (operator {source}), "
            "which no chain holds, so it cannot stream out"
        )
    if graph.operators[source].opcode in ACCUMULATING:
        return f"graph output {name} is an accumulating stage's one pixel, so it is written whole"
    if any(position.get(r, -1) != position[source] for r in readers):
        return f"graph output {name} is read by another operator, so it cannot stream out"
    return None


def stream_chains(graph: Graph, request: ChainRequest) -> Rewrite | Skip:
    """Replace each chain by one StreamChain; the Rewrite's notes are the chains' ChainCosts, in the
    order of ``request.chains``."""
    problem = _problem(graph, request)
    if problem is not None:
        return Skip(problem)
    chains, spilled, block = request.chains, request.spilled, request.block
    slot_of = row_slots(graph, spilled)
    io = _RowIo(request.sourced, request.sunk, graph)
    costs: list[ChainCost] = []
    ed = Editor(graph)
    drop: list[int] = []
    for ops in chains:
        reads = {t for i in ops for t in graph.operators[i].inputs if t >= 0}
        produced = {graph.operators[i].outputs[0] for i in ops}
        fetched = frozenset(t for t in spilled | io.sourced if t in reads and t not in produced)
        written = frozenset((spilled | io.sunk) & produced)
        cost = request.measure(graph, ops, spilled=written, fetched=fetched)
        cost = replace(cost, op_scratch=chain_op_scratch(graph, ops, request.op_scratch))
        costs.append(cost)
        constants = []
        for i in ops:
            for t in graph.operators[i].inputs:
                if t >= 0 and graph.tensors[t].is_constant and t not in constants:
                    constants.append(t)
        tokens_in = [io.token(ed, t) for t in cost.fetched if t in io.sourced]
        tokens_out = [io.token(ed, t) for t in cost.spilled if t in io.sunk]
        inputs = list(cost.inputs) + constants + tokens_in
        outputs = list(cost.outputs) + tokens_out
        body = (ops, cost, (inputs, outputs), slot_of, block, io)
        options = _body(graph, *body) if request.body else _planning(graph, body, request)
        op = ed.custom(
            customops.STREAM_CHAIN, inputs, outputs, customops.encode(options, graph.memo.encoded)
        )
        ed.replace(ops[0], op)
        drop.extend(ops[1:])
    for i in sorted(drop, reverse=True):
        ed.remove(i)
    for t, token in io.tokens.items():
        ed.rename_graph_tensor(t, token)
    return Rewrite.of(ed.commit(), f"{len(chains)} StreamChain operators", notes=tuple(costs))


@dataclass
class _RowIo:
    """The graph inputs and outputs a rewrite streams through row sources and sinks, and the
    one-element token each leaves in the graph (TFLM runs a graph with an input and an output;
    the StreamChain takes the token, which carries no data, in its place)."""

    sourced: frozenset[int]
    sunk: frozenset[int]
    graph: Graph
    tokens: dict[int, int] = field(default_factory=dict)  # streamed tensor -> its token

    def token(self, ed: Editor, t: int) -> int:
        if t not in self.tokens:
            self.tokens[t] = ed.tensor(f"{self.graph.tensors[t].name}/rows", "INT8", [1])
        return self.tokens[t]

    def tensor_of(self, t: int) -> Tensor:
        """Tensor ``t`` of the rewrite: the graph's, or a token (one INT8 element, no data)."""
        if t < len(self.graph.tensors):
            return self.graph.tensors[t]
        return Tensor(t, "row token", (1,), "INT8", 1, False, False)

    def index(self, t: int) -> int:
        """The row source's (sink's) index: the tensor's place among the graph's inputs (outputs)."""
        where = self.graph.inputs if t in self.sourced else self.graph.outputs
        return list(where).index(t)


def _planning(graph: Graph, body: tuple, request: ChainRequest) -> customops.StreamChainOptions:
    """The planning form of a chain's options: the planner's figures and the bytes its body takes
    (memory/kernels/tinyseg.py stream_body_parts, counted from the body ``_body(graph, *body)``
    builds without the stages' option fields, which take no tail bytes; once per chain and search:
    ``request.body_bytes``)."""
    _, cost, (inputs, outputs), _, block, io = body
    key = (cost.ops, cost.spilled, cost.fetched)
    if key not in request.body_bytes:
        node = [io.tensor_of(t) for t in inputs], [io.tensor_of(t) for t in outputs]
        parts = stream_body_parts(_body(graph, *body, fields=False), *node)
        request.body_bytes[key] = sum(parts.values())
    return customops.StreamChainOptions(
        ring_bytes=cost.rings,
        op_scratch=cost.op_scratch,
        spilled_count=sum(t not in io.sunk for t in cost.spilled),
        fetched_count=sum(t not in io.sourced for t in cost.fetched),
        block=block,
        body_bytes=request.body_bytes[key],
    )


def _fields(options: object) -> tuple[str | None, tuple[tuple[str, object], ...]]:
    """A builtin options object as (class name, scalar fields) for the chain's body."""
    if options is None:
        return None, ()
    name = type(options).__name__
    fields = []
    for k, v in sorted(vars(options).items()):
        if v is None:
            continue
        if isinstance(v, (bool, int, float)):
            fields.append((k, v))
        else:
            raise ValueError(f"{name}.{k} is not a scalar; the operator cannot join a chain")
    return (name[:-1] if name.endswith("T") else name), tuple(fields)


def _quant(graph: Graph, op) -> tuple[int, ...] | None:
    """A requantizing stage's per-channel table (contract/requant.py), stored in the model so the
    kernel keeps it out of the arena; None for other stages and float32 rows."""
    if op.opcode not in customops.STREAM_PER_CHANNEL_OPS:
        return None
    transpose = op.opcode == "TRANSPOSE_CONV"
    x = graph.tensors[op.inputs[2 if transpose else 0]]
    flt = graph.tensors[op.inputs[1]]  # TRANSPOSE_CONV: [output shape, filter, input, bias]
    out = graph.tensors[op.outputs[0]]
    if out.dtype not in ("INT8", "INT16") or not x.scales or not out.scales:
        return None
    key = (x.scales[0], tuple(flt.scales), out.scales[0], out.shape[-1])
    if key not in graph.memo.requantized:
        graph.memo.requantized[key] = requantization(*key)
    return graph.memo.requantized[key]


def _body_tensors(
    graph: Graph, ops: list[int], node: tuple[list[int], list[int]]
) -> tuple[dict[int, int], list[customops.StreamTensor]]:
    """Each tensor's index in the body (the node's inputs and outputs first) and the body's
    tensors that are not the node's."""
    local = {t: k for k, t in enumerate(node[0] + node[1])}
    tensors: list[customops.StreamTensor] = []
    for i in ops:
        op = graph.operators[i]
        for t in list(op.inputs) + list(op.outputs):
            if t >= 0 and t not in local:
                local[t] = len(local)
                x = graph.tensors[t]
                # Float32 rows carry no quantization (a converter may still leave a scale of 0 on
                # the tensor); the body records scale 1 and zero point 0 (one of each, as every
                # body tensor), which no stage reads.
                plain = x.dtype == "FLOAT32"
                tensors.append(
                    customops.StreamTensor(
                        x.name,
                        x.dtype,
                        x.shape,
                        (1.0,) if plain else x.scales,
                        (0,) if plain else x.zero_points,
                        x.quantized_dimension,
                    )
                )
    return local, tensors


def _body(
    graph: Graph,
    ops: list[int],
    cost: ChainCost,
    node: tuple[list[int], list[int]],
    slot_of: dict[int, int],
    block: int,
    io: _RowIo,
    fields: bool = True,
) -> customops.StreamChainOptions:
    """The StreamChain's options: planning figures and the body (customops.StreamStage). ``node``:
    the operator's inputs and outputs, tokens included; ``fields``: False leaves the stages'
    builtin option fields out (what the planning form counts needs none of them)."""
    local, tensors = _body_tensors(graph, ops, node)
    stages = []
    for i in ops:
        op = graph.operators[i]
        name, values = _fields(op.options) if fields else (None, ())
        stages.append(
            customops.StreamStage(
                op.opcode,
                tuple(local[t] if t >= 0 else -1 for t in op.inputs),
                tuple(local[t] for t in op.outputs),
                name,
                values,
                op.version,
                _quant(graph, op),
            )
        )
    spill = [t for t in cost.spilled if t not in io.sunk]
    fetch = [t for t in cost.fetched if t not in io.sourced]
    return customops.StreamChainOptions(
        ring_bytes=cost.rings,
        op_scratch=cost.op_scratch,
        spilled_count=len(spill),
        fetched_count=len(fetch),
        block=block,
        stages=tuple(stages),
        tensors=tuple(tensors),
        spill=tuple((local[t], slot_of[t]) for t in spill),
        fetch=tuple((local[t], slot_of[t]) for t in fetch),
        rings=tuple((local[t], r) for t, r in cost.ring_rows.items()),
        source=tuple((local[t], io.index(t)) for t in cost.fetched if t in io.sourced),
        sink=tuple((local[t], io.index(t)) for t in cost.spilled if t in io.sunk),
        tokens=tuple(local[io.tokens[t]] for t in cost.fetched + cost.spilled if t in io.tokens),
    )
