"""Reductions (tinyseg_stream_reduce.cc): MEAN over height and width (a squeeze-and-excitation's
squeeze), its int32 or float sums at the end of op_scratch, its constant the axis."""

from __future__ import annotations

from .record import Stage

STAGES = tuple(
    Stage("MEAN", rows, "reduce", constants=(("INT32",),), accumulates=True, rule="mean")
    for rows in ("quantized", "float32", "int16")
)
