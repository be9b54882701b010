"""Checks a model must pass before anything plans, rewrites or runs it.

Two kinds of check, both static and cheap:

* ``validate_model``: is the file a well-formed graph at all? Index ranges, operand
  counts, options of the right type, a dataflow order TFLM can execute (every tensor
  written once, before it is read), sizes that fit TFLM's ``int`` arithmetic, weight
  buffers as long as their tensors, sane OfflineMemoryAllocation metadata. A model
  that fails is refused with one line (exit 2) instead of crashing a pass or TFLM.
* ``tflm_refusals``: would TFLM refuse this well-formed model (in ``Prepare``, or for CAST
  on its first invoke)? It mirrors the checks of TFLM's kernels
  (tensorflow/lite/micro/kernels: conv_common.cc, depthwise_conv_common.cc,
  transpose_conv.cc, fully_connected.cc, dequantize_common.cc, gather.cc, gather_nd.cc,
  cast.cc) and the operators the tflite-micro wheel registers (python_ops_resolver.cc).
  tests/test_validate.py checks each rule against the real interpreter, and
  scripts/exact_vs_tflm.py the whole mirror on a folder of real models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..contract.customops import (
    FETCHING,
    FETCHING_CONV_2D,
    SPILL,
    STREAM_CHAIN,
    STREAM_STAGE_OPS,
    TINYSEG_OPS,
)
from ..errors import TinySegError, shown
from . import offline
from .schema import BUILTIN_NAMES, NUMPY_DTYPES, TYPE_NAMES, TYPE_SIZES, fb, opcode_name

INT_MAX = 2**31 - 1
MAX_RANK = 16
MAX_TENSOR_BYTES = 1 << 31  # TFLM sizes arena buffers with int/size_t arithmetic on 32-bit targets
MAX_ACTIVATION_BYTES = 1 << 33  # sum over all activations: far beyond any microcontroller
MAX_CALL_DEPTH = 64  # subgraphs on one chain of IF/WHILE/CALL_ONCE calls (real models nest a few)


# Builtins the tflite-micro wheel registers (python_ops_resolver.cc, TFLM 90b983c).
TFLM_BUILTINS = frozenset(
    """
ABS ADD ADD_N ARG_MAX ARG_MIN ASSIGN_VARIABLE AVERAGE_POOL_2D BATCH_MATMUL BATCH_TO_SPACE_ND BROADCAST_ARGS
BROADCAST_TO CALL_ONCE CAST CEIL CONCATENATION CONV_2D COS CUMSUM DEPTH_TO_SPACE DEPTHWISE_CONV_2D DEQUANTIZE DIV
DYNAMIC_UPDATE_SLICE ELU EMBEDDING_LOOKUP EQUAL EXP EXPAND_DIMS FILL FLOOR FLOOR_DIV FLOOR_MOD FULLY_CONNECTED
GATHER GATHER_ND GREATER GREATER_EQUAL HARD_SWISH IF L2_NORMALIZATION L2_POOL_2D LEAKY_RELU LESS LESS_EQUAL LOG
LOG_SOFTMAX LOGICAL_AND LOGICAL_NOT LOGICAL_OR LOGISTIC MAX_POOL_2D MAXIMUM MEAN MINIMUM MIRROR_PAD MUL NEG NOT_EQUAL
PACK PAD PADV2 PRELU QUANTIZE READ_VARIABLE REDUCE_ALL REDUCE_MAX REDUCE_MIN RELU RELU6 RESHAPE RESIZE_BILINEAR
RESIZE_NEAREST_NEIGHBOR REVERSE_V2 ROUND RSQRT SELECT_V2 SHAPE SIN SLICE SOFTMAX SPACE_TO_BATCH_ND SPACE_TO_DEPTH
SPLIT SPLIT_V SQRT SQUARE SQUARED_DIFFERENCE SQUEEZE STRIDED_SLICE SUB SUM SVDF TANH TRANSPOSE TRANSPOSE_CONV
UNIDIRECTIONAL_SEQUENCE_LSTM UNPACK VAR_HANDLE WHILE ZEROS_LIKE
""".split()
)
# Custom operators the wheel registers. Not "ethos-u": python_ops_resolver.cc calls AddEthosU(), but
# that adds nothing where Register_ETHOSU() is the host build's empty stub (the wheel: a model Vela
# compiled fails there with "Failed to get registration from op code CUSTOM").
TFLM_CUSTOM = frozenset(
    """
