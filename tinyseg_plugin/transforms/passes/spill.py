"""Tensor spilling (Algorithm 3, Figures 6 and 7): Spill at the start of a cold range, Fetching at its end,
optionally for only part of the tensor (SPLIT_V after the start, CONCATENATION before the end)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...contract import customops
from ...ir.graph import Graph
from ...memory.coldrange import ColdRange
from . import Rewrite
from .edit import Editor


@dataclass(frozen=True)
class SpillPlan:
    """What to spill: a tensor over one of its cold ranges, all of it or ``rows`` slices along ``axis``."""

    tensor: int
    start: int  # scope of the last access before the range
    end: int  # scope of the access that ends it
    rows: int | None = None  # None: the whole tensor
    axis: int = 1
    slot: int = 0  # the storage slot the Spill writes and the Fetching reads


def spillable(graph: Graph, t: int) -> bool:
    """A tensor the Spill and Fetching kernels can move: an activation of a type they copy, of rank
    1 to customops.MAX_DIMS (a scalar has no shape to fetch), not a graph output."""
    tensor = graph.tensors[t]
    return (
        t in graph.activation_set
        and t not in graph.output_set
        and tensor.numpy_dtype is not None
        and tensor.dtype in ("INT8", "UINT8", "INT16", "FLOAT32", "INT32")
        and 1 <= len(tensor.shape) <= customops.MAX_DIMS
    )


def split_axis(shape: tuple[int, ...]) -> int | None:
    """The outermost axis with more than one slice: its slices are contiguous in memory."""
    for axis, d in enumerate(shape):
        if d > 1:
            return axis
    return None


def partial_axis(graph: Graph, t: int, cr: ColdRange) -> int | None:
    """The axis to cut a partial spill along. When the operator that ends the cold range is a
    CONCATENATION (a skip connection), its axis: then the fetched part merges into that concatenation
    and its convolution (fused fetching) and the whole tensor is never rebuilt in RAM at the peak.
    Otherwise the outermost axis with more than one slice (its slices are contiguous)."""
    shape = graph.tensors[t].shape
    reader = graph.operators[cr.end - 1] if 0 < cr.end <= len(graph.operators) else None
    if reader is not None and reader.opcode == "CONCATENATION" and t in reader.inputs and shape:
        axis = getattr(reader.options, "axis", None)
        if axis is not None and -len(shape) <= axis < len(shape) and shape[axis % len(shape)] > 1:
            return axis % len(shape)
    return split_axis(shape)


def partial_plans(
    graph: Graph, t: int, cr: ColdRange, reduction: int, extra: int = 2
) -> list[SpillPlan]:
    """Partial spills that free at least ``reduction`` bytes, smallest first: just enough whole slices
    (the paper's align(MR)), then ``extra`` more slices at a time, in case alignment or the layout
    keeps the head from dropping by exactly the bytes spilled. Empty if only the whole tensor would do."""
    tensor = graph.tensors[t]
    axis = partial_axis(graph, t, cr)
    if axis is None or reduction <= 0:
        return []
    slice_bytes = tensor.nbytes // tensor.shape[axis]
    if slice_bytes == 0:
        return []
    rows = math.ceil(reduction / slice_bytes)
    out = []
    for r in dict.fromkeys((rows, rows + 1, rows + extra, math.ceil(rows * 1.5))):
        if 0 < r < tensor.shape[axis]:
            out.append(SpillPlan(t, cr.start, cr.end, r, axis))
    return out


def partial_plan(graph: Graph, t: int, cr: ColdRange, reduction: int) -> SpillPlan:
    """Spill just enough whole slices (rows) to free ``reduction`` bytes; the whole tensor if that is all of it."""
    plans = partial_plans(graph, t, cr, reduction)
    return plans[0] if plans else SpillPlan(t, cr.start, cr.end)


def spilled_bytes(graph: Graph, plan: SpillPlan) -> int:
    tensor = graph.tensors[plan.tensor]
    if plan.rows is None:
        return tensor.nbytes
    return tensor.nbytes // tensor.shape[plan.axis] * plan.rows


def apply_spill(graph: Graph, plan: SpillPlan) -> Rewrite:
    """Insert the Spill after the range's first access and the Fetching before its last (a SPLIT_V
    and a CONCATENATION around them for a partial spill); the input graph is unchanged."""
    slot = plan.slot
    ed = Editor(graph)
    name = graph.tensors[plan.tensor].name or f"t{plan.tensor}"
    start_pos = plan.start  # operator index start-1, so the new operator goes at index start
    end_pos = plan.end - 1  # the operator that ends the cold range
    victim = plan.tensor
    whole = victim
    keep = None
    shape = list(graph.tensors[victim].shape)
    inserted = 0
    if plan.rows is not None:
        keep_shape = list(shape)
        keep_shape[plan.axis] = shape[plan.axis] - plan.rows
        part_shape = list(shape)
        part_shape[plan.axis] = plan.rows
        keep = ed.tensor_like(whole, f"{name}/kept", keep_shape)
        victim = ed.tensor_like(whole, f"{name}/spilled", part_shape)
        ed.insert(
            start_pos,
            ed.split_v(whole, [keep_shape[plan.axis], plan.rows], plan.axis, [keep, victim], name),
        )
        inserted += 1
        shape = part_shape
    spill = customops.encode(customops.SpillOptions(slot=slot), graph.memo.encoded)
    ed.insert(start_pos + inserted, ed.custom(customops.SPILL, [victim], [], spill))
    inserted += 1
    end = end_pos + inserted
    fetched = ed.tensor_like(victim, f"{name}/fetched", shape)
    opts = customops.FetchingOptions(
        axis=0, operands=1, fetched=(customops.Fetched(0, slot, tuple(shape)),)
    )
    ed.insert(
        end,
        ed.custom(customops.FETCHING, [], [fetched], customops.encode(opts, graph.memo.encoded)),
    )
    end += 1
    restored = fetched
    if keep is not None:
        restored = ed.tensor_like(whole, f"{name}/restored")
        ed.insert(end, ed.concatenation([keep, fetched], restored, plan.axis))
        end += 1
    ed.rename_uses(plan.tensor, restored, end)
    return Rewrite.of(ed.commit(), f"t{plan.tensor} to slot {slot}")
