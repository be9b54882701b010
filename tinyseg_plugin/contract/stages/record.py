"""One stage the StreamChain kernel computes: an operator on rows of one type, as one entry of
tinyseg_stream.cc's kStages (its family's Prepare and Row)."""

from __future__ import annotations

from dataclasses import dataclass

# The row types, as tinyseg_stream.cc's Rows names them (the C++ value is the index): int8 rows
# (and QUANTIZE/DEQUANTIZE from int8 or uint8), float32 rows (the first activation input is
# float32), int16 rows with int8 weights (TFLM's 16x8; the first activation input, or a QUANTIZE's
# output, is int16). rows_of in __init__.py picks one as the kernel's RowsOf does.
ROWS = ("quantized", "float32", "int16")
# The kernel's family files, tflm_ops/kernels/tinyseg_stream_<family>.cc (a family's float32 and
# int16 rows may sit in _float.cc and _int16*.cc).
FAMILIES = ("conv", "pool", "arithmetic", "activation", "layout", "reduce")
# A stage's rule, by name: how its output's shape and rows follow from its inputs. The name keys
# its body check (contract/bodies.py), its admission (transforms/stream.py stage_problem) and its
# row map (transforms/stream.py row_map); the value is its row rule: "identity" (output row y reads
# input row y), "windowed" (a window of rows around y * stride, less the top padding),
# "upsampling" (y // factor, or a resize's source row, a half-pixel shift as the row map's offset
# term: contract/rows.py), "padding" (y - top) or "accumulating" (one step per input row, one
# pixel written after the last).
RULES = {
    "convolution": "windowed",
    "depthwise": "windowed",
    "pool": "windowed",
    "transpose_convolution": "upsampling",
    "resize_nearest": "upsampling",
    "resize_bilinear": "upsampling",
    "pad": "padding",
    "mean": "accumulating",
    "elementwise": "identity",
    "conversion": "identity",
    "broadcast": "identity",
    "concatenation": "identity",
}


@dataclass(frozen=True)
class Stage:
    """A stage: ``op`` (the builtin operator's name) on ``rows`` (one of ROWS), computed by
    ``family``'s file. ``activations``: the positions of the inputs that are activations (rows
    streamed or read from the arena; None: all of them), the others are constants; ``constants``:
    the constant inputs' types it takes, each tuple one accepted form in input order (None: an
    omitted optional input; ``((),)``: none); ``converts``: the (input, output) types of a
    QUANTIZE or DEQUANTIZE (empty: its inputs and output are of the rows' type); ``per_channel``:
    it requantizes per output channel (multiplier and shift kept persistent); ``lookup_table``: it
    keeps a 256-entry table in the same persistent pool; ``accumulates``: it reads each input row
    once into per-channel sums and writes its one-pixel output after the last (it ends its
    chain); ``rule``: one of RULES; ``same_shape``: the search admits it only with its input's shape
    (the body check asks it of every "elementwise" and "conversion" stage); ``alpha``: where its
    alpha comes from ("field": an option the body carries, "input": a constant input that must not
    vary over rows); ``output_scale_log2``: the output scale TFLM's kernel needs (2^n);
    ``refused_bias``: a bias type the search refuses with its own reason (type, reason);
    ``reads_whole``: a one-pixel activation operand may be read whole from the arena and broadcast
    over every row (a squeeze-and-excitation gate; tinyseg_stream_arithmetic.cc WholeCandidate)."""

    op: str
    rows: str
    family: str
    activations: tuple[int, ...] | None = (0,)
    constants: tuple[tuple[str | None, ...], ...] = ((),)
    converts: tuple[tuple[str, str], ...] = ()
    per_channel: bool = False
    lookup_table: bool = False
    accumulates: bool = False
    rule: str = ""
    same_shape: bool = False
    alpha: str = ""
    output_scale_log2: int | None = None
    refused_bias: tuple[str, str] | tuple[()] = ()
    reads_whole: bool = False

    def __post_init__(self) -> None:
        if self.rows not in ROWS or self.family not in FAMILIES or self.rule not in RULES:
            raise ValueError(
                f"stage {self.op}: rows {self.rows!r}, family {self.family!r}, rule {self.rule!r}"
            )

    @property
    def row_rule(self) -> str:
        """How its output rows read its input rows (RULES' values)."""
        return RULES[self.rule]
