"""Elementwise-over-concatenation splitting: ADD(CONCATENATION(a, b), y) becomes
CONCATENATION(ADD(a, y0), ADD(b, y1)) with y0, y1 = SPLIT_V(y).

Why: a residual ADD that reads a concatenation keeps three full tensors live at once (the
concatenation, the other operand and the sum) and no spill can lower that, since every one of them is
being read or written. After the split each part of the concatenation has its own late reader, so the
parts get cold ranges that spilling can use, and the concatenation dies at its other reader.

Exact: elementwise operators act on each element with the same parameters, and TFLM's CONCATENATION
copies bytes (it requires its inputs and output to share one quantization), so the split graph computes
the same bytes. The verifier still checks every result in the interpreter."""

from __future__ import annotations

from ...ir.graph import Graph
from . import Rewrite, Skip
from .edit import Editor

ELEMENTWISE = ("ADD", "SUB", "MUL")
DTYPES = ("INT8", "INT16", "FLOAT32")


def concat_operand(graph: Graph, op_index: int) -> tuple[int, int] | None:
    """(input position, CONCATENATION operator index) of the operand to split, or None."""
    op = graph.operators[op_index]
    out = graph.tensors[op.outputs[0]]
    if len(op.inputs) != 2 or op.inputs[0] == op.inputs[1]:
        return None
    if any(graph.tensors[t].shape != out.shape for t in op.inputs):
        return None  # broadcasting: the slices of the other operand would not line up
    for pos, t in enumerate(op.inputs):
        p = graph.producers.get(t)
        if p is None:
            continue
        c = graph.operators[p]
        if c.opcode != "CONCATENATION" or getattr(c.options, "fusedActivationFunction", 0) != 0:
            continue
        if len(c.inputs) < 2 or any(graph.tensors[i].is_constant for i in c.inputs):
            continue
        return pos, p
    return None


def _split_point(graph: Graph, op_index: int) -> tuple[int, int] | None:
    op = graph.operators[op_index]
    if op.opcode not in ELEMENTWISE or graph.tensors[op.outputs[0]].dtype not in DTYPES:
        return None
    return concat_operand(graph, op_index)


def splittable(graph: Graph, op_index: int) -> bool:
    """Whether ``split_elementwise`` applies to operator ``op_index``."""
    return _split_point(graph, op_index) is not None


def split_elementwise(graph: Graph, op_index: int) -> Rewrite | Skip:
    """Split the elementwise operator at ``op_index`` along its concatenated operand's axis."""
    found = _split_point(graph, op_index)
    if found is None:
        return Skip(
            f"operator {op_index} is not an elementwise operator over a concatenation it can split"
        )
    op = graph.operators[op_index]
    pos, ci = found
    concat = graph.operators[ci]
    out = graph.tensors[op.outputs[0]]
    rank = len(out.shape)
    axis = concat.options.axis % rank
    parts = list(concat.inputs)
    sizes = [graph.tensors[p].shape[axis] for p in parts]
    other = op.inputs[1 - pos]
    ed = Editor(graph)
    name = out.name or f"t{out.index}"
    pieces = [
        ed.tensor_like(other, f"{name}/operand_part{k}", _with(out.shape, axis, s))
        for k, s in enumerate(sizes)
    ]
    new_ops = [ed.split_v(other, sizes, axis, pieces, name)]
    sums = []
    for k, (part, piece) in enumerate(zip(parts, pieces)):
        s = ed.tensor_like(out.index, f"{name}/part{k}", _with(out.shape, axis, sizes[k]))
        new_ops.append(ed.like(op_index, [part, piece] if pos == 0 else [piece, part], [s]))
        sums.append(s)
    new_ops.append(ed.concatenation(sums, out.index, axis))
    ed.remove(op_index)
    for k, new in enumerate(new_ops):
        ed.insert(op_index + k, new)
    return Rewrite.of(
        ed.commit(), f"op {op_index} {op.opcode} over CONCATENATION split into {len(parts)} slices"
    )


def _with(shape: tuple[int, ...], axis: int, size: int) -> list[int]:
    s = list(shape)
    s[axis] = size
    return s