CIRCULAR_BUFFER TFLM_DECODE TFLite_Detection_PostProcess SignalDelay SignalEnergy SignalFftAutoScale
SignalFilterBank SignalFilterBankLog SignalFilterBankSquareRoot SignalFilterBankSpectralSubtraction SignalFramer
SignalIrfft SignalOverlapAdd SignalPCAN SignalRfft SignalStacker SignalWindow
""".split()
)
ETHOS_U = (
    "ethos-u"  # the custom operator Vela writes for the layers it compiled for the Ethos-U NPU
)

# Operands an operator cannot do without (the first N inputs must be real tensors).
MIN_INPUTS = {
    "CONV_2D": 2,
    "DEPTHWISE_CONV_2D": 2,
    "TRANSPOSE_CONV": 3,
    "FULLY_CONNECTED": 2,
    "ADD": 2,
    "SUB": 2,
    "MUL": 2,
    "DIV": 2,
    "MAXIMUM": 2,
    "MINIMUM": 2,
    "SQUARED_DIFFERENCE": 2,
    "PAD": 2,
    "PADV2": 2,
    "MIRROR_PAD": 2,
    "BATCH_MATMUL": 2,
    "SPLIT": 2,
    "SPLIT_V": 3,
    "STRIDED_SLICE": 4,
    "SLICE": 3,
    "GATHER": 2,
    "GATHER_ND": 2,
    "TRANSPOSE": 2,
    "MEAN": 2,
    "SUM": 2,
    "REDUCE_MAX": 2,
    "REDUCE_MIN": 2,
    "RESIZE_BILINEAR": 2,
    "RESIZE_NEAREST_NEIGHBOR": 2,
    "PRELU": 2,
    "SELECT_V2": 3,
    "EXPAND_DIMS": 2,
    "FILL": 2,
    "BROADCAST_TO": 2,
    "SVDF": 3,
    "REDUCE_PROD": 2,
    "REDUCE_ANY": 2,
    "REDUCE_ALL": 2,
    "EMBEDDING_LOOKUP": 2,
}
NO_INPUTS_OK = frozenset({"VAR_HANDLE", "CALL_ONCE", "WHILE"})
NO_OUTPUTS_OK = frozenset({"ASSIGN_VARIABLE", "CALL_ONCE", "WHILE", "IF"})
# Least rank of inputs (by position; -1: the first output) that the kernels and the planner index.
MIN_RANK = {
    "SVDF": {0: 2, 1: 2},
    "UNIDIRECTIONAL_SEQUENCE_LSTM": {0: 2, -1: 1},
    "FULLY_CONNECTED": {1: 2},
    "BATCH_MATMUL": {0: 2, 1: 2},
    "MIRROR_PAD": {0: 1},
}
RANK4 = {
    "CONV_2D": (0, 1),
    "DEPTHWISE_CONV_2D": (0, 1),
    "TRANSPOSE_CONV": (1, 2),
    "AVERAGE_POOL_2D": (0,),
    "MAX_POOL_2D": (0,),
}

# Options whose absence would leave TFLM (and our passes) with zero strides, axes or subgraph indices.
REQUIRED_OPTIONS = {
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions",
    "CONCATENATION": "ConcatenationOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions",
    "WHILE": "WhileOptions",
    "IF": "IfOptions",
    "CALL_ONCE": "CallOnceOptions",
}
# Options checked for their type when present.
OPTIONS = dict(
    REQUIRED_OPTIONS,
    **{
        "FULLY_CONNECTED": "FullyConnectedOptions",
        "ADD": "AddOptions",
        "SUB": "SubOptions",
        "MUL": "MulOptions",
        "DIV": "DivOptions",
        "RESHAPE": "ReshapeOptions",
        "SOFTMAX": "SoftmaxOptions",
        "SPLIT": "SplitOptions",
        "SPLIT_V": "SplitVOptions",
        "STRIDED_SLICE": "StridedSliceOptions",
        "PACK": "PackOptions",
        "UNPACK": "UnpackOptions",
        "MEAN": "ReducerOptions",
        "SUM": "ReducerOptions",
        "REDUCE_MAX": "ReducerOptions",
        "REDUCE_MIN": "ReducerOptions",
        "SQUEEZE": "SqueezeOptions",
        "BATCH_MATMUL": "BatchMatMulOptions",
        "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
        "SVDF": "SVDFOptions",
        "RESIZE_BILINEAR": "ResizeBilinearOptions",
        "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
        "LEAKY_RELU": "LeakyReluOptions",
        "GATHER": "GatherOptions",
        "DEPTH_TO_SPACE": "DepthToSpaceOptions",
        "SPACE_TO_DEPTH": "SpaceToDepthOptions",
        "TRANSPOSE": "TransposeOptions",
        "PAD": "PadOptions",
    },
)
_BUILTIN_SET = frozenset(BUILTIN_NAMES.values())
_OPTION_NAMES = {
    v: k for k, v in vars(fb.BuiltinOptions).items() if not k.startswith("_") and isinstance(v, int)
}


def _ints(v) -> list[int]:
    return [int(x) for x in v] if v is not None else []


def _name(raw) -> str:
    """A tensor's name as a message shows it (escaped, cut when absurdly long)."""
    return shown(raw.name if raw.name is not None else "")


def _utf8(value) -> bool:
    if not isinstance(value, bytes):
        return True
    try:
        value.decode()
        return True
    except UnicodeDecodeError:
        return False


