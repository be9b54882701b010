"""Proof by execution: lower TinySeg's operators back to builtins and compare with the original in TFLM.

Lowering: Spill is removed; a Fetching becomes CONCATENATION (or, with a single operand,
disappears and its readers read the spilled tensor again); FetchingConv2D becomes
CONCATENATION then CONV_2D; scratch markers are dropped. The lowered model computes
what the optimized model's operators are specified to compute, so equal outputs in
the real interpreter on random inputs show the rewrite preserved the function.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import customops, tflm
from .errors import TinySegError
from .graph import Graph
from .modelio import model_to_bytes
from .passes.edit import Editor, Op

_PAD = {v: k for k, v in customops.PADDING.items()}
_ACT = {v: k for k, v in customops.ACTIVATIONS.items()}


def lower(graph: Graph) -> Graph:
    """The builtin-only equivalent of an optimized graph."""
    slots: dict[int, int] = {}
    for op in graph.operators:
        if op.opcode == customops.SPILL:
            slots[customops.decode(op).slot] = op.inputs[0]
    ed = Editor(graph)
    ed.drop_intermediates_named(customops.MARKER_NAME)
    new_ops: list[int | Op] = []  # kept operators by position, new ones as built
    renames: list[tuple[int, int, int]] = []  # (old, new, from this position of new_ops on)
    for op in graph.operators:
        if op.opcode == customops.SPILL:
            continue
        if op.opcode in (customops.FETCHING, customops.FETCHING_CONV_2D):
            o = customops.decode(op)
            fo = o if isinstance(o, customops.FetchingOptions) else o.fetching
            ram = iter(op.inputs if op.opcode == customops.FETCHING else op.inputs[:-2])
            operands = []
            for k in range(fo.operands):
                hit = [f for f in fo.fetched if f.position == k]
                if hit:
                    if hit[0].slot not in slots:
                        raise TinySegError(f"operator {op.index}: fetches slot {hit[0].slot}, which no Spill fills")
                    operands.append(slots[hit[0].slot])
                else:
                    operands.append(next(ram))
            target = op.outputs[0]
            if op.opcode == customops.FETCHING and len(operands) == 1:
                renames.append((target, operands[0], len(new_ops)))
                continue
            if op.opcode == customops.FETCHING:
                new_ops.append(ed.concatenation(operands, target, fo.axis))
                continue
            filt, bias = op.inputs[-2], op.inputs[-1]
            if len(operands) == 1:
                cat = operands[0]
            else:
                shape = list(graph.tensors[operands[0]].shape)
                shape[3] = graph.tensors[filt].shape[3]
                cat = ed.tensor_like(operands[0], f"{graph.tensors[target].name}/lowered_concat", shape)
                new_ops.append(ed.concatenation(operands, cat, 3))
            c = o.conv
            new_ops.append(ed.conv2d([cat, filt] + ([bias] if bias >= 0 else []), target, padding=_PAD[c.padding],
                                     stride_h=c.stride_h, stride_w=c.stride_w, dilation_h=c.dilation_h,
                                     dilation_w=c.dilation_w, activation=_ACT[c.activation]))
            continue
        new_ops.append(op.index)
    ed.rebuild(new_ops)
    for old, new, start in renames:
        ed.rename_uses(old, new, start)
        ed.rename_outputs(old, new)
    return ed.graph()


def random_inputs(model: bytes, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for d in tflm.input_details(model):
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            out.append(rng.normal(0, 1, size=d["shape"]).astype(dt))
        elif dt.kind == "b":
            out.append(rng.integers(0, 2, size=d["shape"]).astype(dt))
        else:
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, info.max, size=d["shape"], endpoint=True, dtype=dt))
    return out


@dataclass(frozen=True)
class Verification:
    runs: int
    identical: bool
    detail: str = ""


def verify(original: Graph, optimized: Graph, runs: int = 3, seed: int = 0) -> Verification:
    """Run the original and the lowered optimized model on ``runs`` random inputs; outputs must be bit-identical."""
    a = model_to_bytes(original.model)
    b = model_to_bytes(lower(optimized).model)
    for r in range(runs):
        x = random_inputs(a, seed + r)
        ya, yb = tflm.run(a, x), tflm.run(b, x)
        if len(ya) != len(yb):
            return Verification(r + 1, False, f"{len(ya)} outputs against {len(yb)}")
        for k, (p, q) in enumerate(zip(ya, yb)):
            if p.shape != q.shape or p.dtype != q.dtype or not np.array_equal(p, q, equal_nan=p.dtype.kind == "f"):
                diff = int(np.count_nonzero(p != q)) if p.shape == q.shape else -1
                return Verification(r + 1, False, f"output {k} differs on random input {r} ({diff} elements)")
    return Verification(runs, True)
