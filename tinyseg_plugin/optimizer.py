"""The optimization loop (Algorithm 1): plan, find cold ranges, transform, until the target is met
or a step no longer lowers the peak. Every figure comes from the TFLM-exact planner."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from . import customops
from .coldrange import cold_ranges
from .graph import Graph
from .passes.fuse import fuse_concat, fuse_conv
from .passes.layout import improve_layout
from .passes.reorder import reorder
from .passes.scratch import narrow_transpose_convs
from .passes.spill import SpillPlan, apply_spill, partial_plan, spillable
from .planner import Plan, plan_graph

MAX_CANDIDATES = 8  # victims tried per iteration, longest cold range first


@dataclass(frozen=True)
class Step:
    """One row of the Figure-11-style table: what was done and the memory after it."""

    technique: str
    detail: str
    head: int
    total: int


@dataclass(frozen=True)
class SpillRecord:
    tensor: int
    name: str
    bytes: int
    cold_start: int
    cold_end: int
    partial: bool
    slot: int

    @property
    def bytes_moved(self) -> int:
        """Bytes written and read back per inference (before compression)."""
        return 2 * self.bytes


@dataclass
class Options:
    kernels: str = "reference"
    arch: str = "host64"
    target: int | None = None  # bytes of head; None: as low as it goes
    partial: bool = True
    fuse: bool = True
    scratch: bool = True
    layout: bool = True  # offline-planned arena layout when it beats TFLM's greedy placement
    reorder: bool = True  # off when a host (tflite-tools) has already reordered


@dataclass
class Result:
    graph: Graph
    plan: Plan
    original: Plan
    steps: list[Step] = field(default_factory=list)
    spills: list[SpillRecord] = field(default_factory=list)


def _plan(g: Graph, o: Options) -> Plan:
    return plan_graph(g, o.kernels, o.arch)


def _candidates(g: Graph, plan: Plan) -> list[int]:
    """Tensors live where the arena reaches its head and idle there, longest cold range first."""
    crs = cold_ranges(g)
    peak_scopes = [s for s in range(plan.scopes + 1)
                   if max((b.offset + b.size for b in plan.live_at(s)), default=0) == plan.head]
    found: dict[int, tuple[int, int]] = {}
    for s in peak_scopes:
        for b in plan.live_at(s):
            if b.kind != "tensor" or b.subgraph != g.subgraph or not spillable(g, b.index):
                continue
            cr = crs.get(b.index)
            if cr is None or not cr.start < s < cr.end:
                continue
            found[b.index] = (cr.length, b.size)
    return sorted(found, key=lambda t: (-found[t][0], -found[t][1], t))


def _fetch_index(g: Graph, slot: int) -> int | None:
    for op in g.operators:
        if op.opcode == customops.FETCHING:
            if any(f.slot == slot for f in customops.decode(op).fetched):
                return op.index
    return None


def _best_fusion(g: Graph, slot: int, o: Options) -> tuple[Graph, str]:
    """Try merging the new Fetching into its CONCATENATION and/or CONV_2D; keep what lowers the peak most."""
    best, best_head, how = g, _plan(g, o).head, ""
    i = _fetch_index(g, slot)
    if i is None:
        return g, ""
    options: list[tuple[Graph | None, str]] = []
    merged = fuse_concat(g, i)
    options.append((merged, "Fetching+Concatenation"))
    if merged is not None:
        j = _fetch_index(merged, slot)
        if j is not None:
            options.append((fuse_conv(merged, j), "Fetching+Concatenation+Conv2D -> FetchingConv2D"))
    options.append((fuse_conv(g, i), "Fetching+Conv2D -> FetchingConv2D"))
    for cand, label in options:
        if cand is None:
            continue
        h = _plan(cand, o).head
        if h < best_head:
            best, best_head, how = cand, h, label
    return best, how


def optimize(graph: Graph, o: Options, progress: Callable[[str], None] | None = None) -> Result:
    say = progress or (lambda _msg: None)
    plan = _plan(graph, o)
    res = Result(graph, plan, plan, [Step("original", "", plan.head, plan.total)])
    g = graph
    if o.reorder and len(g.operators) > 1:
        from .kernels import TARGETS, KernelRules

        rules = KernelRules(o.kernels, TARGETS[o.arch])
        g2 = reorder(g, lambda x: _plan(x, o).head,
                     lambda i: sum((s + 15) // 16 * 16 for s in rules.scratch_requests(g, g.operators[i])))
        if g2 is not g:
            plan = _plan(g2, o)
            g = g2
            res.steps.append(Step("operator reordering", "memory-minimising topological order", plan.head, plan.total))
            say(f"reordered: head {plan.head:,} B")
    if o.scratch:
        g2, marks = narrow_transpose_convs(g)
        if marks:
            p2 = _plan(g2, o)
            if p2.head < plan.head:
                g, plan = g2, p2
                detail = ", ".join(f"op {i}: {acc}" for i, acc in marks)
                res.steps.append(Step("scratch narrowing", detail, plan.head, plan.total))
                say(f"scratch narrowing: head {plan.head:,} B")
    slot = max((customops.decode(op).slot for op in g.operators if op.opcode == customops.SPILL), default=-1) + 1
    while o.target is None or plan.head > o.target:
        cands = _candidates(g, plan)[:MAX_CANDIDATES]
        crs = cold_ranges(g)
        accepted = False
        for t in cands:
            cr = crs[t]
            size = g.tensors[t].nbytes
            need = plan.head - o.target if o.target is not None else None
            plans = [SpillPlan(t, cr.start, cr.end)]
            if o.partial and need is not None and size > need:
                part = partial_plan(g, t, cr, need)
                if part.rows is not None:
                    plans.insert(0, part)  # spill as little as meets the target; whole tensor if that fails
            for sp in plans:
                g2 = apply_spill(g, sp, slot)
                how = ""
                if o.fuse:
                    g2, how = _best_fusion(g2, slot, o)
                p2 = _plan(g2, o)
                if p2.head < plan.head:
                    break
            else:
                continue
            name = g.tensors[t].name
            short = name if len(name) <= 40 else name[:18] + "..." + name[-19:]
            spilled = size if sp.rows is None else size // g.tensors[t].shape[sp.axis] * sp.rows
            res.spills.append(SpillRecord(t, name, spilled, cr.start, cr.end, sp.rows is not None, slot))
            kind = "partial spilling" if sp.rows is not None else "tensor spilling"
            res.steps.append(Step(kind, f"t{t} '{short}' {spilled:,} B over scopes {cr.start}-{cr.end}", p2.head, p2.total))
            if how:
                res.steps.append(Step("fused fetching", how, p2.head, p2.total))
            say(f"spilled t{t} ({spilled:,} B): head {p2.head:,} B")
            g, plan, slot, accepted = g2, p2, slot + 1, True
            break
        if not accepted:
            break
    if o.layout and (o.target is None or plan.head > o.target):
        g2, p2, how = improve_layout(g, plan, lambda x: _plan(x, o))
        if p2.head < plan.head:
            g, plan = g2, p2
            res.steps.append(Step("offline arena layout", f"first-fit by {how} (OfflineMemoryAllocation)", plan.head, plan.total))
            say(f"offline layout: head {plan.head:,} B")
    res.graph, res.plan = g, plan
    return res