def _packed_bytes(dtype: str, elements: int) -> int:
    """Bytes of a constant buffer holding ``elements`` values (sub-byte types are packed in flatbuffers)."""
    if dtype in ("INT4", "UINT4"):
        return (elements + 1) // 2
    if dtype == "INT2":
        return (elements + 3) // 4
    return elements * TYPE_SIZES.get(dtype, 0)


def _zero_where_not_finite(raw, data, dtype: str, shape: list[int]) -> bool:
    """Whether a constant tensor holds only zeros wherever its scale is infinite or NaN (the whole
    tensor for one scale, the channel along the quantized dimension for per-channel scales)."""
    scales = [float(x) for x in raw.quantization.scale]
    if data is None or len(data) == 0 or dtype not in NUMPY_DTYPES:
        return False
    raw_bytes = np.asarray(data, np.uint8).tobytes()
    elements = math.prod(shape)
    values = np.frombuffer(raw_bytes[: elements * TYPE_SIZES[dtype]], NUMPY_DTYPES[dtype])
    if len(scales) == 1:
        return not values.any()
    axis = raw.quantization.quantizedDimension
    if not 0 <= axis < len(shape) or shape[axis] != len(scales):
        return False
    values = values.reshape(shape)
    return all(
        not np.take(values, c, axis=axis).any()
        for c, sc in enumerate(scales)
        if not np.isfinite(sc)
    )


def validate_model(model: "fb.ModelT", name: str = "model") -> None:
    """Refuse (TinySegError, exit 2) anything no correct converter writes and TFLM cannot run safely."""
    n_buffers = len(model.buffers or [])
    for k, code in enumerate(model.operatorCodes or []):
        if code.customCode is not None and not _utf8(code.customCode):
            raise TinySegError(
                f"{name}: operator code {k} has a custom name that is not UTF-8 text"
            )
    for k, md in enumerate(model.metadata or []):
        if md.name is not None and not _utf8(md.name):
            raise TinySegError(f"{name}: metadata {k} has a name that is not UTF-8 text")
        if not 0 <= md.buffer < n_buffers:
            raise TinySegError(
                f"{name}: metadata {k} names buffer {md.buffer}, which does not exist"
            )
    subgraphs = model.subgraphs or []
    for s, sg in enumerate(subgraphs):
        _validate_subgraph(model, sg, s, f"{name}: subgraph {s}", len(subgraphs))
    _validate_calls(model, name)
    offline.validate(model, name)


def _calls(model: "fb.ModelT") -> dict[int, list[int]]:
    """Which subgraphs each subgraph's IF, WHILE and CALL_ONCE operators call."""
    out: dict[int, list[int]] = {}
    for s, sg in enumerate(model.subgraphs or []):
        for op in sg.operators or []:
            for attr in CONTROL_FLOW_INDICES:
                v = getattr(op.builtinOptions, attr, None)
                if isinstance(v, int) and v not in out.setdefault(s, []):
                    out[s].append(v)
    return out


def _validate_calls(model: "fb.ModelT", name: str) -> None:
    """Refuse a subgraph that calls itself, directly or through others: TFLM (and every walk over
    the calls here) would recurse without end; and calls nested deeper than MAX_CALL_DEPTH.
    Iterative, so no model can exhaust Python's stack here."""
    calls = _calls(model)
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    depth: dict[
        int, int
    ] = {}  # of a done subgraph: the subgraphs on its longest chain of calls, itself included
    for root in range(len(model.subgraphs or [])):
        if state.get(root):
            continue
        path = [root]
        todo = [iter(calls.get(root, []))]
        state[root] = 1
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                done = path.pop()
                state[done] = 2
                todo.pop()
                depth[done] = 1 + max((depth[c] for c in calls.get(done, [])), default=0)
                if depth[done] > MAX_CALL_DEPTH:
                    raise TinySegError(
                        f"{name}: subgraph {done} nests IF/WHILE/CALL_ONCE calls {depth[done] - 1} "
                        f"levels deep (at most {MAX_CALL_DEPTH - 1}); TFLM recurses once per level on "
                        "the device's stack: flatten the control flow"
                    )
                continue
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt) :] + [nxt]
                raise TinySegError(
                    f"{name}: subgraph {nxt} calls itself through IF/WHILE/CALL_ONCE "
                    f"({' -> '.join(map(str, cycle))}); TFLM would recurse without end: "
                    "the converter wrote a broken model, convert it again"
                )
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                todo.append(iter(calls.get(nxt, [])))


