"""Convolutions (tinyseg_stream_conv.cc; int16 rows: _int16.cc, _int16_tconv.cc): inputs filter
and bias (TRANSPOSE_CONV: output shape, filter, bias), requantized per output channel."""

from __future__ import annotations

from .record import Stage

_RULES = {
    "CONV_2D": "convolution",
    "DEPTHWISE_CONV_2D": "depthwise",
    "TRANSPOSE_CONV": "transpose_convolution",
}


def transpose_conv_window(
    in_h: int, out_h: int, kernel: int, stride: int, padding: int
) -> tuple[int, int, int] | None:
    """A TRANSPOSE_CONV's rows as a window (tinyseg_stream_conv.cc ConvGeometry computes the same):
    input row i adds to output rows i * stride - pad + [0, kernel), so output row y reads input rows
    ceil((y + pad - kernel + 1) / stride) .. floor((y + pad) / stride), inside
    [y // stride - before, y // stride + after]. Returns (pad, before, after), the top padding as
    TFLM computes it from the output's size (padding 0 SAME, 1 VALID); None when that size is not
    the one TFLM's padding gives for the input's (the operator's geometry does not match)."""
    if kernel < 1 or stride < 1:
        return None
    size = (out_h + stride - 1) // stride if padding == 0 else (out_h + stride - kernel) // stride
    pad = max((size - 1) * stride + kernel - out_h, 0) // 2
    if size != in_h or pad > kernel - 1:
        return None
    return pad, (kernel - 1 - pad) // stride, -(-pad // stride)


def _conv(
    op: str, rows: str, constants: tuple, activations: tuple[int, ...] = (0,), **more
) -> Stage:
    return Stage(
        op, rows, "conv", activations, constants, per_channel=True, rule=_RULES[op], **more
    )


# int16 rows take int8 weights; CONV_2D's bias is int64 or int32 (the accumulator TFLM picks by
# it), DEPTHWISE_CONV_2D's int64 (TFLM reads it as int64). Neither without bias: TFLM picks a
# CONV_2D's accumulator from an option (quantized_bias_type) a stage does not carry, and the
# tflite-micro wheel crashes on an int16 DEPTHWISE_CONV_2D without one. An int16 TRANSPOSE_CONV's
# bias is int64, int16 (TFLM widens it into a scratch buffer of its own) or none; not int32, which
# TFLM's 16x8 kernel would read as int64; it keeps an int64 accumulator row in op_scratch.
STAGES = (
    _conv("CONV_2D", "quantized", (("INT8", "INT32"), ("INT8", None))),
    _conv("DEPTHWISE_CONV_2D", "quantized", (("INT8", "INT32"), ("INT8", None))),
    _conv(
        "TRANSPOSE_CONV",
        "quantized",
        (("INT32", "INT8", "INT32"), ("INT32", "INT8", None), ("INT32", "INT8")),
        (2,),
    ),
    _conv("CONV_2D", "float32", (("FLOAT32", "FLOAT32"), ("FLOAT32", None))),
    _conv("DEPTHWISE_CONV_2D", "float32", (("FLOAT32", "FLOAT32"), ("FLOAT32", None))),
    _conv(
        "TRANSPOSE_CONV",
        "float32",
        (("INT32", "FLOAT32", "FLOAT32"), ("INT32", "FLOAT32", None), ("INT32", "FLOAT32")),
        (2,),
    ),
    _conv("CONV_2D", "int16", (("INT8", "INT64"), ("INT8", "INT32"))),
    _conv("DEPTHWISE_CONV_2D", "int16", (("INT8", "INT64"),)),
    _conv(
        "TRANSPOSE_CONV",
        "int16",
        (
            ("INT32", "INT8", "INT64"),
            ("INT32", "INT8", "INT16"),
            ("INT32", "INT8", None),
            ("INT32", "INT8"),
        ),
        (2,),
        refused_bias=(
            "INT32",
            "TRANSPOSE_CONV on int16 with an int32 bias (TFLM's 16x8 kernel reads its bias as "
            "int64 or int16)",
        ),
    ),
)
