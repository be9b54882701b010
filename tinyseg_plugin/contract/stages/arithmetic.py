"""Elementwise arithmetic (tinyseg_stream_arithmetic.cc, int8 and int16 rows one template): two activation
inputs (either may be a constant per-channel vector broadcast over the rows, or a one-pixel MUL
gate read whole)."""

from __future__ import annotations

from .record import Stage

STAGES = tuple(
    Stage(
        op,
        rows,
        "arithmetic",
        activations=(0, 1),
        rule="broadcast",
        reads_whole=op == "MUL",
    )
    for rows in ("quantized", "float32", "int16")
    for op in ("ADD", "SUB", "MUL")
)