def _validate_subgraph(
    model: "fb.ModelT", sg: "fb.SubGraphT", s: int, where: str, n_subgraphs: int
) -> None:
    tensors = sg.tensors or []
    n = len(tensors)
    codes = model.operatorCodes or []
    ops = sg.operators or []
    if s == 0 and not ops:
        raise TinySegError(f"{where}: the graph has no operators")
    constant = set()
    nbytes = []
    total = 0
    for t, raw in enumerate(tensors):
        dtype = TYPE_NAMES.get(raw.type)
        if dtype is None:
            raise TinySegError(f"{where}: tensor {t} has an unknown type code {raw.type}")
        shape = _ints(raw.shape)
        if len(shape) > MAX_RANK:
            raise TinySegError(
                f"{where}: tensor {t} '{_name(raw)}' has rank {len(shape)} (at most {MAX_RANK})"
            )
        if any(d < 0 for d in shape):
            nbytes.append(0)  # dynamic: graph.py refuses it with its own message
            continue
        elements = math.prod(shape)
        if any(d > INT_MAX for d in shape) or elements > INT_MAX:
            raise TinySegError(
                f"{where}: tensor {t} '{_name(raw)}' shape {shape} has more elements than TFLM's "
                "int can count"
            )
        size = elements * TYPE_SIZES.get(dtype, 0)
        if size > MAX_TENSOR_BYTES:
            raise TinySegError(
                f"{where}: tensor {t} '{_name(raw)}' needs {size:,} bytes, beyond any arena"
            )
        nbytes.append(size)
        buf = model.buffers[raw.buffer] if raw.buffer < len(model.buffers or []) else None
        data = None if buf is None else buf.data
        if data is not None and len(data) > 0:
            constant.add(t)
            want = _packed_bytes(dtype, elements)
            if raw.sparsity is None and dtype != "STRING" and len(data) < want:
                raise TinySegError(
                    f"{where}: tensor {t} '{_name(raw)}' needs {want:,} bytes of data but its buffer "
                    f"{raw.buffer} holds {len(data):,} (truncated weights)"
                )
        elif not raw.isVariable:
            total += size
        q = raw.quantization
        if q is not None and q.scale is not None and len(q.scale) > 0:
            # TFLM copies one zero point per scale: fewer would be read past their end; more are
            # ignored (converters and our own random models write such biases).
            if q.zeroPoint is not None and 0 < len(q.zeroPoint) < len(q.scale):
                raise TinySegError(
                    f"{where}: tensor {t} '{_name(raw)}' has {len(q.scale)} scales but "
                    f"{len(q.zeroPoint)} zero points"
                )
            if len(q.scale) > 1 and len(q.scale) > elements:
                # (real converters write biases with any quantized_dimension: only the count is checked)
                raise TinySegError(
                    f"{where}: tensor {t} '{_name(raw)}' has {len(q.scale)} per-channel scales "
                    f"for {elements} elements"
                )
            if not all(np.isfinite(float(x)) for x in q.scale) and not _zero_where_not_finite(
                raw, data, dtype, shape
            ):
                # (a scale over all-zero weights only ever multiplies zeros: converters write an
                # infinite one for them, and TFLM runs such models; `unsupported` has the rest)
                raise TinySegError(
                    f"{where}: tensor {t} '{_name(raw)}' has a non-finite quantization scale "
                    "over values that are not all zero: convert the model again"
                )
    if total > MAX_ACTIVATION_BYTES:
        raise TinySegError(f"{where}: the activations need {total:,} bytes, beyond any arena")
    graph_inputs = _ints(sg.inputs)
    if len(set(graph_inputs)) != len(graph_inputs):
        raise TinySegError(f"{where}: a tensor is listed twice among the graph inputs")
    defined = set(graph_inputs) | constant | {t for t, raw in enumerate(tensors) if raw.isVariable}
    defined |= {t for t in range(n) if nbytes[t] == 0}
    # A tensor no operator writes is TFLM's to plan from its first reader on (Vela's Ethos-U scratch
    # tensors are such): only a read before a later operator's write is out of order.
    written = {i for op in ops for i in _ints(op.outputs)}
    unwritten = {t for t in range(n) if t not in written and t not in defined}
    defined |= unwritten
    writer: dict[int, int] = {}
    for o, op in enumerate(ops):
        code = codes[op.opcodeIndex]
        opname = opcode_name(code)
        here = f"{where}: operator {o} ({shown(opname, 60)})"
        ins, outs, mids = _ints(op.inputs), _ints(op.outputs), _ints(op.intermediates)
        for idx in mids:
            if not 0 <= idx < n:
                raise TinySegError(f"{here} names intermediate tensor {idx}, which does not exist")
        for idx in outs:
            if not 0 <= idx < n:
                raise TinySegError(f"{here} writes tensor {idx}, which does not exist")
        is_builtin = max(code.builtinCode, code.deprecatedBuiltinCode) != fb.BuiltinOperator.CUSTOM
        if is_builtin:
            need = MIN_INPUTS.get(opname, 0 if opname in NO_INPUTS_OK else 1)
            real = [i for i in ins if i >= 0]
            if len(ins) < need or any(i < 0 for i in ins[:need]) or (need and not real):
                raise TinySegError(
                    f"{here} has {len(real)} input(s); it needs at least {max(need, 1)}"
                )
            if not outs and opname not in NO_OUTPUTS_OK:
                raise TinySegError(f"{here} has no outputs")
            _check_options(op, opname, here, n_subgraphs, s)
            for pos in RANK4.get(opname, ()):
                if pos < len(ins) and ins[pos] >= 0 and len(_ints(tensors[ins[pos]].shape)) != 4:
                    raise TinySegError(
                        f"{here}: input {pos} has shape {_ints(tensors[ins[pos]].shape)}, "
                        "not the 4-D shape the kernel indexes"
                    )
            for pos, rank in MIN_RANK.get(opname, {}).items():
                idx = (
                    (outs[0] if outs else -1) if pos == -1 else (ins[pos] if pos < len(ins) else -1)
                )
                if idx >= 0 and len(_ints(tensors[idx].shape)) < rank:
                    which = "output" if pos == -1 else f"input {pos}"
                    raise TinySegError(
                        f"{here}: {which} has shape {_ints(tensors[idx].shape)}, rank below {rank}"
                    )
            if opname in RANK4 and outs and len(_ints(tensors[outs[0]].shape)) != 4:
                raise TinySegError(
                    f"{here}: output has shape {_ints(tensors[outs[0]].shape)}, not 4-D"
                )
        elif opname in TINYSEG_OPS:
            _check_tinyseg_wiring(opname, ins, outs, here)
        for idx in ins:
            if idx >= 0 and idx not in defined:
                after = next((p for p in range(o, len(ops)) if idx in _ints(ops[p].outputs)), None)
                if idx in outs:
                    raise TinySegError(f"{here} reads its own output tensor {idx}")
                detail = (
                    f"operator {after} writes it later"
                    if after is not None
                    else "nothing writes it"
                )
                raise TinySegError(
                    f"{here} reads tensor {idx} before it is defined ({detail}; it is not a graph "
                    "input or a constant)"
                )
            if idx >= 0 and idx in outs:
                raise TinySegError(f"{here} reads its own output tensor {idx}")
        for idx in outs:
            if idx in writer:
                raise TinySegError(
                    f"{here} writes tensor {idx}, which operator {writer[idx]} already writes"
                )
            if idx in graph_inputs:
                raise TinySegError(f"{here} writes tensor {idx}, a graph input")
            if idx in constant:
                raise TinySegError(f"{here} writes tensor {idx}, a constant")
            writer[idx] = o
            defined.add(idx)
    for idx in _ints(sg.outputs):
        if idx not in defined or idx in unwritten:
            raise TinySegError(f"{where}: graph output tensor {idx} is never written")


