"""Memory rules of TFLM's reference kernels (tensorflow/lite/micro/kernels/*.cc at 90b983c).

``scratch_requests`` returns what each kernel's Prepare asks of
RequestScratchBufferInArena, in order; None means we have no rule for the
operator (the planner then records it as unknown, so figures are flagged as
possibly inexact). ``persistent_bytes`` is what Init/Prepare take from the
persistent section (OpData and per-channel arrays), each allocation rounded up
to 16 bytes as ``MicroContext::AllocatePersistentBuffer`` does.

Struct sizes differ between TFLM builds, so the ``pointer_bytes`` argument
selects one of the two builds whose figures we have ground truth for:

* 8: the ``tflite-micro`` Python wheel (x86-64 LP64, built by Bazel with
  ``USE_TFLM_COMPRESSION``, which adds scratch indices to the OpData of
  CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED and
  CONCATENATION);
* 4: a Cortex-M firmware build from TFLM's Makefile (arm-none-eabi ILP32,
  where enums are one byte because the toolchain defaults to -fshort-enums,
  and no compression).

``persistent_allocations(..., compression=False)`` with 8-byte pointers gives
the x86-64 Makefile build. Every size in the tables below was read with
``sizeof``/``alignof`` from the TFLM sources at 90b983c compiled by g++ 12
(x86-64) and arm-none-eabi-g++ 12 (-mcpu=cortex-m7).
"""

from __future__ import annotations

import math

from ...ir.graph import Graph, Operator, Tensor
from ..align import ARENA_ALIGNMENT, align_up

PERSISTENT_ALIGNMENT = (
    ARENA_ALIGNMENT  # MicroArenaBufferAlignment(), used by AllocatePersistentBuffer
)

# Operators whose reference kernels request no scratch memory.
NO_SCRATCH = frozenset(
    """
    ABS ADD ARG_MAX ARG_MIN ASSIGN_VARIABLE AVERAGE_POOL_2D BATCH_MATMUL BATCH_TO_SPACE_ND BROADCAST_ARGS
    BROADCAST_TO CALL_ONCE CAST CEIL CONCATENATION COS CUMSUM DEPTH_TO_SPACE DEQUANTIZE DIV ELU EMBEDDING_LOOKUP
    EQUAL EXP EXPAND_DIMS FILL FLOOR FLOOR_DIV FLOOR_MOD GATHER GATHER_ND GREATER GREATER_EQUAL HARD_SWISH IF
    L2_NORMALIZATION L2_POOL_2D LEAKY_RELU LESS LESS_EQUAL LOG LOGICAL_AND LOGICAL_NOT LOGICAL_OR LOGISTIC
    LOG_SOFTMAX MAXIMUM MAX_POOL_2D MINIMUM MUL NEG NOT_EQUAL PACK PAD PADV2 PRELU QUANTIZE READ_VARIABLE RELU
    RELU6 RELU_N1_TO_1 RESHAPE RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR RIGHT_SHIFT ROUND RSQRT SELECT_V2 SHAPE
    SIN SLICE SOFTMAX SPACE_TO_BATCH_ND SPACE_TO_DEPTH SPLIT SPLIT_V SQRT SQUARE SQUARED_DIFFERENCE SQUEEZE
    STRIDED_SLICE SUB TANH TRANSPOSE UNPACK VAR_HANDLE WHILE ZEROS_LIKE
    """.split()
)


def _elems(graph: Graph, index: int) -> int:
    return math.prod(graph.tensors[index].shape) if index >= 0 else 0


def _input(graph: Graph, op: Operator, i: int) -> Tensor | None:
    return graph.tensors[op.inputs[i]] if len(op.inputs) > i and op.inputs[i] >= 0 else None


def _filter_int4(graph: Graph, op: Operator) -> list[int]:
    """Conv, depthwise and fully connected unpack int4 filters into an int8 scratch."""
    f = graph.tensors[op.inputs[1]]
    return [f.elements] if f.dtype == "INT4" else []


