"""Memory rules of TFLM's CMSIS-NN kernels (OPTIMIZED_KERNEL_DIR=cmsis_nn).

Sources: tensorflow/lite/micro/kernels/cmsis_nn/*.cc at TFLM 90b983c and the
buffer-size functions of CMSIS-NN at the commit TFLM pins
(ext_libs/cmsis_nn_download.sh: 4ab83cc3cc98fb85ed6dafb55e8ca02f1628dcae).
TFLM has CMSIS-NN versions of ADD, BATCH_MATMUL, CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED, MAXIMUM/MINIMUM, MUL, PAD/PADV2, AVERAGE/MAX_POOL_2D, SOFTMAX,
SVDF, TRANSPOSE, TRANSPOSE_CONV and UNIDIRECTIONAL_SEQUENCE_LSTM; every other
operator runs the reference kernel and follows ``reference``'s rules.

CMSIS-NN sizes some buffers by what the target can do: ``ARM_MATH_DSP`` (set
for Cortex-M4/M7/M33...) turns on the DSP paths of depthwise conv and average
pool, which need scratch that the plain-C build (the x86 host build, or a
Cortex-M0) does not. The pointer width cannot tell those builds apart (a
Cortex-M0 and a Cortex-M7 are both 32-bit), so ``scratch_requests_for`` takes
``dsp`` explicitly; ``scratch_requests``, the kernel-set entry point, assumes
the Cortex-M7 target this package plans for (dsp=True, compiled by GCC, no MVE).
Helium (MVE) builds are not modelled.
"""

from __future__ import annotations

from ...ir.graph import Graph, Operator, Tensor
from . import reference

# CMSIS-NN constants (Include/arm_nnsupportfunctions.h)
REVERSE_TCOL_EFFICIENT_THRESHOLD = 16

# Schema padding values (tflite::Padding): SAME = 0, VALID = 1.
_SAME, _VALID = 0, 1


def _opt(op: Operator, name: str, default: int) -> int:
    value = getattr(op.options, name, None) if op.options is not None else None
    return int(value) if value is not None else default


def _dims4(t: Tensor) -> tuple[int, int, int, int]:
    """(n, h, w, c) of a 4-D tensor; shorter shapes are padded at the front with ones."""
    s = (1,) * (4 - len(t.shape)) + tuple(t.shape[-4:])
    return s[0], s[1], s[2], s[3]


def tflm_padding(padding: int, stride: int, dilation: int, in_size: int, filter_size: int) -> int:
    """The padding TFLM's ComputePaddingHeightWidth gives a kernel (kernels/padding.h):
    total padding halved, the odd pixel going to the offset."""
    eff = (filter_size - 1) * dilation + 1
    if padding == _SAME:
        out = (in_size + stride - 1) // stride
    elif padding == _VALID:
        out = (in_size + stride - eff) // stride
    else:
        out = 0
    total = max((out - 1) * stride + eff - in_size, 0)
    return total // 2


# ---------------------------------------------------------------- CMSIS-NN buffer sizes (non-MVE)


def convolve_s8_buffer_size(in_c: int, f_h: int, f_w: int) -> int:
    """arm_convolve_s8_get_buffer_size: two im2col columns of int16, the column padded to 4."""
    rhs_cols = f_w * f_h * in_c
    aligned = rhs_cols + (4 - rhs_cols % 4) % 4
    return 2 * aligned * 2


def convolve_1x1_s8_fast_buffer_size(in_c: int, dsp: bool, armclang: bool) -> int:
    """arm_convolve_1x1_s8_fast_get_buffer_size: 2*c int16 only for the DSP build when the
    compiler is Arm Compiler 6 (__ARMCC_VERSION); 0 with GCC and without DSP."""
    return 2 * in_c * 2 if dsp and armclang else 0


