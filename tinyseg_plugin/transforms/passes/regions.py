"""Storage regions: each TinySeg operator names the region its slots sit in (memory/placement.py
chooses them; contract/customops.py encodes them: absent means region 0, so a plan that keeps
every slot in region 0 is not rewritten at all). Options only: operands, lifetimes and any
offline arena layout stay as they are."""

from __future__ import annotations

from dataclasses import replace

from ...contract import customops
from ...ir import offline
from ...ir.graph import Graph
from ...memory.placement import Placement
from . import PassResult, Rewrite, Skip
from .edit import Editor


def _fetching(o: customops.FetchingOptions, p: Placement) -> customops.FetchingOptions:
    return replace(o, fetched=tuple(replace(f, region=p.index_of(f.slot)) for f in o.fetched))


def _with_regions(options, p: Placement):
    """The operator's options with each slot's region from ``p``."""
    if isinstance(options, customops.SpillOptions):
        return replace(options, region=p.index_of(options.slot))
    if isinstance(options, customops.FetchingOptions):
        return _fetching(options, p)
    if isinstance(options, customops.FetchingConv2DOptions):
        return replace(options, fetching=_fetching(options.fetching, p))
    if isinstance(options, customops.StreamChainOptions):
        slots = sorted({s for _, s in options.spill + options.fetch})
        pairs = tuple((s, p.index_of(s)) for s in slots if p.index_of(s))
        return replace(options, slot_regions=pairs)
    return options


def place_slots(graph: Graph, placement: Placement) -> PassResult:
    """Set the ``region`` of every Spill, fetched entry and StreamChain slot to ``placement``'s."""
    changed = []
    for op in graph.operators:
        if op.opcode not in customops.TINYSEG_OPS:
            continue
        old = customops.decode(op, graph.memo.decoded)
        new = _with_regions(old, placement)
        if new != old:
            changed.append((op.index, new))
    if not changed:
        return Skip("every slot is in region 0")
    ed = Editor(graph)
    for position, options in changed:
        ed.set_custom_options(position, customops.encode(options))
    layout = offline.of_subgraph(graph.model, graph.subgraph)
    if layout is not None:  # options only: the layout still holds
        ed.offline_offsets(layout)
    regions = sorted({i for _, i in placement.slots if i})
    detail = ", ".join(f"{placement.names[i]} (region {i})" for i in regions)
    return Rewrite.of(ed.commit(), f"slots placed in {detail}")
