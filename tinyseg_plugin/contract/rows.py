"""The row map: which input rows each output row of a stage reads (chain_schedule.h RowMap).

One record for the planner's simulation (transforms/stream.py), the body check's dry run of the
kernel's schedule (bodies.py) and the C++ schedule: output row y reads input rows
[anchor - before, anchor + after] clipped to [0, in_h), anchor = (y * num + offset) // den.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RowMap:
    """How output rows read one input. A down-sampling window: num = stride, den = 1; up-sampling
    by f: num = 1, den = f; PAD: before = -top; RESIZE_BILINEAR: TFLM's source position, its
    half-pixel shift as ``offset`` (customops.bilinear_row_rule), so that the window is the two
    rows TFLM blends."""

    in_h: int
    out_h: int
    num: int = 1
    den: int = 1
    before: int = 0  # rows above the anchor row (top padding)
    after: int = 0  # rows below it (effective kernel - 1 - top padding)
    offset: int = 0  # added to y * num before the division (a half-pixel shift)

    def window(self, y: int) -> tuple[int, int]:
        """Input rows [lo, hi] output row y reads; lo > hi when it reads none (padding)."""
        anchor = (y * self.num + self.offset) // self.den
        return max(anchor - self.before, 0), min(anchor + self.after, self.in_h - 1)