def convolve_wrapper_s8_buffer_size(
    in_dims: tuple[int, int, int, int],
    f_h: int,
    f_w: int,
    f_c: int,
    stride: tuple[int, int],
    pad: tuple[int, int],
    dilation: tuple[int, int],
    dsp: bool,
    armclang: bool,
) -> int:
    """arm_convolve_wrapper_s8_get_buffer_size (and its _dsp variant, which has the same structure)."""
    n, h, w, c = in_dims
    (sh, sw), (ph, pw), (dh, dw) = stride, pad, dilation
    if (
        pw == 0 and ph == 0 and f_w == 1 and f_h == 1 and dw == 1 and dh == 1 and c == f_c
    ):  # arm_nn_is_convolve_1x1
        if sw == 1 and sh == 1:  # arm_nn_is_convolve_1x1_fast
            return convolve_1x1_s8_fast_buffer_size(c, dsp, armclang)
        return 0
    # 1xN (arm_nn_is_convolve_1_x_n) and the general case both use arm_convolve_s8_get_buffer_size
    return convolve_s8_buffer_size(c, f_h, f_w)


def convolve_wrapper_s16_buffer_size(in_c: int, f_h: int, f_w: int) -> int:
    """arm_convolve_wrapper_s16_get_buffer_size -> arm_convolve_s16_get_buffer_size: 2*c*kh*kw int16."""
    return 2 * in_c * f_w * f_h * 2


def depthwise_wrapper_s8_buffer_size(
    in_dims: tuple[int, int, int, int],
    out_c: int,
    f_h: int,
    f_w: int,
    pad: tuple[int, int],
    dilation: tuple[int, int],
    dsp: bool,
) -> int:
    """arm_depthwise_conv_wrapper_s8_get_buffer_size: only depth multiplier 1, batch 1, no dilation
    uses arm_depthwise_conv_s8_opt, whose buffer is c*kh*kw int16 with DSP (0 without); the 3x3
    kernel with padding <= 1 goes to arm_depthwise_conv_3x3_s8, which needs none."""
    n, _, _, c = in_dims
    if c == out_c and n == 1 and dilation == (1, 1):
        if f_w == 3 and f_h == 3 and pad[0] <= 1 and pad[1] <= 1:
            return 0
        return c * f_w * f_h * 2 if dsp else 0
    return 0


def depthwise_wrapper_s4_buffer_size(
    in_dims: tuple[int, int, int, int], out_c: int, f_h: int, f_w: int, dilation: tuple[int, int]
) -> int:
    """arm_depthwise_conv_wrapper_s4_get_buffer_size: the s4 opt path uses the DSP size on every non-MVE build."""
    n, _, _, c = in_dims
    if c == out_c and n == 1 and dilation == (1, 1):
        return c * f_w * f_h * 2
    return 0


def avgpool_buffer_size(ch: int, dsp: bool) -> int:
    """arm_avgpool_s8/s16_get_buffer_size: one int32 accumulator per channel with DSP, none without."""
    return ch * 4 if dsp else 0


def transpose_conv_s8_buffer_sizes(
    in_dims: tuple[int, int, int, int],
    out_c: int,
    f_h: int,
    f_w: int,
    stride: tuple[int, int],
) -> tuple[int, int]:
    """(arm_transpose_conv_s8_get_buffer_size, arm_transpose_conv_s8_get_reverse_conv_buffer_size).

    With stride <= 2 and more than 16 input channels CMSIS-NN runs the transposed
    conv as a convolution over the upsampled input (an im2col buffer) and keeps a
    reversed copy of the filter; otherwise it accumulates int32 rows of the output
    (note the MAX(filter w, stride h), as in the source)."""
    _, _, w, c = in_dims
    sh, sw = stride
    if sw <= 2 and sh <= 2 and c > REVERSE_TCOL_EFFICIENT_THRESHOLD:
        return convolve_s8_buffer_size(c, f_h, f_w), c * f_w * f_h * out_c
    buf_x = ((w - 1) * sw + max(f_w, sh)) * out_c
    buf_y = max(f_h, sh)
    return buf_x * buf_y * 4, 0


