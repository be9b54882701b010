"""The analysis of one model: plan, cold ranges and the per-operator schedule, as plain data.

``analyze`` is what ``tinyseg analyze`` prints and what the tflite-tools plugin
contributes to the host's report; ``to_dict`` is the stable JSON layout
documented in docs/analysis_json.md (bump SCHEMA when it changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.graph import Graph
from ..ir.validate import Refusal, refusal_lines, tflm_refusals
from .coldrange import ColdRange, cold_ranges, op_of, scope_of
from .planner import Buffer, Plan, head_without_io, plan_graph

SCHEMA = "tinyseg.analysis/3"  # 3: "kernel_set", "build_profile", buffers' "owner" (old "runtime", "arch", "index" kept for one release); 2: "target" renamed "arch"


@dataclass(frozen=True)
class OpRow:
    """One operator of the schedule with what is live while it runs."""

    index: int
    scope: int
    opcode: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    scratch: tuple[int, ...]  # planned bytes of each scratch buffer
    live: tuple[str, ...]  # labels of the live buffers
    live_bytes: int
    arena_top: int  # highest offset + size among the live buffers
    input_bytes: int
    output_bytes: int
    scratch_bytes: int
    other_bytes: int


@dataclass
class Analysis:
    graph: Graph
    plan: Plan
    cold: dict[int, ColdRange]
    ops: list[OpRow]
    peak_op: (
        int | None
    )  # operator whose scope reaches the head first; None for a model with no operators
    refusals: list[Refusal] = field(
        default_factory=list
    )  # what TFLM would refuse: then nothing is exact

    @property
    def head(self) -> int:
        return self.plan.head

    @property
    def exact(self) -> bool:
        """Exact only where TFLM can run the model and every operator has a scratch rule."""
        return self.plan.exact and not self.refusals

    @property
    def not_exact_because(self) -> list[str]:
        reasons = refusal_lines(self.refusals)
        if self.plan.unknown_ops:
            reasons.append(
                f"no scratch rule for {', '.join(self.plan.unknown_ops)}; the head may be low"
            )
        return reasons


class _RowData:
    """What every schedule row reads of the plan, computed once: labels, sizes and tops by buffer
    position, and which buffers a row lists (subgraph 0's tensors and every scratch buffer). The live
    lists are as long as the model's live sets, so each row is built with C-level maps over them."""

    def __init__(self, graph: Graph, plan: Plan) -> None:
        bufs = plan.buffers
        self.listed = [b.subgraph == 0 or b.kind == "scratch" for b in bufs]
        self.labels = [b.label for b in bufs]
        self.sizes = [b.size for b in bufs]
        self.tops = [b.offset + b.size for b in bufs]
        self.position = {id(b): k for k, b in enumerate(bufs)}
        self.by_scope = plan.live_positions()
        self.all_listed = all(self.listed)


def _row(graph: Graph, plan: Plan, op_index: int, data: _RowData | None = None) -> OpRow:
    data = data or _RowData(graph, plan)
    op = graph.operators[op_index]
    s = scope_of(op_index)
    if 0 <= s < len(data.by_scope):
        live = data.by_scope[s]
    else:
        live = tuple(k for k, b in enumerate(plan.buffers) if b.alive_at(s))
    if not data.all_listed:
        listed = data.listed
        live = tuple(k for k in live if listed[k])
    live_bytes = sum(map(data.sizes.__getitem__, live))
    # The operator's own buffers, classified as a scan of the live list would: its scratch, then its
    # outputs, then its inputs (a tensor both read and written counts as an output).
    live_set = None
    scratch_bytes = in_bytes = out_bytes = 0

    def is_live(b) -> bool:
        nonlocal live_set
        if b is None or not b.alive_at(s):
            return False
        if live_set is None:
            live_set = set(live) if len(live) > 8 else live
        return data.position[id(b)] in live_set

    own = plan.scratch_of(op_index, graph.subgraph)
    scratch_bytes = sum(b.size for b in own if is_live(b))
    outs = dict.fromkeys(op.outputs)
    ins = dict.fromkeys(t for t in op.inputs if t >= 0 and t not in outs)
    for t in outs:
        b = plan.tensor_buffer(t, graph.subgraph)
        if is_live(b):
            out_bytes += b.size
    for t in ins:
        b = plan.tensor_buffer(t, graph.subgraph)
        if is_live(b):
            in_bytes += b.size
    scratch = tuple(b.size for b in own)
    return OpRow(
        op_index,
        s,
        op.opcode,
        op.inputs,
        op.outputs,
        scratch,
        tuple(map(data.labels.__getitem__, live)),
        live_bytes,
        max(map(data.tops.__getitem__, live), default=0),
        in_bytes,
        out_bytes,
        scratch_bytes,
        live_bytes - in_bytes - out_bytes - scratch_bytes,
    )


def analyze_graph(
    graph: Graph,
    kernel_set: str = "reference",
    build_profile: str = "host64",
    plan: Plan | None = None,
) -> Analysis:
    plan = plan or plan_graph(graph, kernel_set, build_profile)
    data = _RowData(graph, plan)
    rows = [_row(graph, plan, i, data) for i in range(len(graph.operators))]
    peak = None
    if rows:
        peak = max(rows, key=lambda r: (r.arena_top, r.live_bytes, -r.index)).index
    return Analysis(graph, plan, cold_ranges(graph), rows, peak, tflm_refusals(graph))


def _buffer_dict(b: Buffer) -> dict:
    return {
        "label": b.label,
        "kind": b.kind,
        "subgraph": b.subgraph,
        "owner": b.owner,
        "index": b.owner,  # deprecated spelling of "owner", kept for one release
        "bytes": b.nbytes,
        "size": b.size,
        "offset": b.offset,
        "first_scope": b.first,
        "last_scope": b.last,
        "offline": b.offline,
    }


def head_scopes(a: Analysis) -> list[int]:
    """Every scope (of an operator) at which the arena reaches its head, not only the first."""
    head = a.plan.head
    return [r.scope for r in a.ops if head and r.arena_top >= head]


def to_dict(a: Analysis, model_name: str = "") -> dict:
    """The documented JSON layout (docs/analysis_json.md)."""
    g, p = a.graph, a.plan
    tensors = []
    activations, inputs, outputs = set(g.activations), set(g.inputs), set(g.outputs)
    for t in g.tensors:
        if t.index not in activations:
            continue
        b = p.tensor_buffer(t.index, g.subgraph)
        cr = a.cold.get(t.index)
        tensors.append(
            {
                "index": t.index,
                "name": t.name,
                "shape": list(t.shape),
                "dtype": t.dtype,
                "bytes": t.nbytes,
                "arena_bytes": b.size if b else 0,
                "offset": b.offset if b else None,
                "first_scope": b.first if b else None,
                "last_scope": b.last if b else None,
                "producer": g.producers.get(t.index),
                "consumers": g.consumers.get(t.index, []),
                "graph_input": t.index in inputs,
                "graph_output": t.index in outputs,
                "cold_range": None
                if cr is None
                else {"start": cr.start, "end": cr.end, "last": cr.last, "length": cr.length},
                "idle_ranges": [] if cr is None else [list(r) for r in cr.idle],
            }
        )
    ops = [
        {
            "index": r.index,
            "scope": r.scope,
            "opcode": r.opcode,
            "inputs": list(r.inputs),
            "outputs": list(r.outputs),
            "scratch": list(r.scratch),
            "live": list(r.live),
            "live_bytes": r.live_bytes,
            "arena_top": r.arena_top,
            "input_bytes": r.input_bytes,
            "output_bytes": r.output_bytes,
            "scratch_bytes": r.scratch_bytes,
            "other_bytes": r.other_bytes,
            "peak": r.index == a.peak_op,
        }
        for r in a.ops
    ]
    tail = p.tail
    return {
        "schema": SCHEMA,
        "model": model_name,
        "kernel_set": p.kernel_set,
        "runtime": p.kernel_set,  # deprecated spelling of "kernel_set", kept for one release
        "build_profile": p.build_profile,
        "arch": p.build_profile,  # deprecated spelling of "build_profile", kept for one release
        "exact": a.exact,
        "not_exact_because": a.not_exact_because,
        "unknown_ops": p.unknown_ops,
        "head": p.head,
        "tail": {
            "estimate": True,
            "total": tail.total,
            "eval_tensors": tail.eval_tensors,
            "node_registrations": tail.node_registrations,
            "io_tensors": tail.io_tensors,
            "kernel_data": tail.kernel_data,
            "scratch_handles": tail.scratch_handles,
            "variables": tail.variables,
            "fixed": tail.fixed,
            "builtin_data": tail.builtin_data,
        },
        "total": p.total,
        "head_without_io": head_without_io(p),
        "head_scopes": head_scopes(a),
        "peak": None
        if a.peak_op is None
        else {
            "operator": a.peak_op,
            "scope": scope_of(a.peak_op),
            "opcode": g.operators[a.peak_op].opcode,
            "live": list(a.ops[a.peak_op].live),
            "live_bytes": a.ops[a.peak_op].live_bytes,
        },
        "tensors": tensors,
        "operators": ops,
        "buffers": [_buffer_dict(b) for b in p.buffers],
    }


__all__ = [
    "Analysis",
    "OpRow",
    "SCHEMA",
    "analyze_graph",
    "head_scopes",
    "to_dict",
    "op_of",
    "scope_of",
]