def _check_tinyseg_wiring(opname: str, ins: list[int], outs: list[int], here: str) -> None:
    """The operand lists of TinySeg's operators (customops.py's contract; a StreamChain's depend on its
    body, which customops.decode checks, as it checks every operator's options)."""
    what = None
    if opname == SPILL and (len(ins) != 1 or ins[0] < 0 or len(outs) > 1):
        what = (
            f"{len(ins)} input(s) and {len(outs)} output(s); a Spill reads exactly one tensor "
            "and writes none or a token"
        )
    elif opname in (FETCHING, FETCHING_CONV_2D) and len(outs) != 1:
        what = f"{len(outs)} output(s); a {opname} writes exactly one"
    elif opname == FETCHING and any(i < 0 for i in ins):
        what = "an omitted (-1) input; a Fetching's inputs are its in-RAM operands and tokens"
    elif opname == FETCHING_CONV_2D and (len(ins) < 2 or any(i < 0 for i in ins[:-1])):
        what = "no filter before its bias; a FetchingConv2D reads [operands..., filter, bias or -1]"
    if what:
        raise TinySegError(
            f"{here} has {what} (a malformed optimized model: optimize the original again)"
        )


def _check_options(op: "fb.OperatorT", opname: str, here: str, n_subgraphs: int, s: int) -> None:
    want = OPTIONS.get(opname)
    have = _OPTION_NAMES.get(op.builtinOptionsType, f"type {op.builtinOptionsType}")
    if op.builtinOptionsType != fb.BuiltinOptions.NONE and op.builtinOptions is None:
        raise TinySegError(f"{here} has unreadable builtin options ({have})")
    if want is None:
        return
    if op.builtinOptions is None:
        if opname in REQUIRED_OPTIONS:
            raise TinySegError(f"{here} has no {want}")
        return
    if type(op.builtinOptions).__name__ != want + "T":
        raise TinySegError(f"{here} has {have}, expected {want}")
    o = op.builtinOptions
    for attr in (
        "strideH",
        "strideW",
        "dilationHFactor",
        "dilationWFactor",
        "filterHeight",
        "filterWidth",
    ):
        v = getattr(o, attr, None)
        if (
            v is not None
            and v < 1
            and not (attr.startswith("dilation") and opname == "TRANSPOSE_CONV")
        ):
            raise TinySegError(f"{here}: {attr} is {v}, it must be at least 1")
    for attr in (
        "thenSubgraphIndex",
        "elseSubgraphIndex",
        "condSubgraphIndex",
        "bodySubgraphIndex",
        "initSubgraphIndex",
    ):
        v = getattr(o, attr, None)
        if v is not None and (not 0 <= v < n_subgraphs or v == s):
            raise TinySegError(f"{here}: {attr} {v} is not another subgraph of the model")


# ---------------------------------------------------------------- what TFLM refuses