# ---------------------------------------------------------------- scratch requests


def _conv(graph: Graph, op: Operator, dsp: bool, armclang: bool) -> list[int]:
    """cmsis_nn/conv.cc Prepare: one buffer for int8 and int16 inputs, when its size is > 0.
    (Its int16 bias check reads the bias through AllocateTempOutputTensor, which finds
    no third output, so the int16 path always asks.)"""
    t = graph.tensors
    inp, f = t[op.inputs[0]], t[op.inputs[1]]
    in_dims = _dims4(inp)
    _, f_h, f_w, f_c = _dims4(f)
    sh, sw = _opt(op, "strideH", 1), _opt(op, "strideW", 1)
    dh, dw = _opt(op, "dilationHFactor", 1), _opt(op, "dilationWFactor", 1)
    padding = _opt(op, "padding", _SAME)
    pad = (
        tflm_padding(padding, sh, dh, in_dims[1], f_h),
        tflm_padding(padding, sw, dw, in_dims[2], f_w),
    )
    if inp.dtype == "INT8":
        size = convolve_wrapper_s8_buffer_size(
            in_dims, f_h, f_w, f_c, (sh, sw), pad, (dh, dw), dsp, armclang
        )
    elif inp.dtype == "INT16":
        size = convolve_wrapper_s16_buffer_size(in_dims[3], f_h, f_w)
    else:
        size = 0
    return [size] if size > 0 else []


def _depthwise(graph: Graph, op: Operator, dsp: bool) -> list[int]:
    """cmsis_nn/depthwise_conv.cc Prepare: int8 inputs only (int16 asks for nothing)."""
    t = graph.tensors
    inp, f, out = t[op.inputs[0]], t[op.inputs[1]], t[op.outputs[0]]
    if inp.dtype != "INT8":
        return []
    in_dims = _dims4(inp)
    _, f_h, f_w, _ = _dims4(f)
    out_c = _dims4(out)[3]
    sh, sw = _opt(op, "strideH", 1), _opt(op, "strideW", 1)
    dh, dw = _opt(op, "dilationHFactor", 1), _opt(op, "dilationWFactor", 1)
    padding = _opt(op, "padding", _SAME)
    pad = (
        tflm_padding(padding, sh, dh, in_dims[1], f_h),
        tflm_padding(padding, sw, dw, in_dims[2], f_w),
    )
    if f.dtype == "INT4":
        size = depthwise_wrapper_s4_buffer_size(in_dims, out_c, f_h, f_w, (dh, dw))
    else:
        size = depthwise_wrapper_s8_buffer_size(in_dims, out_c, f_h, f_w, pad, (dh, dw), dsp)
    return [size] if size > 0 else []


def _fully_connected(graph: Graph, op: Operator, dsp: bool, armclang: bool) -> list[int]:
    """cmsis_nn/fully_connected.cc Prepare. int8 with int8 weights, an output of rank > 2 and
    an accumulation depth divisible by 4 runs as a 1x1 convolution: per-tensor weights then
    need a fake per-channel multiplier/shift pair (output_depth x 2 int32) first, then the
    1x1-fast buffer. Other int8 cases use arm_fully_connected_s8_get_buffer_size (0 without
    MVE); int16, int4 weights and float ask for nothing."""
    t = graph.tensors
    inp, f, out = t[op.inputs[0]], t[op.inputs[1]], t[op.outputs[0]]
    if inp.dtype != "INT8" or f.dtype == "INT4":
        return []
    accum_depth, output_depth = f.shape[-1], out.shape[-1]
    if len(out.shape) > 2 and accum_depth % 4 == 0:
        req = [] if len(f.scales) > 1 else [output_depth * 4 * 2]
        size = convolve_1x1_s8_fast_buffer_size(accum_depth, dsp, armclang)
        return req + ([size] if size > 0 else [])
    return []


