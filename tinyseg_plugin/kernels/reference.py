"""Memory rules of TFLM's reference kernels (tensorflow/lite/micro/kernels/*.cc at 90b983c).

``scratch_requests`` returns what each kernel's Prepare asks of
RequestScratchBufferInArena, in order; None means we have no rule for the
operator (the planner then records it as unknown, so figures are flagged as
possibly inexact). ``persistent_bytes`` estimates what Init/Prepare take from
the persistent section (OpData and per-channel arrays), used for the tail.
"""
from __future__ import annotations

import math

from ..graph import Graph, Operator

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


def _filter_int4(graph: Graph, op: Operator) -> list[int]:
    """Conv, depthwise and fully connected unpack int4 filters into an int8 scratch."""
    f = graph.tensors[op.inputs[1]]
    return [f.elements] if f.dtype == "INT4" else []


def scratch_requests(graph: Graph, op: Operator, pointer_bytes: int) -> list[int] | None:
    name = op.opcode
    t = graph.tensors
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        return _filter_int4(graph, op)
    if name == "TRANSPOSE_CONV":
        inp, out = t[op.inputs[2]], t[op.outputs[0]]
        bias = op.inputs[3] if len(op.inputs) > 3 else -1
        if inp.dtype == "INT8":
            return [out.elements * 4]
        if inp.dtype == "INT16":
            req = [out.elements * 8]
            if bias >= 0 and t[bias].dtype == "INT16":
                req.append(t[bias].elements * 8)
            return req
        return []
    if name == "SVDF":
        inp, wf = t[op.inputs[0]], t[op.inputs[1]]
        batch, num_filters = inp.shape[0], wf.shape[0]
        rank = max(int(getattr(op.options, "rank", 1) or 1), 1)
        if inp.dtype == "INT8":
            return [batch * num_filters * 4, batch * (num_filters // rank) * 4]
        return [batch * num_filters * 4]
    if name == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        inp, out = t[op.inputs[0]], t[op.outputs[0]]
        time_major = bool(getattr(op.options, "timeMajor", False))
        batch = inp.shape[1] if time_major else inp.shape[0]
        cell = t[op.inputs[19]] if len(op.inputs) > 19 and op.inputs[19] >= 0 else None
        state_dim = out.shape[-1]
        cell_size = cell.itemsize if cell is not None else 2
        return [batch * state_dim * cell_size] * 4
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


def _align(n: int, a: int = 16) -> int:
    return (n + a - 1) // a * a


def _per_channel(graph: Graph, op: Operator) -> int:
    """Per-channel multiplier and shift arrays (int32 each) of quantized convolutions."""
    f = graph.tensors[op.inputs[1]]
    if f.dtype not in ("INT8", "INT4", "INT16") or not f.shape:
        return 0
    channels = f.shape[0] if op.opcode in ("CONV_2D", "TRANSPOSE_CONV") else f.shape[-1]
    return 2 * _align(channels * 4)


# Approximate OpData sizes on a 64-bit host; the 32-bit figures are smaller by the pointers.
_OPDATA64 = {
    "CONV_2D": 80, "DEPTHWISE_CONV_2D": 80, "TRANSPOSE_CONV": 96, "FULLY_CONNECTED": 64, "SVDF": 96,
    "AVERAGE_POOL_2D": 32, "MAX_POOL_2D": 32, "SOFTMAX": 48, "ADD": 64, "MUL": 48, "SUB": 64,
    "CONCATENATION": 64, "LOGISTIC": 32, "QUANTIZE": 32, "DEQUANTIZE": 32,
}


def persistent_bytes(graph: Graph, op: Operator, pointer_bytes: int) -> int:
    base = _OPDATA64.get(op.opcode, 16)
    if pointer_bytes == 4:
        base = max(base - 16, 8)
    extra = _per_channel(graph, op) if op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV") else 0
    return _align(base) + extra
