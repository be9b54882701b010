"""Test helper: put an optimized model's spill slots in other storage regions, by rewriting its
TinySeg operators' options (decode, dataclasses.replace, encode), as a multi-region plan would
write them. The planner is not involved: the runtime is tested on its own."""

from __future__ import annotations

import copy
import dataclasses
from typing import Callable

from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.graph import Graph, build_graph


def slots(graph: Graph) -> set[int]:
    """Every slot a TinySeg operator of ``graph`` spills or fetches."""
    found: set[int] = set()
    for op in graph.operators:
        if not customops.is_tinyseg_op(op):
            continue
        o = customops.decode(op)
        if isinstance(o, customops.SpillOptions):
            found.add(o.slot)
        elif isinstance(o, customops.StreamChainOptions):
            found |= {s for _, s in o.spill + o.fetch}
        else:
            fetching = o.fetching if isinstance(o, customops.FetchingConv2DOptions) else o
            found |= {f.slot for f in fetching.fetched}
    return found


def _placed(o, region_of: Callable[[int], int]):
    if isinstance(o, customops.SpillOptions):
        return dataclasses.replace(o, region=region_of(o.slot))
    if isinstance(o, customops.StreamChainOptions):
        chain = sorted({s for _, s in o.spill + o.fetch})
        pairs = tuple((s, region_of(s)) for s in chain if region_of(s))
        return dataclasses.replace(o, slot_regions=pairs)
    if isinstance(o, customops.FetchingConv2DOptions):
        return dataclasses.replace(o, fetching=_placed(o.fetching, region_of))
    fetched = tuple(dataclasses.replace(f, region=region_of(f.slot)) for f in o.fetched)
    return dataclasses.replace(o, fetched=fetched)


def place(graph: Graph, region_of: Callable[[int], int], only: str | None = None) -> Graph:
    """A copy of ``graph`` whose slot s lives in storage region ``region_of(s)``; ``only``: rewrite
    just the operators of that opcode (a plan at odds with itself, to reach one kernel's checks)."""
    model = copy.deepcopy(graph.model)
    for op in graph.operators:
        if customops.is_tinyseg_op(op) and only in (None, op.opcode):
            raw = model.subgraphs[0].operators[op.index]
            raw.customOptions = list(customops.encode(_placed(customops.decode(op), region_of)))
    return build_graph(model)