def _average_pool(graph: Graph, op: Operator, dsp: bool) -> list[int]:
    inp, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    if inp.dtype not in ("INT8", "INT16"):
        return []
    size = avgpool_buffer_size(_dims4(out)[3], dsp)
    return [size] if size > 0 else []


def _transpose_conv(graph: Graph, op: Operator) -> list[int]:
    """cmsis_nn/transpose_conv.cc Prepare: int8 asks for both CMSIS-NN buffers (even a 0-byte
    one); int16 keeps the reference kernel's int64 output copy, then an int64 copy of an int16 bias."""
    t = graph.tensors
    f, inp, out = t[op.inputs[1]], t[op.inputs[2]], t[op.outputs[0]]
    bias = t[op.inputs[3]] if len(op.inputs) > 3 and op.inputs[3] >= 0 else None
    if inp.dtype == "INT8":
        out_c, f_h, f_w, _ = f.shape
        a, b = transpose_conv_s8_buffer_sizes(
            _dims4(inp), out_c, f_h, f_w, (_opt(op, "strideH", 1), _opt(op, "strideW", 1))
        )
        return [a, b]
    if inp.dtype == "INT16":
        return [out.elements * 8] + (
            [bias.elements * 8] if bias is not None and bias.dtype == "INT16" else []
        )
    return []


def _lstm(graph: Graph, op: Operator) -> list[int]:
    """cmsis_nn/unidirectional_sequence_lstm.cc: three buffers when CMSIS-NN runs it (int8 or
    int16 activations with an int16 cell state), the reference kernel's four otherwise."""
    batch, state, cell_size = reference.lstm_dims(graph, op)
    inp = graph.tensors[op.inputs[0]]
    n = 3 if inp.dtype in ("INT8", "INT16") and cell_size == 2 else 4
    return [batch * state * cell_size] * n


def scratch_requests_for(
    graph: Graph, op: Operator, pointer_bytes: int, dsp: bool, armclang: bool = False
) -> list[int] | None:
    """Bytes of each RequestScratchBufferInArena call, in order, for a build with or without
    ARM_MATH_DSP (and, for the one size that depends on it, compiled by Arm Compiler 6)."""
    name = op.opcode
    if name == "CONV_2D":
        return _conv(graph, op, dsp, armclang)
    if name == "DEPTHWISE_CONV_2D":
        return _depthwise(graph, op, dsp)
    if name == "FULLY_CONNECTED":
        return _fully_connected(graph, op, dsp, armclang)
    if name == "AVERAGE_POOL_2D":
        return _average_pool(graph, op, dsp)
    if name == "MAX_POOL_2D":
        return []
    if name == "TRANSPOSE_CONV":
        return _transpose_conv(graph, op)
    if name == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        return _lstm(graph, op)
    if name == "BATCH_MATMUL":
        return []  # arm_fully_connected_s8_get_buffer_size is 0 without MVE
    # SVDF (arm_svdf_s8_get_buffer_size is 0 without MVE, so the reference kernel's two
    # accumulators remain), SOFTMAX, ADD, MUL, PAD, TRANSPOSE, MAXIMUM/MINIMUM and every
    # operator without a CMSIS-NN kernel ask for what the reference kernel asks for.
    return reference.scratch_requests(graph, op, pointer_bytes)


def scratch_requests(graph: Graph, op: Operator, pointer_bytes: int) -> list[int] | None:
    """The Cortex-M7 build (ARM_MATH_DSP, no MVE, GCC): the target this package plans for.
    The x86 host build of these kernels is ``scratch_requests_for(..., dsp=False)``."""
    return scratch_requests_for(graph, op, pointer_bytes, dsp=True)


# ---------------------------------------------------------------- persistent memory