@dataclass(frozen=True)
class Refusal:
    """Why TFLM would not run a model: ``missing`` means no kernel in the wheel (a firmware may register
    one, so an explicit unverified optimization is possible); otherwise a kernel's Prepare refuses it.

    ``reason`` continues a sentence whose subject is the operator ("operator 3 'GATHER' <reason>"),
    ``remedy`` says what the user can do; ``str()`` is the whole sentence, without a final stop."""

    operator: int
    opcode: str
    reason: str
    missing: bool = False
    certain: bool = True  # False: TFLM may or may not cope (only a real load tells)
    remedy: str = ""
    stage: str = "Prepare"  # where TFLM fails: "Prepare", "Eval" (its first invoke) or "load"

    @property
    def what(self) -> str:
        """The refusal without its remedy."""
        if self.operator < 0:
            return self.reason
        return f"operator {self.operator} '{shown(self.opcode, 60)}' {self.reason}"

    def __str__(self) -> str:
        return f"{self.what}; {self.remedy}" if self.remedy else self.what


def refusal_lines(refusals: list[Refusal], listed: int = 8) -> list[str]:
    """One sentence per distinct refusal, the operators it recurs at named after it: a model with
    float16 weights has one refused DEQUANTIZE per layer, and one sentence each buries the rest."""
    groups: dict[tuple, list[Refusal]] = {}
    for r in refusals:
        key = (r.opcode, r.reason, r.remedy, r.certain) if r.operator >= 0 else (id(r),)
        groups.setdefault(key, []).append(r)
    out = []
    for same in groups.values():
        first, more = same[0], [r.operator for r in same[1:]]
        line = f"TFLM refuses the model: {first}" if first.certain else str(first)
        if more:
            shown_ops = ", ".join(map(str, more[:listed])) + (", ..." if len(more) > listed else "")
            line += f" (so do {len(more)} more operators: {shown_ops})"
        out.append(line)
    return out


# What the user can do about an operator the wheel lacks, by operator (others: MISSING_REMEDY).
MISSING_REMEDIES = {
    "TILE": 'Keras UpSampling2D converts to TILE: use layers.Resizing(..., interpolation="nearest") '
    "instead, which converts to RESIZE_NEAREST_NEIGHBOR (TFLM runs it and TinySeg streams it)",
    ETHOS_U: "give tinyseg the model from before Vela compiled it (Vela hides the layers it compiled "
    "for the Ethos-U NPU, and their arena, in this one operator), then compile the result with Vela",
}
MISSING_REMEDY = (
    "replace it with operators TFLM ships (or register a kernel for it in your firmware)"
)
# The types TFLM's CAST reads and writes (the wheel: every other type fails in Eval).
CAST_TYPES = frozenset({"INT8", "INT16", "INT32", "UINT32", "FLOAT32", "BOOL"})
# Operators whose TFLM kernel computes float32 and int8 only and fails on its first invoke on any
# other type (an int16 (16x8) model's, say): hard_swish.cc, elu.cc and resize_bilinear.cc's Eval.
FLOAT32_INT8_ONLY = frozenset({"HARD_SWISH", "ELU", "RESIZE_BILINEAR"})
HYBRID_REMEDY = (
    "quantize the whole model to int8 (full-integer post-training quantization) or keep it all "
    "float32"
)


CONTROL_FLOW_INDICES = (
    "thenSubgraphIndex",
    "elseSubgraphIndex",
    "condSubgraphIndex",
    "bodySubgraphIndex",
    "initSubgraphIndex",
)


def uncalled_subgraphs(model: "fb.ModelT") -> list[int]:
    """Subgraphs other than 0 that no IF, WHILE or CALL_ONCE operator of the model calls."""
    called = {0}
    for sg in model.subgraphs or []:
        for op in sg.operators or []:
            for attr in CONTROL_FLOW_INDICES:
                v = getattr(op.builtinOptions, attr, None)
                if isinstance(v, int):
                    called.add(v)
    return [s for s in range(len(model.subgraphs or [])) if s not in called]


def tflm_refusals(graph) -> list[Refusal]:
    """What the real interpreter would refuse in this graph (a graph.Graph), in operator order."""
    out: list[Refusal] = []
    for s in uncalled_subgraphs(graph.model):
        # TFLM allocates every subgraph, called or not, and crashes on some (e.g. a TRANSPOSE_CONV in one).
        out.append(
            Refusal(
                -1,
                "",
                f"subgraph {s} is called by no IF/WHILE/CALL_ONCE; TFLM still prepares it "
                "and may crash on it",
                certain=False,
            )
        )
    for op in graph.operators:
        r = _operator_refusal(graph, op)
        if r is not None:
            out.append(r)
    return out


