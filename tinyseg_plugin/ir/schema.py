"""Access to the TFLite flatbuffer schema (object API) shipped by the ``tflite-micro`` wheel.

Everything else imports the schema from here, so that the location of the generated
module is written down once.
"""

from __future__ import annotations

from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb

BUILTIN_NAMES: dict[int, str] = {
    v: k
    for k, v in vars(fb.BuiltinOperator).items()
    if not k.startswith("_") and isinstance(v, int)
}
BUILTIN_CODES: dict[str, int] = {v: k for k, v in BUILTIN_NAMES.items()}
TYPE_NAMES: dict[int, str] = {
    v: k for k, v in vars(fb.TensorType).items() if not k.startswith("_") and isinstance(v, int)
}
TYPE_CODES: dict[str, int] = {v: k for k, v in TYPE_NAMES.items()}

# Bytes per element, as TfLiteTypeGetSize reports them (sub-byte types are unpacked
# to one byte per element in the arena; complex types hold two floats).
TYPE_SIZES: dict[str, int] = {
    "FLOAT32": 4,
    "FLOAT16": 2,
    "BFLOAT16": 2,
    "FLOAT64": 8,
    "INT32": 4,
    "UINT32": 4,
    "INT64": 8,
    "UINT64": 8,
    "INT16": 2,
    "UINT16": 2,
    "INT8": 1,
    "UINT8": 1,
    "BOOL": 1,
    "INT4": 1,
    "UINT4": 1,
    "INT2": 1,
    "COMPLEX64": 8,
    "COMPLEX128": 16,
    "RESOURCE": 0,
    "VARIANT": 0,
    "STRING": 0,
}

NUMPY_DTYPES: dict[str, str] = {
    "FLOAT32": "float32",
    "FLOAT16": "float16",
    "FLOAT64": "float64",
    "INT32": "int32",
    "UINT32": "uint32",
    "INT64": "int64",
    "UINT64": "uint64",
    "INT16": "int16",
    "UINT16": "uint16",
    "INT8": "int8",
    "UINT8": "uint8",
    "BOOL": "bool",
}


def opcode_name(code: "fb.OperatorCodeT") -> str:
    """The builtin operator name, or the custom code for CUSTOM operators."""
    builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
    if builtin == fb.BuiltinOperator.CUSTOM:
        custom = code.customCode
        return custom.decode() if isinstance(custom, bytes) else str(custom)
    return BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}")