# sizeof() of what each CMSIS-NN kernel's Init allocates, (LP64, ILP32), Makefile
# builds with KERNELS_OPTIMIZED_FOR_SPEED (the default) and without compression.
_OPDATA: dict[str, tuple[int, int]] = {
    "CONV_2D": (80, 60),  # OpData{OpDataConv, buffer_idx}
    "DEPTHWISE_CONV_2D": (80, 60),
    "FULLY_CONNECTED": (96, 72),  # OpData{OpDataFullyConnected, indices, kernel_sums, dims}
    "AVERAGE_POOL_2D": (36, 36),  # OpData{OpDataPooling, buffer_idx}
    "MAX_POOL_2D": (36, 36),
    "TRANSPOSE_CONV": (88, 76),
    "SVDF": (48, 40),  # CmsisNnOpDataSvdf
    "SOFTMAX": (88, 64),  # CMSISNNSoftmaxParams
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (1008, 912),  # OpData{OpDataLSTM, cmsis_nn_lstm_params}
    "BATCH_MATMUL": (56, 36),
    "ADD": (60, 60),
    "MUL": (36, 36),  # OpDataMul (mul_common.cc)
    "PAD": (56, 56),
    "PADV2": (56, 56),
}
_NO_INIT = frozenset({"TRANSPOSE", "MAXIMUM", "MINIMUM"})


def default_compression(pointer_bytes: int) -> bool:
    """CMSIS-NN builds come from the Makefile, without USE_TFLM_COMPRESSION."""
    return False


def opdata_bytes(opcode: str, pointer_bytes: int, compression: bool | None = None) -> int:
    """sizeof() of the kernel's Init allocation (CMSIS-NN kernels are modelled without compression)."""
    if opcode in _OPDATA:
        return _OPDATA[opcode][0 if pointer_bytes == 8 else 1]
    if opcode in _NO_INIT:
        return 0
    return reference.opdata_bytes(opcode, pointer_bytes, bool(compression))


def prepare_allocations(graph: Graph, op: Operator, pointer_bytes: int) -> list[int]:
    """Bytes of each AllocatePersistentBuffer call the CMSIS-NN kernel makes in Prepare."""
    name = op.opcode
    t = graph.tensors
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):  # per-channel arrays for int8/int16 only
        if t[op.inputs[0]].dtype not in ("INT8", "INT16"):
            return []
        f = t[op.inputs[1]]
        ch = f.shape[0] if name == "CONV_2D" else f.shape[-1]
        return [4 * ch] * 2
    if name == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        # CMSIS_NN_PortOpData: eight kernel-sum vectors of state_dimension biases
        # (int32 for int8 activations, int64 for int16)
        _, state, cell_size = reference.lstm_dims(graph, op)
        inp = t[op.inputs[0]]
        if cell_size == 2 and inp.dtype in ("INT8", "INT16"):
            return [state * (4 if inp.dtype == "INT8" else 8)] * 8
        return []
    if name in (
        "TRANSPOSE",
        "MAXIMUM",
        "MINIMUM",
        "ADD",
        "MUL",
        "PAD",
        "PADV2",
        "AVERAGE_POOL_2D",
        "MAX_POOL_2D",
        "SVDF",
    ):
        return []
    # FULLY_CONNECTED (per-channel arrays), TRANSPOSE_CONV (arrays for every type), SOFTMAX
    # (int16 tables), BATCH_MATMUL and the reference kernels: as the reference kernels do
    return reference.prepare_allocations(graph, op, pointer_bytes)


def persistent_allocations(graph: Graph, op: Operator, pointer_bytes: int) -> list[int]:
    init = opdata_bytes(op.opcode, pointer_bytes)
    return ([init] if init else []) + prepare_allocations(graph, op, pointer_bytes)


def persistent_bytes(graph: Graph, op: Operator, pointer_bytes: int) -> int:
    return sum(reference.align_up(n) for n in persistent_allocations(graph, op, pointer_bytes))