def _operator_refusal(graph, op) -> Refusal | None:
    """Why TFLM would refuse this one operator (no kernel, or its kernel's Prepare), or None."""
    name = op.opcode
    if name == STREAM_CHAIN:
        reason = _stream_chain_refusal(graph, op)
        return Refusal(op.index, name, reason, True) if reason else None
    if name in TINYSEG_OPS:
        return None
    if op.is_custom or name not in _BUILTIN_SET:
        if name == ETHOS_U:
            return Refusal(
                op.index,
                name,
                "is the Ethos-U operator Vela writes, which is not registered in the tflite-micro wheel",
                remedy=MISSING_REMEDIES[ETHOS_U],
                stage="load",
            )
        if name not in TFLM_CUSTOM:
            return Refusal(
                op.index,
                name,
                "is a custom operator TFLM does not ship",
                True,
                remedy=MISSING_REMEDY,
            )
        return None
    if name not in TFLM_BUILTINS:
        return Refusal(
            op.index,
            name,
            "is a builtin operator TFLM has no kernel for",
            True,
            remedy=MISSING_REMEDIES.get(name, MISSING_REMEDY),
        )
    types = [graph.tensors[i].dtype if i >= 0 else None for i in op.inputs]
    out_t = graph.tensors[op.outputs[0]].dtype if op.outputs else None
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED"):
        return _weighted_refusal(op, name, types, out_t)
    inp = types[0] if types else None
    if name == "DEQUANTIZE" and (inp not in ("INT8", "INT16", "UINT8") or out_t != "FLOAT32"):
        return Refusal(
            op.index,
            name,
            f"turns {inp} into {out_t}, but TFLM dequantizes only INT8, INT16 and UINT8 to FLOAT32",
            remedy="convert the model without float16 weights (full-integer int8, or float32)",
        )
    if name in ("GATHER", "GATHER_ND"):
        return _gather_refusal(op, name, types)
    if name in FLOAT32_INT8_ONLY and inp is not None and inp not in ("FLOAT32", "INT8"):
        return Refusal(
            op.index,
            name,
            f"runs on {inp}, but TFLM's {name} computes only FLOAT32 and INT8 (it fails on the "
            "first invoke)",
            remedy=f"quantize the model with int8 activations, or keep {name} float32",
            stage="Eval",
        )
    if name == "CAST" and (inp not in CAST_TYPES or out_t not in CAST_TYPES):
        # TFLM's CAST accepts any type in Prepare and fails on its first invoke
        return Refusal(
            op.index,
            name,
            f"casts {inp} to {out_t}, but TFLM's CAST converts only between "
            f"{', '.join(sorted(CAST_TYPES))} (it fails on the first invoke)",
            remedy="convert the model with int8 or float32 inputs and outputs "
            "(the converter's inference_input_type and inference_output_type)",
            stage="Eval",
        )
    return None


def _weighted_refusal(op, name: str, types: list, out_t: str | None) -> Refusal | None:
    """The type pairs TFLM's convolution and fully-connected kernels accept in Prepare."""
    pos = {"TRANSPOSE_CONV": (2, 1)}.get(name, (0, 1))
    inp = types[pos[0]] if len(types) > pos[0] else None
    flt = types[pos[1]] if len(types) > pos[1] else None
    if name == "CONV_2D":
        ok = (inp, flt) in {
            ("FLOAT32", "FLOAT32"),
            ("INT16", "INT8"),
            ("INT8", "INT4"),
            ("INT8", "INT8"),
        }
    elif name == "DEPTHWISE_CONV_2D":
        ok = inp == flt or (inp, flt) in {("INT8", "INT4"), ("INT16", "INT8")}
    elif name == "TRANSPOSE_CONV":
        ok = inp == flt or (inp, flt) == ("INT16", "INT8")
    else:
        ok = not (
            (inp == "FLOAT32" and flt != "FLOAT32")
            or (inp == "INT8" and flt not in ("INT8", "INT4"))
            or (inp == "INT16" and flt != "INT8")
        )
    if not ok:
        kind = (
            "a pair of types TFLite Micro's kernel does not support"
            if inp == flt
            else "and TFLite Micro does not support such hybrid models"
        )
        return Refusal(
            op.index, name, f"reads {inp} input with {flt} weights, {kind}", remedy=HYBRID_REMEDY
        )
    if name in ("CONV_2D", "FULLY_CONNECTED") and out_t is not None and inp != out_t:
        return Refusal(
            op.index,
            name,
            f"reads {inp} input but writes {out_t} output, and TFLM needs the two types equal",
            remedy=HYBRID_REMEDY,
        )
    return None


def _gather_refusal(op, name: str, types: list) -> Refusal | None:
    """TFLM's GATHER and GATHER_ND Prepare: INT32 positions, FLOAT32 or INT8 values (the wheel
    refuses the rest; GATHER_ND calls its positions indices)."""
    values = types[0] if types else None
    positions = types[1] if len(types) > 1 else None
    word = "indices" if name == "GATHER_ND" else "positions"
    if positions != "INT32":
        return Refusal(
            op.index,
            name,
            f"has {positions} {word}, but TFLM's {name} takes only INT32 {word}",
            remedy="cast the indices to int32 before the gather (tf.cast(indices, tf.int32)) and "
            "convert the model again",
        )
    if values not in ("FLOAT32", "INT8"):
        return Refusal(
            op.index,
            name,
            f"gathers {values} values, but TFLM's {name} gathers only FLOAT32 and INT8",
            remedy="quantize the model to int8 or keep the gathered tensor float32",
        )
    return None


