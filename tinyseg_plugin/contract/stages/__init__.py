"""The stage registry: every stage the StreamChain kernel computes, one frozen record per
(operator, row type), each in the file named like the C++ family that computes it
(tflm_ops/kernels/tinyseg_stream_<family>.cc). No other module lists stages: customops.py's
stage tables are read from here, the generated tinyseg_contract.h lists the same keys
(kStageKeys), tinyseg_stream.cc's kStages must hold exactly those (a static_assert), and
tests/test_stage_registry.py compares kStages' text with STAGES without a compiler."""

from __future__ import annotations

from . import activation, arithmetic, conv, layout, pool, reduce
from .conv import transpose_conv_window
from .record import FAMILIES, ROWS, RULES, Stage

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

# Row-local operators the kernel computes no stage of, and their rule: `analyze --stream`'s
# estimate streams them (their row map), `optimize` cuts its chains there (stage_problem says why).
ESTIMATED: dict[str, str] = {"RELU_N1_TO_1": "elementwise"}

__all__ = [
    "ESTIMATED",
    "FAMILIES",
    "ROWS",
    "RULES",
    "STAGES",
    "Stage",
    "by_op",
    "conversions",
    "find",
    "keys",
    "reads_whole",
    "record_of",
    "row_local",
    "rows_of",
    "rule_of",
    "same_type",
    "transpose_conv_window",
]


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


_BY_OP = by_op()
# The element type of a stage's rows when its inputs and output are of one type (no conversion).
_ROWS_OF_TYPE = {"INT8": "quantized", "FLOAT32": "float32", "INT16": "int16"}


def record_of(op: str) -> Stage | None:
    """The first record of ``op`` (by_op's), None when the kernel computes no stage of it."""
    return _BY_OP.get(op)


def reads_whole(op: str) -> bool:
    """Whether a stage of ``op`` may read a one-pixel operand whole (Stage.reads_whole)."""
    s = _BY_OP.get(op)
    return s is not None and s.reads_whole


def rule_of(op: str) -> str | None:
    """The rule (RULES) of a row-local operator, a stage's or an estimated one's; None: the
    operator is not row-local."""
    s = _BY_OP.get(op)
    return s.rule if s is not None else ESTIMATED.get(op)


def row_local() -> frozenset[str]:
    """Every operator with a row rule: the stages' and the estimated ones."""
    return frozenset(_BY_OP) | frozenset(ESTIMATED)


def same_type(op: str, dtype: str | None) -> Stage | None:
    """The stage of ``op`` whose inputs and output are all ``dtype`` (no conversion); None when
    the kernel computes none."""
    s = find(op, _ROWS_OF_TYPE.get(dtype or "", ""))
    return s if s is not None and not s.converts else None


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
