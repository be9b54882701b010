"""The stage registry: every stage the StreamChain kernel computes, one frozen record per
(operator, row type), each in the file named like the C++ family that computes it
(tflm_ops/kernels/tinyseg_stream_<family>.cc). No other module lists stages: customops.py's
stage tables are read from here, the generated tinyseg_contract.h lists the same keys
(kStageKeys), tinyseg_stream.cc's kStages must hold exactly those (a static_assert), and
tests/test_stage_registry.py compares kStages' text with STAGES without a compiler."""

from __future__ import annotations

from . import activation, arithmetic, conv, layout, pool, reduce
from .record import FAMILIES, ROWS, Stage

# By row type, then family, then the order of the family's file.
STAGES: tuple[Stage, ...] = tuple(
    sorted(
        conv.STAGES
        + pool.STAGES
        + arithmetic.STAGES
        + activation.STAGES
        + layout.STAGES
        + reduce.STAGES,
        key=lambda s: ROWS.index(s.rows),
    )
)

__all__ = ["FAMILIES", "ROWS", "STAGES", "Stage", "by_op", "conversions", "find", "keys", "rows_of"]


def keys() -> tuple[tuple[str, str], ...]:
    """(operator, row type) of every stage, in STAGES' order: the header's kStageKeys."""
    return tuple((s.op, s.rows) for s in STAGES)


def find(op: str, rows: str) -> Stage | None:
    """The stage of ``op`` on ``rows``; None when the kernel does not compute it."""
    return next((s for s in STAGES if s.op == op and s.rows == rows), None)


def by_op() -> dict[str, Stage]:
    """Every operator with a stage, in STAGES' order, and its first stage (the records of one
    operator agree on its operands and its persistent data: tests/test_stage_registry.py)."""
    out: dict[str, Stage] = {}
    for s in STAGES:
        out.setdefault(s.op, s)
    return out


def conversions(op: str) -> tuple[tuple[str, str], ...]:
    """The (input, output) types a QUANTIZE or DEQUANTIZE computes, over its row types."""
    return tuple(pair for s in STAGES if s.op == op for pair in s.converts)


def rows_of(input_type: str, output_type: str) -> str:
    """A stage's row type from its first activation input's type and its output's, as the
    kernel's RowsOf picks it (tinyseg_stream.cc)."""
    if input_type == "FLOAT32":
        return "float32"
    if "INT16" in (input_type, output_type):
        return "int16"
    return "quantized"
