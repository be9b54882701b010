"""Pooling (tinyseg_stream_pool.cc, int8 and int16 rows one template): one activation input, no
constants."""

from __future__ import annotations

from .record import Stage

STAGES = tuple(
    Stage(op, rows, "pool", rule="pool")
    for rows in ("quantized", "float32", "int16")
    for op in ("MAX_POOL_2D", "AVERAGE_POOL_2D")
)
