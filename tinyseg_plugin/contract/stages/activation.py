"""Activations and type conversions (tinyseg_stream_activation.cc; float32 rows also _float.cc,
int16 rows also _int16_more.cc): one activation input, each row computed alone."""

from __future__ import annotations

from .record import Stage


def _act(op: str, rows: str, **more) -> Stage:
    # The search admits a QUANTIZE whatever its output's shape (the body check refuses another).
    rule = "conversion" if op in ("QUANTIZE", "DEQUANTIZE") else "elementwise"
    alpha = {"LEAKY_RELU": "field", "PRELU": "input"}.get(op, "")
    same = op != "QUANTIZE"
    return Stage(op, rows, "activation", rule=rule, same_shape=same, alpha=alpha, **more)


# ELU looks each int8 element up in a table Prepare fills (as TFLM's elu.cc); its float32 stage
# takes the same pool entry and leaves it unused. An int16 LOGISTIC's output scale is 2^-15 (as
# TFLM's Prepare checks); an int16 PRELU takes an int8 alpha, as TFLM's int16 PRELU needs.
STAGES = (
    _act(
        "QUANTIZE", "quantized", converts=(("UINT8", "INT8"), ("INT8", "UINT8"), ("INT8", "INT8"))
    ),
    _act("DEQUANTIZE", "quantized", converts=(("INT8", "FLOAT32"),)),
    _act("LOGISTIC", "quantized"),
    _act("TANH", "quantized"),
    _act("RELU", "quantized"),
    _act("RELU6", "quantized"),
    _act("HARD_SWISH", "quantized"),
    _act("LEAKY_RELU", "quantized"),
    _act("PRELU", "quantized", constants=(("INT8",),)),  # alpha
    _act("ELU", "quantized", lookup_table=True),
    # float32 -> int8 starts an int8 chain at a float32 tensor; float32 -> int16 an int16 one
    _act("QUANTIZE", "float32", converts=(("FLOAT32", "INT8"), ("FLOAT32", "INT16"))),
    _act("LOGISTIC", "float32"),
    _act("TANH", "float32"),
    _act("RELU", "float32"),
    _act("RELU6", "float32"),
    _act("HARD_SWISH", "float32"),
    _act("LEAKY_RELU", "float32"),
    _act("PRELU", "float32", constants=(("FLOAT32",),)),  # alpha
    _act("ELU", "float32", lookup_table=True),
    _act("QUANTIZE", "int16", converts=(("INT8", "INT16"), ("INT16", "INT8"), ("INT16", "INT16"))),
    _act("DEQUANTIZE", "int16", converts=(("INT16", "FLOAT32"),)),
    _act("LOGISTIC", "int16", output_scale_log2=-15),
    _act("TANH", "int16", output_scale_log2=-15),
    _act("RELU", "int16"),
    _act("RELU6", "int16"),
    _act("LEAKY_RELU", "int16"),
    _act("PRELU", "int16", constants=(("INT8",),)),  # alpha
)
