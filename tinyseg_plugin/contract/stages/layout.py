"""Layout (tinyseg_stream_layout.cc; also _float.cc and _int16_tconv.cc): padding, resizing and
concatenation, rows moved or interpolated, never requantized arithmetic."""

from __future__ import annotations

from .record import Stage

_RULES = {
    "PAD": "pad",
    "PADV2": "pad",
    "RESIZE_NEAREST_NEIGHBOR": "resize_nearest",
    "RESIZE_BILINEAR": "resize_bilinear",
    "CONCATENATION": "concatenation",
}


def _layout(
    op: str, rows: str, constants: tuple = ((),), activations: tuple[int, ...] | None = (0,)
) -> Stage:
    return Stage(op, rows, "layout", activations, constants, rule=_RULES[op])


# PAD's paddings are int32 (TFLM's PAD reads them so; it pads int16 with 0, as TFLM's); PADV2's
# pad value is a scalar of the output's type (quantization). RESIZE_*'s constant is the size; a
# float32 RESIZE_BILINEAR's rows follow customops.bilinear_float_row_rule.
STAGES = (
    _layout("PAD", "quantized", (("INT32",),)),
    _layout("PADV2", "quantized", (("INT32", "INT8"),)),
    _layout("RESIZE_NEAREST_NEIGHBOR", "quantized", (("INT32",),)),
    _layout("RESIZE_BILINEAR", "quantized", (("INT32",),)),
    _layout("CONCATENATION", "quantized", activations=None),
    _layout("PAD", "float32", (("INT32",),)),
    _layout("PADV2", "float32", (("INT32", "FLOAT32"),)),
    _layout("RESIZE_NEAREST_NEIGHBOR", "float32", (("INT32",),)),
    _layout("RESIZE_BILINEAR", "float32", (("INT32",),)),
    _layout("CONCATENATION", "float32", activations=None),
    _layout("PAD", "int16", (("INT32",),)),
    _layout("PADV2", "int16", (("INT32", "INT16"),)),
    _layout("RESIZE_NEAREST_NEIGHBOR", "int16", (("INT32",),)),
    _layout("CONCATENATION", "int16", activations=None),
)
