"""The arena's 16-byte rounding, defined once: the planner, the kernel rules and the custom-operator
contract all round with it (TFLM's MicroArenaBufferAlignment())."""

from __future__ import annotations

ARENA_ALIGNMENT = 16


def align_up(n: int, a: int = ARENA_ALIGNMENT) -> int:
    """n rounded up to a multiple of a."""
    return (n + a - 1) // a * a
