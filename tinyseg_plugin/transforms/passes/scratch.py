"""Scratch narrowing of TRANSPOSE_CONV (the paper's temporary tensor quantization, section 5.3).

TFLM's int8 TRANSPOSE_CONV scatters into an int32 accumulator as large as its output.
For each such operator we mark, in the model, one of two exact narrowings:
- INT16 accumulator, only when a bound over the operator's real weights and its
  input's int8 range proves no partial sum can leave int16;
- otherwise an INT32 accumulator over bands of output rows (scatter restricted to
  one band at a time), which is exact for any weights.
"""

from __future__ import annotations

import numpy as np

from ...contract import customops
from ...ir.graph import Graph
from ...ir.schema import fb
from . import Rewrite, Skip
from .edit import Editor

INT16_MAX = 32767
DEFAULT_BAND_ROWS = 1


def _pad_before(out_size: int, in_size: int, k: int, stride: int, padding: int) -> int:
    if padding != fb.Padding.SAME:
        return 0
    total = max((in_size - 1) * stride + k - out_size, 0)
    return total // 2


def accumulator_bound(graph: Graph, op_index: int) -> int | None:
    """Largest |partial sum| the int8 reference kernel can reach, or None if the operator is not int8."""
    op = graph.operators[op_index]
    x = graph.tensors[op.inputs[2]]
    w = graph.buffer_array(op.inputs[1])
    if x.dtype != "INT8" or w is None or not x.zero_points:
        return None
    zp = x.zero_points[0]
    amax = max(abs(-128 - zp), abs(127 - zp))  # |x - zp| over the whole int8 range
    out = graph.tensors[op.outputs[0]]
    o = op.options
    _, kh, kw, _ = w.shape
    absw = np.abs(w.astype(np.int64)).sum(axis=3)  # [oc, kh, kw]: sum over input channels
    pad_h = _pad_before(out.shape[1], x.shape[1], kh, o.strideH, o.padding)
    pad_w = _pad_before(out.shape[2], x.shape[2], kw, o.strideW, o.padding)

    def taps(out_size: int, in_size: int, k: int, stride: int, pad: int) -> list[list[int]]:
        """For each output coordinate, the filter taps that reach it from some input coordinate."""
        rows = []
        for oy in range(min(out_size, 4 * stride + k)):  # the pattern repeats with period `stride`
            rows.append(
                [
                    ky
                    for ky in range(k)
                    if (oy + pad - ky) % stride == 0 and 0 <= (oy + pad - ky) // stride < in_size
                ]
            )
        return rows

    worst = 0
    for ys in taps(out.shape[1], x.shape[1], kh, o.strideH, pad_h):
        for xs in taps(out.shape[2], x.shape[2], kw, o.strideW, pad_w):
            if ys and xs:
                worst = max(worst, int(absw[:, ys][:, :, xs].sum(axis=(1, 2)).max()))
    return worst * amax


def narrow_transpose_convs(graph: Graph, band_rows: int = DEFAULT_BAND_ROWS) -> Rewrite | Skip:
    """Mark every int8 TRANSPOSE_CONV; the rewrite's ``notes`` are (operator, accumulator) for each mark."""
    targets = [
        op.index
        for op in graph.operators
        if op.opcode == "TRANSPOSE_CONV"
        and not op.intermediates
        and graph.tensors[op.inputs[2]].dtype == "INT8"
    ]
    if not targets:
        return Skip("no unmarked int8 TRANSPOSE_CONV")
    ed = Editor(graph)
    marks = []
    for i in targets:
        bound = accumulator_bound(graph, i)
        if bound is not None and bound <= INT16_MAX:
            marker = ed.tensor(customops.MARKER_NAME, "INT16", [0, 0])
            marks.append((i, "INT16"))
        else:
            marker = ed.tensor(customops.MARKER_NAME, "INT32", [0, band_rows])
            marks.append((i, f"INT32 bands of {band_rows} row(s)"))
        ed.set_intermediates(i, [marker])
    return Rewrite.of(
        ed.commit(), ", ".join(f"op {i}: {acc}" for i, acc in marks), notes=tuple(marks)
    )