def lstm_dims(graph: Graph, op: Operator) -> tuple[int, int, int]:
    """(batch, state_dimension, cell-state item size) as CreateLstmSizeInfo reads them:
    the batch from the input (dim 1 when time-major), the state size from the
    output-state tensor (input 18, dims[1]), the cell state is input 19."""
    t = graph.tensors
    inp = t[op.inputs[0]]
    time_major = bool(getattr(op.options, "timeMajor", False))
    batch = inp.shape[1] if time_major and len(inp.shape) > 1 else inp.shape[0]
    hidden = _input(graph, op, 18)
    state = (
        hidden.shape[1]
        if hidden is not None and len(hidden.shape) > 1
        else t[op.outputs[0]].shape[-1]
    )
    cell = _input(graph, op, 19)
    return batch, state, (cell.itemsize if cell is not None else 4)


def scratch_requests(graph: Graph, op: Operator, pointer_bytes: int) -> list[int] | None:
    name = op.opcode
    t = graph.tensors
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        return _filter_int4(graph, op)
    if name == "TRANSPOSE_CONV":
        # transpose_conv.cc Prepare: int8 accumulates into an int32 copy of the output, int16 into
        # int64; then CalculateOpData asks for an int64 copy of an int16 bias.
        inp, out = t[op.inputs[2]], t[op.outputs[0]]
        bias = _input(graph, op, 3)
        if inp.dtype == "INT8":
            return [out.elements * 4]
        if inp.dtype == "INT16":
            return [out.elements * 8] + (
                [bias.elements * 8] if bias is not None and bias.dtype == "INT16" else []
            )
        return []
    if name == "SVDF":
        # svdf_common.cc PrepareSvdf: batch x num_filters accumulators, int8 also batch x num_units.
        inp, wf = t[op.inputs[0]], t[op.inputs[1]]
        batch, num_filters = inp.shape[0], wf.shape[0]
        rank = max(int(getattr(op.options, "rank", 1) or 1), 1)
        if inp.dtype == "INT8":
            return [batch * num_filters * 4, batch * (num_filters // rank) * 4]
        return [batch * num_filters * 4]
    if name == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        batch, state, cell_size = lstm_dims(graph, op)
        return [batch * state * cell_size] * 4
    if name == "ADD_N":
        out = t[op.outputs[0]]
        if out.dtype in ("FLOAT32", "INT8"):
            return [pointer_bytes * len(op.inputs)]
        return []
    if name == "MIRROR_PAD":
        n = len(t[op.inputs[0]].shape)
        return [n * 4, n * 4]
    if name in ("MEAN", "SUM"):
        inp, out = t[op.inputs[0]], t[op.outputs[0]]
        axis = _elems(graph, op.inputs[1])
        req = [out.elements * 4] if inp.dtype in ("INT8", "INT16") else []
        return req + [len(inp.shape) * 4, axis * 4]
    if name in ("REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL"):
        inp = t[op.inputs[0]]
        return [len(inp.shape) * 4, _elems(graph, op.inputs[1]) * 4]
    if name in NO_SCRATCH:
        return []
    return None


# ---------------------------------------------------------------- persistent memory


# sizeof() of what each reference kernel's Init allocates (its OpData), as
# (LP64, LP64 with USE_TFLM_COMPRESSION, ILP32 arm-none-eabi). Kernels whose Init
# returns nullptr are absent. Entries under 16 bytes all round to 16.
_OPDATA: dict[str, tuple[int, int, int]] = {
    "CONV_2D": (72, 80, 56),  # OpDataConv (conv.h)
    "DEPTHWISE_CONV_2D": (72, 80, 56),  # OpDataConv
    "TRANSPOSE_CONV": (80, 88, 72),  # OpData (transpose_conv.cc)
    "FULLY_CONNECTED": (64, 72, 48),  # OpDataFullyConnected (fully_connected.h)
    "CONCATENATION": (40, 80, 24),  # OpData (concatenation.cc): +kMaxInputNum scratch indices
    "SVDF": (36, 36, 36),  # OpDataSvdf
    "AVERAGE_POOL_2D": (32, 32, 32),  # OpDataPooling
    "MAX_POOL_2D": (32, 32, 32),
    "ADD": (60, 60, 60),  # OpDataAdd
    "SUB": (52, 52, 52),  # OpDataSub
    "MUL": (36, 36, 36),  # OpDataMul
    "SOFTMAX": (80, 80, 56),  # SoftmaxParams
    "LOGISTIC": (16, 16, 16),  # OpDataLogistic
    "QUANTIZE": (32, 32, 32),  # OpDataQuantizeReference
    "DEQUANTIZE": (32, 32, 32),  # DequantizeOpData
    "PAD": (56, 56, 56),  # OpData (pad_common.cc)
    "PADV2": (56, 56, 56),
    "STRIDED_SLICE": (84, 84, 84),  # StridedSliceParams
    "MEAN": (44, 44, 44),  # OpDataReduce
    "SUM": (44, 44, 44),
    "REDUCE_MAX": (44, 44, 44),
    "REDUCE_MIN": (44, 44, 44),
    "REDUCE_ALL": (44, 44, 44),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (688, 688, 688),  # OpDataLSTM (lstm_shared.h)
    "RELU": (28, 28, 28),  # ReluOpData
    "RELU6": (8, 8, 8),  # Relu6OpData
    "LEAKY_RELU": (24, 24, 24),
    "HARD_SWISH": (20, 20, 20),
    "TANH": (16, 16, 16),
    "ELU": (256, 256, 256),  # an int8 lookup table
    "PRELU": (28, 28, 28),
    "DIV": (28, 28, 28),
    "SQUARED_DIFFERENCE": (112, 112, 112),
    "EQUAL": (32, 32, 32),
    "NOT_EQUAL": (32, 32, 32),
    "GREATER": (32, 32, 32),
    "GREATER_EQUAL": (32, 32, 32),
    "LESS": (32, 32, 32),
    "LESS_EQUAL": (32, 32, 32),
    "SELECT_V2": (1, 1, 1),
    "ABS": (28, 28, 28),
    "RSQRT": (28, 28, 28),  # OpDataAbsRsqrt
    "MIRROR_PAD": (20, 20, 20),
    "SPACE_TO_BATCH_ND": (4, 4, 4),
    "IF": (8, 8, 8),
    "WHILE": (8, 8, 8),
    "CALL_ONCE": (8, 8, 8),
    "VAR_HANDLE": (4, 4, 4),
    "ASSIGN_VARIABLE": (0, 4, 0),  # an OpData only in compression builds
    "BATCH_MATMUL": (32, 32, 16),  # OpDataBatchMatmul
    "L2_NORMALIZATION": (4, 4, 4),
}

# Kernels that allocate their OpData in Prepare, for some types only: (LP64, ILP32).
_PREPARE_OPDATA: dict[str, tuple[tuple[str, ...], int, int]] = {
    "ADD_N": (("INT8",), 40, 40),
    "CUMSUM": (("INT8",), 36, 36),
    "LOG_SOFTMAX": (("INT8",), 40, 28),
}

# Kernels whose Prepare copies the output's dims into the tail (CreateWritableTensorDimsWithCopy).
_DIMS_COPY = frozenset(
    {
        "DEPTH_TO_SPACE",
        "SPACE_TO_DEPTH",
        "GATHER",
        "GATHER_ND",
        "L2_POOL_2D",
        "EMBEDDING_LOOKUP",
        "BATCH_MATMUL",
    }
)

INT16_LUT_BYTES = 513 * 2  # LUTSize<int16_t>() entries of int16


def _column(pointer_bytes: int, compression: bool) -> int:
    if pointer_bytes == 4:
        return 2
    return 1 if compression else 0


def default_compression(pointer_bytes: int) -> bool:
    """The builds we model: the 64-bit Python wheel has compression, the Cortex-M build not."""
    return pointer_bytes == 8


def opdata_bytes(opcode: str, pointer_bytes: int, compression: bool | None = None) -> int:
    """sizeof() of the reference kernel's Init allocation (0 when Init allocates nothing)."""
    if compression is None:
        compression = default_compression(pointer_bytes)
    row = _OPDATA.get(opcode)
    return row[_column(pointer_bytes, compression)] if row else 0


def _channels(f: Tensor, axis: int) -> int:
    return f.shape[axis] if f.shape else 1


def _int_array_bytes(n: int) -> int:
    return 4 + 4 * n  # TfLiteIntArrayGetSizeInBytes


def prepare_allocations(graph: Graph, op: Operator, pointer_bytes: int) -> list[int]:
    """Bytes of each AllocatePersistentBuffer call the reference kernel makes in Prepare."""
    name = op.opcode
    t = graph.tensors
    out: list[int] = []
    if name == "CONV_2D":  # conv_common.cc: multiplier and shift arrays, for every type
        out += [4 * _channels(t[op.inputs[1]], 0)] * 2
    elif name == "DEPTHWISE_CONV_2D":  # depthwise_conv_common.cc
        out += [4 * _channels(t[op.inputs[1]], -1)] * 2
    elif name == "TRANSPOSE_CONV":  # transpose_conv.cc
        out += [4 * _channels(t[op.inputs[1]], 0)] * 2
    elif name == "FULLY_CONNECTED":  # fully_connected_common.cc: per-channel quantized filters only
        inp, f = t[op.inputs[0]], t[op.inputs[1]]
        if inp.dtype != "FLOAT32" and len(f.scales) > 1:
            out += [4 * len(f.scales)] * 2
    elif name == "SOFTMAX":  # softmax_common.cc: exp and 1/(1+x) tables for int16 input
        if t[op.inputs[0]].dtype == "INT16":
            out += [INT16_LUT_BYTES] * 2
    elif name in _PREPARE_OPDATA:
        types, b64, b32 = _PREPARE_OPDATA[name]
        if t[op.outputs[0]].dtype in types:
            out.append(b64 if pointer_bytes == 8 else b32)
    if name == "EMBEDDING_LOOKUP":
        out.append(16 if pointer_bytes == 8 else 8)
    if name == "BATCH_MATMUL":
        out += _batch_matmul(graph, op, pointer_bytes)
    if name in _DIMS_COPY:
        out.append(_int_array_bytes(len(t[op.outputs[0]].shape)))
    return out


def _batch_matmul(graph: Graph, op: Operator, pointer_bytes: int) -> list[int]:
    """batch_matmul.cc InitializeTemporaries: quantization data, then transposed copies."""
    t = graph.tensors
    lhs, rhs = t[op.inputs[0]], t[op.inputs[1]]
    out: list[int] = []
    if lhs.dtype in ("INT8", "INT16"):
        out.append(28)  # QuantizationOpDataBatchMatmul: seven int32
    eval_tensor = 24 if pointer_bytes == 8 else 12
    if bool(getattr(op.options, "adjX", False)):
        out += [eval_tensor, _int_array_bytes(len(lhs.shape)), lhs.nbytes]
    if not bool(getattr(op.options, "adjY", False)):
        out += [eval_tensor, _int_array_bytes(len(rhs.shape)), rhs.nbytes]
    return out


def persistent_allocations(
    graph: Graph, op: Operator, pointer_bytes: int, compression: bool | None = None
) -> list[int]:
    """Every persistent allocation of the kernel, Init first, in bytes asked for."""
    init = opdata_bytes(op.opcode, pointer_bytes, compression)
    return ([init] if init else []) + prepare_allocations(graph, op, pointer_bytes)


def persistent_bytes(graph: Graph, op: Operator, pointer_bytes: int) -> int:
    return sum(align_up(n) for n in persistent_allocations(graph, op, pointer_bytes))


# ---------------------------------------------------------------- builtin data

# What the micro op resolver's parse function allocates for each operator before
# Init (the TfLite<Op>Params struct, through MicroBuiltinDataAllocator, with
# alignof alignment), as ((LP64 size, align), (ILP32 size, align)). ILP32
# figures are smaller for structs with enums: arm-none-eabi uses short enums.
BUILTIN_DATA: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "ADD": ((8, 4), (2, 1)),  # TfLiteAddParams
    "ARG_MAX": ((4, 4), (1, 1)),
    "ARG_MIN": ((4, 4), (1, 1)),
    "AVERAGE_POOL_2D": ((40, 4), (40, 4)),  # TfLitePoolParams
    "BATCH_MATMUL": ((3, 1), (3, 1)),
    "CALL_ONCE": ((4, 4), (4, 4)),
    "CAST": ((8, 4), (2, 1)),
    "CONCATENATION": ((8, 4), (8, 4)),
    "CONV_2D": ((28, 4), (28, 4)),  # TfLiteConvParams
    "CUMSUM": ((2, 1), (2, 1)),
    "DEPTHWISE_CONV_2D": ((28, 4), (28, 4)),
    "DEPTH_TO_SPACE": ((4, 4), (4, 4)),
    "DIV": ((4, 4), (1, 1)),
    "FULLY_CONNECTED": (
        (16, 4),
        (5, 1),
    ),  # the wheel's newer TFLM: (32, 8), see planner._TAIL_PROFILES
    "GATHER": ((8, 4), (8, 4)),
    "IF": ((8, 4), (8, 4)),
    "L2_NORMALIZATION": ((4, 4), (1, 1)),
    "L2_POOL_2D": ((40, 4), (40, 4)),
    "LEAKY_RELU": ((4, 4), (4, 4)),
    "MAX_POOL_2D": ((40, 4), (40, 4)),
    "MEAN": ((1, 1), (1, 1)),  # TfLiteReducerParams
    "MIRROR_PAD": ((4, 4), (1, 1)),
    "MUL": ((4, 4), (1, 1)),
    "PACK": ((8, 4), (8, 4)),
    "REDUCE_ALL": ((1, 1), (1, 1)),
    "REDUCE_MAX": ((1, 1), (1, 1)),
    "REDUCE_MIN": ((1, 1), (1, 1)),
    "RESHAPE": ((36, 4), (36, 4)),  # TfLiteReshapeParams: an 8-entry shape array
    "RESIZE_BILINEAR": ((2, 1), (2, 1)),
    "RESIZE_NEAREST_NEIGHBOR": ((2, 1), (2, 1)),
    "SHAPE": ((4, 4), (1, 1)),
    "SOFTMAX": ((4, 4), (4, 4)),
    "SPACE_TO_DEPTH": ((4, 4), (4, 4)),
    "SPLIT": ((4, 4), (4, 4)),
    "SPLIT_V": ((4, 4), (4, 4)),
    "SQUEEZE": ((36, 4), (36, 4)),
    "STRIDED_SLICE": ((24, 4), (24, 4)),
    "SUB": ((8, 4), (2, 1)),
    "SUM": ((1, 1), (1, 1)),
    "SVDF": ((12, 4), (8, 4)),
    "TRANSPOSE_CONV": ((20, 4), (16, 4)),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ((16, 4), (16, 4)),
    "UNPACK": ((8, 4), (8, 4)),
    "VAR_HANDLE": ((16, 8), (8, 4)),
    "WHILE": ((8, 4), (8, 4)),
}


def builtin_data(
    op: Operator, pointer_bytes: int, overrides: dict | None = None
) -> tuple[int, int]:
    """(size, alignment) of the operator's parsed builtin options in the tail; (0, 1) for none.
    ``overrides`` maps an operator to (size, alignment) for TFLM versions that differ."""
    if op.is_custom:
        return (0, 1)
    if overrides and op.opcode in overrides:
        return overrides[op.opcode]
    row = BUILTIN_DATA.get(op.opcode)
    if row is None:
        return (0, 1)
    return row[0] if pointer_bytes == 8 else row[1]