def _stream_chain_refusal(graph, op) -> str | None:
    """Why the StreamChain kernel would refuse this operator in Prepare, as far as its options say."""
    from ..contract.customops import decode
    from ..errors import TinySegError

    try:
        o = decode(op, graph.memo.decoded)
    except TinySegError as exc:
        return str(exc)
    if not o.stages:
        return "a planning-only StreamChain (no body): `tinyseg analyze --stream` plans it, no kernel runs it"
    unknown = sorted({st.op for st in o.stages if st.op not in STREAM_STAGE_OPS})
    if unknown:
        return f"its body holds {', '.join(unknown)}, which the StreamChain kernel does not compute"
    return None


# ---------------------------------------------------------------- what optimize and verify cannot take


def unsupported(graph) -> str | None:
    """Why ``optimize`` and ``verify`` must refuse a model that ``analyze`` can still plan, or None.

    Sparse weights: TFLM has no sparse kernels and ignores ``Tensor.sparsity``, so it would read the
    compressed buffer as dense weights (past its end). Inputs and outputs of a type the check can neither
    feed nor compare (complex, string, resource, variant, sub-byte). An OfflineMemoryAllocation that
    puts tensors live at the same time on the same bytes is the planner's question
    (memory.planner.offline_conflict)."""
    for s, sg in enumerate(graph.model.subgraphs or []):
        for t, raw in enumerate(sg.tensors or []):
            if raw.sparsity is not None:
                return (
                    f"subgraph {s} tensor {t} '{_name(raw)}' holds sparse weights (Tensor.sparsity), which TFLM "
                    "does not support (it would read the compressed buffer as dense weights); convert the model "
                    "without sparsification"
                )
    for s, sg in enumerate(graph.model.subgraphs or []):
        for t, raw in enumerate(sg.tensors or []):
            q = raw.quantization
            if q is not None and q.scale is not None and not np.all(np.isfinite(q.scale)):
                return (
                    f"subgraph {s} tensor {t} '{_name(raw)}' has an infinite or NaN quantization scale "
                    "(over all-zero weights), from which TFLM derives its requantization multiplier "
                    "with undefined results in C++ (the host wheel happens to run it, a device build "
                    "may not); give those weights a finite scale (any, e.g. 1.0) and convert again"
                )
    why = batch_space_mismatch(graph)
    if why:
        return why
    for kind, ids in (("input", graph.inputs), ("output", graph.outputs)):
        for k, t in enumerate(ids):
            tensor = graph.tensors[t]
            if tensor.dtype not in NUMPY_DTYPES:
                return (
                    f"graph {kind} {k} '{shown(tensor.name)}' is {tensor.dtype}, which the check in TFLM cannot "
                    f"{'feed' if kind == 'input' else 'compare'} (supported: {', '.join(NUMPY_DTYPES)})"
                )
    return None


_BATCH_SPACE = {"SPACE_TO_BATCH_ND": (0, 0), "BATCH_TO_SPACE_ND": (1, 0)}


def batch_space_mismatch(graph) -> str | None:
    """A SPACE_TO_BATCH_ND or BATCH_TO_SPACE_ND whose stored batches disagree with its block shape.

    TFLM never resizes a tensor: its kernels loop over the batches the model stores. An export with
    the batch left unset stores batch 1 on the space-to-batch tensors of a dilated convolution, so
    SPACE_TO_BATCH_ND fills one block of its output and BATCH_TO_SPACE_ND writes one block of its
    output, leaving the rest as whatever the arena held. Such a model's outputs depend on the arena
    layout, so no rewrite of it (or its check in TFLM) can be bit-exact."""
    for op in graph.operators:
        which = _BATCH_SPACE.get(op.opcode)
        if which is None or len(op.inputs) < 2 or not op.outputs or op.inputs[1] < 0:
            continue
        block = graph.buffer_array(op.inputs[1])
        x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if block is None or not x.shape or not y.shape:
            continue
        blocks = int(np.prod(block.astype(np.int64)))
        small, big = (x, y) if op.opcode == "SPACE_TO_BATCH_ND" else (y, x)
        if int(big.shape[0]) != int(small.shape[0]) * blocks:
            return (
                f"operator {op.index} ({op.opcode}) stores batch {int(big.shape[0])} on "
                f"'{shown(big.name)}' where its block shape {[int(v) for v in block.ravel()]} makes "
                f"{int(small.shape[0]) * blocks}; TFLM does not resize tensors, so it would leave part of "
                "a tensor uninitialised and the outputs would depend on the arena layout: export the "
                "model with a fixed batch size (e.g. batch_size=1 on the Keras Input)"
            )
    return None


def tinyseg_operators(graph) -> list[int]:
    """Indices of TinySeg's own operators (present only in optimized models)."""
    return [op.index for op in graph.operators if op.opcode in TINYSEG_OPS]
