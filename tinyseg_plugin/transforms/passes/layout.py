"""Offline arena layout: when TFLM's greedy placement fragments the arena, find a tighter one and
store it in the model's ``OfflineMemoryAllocation`` metadata, which TFLM's planner honours as is.

Scratch buffers cannot be planned offline (kernels request them at Prepare time); TFLM places
them online around the offline tensors, and the planner emulates exactly that, so a candidate
layout is kept only if the TFLM-exact head it yields is lower. Run it last: any later edit of the
graph invalidates tensor indices and drops the metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...ir.graph import Graph
from ...memory.planner import Buffer, Plan, plan_conflict
from ...memory.planner import first_fit as place_first_fit
from . import Rewrite, Skip
from .edit import Editor

ORDERS: dict[str, Callable[[Buffer], tuple]] = {
    "size, then lifetime": lambda b: (-b.size, -(b.last - b.first), b.first),
    "lifetime, then size": lambda b: (-(b.last - b.first), -b.size, b.first),
    "area": lambda b: (-b.size * (b.last - b.first + 1), b.first),
    "start": lambda b: (b.first, -b.size),
}


def first_fit(buffers: list[Buffer], key: Callable[[Buffer], tuple]) -> dict[int, int]:
    """Offsets (by position in ``buffers``) from first-fit in the given order (the planner's
    placement walk, indexed so that it does not rescan every placed buffer)."""
    order = sorted(range(len(buffers)), key=lambda k: key(buffers[k]))
    offsets = place_first_fit(
        order, [b.size for b in buffers], [b.first for b in buffers], [b.last for b in buffers]
    )
    return {i: offsets[i] for i in order}


def with_offsets(graph: Graph, offsets: dict[int, int]) -> Rewrite:
    """A copy of the model whose OfflineMemoryAllocation metadata pins the given tensors of
    ``graph`` (the table is sized and indexed after the edit prunes unused tensors)."""
    ed = Editor(graph)
    ed.offline_offsets(offsets)
    return Rewrite.of(ed.commit(), "OfflineMemoryAllocation")


@dataclass(frozen=True)
class LayoutRequest:
    """The graph's plan as TFLM's greedy placement makes it, and how to plan a candidate layout."""

    plan: Plan
    plan_of: Callable[[Graph], Plan]


def improve_layout(graph: Graph, request: LayoutRequest) -> Rewrite | Skip:
    """Try a few first-fit orders over all buffers; keep the layout whose TFLM-exact head is lowest
    (the rewrite carries its plan)."""
    plan, plan_of = request.plan, request.plan_of
    if len(graph.model.subgraphs) != 1:
        return Skip("the model has several subgraphs; offline offsets cover the first only")
    best, best_plan, how, refused = None, plan, "", ""
    buffers = plan.buffers
    for name, key in ORDERS.items():
        offs = first_fit(buffers, key)
        tensors = {buffers[i].owner: o for i, o in offs.items() if buffers[i].kind == "tensor"}
        g = with_offsets(graph, tensors)
        p = plan_of(g.graph)
        if p.head >= best_plan.head:
            continue
        # The safety net: a layout that puts two tensors live at the same time on shared bytes
        # would make TFLM compute garbage, so it is never written.
        clash = plan_conflict(p)
        if clash:
            refused = refused or f"first-fit by {name}: {clash}"
            continue
        best, best_plan, how = g, p, name
    if best is None:
        if refused:
            return Skip(f"a layout would overlap live tensors ({refused})")
        return Skip("no first-fit order beats TFLM's greedy placement")
    return Rewrite(
        best.graph, best.remap, f"first-fit by {how} (OfflineMemoryAllocation)", best_plan
    )
