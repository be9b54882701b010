"""The custom-operator contract between the optimizer, the planner and the C++ runtime.

This is the only module that knows how TinySeg's operators are encoded in a
model; docs/custom_ops.md describes the same contract for the C++ side
(tflm_ops/), and both must change together (bump CONTRACT_VERSION).

- ``Spill``: inputs [victim], no outputs. Compresses the victim into storage slot ``slot``.
- ``Fetching``: inputs [in-RAM operands...], outputs [out]. ``out`` is the concatenation
  along ``axis`` of ``operands`` tensors, of which the ``fetched`` ones come from storage
  (each at its ``position``) and the rest are the inputs, in order. With no in-RAM
  operand it simply restores one spilled tensor.
- ``FetchingConv2D``: inputs [in-RAM operands..., filter, bias or -1], outputs [out]:
  CONV_2D over the virtual concatenation, computed in bands of ``band_rows`` output rows.
  ``quantized_bias_type`` (optional, "NONE" when absent) is the CONV_2D's
  Conv2DOptions.quantized_bias_type: an int16 convolution without bias accumulates
  in int32 when it is "INT32", else in int64, as TFLM's CONV_2D does.
- TRANSPOSE_CONV scratch narrowing: a zero-size marker tensor in the operator's
  ``intermediates``: type INT16, shape [0, 0] = int16 accumulator over the whole
  output; type INT32, shape [0, rows] = int32 accumulator over bands of ``rows``
  output rows. A runtime without TinySeg's patch ignores it (and needs more memory).

Options are FlexBuffers maps, like TFLM's own custom operators use.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from flatbuffers import flexbuffers

from ..errors import TinySegError
from ..memory.align import align_up

SPILL = "Spill"
FETCHING = "Fetching"
FETCHING_CONV_2D = "FetchingConv2D"
# A chain of row-local operators run row by row: tflm_ops/kernels/tinyseg_stream.cc.
STREAM_CHAIN = "StreamChain"
TINYSEG_OPS = (SPILL, FETCHING, FETCHING_CONV_2D, STREAM_CHAIN)
PLANNED_OPS = TINYSEG_OPS
CONTRACT_VERSION = 1

BLOCK_BYTES = 1024  # codec block size the optimizer asks for
BLOCK_HEADER_BYTES = 8  # tflm_ops/core codec: header of one encoded block
MARKER_NAME = "tinyseg/transpose_conv_scratch"

PADDING = {0: "SAME", 1: "VALID"}
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}

# ---------------------------------------------------------------- the contract's numbers, defined once
# The C++ kernels read these from tflm_ops/kernels/tinyseg_contract.h, which is generated from this
# module (`python -m tinyseg_plugin.customops --header`); tests/test_contract.py fails when the
# committed header differs from what this module generates, or when a kernel spells a key or a
# limit itself.

MAX_DIMS = 6  # rank of a fetched operand
MAX_OPERANDS = 4096  # operands of a concatenation, and fetched entries
MIN_BLOCK_BYTES = 4
MAX_BLOCK_BYTES = (
    32768  # tflm_ops/core codec.h kMaxBlockBytes (the header static_asserts the two agree)
)
INT16_MAX = (1 << 15) - 1
INT32_MAX = (1 << 31) - 1

# Integer options: key -> (least, greatest) value a kernel accepts. `axis` of FetchingConv2D is
# also bounded by CONV_AXIS below.
INT_LIMITS: dict[str, tuple[int, int]] = {
    "slot": (0, INT32_MAX),
    "position": (0, INT32_MAX),
    "axis": (0, MAX_DIMS - 1),
    "operands": (1, MAX_OPERANDS),
    "block": (MIN_BLOCK_BYTES, MAX_BLOCK_BYTES),
    "stride_h": (1, INT16_MAX),
    "stride_w": (1, INT16_MAX),
    "dilation_h": (1, INT16_MAX),
    "dilation_w": (1, INT16_MAX),
    "band_rows": (1, INT32_MAX),
    "dim": (1, INT32_MAX),  # each entry of a fetched operand's shape
    # StreamChain's planning figures ("fetched" there counts the tensors it fetches row by row)
    "ring_bytes": (0, INT32_MAX),
    "op_scratch": (0, INT32_MAX),
    "spilled": (0, MAX_OPERANDS),
    "fetched": (0, MAX_OPERANDS),
}
CONV_AXIS = 3  # FetchingConv2D concatenates NHWC operands along channels
CONV_RANK = 4

# The keys of each operator's FlexBuffers map (quantized_bias_type is optional).
KEYS: dict[str, tuple[str, ...]] = {
    SPILL: ("version", "slot", "block"),
    FETCHING: ("version", "axis", "operands", "block", "fetched"),
    FETCHING_CONV_2D: (
        "version",
        "axis",
        "operands",
        "block",
        "fetched",
        "padding",
        "stride_h",
        "stride_w",
        "dilation_h",
        "dilation_w",
        "activation",
        "band_rows",
        "quantized_bias_type",
    ),
}
FETCHED_KEYS = ("position", "slot", "shape")
STREAM_CHAIN_KEYS = ("version", "ring_bytes", "op_scratch", "spilled", "fetched", "block")
STREAM_BODY_KEYS = ("stages", "tensors", "spill", "fetch", "rings")
STREAM_STAGE_KEYS = ("op", "version", "inputs", "outputs", "options", "fields")
STREAM_TENSOR_KEYS = ("name", "type", "shape", "scale", "zero_point", "quantized_dimension")
# The builtin options fields a stage's "fields" map holds that the kernel reads (the TFLite schema's
# field names, as the flatbuffers object API spells them).
STREAM_FIELD_KEYS = (
    "padding",
    "strideW",
    "strideH",
    "dilationWFactor",
    "dilationHFactor",
    "fusedActivationFunction",
    "filterWidth",
    "filterHeight",
    "axis",
    "alignCorners",
    "halfPixelCenters",
    "alpha",
)
KEYS[STREAM_CHAIN] = STREAM_CHAIN_KEYS + STREAM_BODY_KEYS
# The integer (or boolean: 0/1) values of those fields a kernel accepts; an absent field takes the
# schema's default. Strides, dilations and pool filters stay below 2^15 (so every product of the
# window arithmetic fits 32 bits); enums are the values the kernel computes (padding SAME/VALID,
# activation NONE/RELU/RELU_N1_TO_1/RELU6); CONCATENATION's axis is then checked to be the channels.
STREAM_FIELD_LIMITS: dict[str, tuple[int, int]] = {
    "padding": (0, 1),
    "strideW": (1, INT16_MAX),
    "strideH": (1, INT16_MAX),
    "dilationWFactor": (1, INT16_MAX),
    "dilationHFactor": (1, INT16_MAX),
    "fusedActivationFunction": (0, 3),
    "filterWidth": (1, INT16_MAX),
    "filterHeight": (1, INT16_MAX),
    "axis": (-4, 3),
    "alignCorners": (0, 1),
    "halfPixelCenters": (0, 1),
}
STREAM_FIELD_DEFAULTS: dict[str, int] = {
    "padding": 0,
    "strideW": 1,
    "strideH": 1,
    "dilationWFactor": 1,
    "dilationHFactor": 1,
    "fusedActivationFunction": 0,
    "axis": 3,
    "alignCorners": 0,
    "halfPixelCenters": 0,
}
# A body tensor's quantization: a finite scale in [STREAM_MIN_SCALE, STREAM_MAX_SCALE] (outside it
# the requantization multipliers of a stage leave what TFLM's QuantizeMultiplier represents) and a
# zero point inside its type's range.
STREAM_MIN_SCALE = 2.0**-32
STREAM_MAX_SCALE = 2.0**32
ZERO_POINT_LIMITS: dict[str, tuple[int, int]] = {
    "INT8": (-128, 127),
    "UINT8": (0, 255),
    "INT16": (0, 0),
    "INT32": (0, 0),
    "FLOAT32": (0, 0),
}
# The persistent block of one StreamChain (stream_chain_body_bytes) and each of its int32 counts stay
# below 2^31, so a 32-bit device computes every size of it without overflow.
STREAM_MAX_BODY_BYTES = INT32_MAX

# The stages the StreamChain kernel computes, and which of a stage's inputs are activations (rows
# streamed or read from the arena; None: all of them); the others are constants (filter, bias,
# output shape). The chain search emits only chains of these (stream_stage_supported), the
# estimate (`analyze --stream`) plans every row-local operator.
STREAM_STAGE_OPS: dict[str, tuple[int, ...] | None] = {
    "QUANTIZE": (0,),
    "CONV_2D": (0,),
    "MAX_POOL_2D": (0,),
    "TRANSPOSE_CONV": (2,),
    "CONCATENATION": None,
    "ADD": (0, 1),
    "MUL": (0, 1),
    "LOGISTIC": (0,),
    "PRELU": (0,),
    "RESIZE_NEAREST_NEIGHBOR": (0,),
    "DEPTHWISE_CONV_2D": (0,),
    "AVERAGE_POOL_2D": (0,),
    "RELU": (0,),
    "RELU6": (0,),
    "PAD": (0,),
    "SUB": (0, 1),
    "DEQUANTIZE": (0,),
    "TANH": (0,),
    "HARD_SWISH": (0,),
    "LEAKY_RELU": (0,),
    "PADV2": (0,),
    "ELU": (0,),
}
# The constant inputs a stage takes, by type, in order (None: an omitted optional input).
STREAM_STAGE_CONSTANTS: dict[str, tuple[tuple[str | None, ...], ...]] = {
    "CONV_2D": (("INT8", "INT32"), ("INT8", None)),  # filter, bias
    "DEPTHWISE_CONV_2D": (("INT8", "INT32"), ("INT8", None)),
    "TRANSPOSE_CONV": (
        ("INT32", "INT8", "INT32"),
        ("INT32", "INT8", None),
        ("INT32", "INT8"),
    ),  # shape, filter, bias
    "PRELU": (("INT8",),),  # alpha
    "RESIZE_NEAREST_NEIGHBOR": (("INT32",),),  # size
    "PAD": (("INT32",),),  # paddings (TFLM's PAD reads them as int32)
    "PADV2": (
        ("INT32", "INT8"),
    ),  # paddings, the pad value (a scalar of the output's quantization)
}
# Stages with per-channel requantization (multiplier and shift per output channel, kept persistent).
STREAM_PER_CHANNEL_OPS = ("CONV_2D", "TRANSPOSE_CONV", "DEPTHWISE_CONV_2D")
# Stages that look each int8 element up in a 256-entry table Prepare fills from the quantization
# (as TFLM's elu.cc keeps one in its OpData), kept persistent in the same int32 pool.
STREAM_LOOKUP_TABLE_OPS = ("ELU",)
STREAM_LOOKUP_TABLE_BYTES = 256  # one int8 output per int8 input value
# Activation types the stages compute: int8 throughout, and QUANTIZE between int8 and uint8.
STREAM_QUANTIZE_TYPES: tuple[tuple[str, str], ...] = (
    ("UINT8", "INT8"),
    ("INT8", "UINT8"),
    ("INT8", "INT8"),
)
# DEQUANTIZE stages: int8 to float32. No stage reads float32 rows, so a DEQUANTIZE's output is never
# read inside a chain (nor spilled: only chain members read spilled rows): it is a chain output.
STREAM_DEQUANTIZE_TYPES: tuple[tuple[str, str], ...] = (("INT8", "FLOAT32"),)
STREAM_MAX_STAGE_INPUTS = 16  # operands of one stage (a concatenation's inputs)

# dtype rules. Spill and Fetching move bytes of these element types:
ELEMENT_BYTES: dict[str, int] = {"INT8": 1, "UINT8": 1, "INT16": 2, "INT32": 4, "FLOAT32": 4}
# FetchingConv2D: (activation type, filter type) pairs it computes, and the bias types of each.
CONV_TYPES: tuple[tuple[str, str], ...] = (
    ("FLOAT32", "FLOAT32"),
    ("INT8", "INT8"),
    ("INT16", "INT8"),
)
CONV_BIAS_TYPES: dict[str, tuple[str, ...]] = {
    "FLOAT32": ("FLOAT32",),
    "INT8": ("INT32",),
    "INT16": ("INT32", "INT64"),
}

# OpData each kernel keeps (persistent_bytes adds them up; the C++ structs static_assert them).
SPILL_OPDATA_BYTES = 16
FETCHING_HEADER_BYTES = 32
FETCHING_CONV_HEADER_BYTES = 64
FETCHED_FIXED_BYTES = 16  # one fetched operand: 16 bytes and two pointers
FETCHED_POINTERS = 2
STREAM_CHAIN_OPDATA_BYTES = 96  # Init: the option numbers and the buffer indices
# Prepare allocates one more persistent block: the chain's tables (stream_chain_body_bytes).
STREAM_TENSOR_BYTES = 96  # per chain-local tensor: geometry, quantization, its ring (a RowRing)
STREAM_SCHEDULE_TENSOR_BYTES = 16  # per tensor: chain_schedule.h ChainTensor
STREAM_STAGE_BYTES = 128  # per stage: operator parameters
STREAM_EDGE_BYTES = 32  # per (stage, distinct activation input): chain_schedule.h ChainEdge
SPILL_STREAM_BYTES = 256  # per spilled tensor: spill_manager.h SpillStream
STREAM_INT32_PER_TENSOR = 2  # the schedule's rows done and rows held
STREAM_INT32_PER_STAGE = 1  # chain_schedule.h ChainStage
PER_CHANNEL_BYTES = 4  # FetchingConv2D: one int32 multiplier and one int32 shift per output channel


def fetched_operand_bytes(pointer_bytes: int) -> int:
    return FETCHED_FIXED_BYTES + FETCHED_POINTERS * pointer_bytes


def conv_types_supported(activation: str, filter_type: str, bias: str | None) -> bool:
    """Whether FetchingConv2D computes this convolution (bias None: no bias tensor)."""
    if (activation, filter_type) not in CONV_TYPES:
        return False
    return bias is None or bias in CONV_BIAS_TYPES[activation]


@dataclass(frozen=True)
class Fetched:
    """One operand that comes from storage: where it sits in the concatenation and its slot."""

    position: int
    slot: int
    shape: tuple[int, ...]


@dataclass(frozen=True)
class SpillOptions:
    slot: int
    block: int = BLOCK_BYTES
    version: int = CONTRACT_VERSION


@dataclass(frozen=True)
class FetchingOptions:
    axis: int
    operands: int
    fetched: tuple[Fetched, ...]
    block: int = BLOCK_BYTES
    version: int = CONTRACT_VERSION


@dataclass(frozen=True)
class ConvParams:
    padding: str = "SAME"
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1
    activation: str = "NONE"


BIAS_TYPES = {
    0: "NONE",
    2: "INT32",
    4: "INT64",
}  # schema TensorType of Conv2DOptions.quantized_bias_type


@dataclass(frozen=True)
class FetchingConv2DOptions:
    fetching: FetchingOptions
    conv: ConvParams = field(default_factory=ConvParams)
    band_rows: int = 1
    quantized_bias_type: str = "NONE"  # one of BIAS_TYPES' values


@dataclass(frozen=True)
class StreamTensor:
    """A tensor of a chain's body that is not an input or output of the StreamChain itself
    (an intermediate, or a tensor it spills or fetches row by row)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    scales: tuple[float, ...] = ()
    zero_points: tuple[int, ...] = ()
    quantized_dimension: int = 0


@dataclass(frozen=True)
class StreamStage:
    """One operator of a chain's body. Operands are chain-local ids: 0.. the StreamChain's inputs,
    then its outputs, then its ``tensors``; -1 an omitted optional input."""

    op: str  # builtin name
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: str | None = None  # builtin options class name, e.g. "Conv2DOptions"
    fields: tuple[tuple[str, object], ...] = ()  # its field values
    version: int = 1


@dataclass(frozen=True)
class StreamChainOptions:
    """A streamed chain: the planner's figures (its rings, its members' largest row-step scratch,
    how many tensors it writes to storage and reads from it row by row) and its body, the
    program the StreamChain kernel runs (docs/custom_ops.md)."""

    ring_bytes: int
    op_scratch: int = 0  # the largest scratch a member operator needs for one row step
    spilled: int = 0
    fetched: int = 0
    block: int = BLOCK_BYTES
    version: int = CONTRACT_VERSION
    # The body: what the chain computes (the kernel's program; lowering rebuilds it as builtins).
    stages: tuple[StreamStage, ...] = ()
    tensors: tuple[StreamTensor, ...] = ()
    spill: tuple[tuple[int, int], ...] = ()  # (local id, slot): written row by row to storage
    fetch: tuple[tuple[int, int], ...] = ()  # (local id, slot): read row by row from storage
    rings: tuple[tuple[int, int], ...] = ()  # (local id, rows its ring holds)


def is_tinyseg_op(op) -> bool:
    return op.opcode in PLANNED_OPS


# ---------------------------------------------------------------- encoding


def _fetching_map(o: FetchingOptions) -> dict:
    return {
        "version": o.version,
        "axis": o.axis,
        "operands": o.operands,
        "block": o.block,
        "fetched": [
            {"position": f.position, "slot": f.slot, "shape": list(f.shape)} for f in o.fetched
        ],
    }


@functools.lru_cache(maxsize=4096)
def encode(
    options: SpillOptions | FetchingOptions | FetchingConv2DOptions | StreamChainOptions,
) -> bytes:
    """FlexBuffers bytes for an operator's custom_options (cached: the options are frozen, and the
    chain search encodes the same chains many times)."""
    if isinstance(options, StreamChainOptions):
        m = {k: getattr(options, k) for k in STREAM_CHAIN_KEYS}
        if not options.stages:  # planning figures only (the chain search)
            return bytes(flexbuffers.Dumps(m))
        m["stages"] = [
            {
                "op": st.op,
                "version": st.version,
                "inputs": list(st.inputs),
                "outputs": list(st.outputs),
                "options": st.options or "",
                "fields": dict(st.fields),
            }
            for st in options.stages
        ]
        m["tensors"] = [
            {
                "name": t.name,
                "type": t.dtype,
                "shape": list(t.shape),
                "scale": list(t.scales),
                "zero_point": list(t.zero_points),
                "quantized_dimension": t.quantized_dimension,
            }
            for t in options.tensors
        ]
        for key in ("spill", "fetch", "rings"):
            m[key] = [list(pair) for pair in getattr(options, key)]
    elif isinstance(options, SpillOptions):
        m = {"version": options.version, "slot": options.slot, "block": options.block}
    elif isinstance(options, FetchingOptions):
        m = _fetching_map(options)
    else:
        m = _fetching_map(options.fetching)
        c = options.conv
        m.update(
            {
                "padding": c.padding,
                "stride_h": c.stride_h,
                "stride_w": c.stride_w,
                "dilation_h": c.dilation_h,
                "dilation_w": c.dilation_w,
                "activation": c.activation,
                "band_rows": options.band_rows,
                "quantized_bias_type": options.quantized_bias_type,
            }
        )
    return bytes(flexbuffers.Dumps(m))


def _load(opcode: str, data: bytes | None) -> dict:
    """The options map; ValueError with the reason (decode names the operator)."""
    if data is None:
        raise ValueError("has no custom options")
    try:
        m = flexbuffers.Loads(bytearray(data))
    except Exception:
        raise ValueError("custom options are not a FlexBuffers map") from None
    if not isinstance(m, dict):
        raise ValueError("custom options are not a FlexBuffers map")
    if m.get("version") != CONTRACT_VERSION:
        raise ValueError(
            f"contract version {m.get('version')}, this tool speaks {CONTRACT_VERSION}"
        )
    return m


def _int(m: dict, key: str, limit: str | None = None) -> int:
    """An integer option within the contract's limits (what the C++ kernel would refuse, refused)."""
    v = m[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"option '{key}' is not an integer")
    lo, hi = INT_LIMITS[limit or key]
    if not lo <= v <= hi:
        raise ValueError(f"option '{key}' = {v} is outside {lo}..{hi}")
    return v


def _fetching(m: dict) -> FetchingOptions:
    operands = _int(m, "operands")
    entries = m["fetched"]
    if not isinstance(entries, list) or len(entries) > operands:
        raise ValueError("'fetched' must be a list of at most `operands` entries")
    fetched = []
    for f in entries:
        shape = f["shape"]
        if not isinstance(shape, list) or not 1 <= len(shape) <= MAX_DIMS:
            raise ValueError(f"a fetched shape must have rank 1..{MAX_DIMS}")
        fetched.append(
            Fetched(
                _int(f, "position"), _int(f, "slot"), tuple(_int({"dim": d}, "dim") for d in shape)
            )
        )
    positions = [f.position for f in fetched]
    if any(p >= operands for p in positions) or len(set(positions)) != len(positions):
        raise ValueError("fetched positions must be distinct and below `operands`")
    return FetchingOptions(
        axis=_int(m, "axis"), operands=operands, block=_int(m, "block"), fetched=tuple(fetched)
    )


def _stream_chain(m: dict) -> StreamChainOptions:
    numbers = [_int(m, k) for k in STREAM_CHAIN_KEYS[1:]]
    if not any(k in m for k in STREAM_BODY_KEYS):
        return StreamChainOptions(*numbers)  # planning figures only (the chain search)
    stages = tuple(
        StreamStage(
            str(st["op"]),
            tuple(int(i) for i in st["inputs"]),
            tuple(int(o) for o in st["outputs"]),
            str(st["options"]) or None,
            tuple(sorted(dict(st["fields"]).items())),
            int(st["version"]),
        )
        for st in m["stages"]
    )
    tensors = tuple(
        StreamTensor(
            str(t["name"]),
            str(t["type"]),
            tuple(int(d) for d in t["shape"]),
            tuple(float(x) for x in t["scale"]),
            tuple(int(z) for z in t["zero_point"]),
            int(t["quantized_dimension"]),
        )
        for t in m["tensors"]
    )
    pairs = {k: tuple((int(a), int(b)) for a, b in m[k]) for k in ("spill", "fetch", "rings")}
    return StreamChainOptions(*numbers, stages=stages, tensors=tensors, **pairs)


def decode(op) -> SpillOptions | FetchingOptions | FetchingConv2DOptions | StreamChainOptions:
    """The options of a TinySeg operator (an Operator of graph.py)."""
    data = None if op.custom_options is None else bytes(op.custom_options)
    result = _decode(op.opcode, data)
    if isinstance(result, str):
        raise TinySegError(f"operator {op.index} ({op.opcode}){result}")
    return result


@functools.lru_cache(maxsize=4096)
def _decode(opcode: str, data: bytes | None):
    """The options, or the reason they are refused (a string). Cached by bytes: the planner and the
    chain search decode the same options many times, and FlexBuffers decoding is slow in Python.
    The options are frozen dataclasses, so sharing one between operators is safe."""
    try:
        m = _load(opcode, data)
    except ValueError as exc:
        return f": {exc}" if data is not None else f" {exc}"
    try:
        if opcode == SPILL:
            return SpillOptions(slot=_int(m, "slot"), block=_int(m, "block"))
        if opcode == FETCHING:
            return _fetching(m)
        if opcode == STREAM_CHAIN:
            return _stream_chain(m)
        if opcode == FETCHING_CONV_2D:
            conv = ConvParams(
                str(m["padding"]),
                _int(m, "stride_h"),
                _int(m, "stride_w"),
                _int(m, "dilation_h"),
                _int(m, "dilation_w"),
                str(m["activation"]),
            )
            if conv.padding not in PADDING.values() or conv.activation not in ACTIVATIONS.values():
                raise ValueError(f"padding {conv.padding!r} / activation {conv.activation!r}")
            bias_type = str(m.get("quantized_bias_type", "NONE"))
            if bias_type not in BIAS_TYPES.values():
                raise ValueError(f"quantized_bias_type {bias_type!r}")
            fetching = _fetching(m)
            if fetching.axis != CONV_AXIS or any(
                len(f.shape) != CONV_RANK for f in fetching.fetched
            ):
                raise ValueError(
                    f"FetchingConv2D concatenates rank-{CONV_RANK} operands along axis {CONV_AXIS}"
                )
            return FetchingConv2DOptions(fetching, conv, _int(m, "band_rows"), bias_type)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f": malformed options ({exc})"
    return ": not a TinySeg operator"


# ---------------------------------------------------------------- memory each kernel asks for


def staging_bytes(block: int) -> int:
    """One encoded block: what Spill and the fetching kernels stage between the codec and storage."""
    return block + BLOCK_HEADER_BYTES


def stream_chain_scratch(o: StreamChainOptions) -> list[int]:
    """A streamed chain's scratch: one buffer for every ring and, per spilled tensor, the block
    its rows collect in before the codec encodes it; then the member operators' own scratch
    (shared: one runs at a time). Row streams need no staging block: SpillStream programs from
    its own units and FetchRange decodes into the ring."""
    first = o.ring_bytes + o.spilled * o.block
    return ([first] if first else []) + ([o.op_scratch] if o.op_scratch else [])


def stream_stage_problem(
    op: str,
    activations: list[str],
    output: str,
    constants: list[str | None],
    paddings: list[list[int]] | None = None,
) -> str | None:
    """Why the StreamChain kernel cannot compute a stage (None: it can): ``activations``: the
    types of its activation inputs; ``constants``: the types of its other inputs, in order
    (None: omitted); ``paddings``: PAD's constant paddings, [[before, after]] per NHWC axis (None:
    not known here; kernel_computes passes them). The C++ kernel checks the same in Prepare
    (tinyseg_contract.h)."""
    if op not in STREAM_STAGE_OPS:
        return f"{op} is not a StreamChain stage"
    positions = STREAM_STAGE_OPS[op]
    if (
        not activations
        or len(activations) > STREAM_MAX_STAGE_INPUTS
        or (positions is not None and len(activations) != len(positions))
    ):
        return f"{op} with {len(activations)} activation inputs"
    if tuple(constants) not in STREAM_STAGE_CONSTANTS.get(op, ((),)):
        return f"{op} with constant inputs {constants}"
    if op == "QUANTIZE":
        if (activations[0], output) not in STREAM_QUANTIZE_TYPES:
            return f"QUANTIZE {activations[0]} -> {output}"
        return None
    if op == "DEQUANTIZE":
        if (activations[0], output) not in STREAM_DEQUANTIZE_TYPES:
            return f"DEQUANTIZE {activations[0]} -> {output}"
        return None
    if output != "INT8" or any(t != "INT8" for t in activations):
        return f"{op} on {'/'.join(activations)} -> {output} (int8 only)"
    if op in ("PAD", "PADV2") and paddings is not None:
        rows = [[int(v) for v in r] for r in paddings]
        if len(rows) != 4 or any(len(r) != 2 for r in rows):
            return f"{op} with paddings {rows} (NHWC only)"
        if any(v < 0 for r in rows for v in r):
            return f"{op} with negative paddings {rows}"
        if any(rows[0]) or any(rows[3]):
            return f"{op} of batch or channels {rows} (height and width only)"
    return None


def stream_activation_inputs(
    stage: StreamStage, constants: frozenset[int] = frozenset()
) -> list[int]:
    """A stage's activation operands (chain-local ids), in order, without repeats: the edges of
    the chain's schedule (chain_schedule.h ChainEdge), written once for both sides. ``constants``:
    local ids of constant inputs of the StreamChain (an ADD, SUB or MUL may take one where an
    activation could be: a per-channel vector broadcast over the rows; it is no edge)."""
    positions = STREAM_STAGE_OPS.get(stage.op, ())
    ids = [
        t
        for k, t in enumerate(stage.inputs)
        if t >= 0 and t not in constants and (positions is None or k in positions)
    ]
    return list(dict.fromkeys(ids))


def stream_chain_body_bytes(
    o: StreamChainOptions,
    out_channels: list[int],
    num_inputs: int,
    num_outputs: int,
    constants: frozenset[int] = frozenset(),
) -> int:
    """The persistent block StreamChain's Prepare allocates for its tables (tinyseg_stream.cc):
    per chain-local tensor (the operator's inputs and outputs, then the body's tensors) its
    record and its schedule entry; per stage its record; per edge its row map; per spilled
    tensor its SpillStream; int32 arrays: rows done and held per tensor, the schedule's stages,
    every stage's operands, the outputs the schedule pulls (the operator's, then the spilled),
    and multiplier and shift per output channel of the requantizing stages, then the lookup table
    of each table stage (ELU), in the same pool.
    ``out_channels``: each stage's output channels; ``constants``: local ids of constant inputs."""
    num_local = num_inputs + num_outputs + len(o.tensors)
    stages = len(o.stages)
    edges = sum(len(stream_activation_inputs(st, constants)) for st in o.stages)
    operands = sum(len(st.inputs) for st in o.stages)
    per_channel = sum(
        2 * c for st, c in zip(o.stages, out_channels) if st.op in STREAM_PER_CHANNEL_OPS
    )
    per_channel += sum(
        STREAM_LOOKUP_TABLE_BYTES // 4 for st in o.stages if st.op in STREAM_LOOKUP_TABLE_OPS
    )
    int32s = (
        STREAM_INT32_PER_TENSOR * num_local
        + STREAM_INT32_PER_STAGE * stages
        + operands
        + num_outputs
        + len(o.spill)
        + per_channel
    )
    return (
        SPILL_STREAM_BYTES * len(o.spill)
        + (STREAM_TENSOR_BYTES + STREAM_SCHEDULE_TENSOR_BYTES) * num_local
        + STREAM_STAGE_BYTES * stages
        + STREAM_EDGE_BYTES * edges
        + 4 * int32s
    )


def band_input_rows(conv: ConvParams, filter_h: int, band_rows: int) -> int:
    return (filter_h - 1) * conv.dilation_h + 1 + conv.stride_h * (band_rows - 1)


def band_buffer_bytes(graph, op, o: FetchingConv2DOptions) -> int:
    """The band of the virtual concatenation (all input channels) that one step of FetchingConv2D
    convolves: rows x input width x input channels, capped at the input height."""
    filt = graph.tensors[op.inputs[-2]]
    _, in_h, in_w, _ = o.fetching.fetched[0].shape
    rows = min(band_input_rows(o.conv, filt.shape[1], o.band_rows), in_h)
    return rows * in_w * filt.shape[3] * graph.tensors[op.outputs[0]].itemsize


def scratch_requests(graph, op, kernels: str) -> list[int]:
    """Scratch buffers each TinySeg kernel requests in Prepare, in order (same for every kernel set)."""
    o = decode(op)
    if isinstance(o, StreamChainOptions):
        return stream_chain_scratch(o)
    if isinstance(o, SpillOptions):
        return [staging_bytes(o.block)]
    if isinstance(o, FetchingOptions):
        return [staging_bytes(o.block)]
    return [band_buffer_bytes(graph, op, o), staging_bytes(o.fetching.block)]


def persistent_bytes(graph, op, pointer_bytes: int) -> int:
    """OpData each kernel keeps (see docs/custom_ops.md), each allocation rounded to 16 bytes."""
    o = decode(op)
    if isinstance(o, StreamChainOptions):
        if not o.stages:  # planning figures only (the chain search): the OpData alone
            return align_up(STREAM_CHAIN_OPDATA_BYTES)
        shapes = _local_shapes(graph, op, o)
        channels = [
            shapes[st.outputs[0]][-1] if st.outputs and shapes[st.outputs[0]] else 0
            for st in o.stages
        ]
        constants = frozenset(
            k for k, t in enumerate(op.inputs) if t >= 0 and graph.tensors[t].is_constant
        )
        return align_up(STREAM_CHAIN_OPDATA_BYTES) + align_up(
            stream_chain_body_bytes(o, channels, len(op.inputs), len(op.outputs), constants)
        )
    if isinstance(o, SpillOptions):
        return align_up(SPILL_OPDATA_BYTES)
    per_fetched = fetched_operand_bytes(pointer_bytes)
    if isinstance(o, FetchingOptions):
        return align_up(FETCHING_HEADER_BYTES + per_fetched * len(o.fetched))
    channels = graph.tensors[op.outputs[0]].shape[-1]
    return align_up(
        FETCHING_CONV_HEADER_BYTES + per_fetched * len(o.fetching.fetched)
    ) + 2 * align_up(PER_CHANNEL_BYTES * channels)


def _local_shapes(graph, op, o: StreamChainOptions) -> list[tuple[int, ...]]:
    """Shapes of a chain's local tensors: the operator's inputs, its outputs, the body's tensors."""
    real = [
        tuple(graph.tensors[t].shape) if t >= 0 else () for t in list(op.inputs) + list(op.outputs)
    ]
    return real + [t.shape for t in o.tensors]


def operand_sources(op, o: "FetchingOptions") -> list["Fetched | int"]:
    """The operand expansion, written once: operand k is the fetched entry whose position is k,
    otherwise the next in-RAM input (of ``op.inputs``, without FetchingConv2D's filter and bias)."""
    ram = list(op.inputs if op.opcode == FETCHING else op.inputs[:-2])
    at = {f.position: f for f in o.fetched}
    out: list[Fetched | int] = []
    for k in range(o.operands):
        if k in at:
            out.append(at[k])
        elif ram:
            out.append(int(ram.pop(0)))
        else:
            raise TinySegError(
                f"operator {op.index} ({op.opcode}): operand {k} is neither fetched nor an input"
            )
    return out


# ---------------------------------------------------------------- validation of what the kernels refuse in Prepare
# One check of every TinySeg operator against its graph, with the C++ kernels' limits (the constants
# above, generated into tinyseg_contract.h): tinyseg_stream.cc's Prepare refuses exactly these bodies,
# tinyseg_fetching_conv.cc these FetchingConv2D operators. `analyze`, `verify` and the lowering call
# validate_graph, so a hostile model is refused with one line before anything runs it.


class _BodyError(ValueError):
    """A body the StreamChain kernel refuses (the reason)."""


@dataclass
class _Local:
    """A chain-local tensor as the kernel's PrepareTensors sees it."""

    kind: str  # "input", "output" (the StreamChain's), "body"
    dtype: str | None
    height: int = 0
    width: int = 0
    channels: int = 0
    row_bytes: int = 0
    scale: float = 0.0
    zero_point: int = 0
    constant: bool = False
    graph_index: int = -1
    ring: int = 0
    producer: int = -1
    fetched: bool = False
    spilled: bool = False


def _local(
    kind: str,
    dtype: str | None,
    shape: tuple[int, ...],
    scale: float,
    zero_point: int,
    constant: bool,
    graph_index: int,
    what: str,
) -> _Local:
    x = _Local(
        kind, dtype, scale=scale, zero_point=zero_point, constant=constant, graph_index=graph_index
    )
    if len(shape) == 4:
        if shape[0] != 1 and kind != "input":
            raise _BodyError(f"{what} has batch {shape[0]} (chain tensors have batch 1)")
        x.height, x.width, x.channels = (int(d) for d in shape[1:])
        x.row_bytes = x.width * x.channels * ELEMENT_BYTES.get(dtype or "", 0)
        if x.row_bytes > INT32_MAX:
            raise _BodyError(f"{what} has rows of {x.row_bytes} bytes (at most {INT32_MAX})")
    return x


def _body_tensor(j: int, t: StreamTensor, kernel: bool) -> _Local:
    what = f"tensors[{j}]"
    if t.dtype not in ELEMENT_BYTES:
        raise _BodyError(f"{what} has type {t.dtype!r}")
    if len(t.shape) != 4 or any(isinstance(d, bool) or not 1 <= d <= INT32_MAX for d in t.shape):
        raise _BodyError(f"{what} has shape {list(t.shape)} (rank 4, dimensions 1..{INT32_MAX})")
    if kernel and (len(t.scales) != 1 or len(t.zero_points) != 1):
        raise _BodyError(f"{what} needs one scale and one zero point")
    for scale in t.scales:
        if not (math.isfinite(scale) and STREAM_MIN_SCALE <= scale <= STREAM_MAX_SCALE):
            raise _BodyError(f"{what} has scale {scale!r} (finite, in [2^-32, 2^32])")
    lo, hi = ZERO_POINT_LIMITS[t.dtype]
    for zp in t.zero_points:
        if not lo <= zp <= hi:
            raise _BodyError(f"{what} has zero point {zp} ({t.dtype}: {lo}..{hi})")
    return _local(
        "body",
        t.dtype,
        t.shape,
        t.scales[0] if t.scales else 0.0,
        t.zero_points[0] if t.zero_points else 0,
        False,
        -1,
        what,
    )


def _stage_fields(k: int, st: StreamStage) -> dict[str, int]:
    """The stage's integer fields within STREAM_FIELD_LIMITS (absent: the schema's default), every
    float field finite."""
    fields = dict(st.fields)
    out = dict(STREAM_FIELD_DEFAULTS)
    for key, value in fields.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise _BodyError(f"stage {k} ({st.op}) field {key} is {value}")
        if key not in STREAM_FIELD_LIMITS:
            continue
        if not isinstance(value, (bool, int)):
            raise _BodyError(f"stage {k} ({st.op}) field {key} is not an integer")
        lo, hi = STREAM_FIELD_LIMITS[key]
        if not lo <= int(value) <= hi:
            raise _BodyError(
                f"stage {k} ({st.op}) field {key} = {int(value)} is outside {lo}..{hi}"
            )
        out[key] = int(value)
    return out


def _out_size(size: int, filt: int, stride: int, dilation: int, padding: int) -> int:
    """TFLM's ComputeOutSize (padding 0 SAME, 1 VALID)."""
    eff = (filt - 1) * dilation + 1
    return (size + stride - 1) // stride if padding == 0 else (size + stride - eff) // stride


def _pad_top(size: int, out: int, filt: int, stride: int, dilation: int) -> int:
    """TFLM's ComputePaddingHeightWidth, the top (left) part."""
    eff = (filt - 1) * dilation + 1
    return max((out - 1) * stride + eff - size, 0) // 2


def _constant(graph, loc: list[_Local], lid: int, what: str):
    """The graph tensor behind a constant input of a stage (a StreamChain input)."""
    if lid < 0 or loc[lid].kind != "input" or loc[lid].graph_index < 0:
        raise _BodyError(f"{what} is not one of the StreamChain's inputs")
    return graph.tensors[loc[lid].graph_index]


def _check_stage(
    graph,
    o: StreamChainOptions,
    loc: list[_Local],
    k: int,
    st: StreamStage,
    edges: list[tuple[int, int, RowMapSpec]],
    kernel: bool,
) -> None:
    """What tinyseg_stream.cc's PrepareStage refuses; appends the stage's edges with their row maps.
    ``kernel`` False (the lowering of an estimate's chain, whose stages may be float32): the
    geometry and structure only, not the types the kernel computes."""
    name = f"stage {k} ({st.op})"
    positions = STREAM_STAGE_OPS[st.op]
    acts: list[int] = []
    consts: list[int] = []
    for j, lid in enumerate(st.inputs):
        if positions is not None and j not in positions:
            consts.append(lid)
            continue
        if lid < 0:
            raise _BodyError(f"{name} omits an activation input")
        if loc[lid].constant:
            continue
        if loc[lid].row_bytes <= 0:
            raise _BodyError(f"{name} reads local tensor {lid}, which has no rows")
        if lid not in acts:
            acts.append(lid)
    if not acts:
        raise _BodyError(f"{name} reads no streamed tensor")
    out_id = st.outputs[0]
    out, x = loc[out_id], loc[acts[0]]
    if out.row_bytes <= 0 or out.kind == "input":
        raise _BodyError(
            f"{name} writes local tensor {out_id}, a StreamChain input or a tensor without rows"
        )
    f = _stage_fields(k, st)
    same = (x.height, x.width, x.channels) == (out.height, out.width, out.channels)
    op = st.op
    if op in ("QUANTIZE", "DEQUANTIZE"):
        types = STREAM_QUANTIZE_TYPES if op == "QUANTIZE" else STREAM_DEQUANTIZE_TYPES
        if (kernel and (x.dtype, out.dtype) not in types) or not same:
            raise _BodyError(
                f"{name}: {x.dtype} {x.height}x{x.width}x{x.channels} -> "
                f"{out.dtype} {out.height}x{out.width}x{out.channels}"
            )
        if kernel and op == "DEQUANTIZE" and out.kind != "output":
            raise _BodyError(f"{name} writes a body tensor (it writes one of the chain's outputs)")
    elif kernel and (out.dtype != "INT8" or any(loc[a].dtype != "INT8" for a in acts)):
        raise _BodyError(f"{name} is int8 only")
    heights = {a: loc[a].height for a in acts}
    rowmap = {a: RowMapSpec(heights[a], out.height) for a in acts}
    if op in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"):
        flt = _constant(graph, loc, consts[1 if op == "TRANSPOSE_CONV" else 0], f"{name}'s filter")
        bias_lid = (
            consts[2 if op == "TRANSPOSE_CONV" else 1]
            if len(consts) > (2 if op == "TRANSPOSE_CONV" else 1)
            else -1
        )
        bias = _constant(graph, loc, bias_lid, f"{name}'s bias") if bias_lid >= 0 else None
        dw = op == "DEPTHWISE_CONV_2D"
        fs = tuple(flt.shape)
        ok = (
            (flt.dtype == "INT8" or not kernel)
            and len(fs) == 4
            and fs[3 if dw else 0] == out.channels
            and (not dw or (fs[0] == 1 and x.channels and out.channels % x.channels == 0))
            and (
                bias is None
                or ((bias.dtype == "INT32" or not kernel) and bias.elements == out.channels)
            )
        )
        if not ok:
            raise _BodyError(
                f"{name} needs an int8 filter of {out.channels} output channels and an int32 bias"
            )
        fh, fw = fs[1], fs[2]
        sh, sw, dh, dwf = f["strideH"], f["strideW"], f["dilationHFactor"], f["dilationWFactor"]
        if op == "TRANSPOSE_CONV":
            oh = _out_size(out.height, fh, sh, 1, f["padding"])
            if (
                sh < fh
                or _pad_top(out.height, oh, fh, sh, 1) != 0
                or out.height != x.height * sh
                or fs[3] != x.channels
            ):
                raise _BodyError(f"{name}'s geometry does not match its tensors")
            if o.op_scratch < out.width * out.channels * 4:
                raise _BodyError(
                    f"{name}: op_scratch {o.op_scratch} is smaller than one output row "
                    f"({out.width * out.channels * 4} bytes)"
                )
            rowmap[acts[0]].den = sh
        else:
            oh = _out_size(x.height, fh, sh, dh, f["padding"])
            ow = _out_size(x.width, fw, sw, dwf, f["padding"])
            if (oh, ow) != (out.height, out.width) or (not dw and fs[3] != x.channels):
                raise _BodyError(
                    f"{name}'s geometry does not match its tensors "
                    f"({x.height}x{x.width} -> {out.height}x{out.width})"
                )
            top = _pad_top(x.height, oh, fh, sh, dh)
            rowmap[acts[0]].set_window(sh, top, (fh - 1) * dh + 1 - 1 - top)
    elif op in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        fh, fw = dict(st.fields).get("filterHeight"), dict(st.fields).get("filterWidth")
        if fh is None or fw is None or x.channels != out.channels:
            raise _BodyError(f"{name} needs its filter size and the input's channels")
        sh, sw = f["strideH"], f["strideW"]
        oh, ow = (
            _out_size(x.height, fh, sh, 1, f["padding"]),
            _out_size(x.width, fw, sw, 1, f["padding"]),
        )
        if (oh, ow) != (out.height, out.width):
            raise _BodyError(f"{name}'s geometry does not match its tensors")
        top = _pad_top(x.height, oh, fh, sh, 1)
        rowmap[acts[0]].set_window(sh, top, fh - 1 - top)
    elif op == "CONCATENATION":
        if f["axis"] not in (3, -1) or f["fusedActivationFunction"] != 0:
            raise _BodyError(f"{name} along axis {f['axis']} (channels only, no activation)")
        if any(
            (loc[a].height, loc[a].width) != (out.height, out.width)
            or (kernel and (loc[a].scale != out.scale or loc[a].zero_point != out.zero_point))
            for a in acts
        ):
            raise _BodyError(
                f"{name}'s inputs differ from its output in height, width or quantization"
            )
        if sum(loc[lid].channels for lid in st.inputs if lid >= 0) != out.channels:
            raise _BodyError(f"{name}'s input channels do not add up to its output's")
    elif op in ("ADD", "SUB", "MUL"):
        if len(st.inputs) != 2:
            raise _BodyError(f"{name} takes two inputs")
        for lid in st.inputs:
            if loc[lid].constant:
                t = graph.tensors[loc[lid].graph_index]
                shape = (1,) * (4 - len(t.shape)) + tuple(t.shape)
                if len(shape) != 4 or (kernel and t.dtype != "INT8") or shape[1] != 1:
                    raise _BodyError(f"{name}: a constant operand has one int8 row")
            else:
                shape = (1, loc[lid].height, loc[lid].width, loc[lid].channels)
                if shape[1] != out.height:
                    raise _BodyError(f"{name}'s rows do not broadcast")
            if shape[0] != 1 or shape[2] not in (1, out.width) or shape[3] not in (1, out.channels):
                raise _BodyError(f"{name}'s operands do not broadcast to its output")
    elif op == "RESIZE_NEAREST_NEIGHBOR":
        if f["alignCorners"] or x.channels != out.channels or out.height % x.height:
            raise _BodyError(f"{name} by an integer factor, without align_corners")
        rowmap[acts[0]].den = out.height // x.height
    elif op in ("PAD", "PADV2"):
        pads = graph.buffer_array(
            _constant(graph, loc, consts[0] if consts else -1, f"{name}'s paddings").index
        )
        if (
            pads is None
            or pads.shape != (4, 2)
            or (pads < 0).any()
            or pads[0].any()
            or pads[3].any()
        ):
            raise _BodyError(
                f"{name} pads height and width only, with constant non-negative paddings"
            )
        if (out.height, out.width, out.channels) != (
            x.height + int(pads[1].sum()),
            x.width + int(pads[2].sum()),
            x.channels,
        ):
            raise _BodyError(f"{name}'s output is not its input plus the paddings")
        top = int(pads[1][0])
        rowmap[acts[0]].set_window(1, top, -top)
    else:  # one input, its output's shape: LOGISTIC, TANH, RELU, RELU6, HARD_SWISH, LEAKY_RELU, ELU, PRELU
        if not same:
            raise _BodyError(
                f"{name}: input {x.height}x{x.width}x{x.channels}, "
                f"output {out.height}x{out.width}x{out.channels}"
            )
        if op == "LEAKY_RELU" and not isinstance(dict(st.fields).get("alpha"), (int, float)):
            raise _BodyError(f"{name} needs its alpha")
    for a in acts:
        m = rowmap[a]
        if m.num == m.den == 1 and m.before == m.after == 0 and m.in_h != m.out_h:
            raise _BodyError(
                f"{name}'s input rows ({m.in_h}) differ from its output rows ({m.out_h})"
            )
        edges.append((k, a, m))


@dataclass
class RowMapSpec:
    """chain_schedule.h RowMap: output row y reads input rows [y*num//den - before, y*num//den + after]."""

    in_h: int
    out_h: int
    num: int = 1
    den: int = 1
    before: int = 0
    after: int = 0

    def set_window(self, num: int, before: int, after: int) -> None:
        self.num, self.before, self.after = num, before, after

    def window(self, y: int) -> tuple[int, int]:
        anchor = y * self.num // self.den
        return max(anchor - self.before, 0), min(anchor + self.after, self.in_h - 1)


def _dry_run(
    loc: list[_Local], stages: int, outputs: list[int], edges: list[tuple[int, int, RowMapSpec]]
) -> None:
    """chain_schedule.h's pull schedule, bookkeeping only (as the kernel's Prepare runs it): refuses a
    ring shorter than the rows its readers hold at once, and a cycle."""
    done = [0] * len(loc)
    stage_out = {s: t for t, x in enumerate(loc) if (s := x.producer) >= 0}
    streamed = [x.producer >= 0 or x.fetched for x in loc]

    def note(t: int) -> None:
        if loc[t].ring <= 0:
            return
        low = loc[t].height
        for s, u, m in edges:
            out = stage_out[s]
            if u == t and done[out] < loc[out].height:
                lo, hi = m.window(done[out])
                if lo <= hi and lo < low:
                    low = lo
        held = done[t] - min(low, done[t])
        if held > loc[t].ring:
            raise _BodyError(
                f"the ring of local tensor {t} holds {loc[t].ring} rows, its readers need {held}"
            )

    def pull(t: int, row: int, depth: int) -> None:
        if depth > stages:
            raise _BodyError("its stages read each other in a cycle")
        s = loc[t].producer
        while done[t] <= row:
            if s >= 0:
                for es, u, m in edges:
                    if es == s and streamed[u]:
                        lo, hi = m.window(done[t])
                        if lo <= hi:
                            pull(u, hi, depth + 1)
            done[t] += 1
            note(t)
            if s >= 0:
                for es, u, _ in edges:
                    if es == s:
                        note(u)

    progress = True
    while progress:
        progress = False
        for t in outputs:
            if done[t] < loc[t].height:
                pull(t, done[t], 0)
                progress = True
    for s in range(stages):
        t = stage_out[s]
        if done[t] < loc[t].height:
            pull(t, loc[t].height - 1, 0)


def _pairs(o: StreamChainOptions, loc: list[_Local]) -> None:
    """rings, spill and fetch as tinyseg_stream.cc's PreparePairs reads them."""
    end = 0
    for key in ("rings", "spill", "fetch"):
        for i, (lid, value) in enumerate(getattr(o, key)):
            if not 0 <= lid < len(loc) or not 0 <= value <= INT32_MAX:
                raise _BodyError(
                    f"{key}[{i}] = [{lid}, {value}] (local id 0..{len(loc) - 1}, number 0..{INT32_MAX})"
                )
            x = loc[lid]
            if x.kind != "body" or x.row_bytes <= 0:
                raise _BodyError(f"{key}[{i}] names local tensor {lid}, which is not a body tensor")
            if key == "rings":
                if not 1 <= value <= x.height or x.ring:
                    raise _BodyError(
                        f"rings[{i}] gives local tensor {lid} {value} rows (1..{x.height}, once)"
                    )
                x.ring = value
                end += value * x.row_bytes
            elif key == "spill":
                if x.spilled or not x.ring:
                    raise _BodyError(
                        f"spill[{i}]: local tensor {lid} is spilled twice or has no ring"
                    )
                x.spilled = True
            else:
                if x.fetched or not x.ring:
                    raise _BodyError(
                        f"fetch[{i}]: local tensor {lid} is fetched twice or has no ring"
                    )
                x.fetched = True
    if end != o.ring_bytes:
        raise _BodyError(f"ring_bytes is {o.ring_bytes}, its rings add up to {end}")
    if o.ring_bytes + o.spilled * o.block > INT32_MAX:
        raise _BodyError("its rings and row-stream blocks exceed 2^31-1 bytes")


def _check_body(graph, op, o: StreamChainOptions, kernel: bool) -> None:
    loc: list[_Local] = []
    n_in = len(op.inputs)
    for k, t in enumerate(list(op.inputs) + list(op.outputs)):
        kind = "input" if k < n_in else "output"
        if t < 0:
            loc.append(_Local(kind, None))
            continue
        x = graph.tensors[t]
        loc.append(
            _local(
                kind,
                x.dtype,
                tuple(x.shape),
                x.scales[0] if x.scales else 0.0,
                x.zero_points[0] if x.zero_points else 0,
                kind == "input" and x.is_constant,
                t,
                f"local tensor {k}",
            )
        )
    loc += [_body_tensor(j, t, kernel) for j, t in enumerate(o.tensors)]
    if o.spilled != len(o.spill) or o.fetched != len(o.fetch):
        raise _BodyError(
            f"spilled {o.spilled} / fetched {o.fetched} disagree with its spill and fetch lists"
        )
    channels = []
    for k, st in enumerate(o.stages):
        if st.op not in STREAM_STAGE_OPS and kernel:
            raise _BodyError(f"stage {k} is {st.op}, which the StreamChain kernel does not compute")
        if len(st.outputs) != 1 or not 1 <= len(st.inputs) <= STREAM_MAX_STAGE_INPUTS:
            raise _BodyError(
                f"stage {k} ({st.op}) has {len(st.outputs)} outputs and {len(st.inputs)} inputs "
                f"(1, and 1..{STREAM_MAX_STAGE_INPUTS})"
            )
        if not 0 <= st.outputs[0] < len(loc) or any(not -1 <= i < len(loc) for i in st.inputs):
            raise _BodyError(f"stage {k} ({st.op}) names a local tensor outside -1..{len(loc) - 1}")
        c = loc[st.outputs[0]].channels
        if st.op in STREAM_PER_CHANNEL_OPS and not 1 <= c <= INT32_MAX:
            raise _BodyError(f"stage {k} ({st.op}) has {c} output channels")
        channels.append(c)
    constants = frozenset(k for k, x in enumerate(loc[:n_in]) if x.constant)
    body = stream_chain_body_bytes(o, channels, n_in, len(op.outputs), constants)
    if body > STREAM_MAX_BODY_BYTES:
        raise _BodyError(f"its tables need {body} bytes (at most {STREAM_MAX_BODY_BYTES})")
    _pairs(o, loc)
    edges: list[tuple[int, int, RowMapSpec]] = []
    unknown = False  # a stage of an estimate's chain the kernel has no row map for: no dry run
    for k, st in enumerate(o.stages):
        if st.op in STREAM_STAGE_OPS:
            _check_stage(graph, o, loc, k, st, edges, kernel)
        else:
            unknown = True
        out = loc[st.outputs[0]]
        if out.producer >= 0 or out.fetched:
            raise _BodyError(
                f"stage {k} ({st.op}) writes local tensor {st.outputs[0]}, which another stage "
                "writes or a fetch reads"
            )
        if out.kind != "output" and not out.ring:
            raise _BodyError(
                f"stage {k} ({st.op}) writes body tensor {st.outputs[0]}, which has no ring"
            )
        out.producer = k
    for s, t, _ in edges:
        x = loc[t]
        if x.kind != "input" and not x.fetched and not 0 <= x.producer < s:
            raise _BodyError(
                f"stage {s} reads local tensor {t} before any earlier stage or fetch makes it"
            )
    outputs = list(range(n_in, n_in + len(op.outputs))) + [lid for lid, _ in o.spill]
    if any(loc[t].producer < 0 for t in outputs):
        raise _BodyError("an output or a spilled tensor is made by no stage")
    if not unknown:
        _dry_run(loc, len(o.stages), outputs, edges)


def validate_body(graph, op, kernel: bool = True) -> None:
    """Refuse a StreamChain whose body the kernel refuses in Prepare (TinySegError, one line).
    ``kernel`` False: a chain of an estimate (`analyze --stream`'s search, which may stream float32
    or other row-local operators the kernel does not compute) that only the lowering runs: its
    structure, geometry, rings and numbers are checked, not the stages' types."""
    o = decode(op)
    if not isinstance(o, StreamChainOptions) or not o.stages:
        return  # a planning-only chain has nothing to run: validate.tflm_refusals says why TFLM refuses it
    try:
        _check_body(graph, op, o, kernel)
    except _BodyError as exc:
        raise TinySegError(
            f"operator {op.index} (StreamChain): malformed StreamChain body: {exc}; "
            "the file was not written this way by tinyseg optimize: optimize the original "
            "model again"
        ) from None


def _fetching_conv_problem(graph, op, o: FetchingConv2DOptions) -> str | None:
    """What tinyseg_fetching_conv.cc's Prepare refuses beyond the options alone."""
    if len(op.inputs) < 2 or len(op.outputs) != 1:
        return "needs [operands..., filter, bias or -1] and one output"
    n_ram = len(op.inputs) - 2
    if o.fetching.operands != n_ram + len(o.fetching.fetched):
        return (
            f"operands is {o.fetching.operands}, its in-RAM inputs and fetched entries are "
            f"{n_ram + len(o.fetching.fetched)}"
        )
    out = graph.tensors[op.outputs[0]]
    if op.inputs[-1] < 0 and out.dtype != "INT16":
        return "a float32 or int8 convolution needs its bias input"
    filt = graph.tensors[op.inputs[-2]]
    if len(filt.shape) != 4 or len(out.shape) != 4:
        return "filter and output are rank 4"
    _, kh, kw, _ = filt.shape
    c = o.conv
    if (kh - 1) * c.dilation_h + 1 > INT_LIMITS["dilation_h"][1] or (
        kw - 1
    ) * c.dilation_w + 1 > INT_LIMITS["dilation_w"][1]:
        return f"the dilated filter spans more than {INT16_MAX} rows or columns"
    if o.band_rows > out.shape[1]:
        return f"band_rows {o.band_rows} is more than the output's {out.shape[1]} rows"
    return None


def validate_graph(graph, kernel: bool = True) -> None:
    """Every TinySeg operator of the graph as its kernel's Prepare checks it, and every fetch against
    what was spilled to its slot before it (a fetch of more bytes than were written reads past the
    stored stream): TinySegError with one line naming the operator and the reason. ``kernel``: see
    validate_body (the lowering passes False)."""
    spilled: dict[int, int] = {}  # slot -> bytes written (the latest write before this operator)
    for op in graph.operators:
        if op.opcode not in TINYSEG_OPS:
            continue
        o = decode(op)
        here = f"operator {op.index} ({op.opcode})"
        if isinstance(o, StreamChainOptions):
            validate_body(graph, op, kernel)
            loc = list(op.inputs) + list(op.outputs)
            sizes = [graph.tensors[t].nbytes if t >= 0 else 0 for t in loc] + [
                math.prod(t.shape) * ELEMENT_BYTES.get(t.dtype, 0) for t in o.tensors
            ]
            for lid, slot in o.fetch:
                if sizes[lid] > spilled.get(slot, -1):
                    raise TinySegError(
                        f"{here}: malformed StreamChain body: fetches {sizes[lid]} bytes from slot "
                        f"{slot}, where {max(spilled.get(slot, 0), 0)} were spilled before it"
                    )
            for lid, slot in o.spill:
                spilled[slot] = sizes[lid]
        elif isinstance(o, SpillOptions):
            spilled[o.slot] = graph.tensors[op.inputs[0]].nbytes if op.inputs else 0
        else:
            fetching = o if isinstance(o, FetchingOptions) else o.fetching
            itemsize = graph.tensors[op.outputs[0]].itemsize if op.outputs else 0
            for f in fetching.fetched:
                size = math.prod(f.shape) * itemsize
                if size > spilled.get(f.slot, -1):
                    raise TinySegError(
                        f"{here}: fetched entry at position {f.position} reads {size} bytes from "
                        f"slot {f.slot}, where {max(spilled.get(f.slot, 0), 0)} were spilled before it; "
                        "the file is damaged: optimize the original model again"
                    )
            if isinstance(o, FetchingConv2DOptions):
                problem = _fetching_conv_problem(graph, op, o)
                if problem:
                    raise TinySegError(
                        f"{here}: {problem}; the file is damaged: optimize the original model again"
                    )


# ---------------------------------------------------------------- TRANSPOSE_CONV marker


@dataclass(frozen=True)
class ScratchMarker:
    """How a TRANSPOSE_CONV's accumulator is narrowed: int16 over the output, or int32 in row bands."""

    accumulator: str  # "INT16" or "INT32"
    band_rows: int  # 0: the whole output


def transpose_conv_marker(graph, op) -> ScratchMarker | None:
    for t in op.intermediates:
        tensor = graph.tensors[t]
        if len(tensor.shape) == 2 and tensor.shape[0] == 0 and tensor.dtype in ("INT16", "INT32"):
            return ScratchMarker(tensor.dtype, int(tensor.shape[1]))
    return None


def transpose_conv_scratch(graph, op, marker: ScratchMarker) -> list[int]:
    out = graph.tensors[op.outputs[0]]
    if marker.accumulator == "INT16":
        return [out.elements * 2]
    rows = min(max(marker.band_rows, 1), out.shape[1])
    return [rows * out.shape[2] * out.shape[3] * 4]


# ---------------------------------------------------------------- the C++ side of the contract

_TFLITE_TYPE = {
    "INT8": "kTfLiteInt8",
    "UINT8": "kTfLiteUInt8",
    "INT16": "kTfLiteInt16",
    "INT32": "kTfLiteInt32",
    "INT64": "kTfLiteInt64",
    "FLOAT32": "kTfLiteFloat32",
}


def _cname(key: str) -> str:
    return "k" + "".join(part.capitalize() for part in key.split("_"))


def header() -> str:
    """tflm_ops/kernels/tinyseg_contract.h: this module's contract as C++14 constants and checks."""
    out = [
        "// GENERATED from tinyseg_plugin/customops.py by `python -m tinyseg_plugin.customops --header`.",
        "// Do not edit: change customops.py and regenerate (tests/test_contract.py checks the two agree).",
        "// The custom-operator contract, defined once: option keys, limits, dtype rules, OpData sizes.",
        "#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_",
        "#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_",
        "",
        "#include <cstddef>",
        "#include <cstdint>",
        "#include <cstring>",
        "",
        '#include "tensorflow/lite/c/common.h"',
        "",
        "namespace tflite {",
        "namespace tinyseg_ops {",
        "namespace contract {",
        "",
        f"constexpr int kVersion = {CONTRACT_VERSION};",
        f'constexpr char kSpill[] = "{SPILL}";',
        f'constexpr char kFetching[] = "{FETCHING}";',
        f'constexpr char kFetchingConv2D[] = "{FETCHING_CONV_2D}";',
        f'constexpr char kStreamChain[] = "{STREAM_CHAIN}";',
        "",
        "// Option keys.",
    ]
    keys = sorted(
        {k for ks in KEYS.values() for k in ks}
        | set(FETCHED_KEYS)
        | set(STREAM_STAGE_KEYS)
        | set(STREAM_TENSOR_KEYS)
    )
    out += [f'constexpr char {_cname("key_" + k)}[] = "{k}";' for k in keys]
    out += ["", "// Builtin options fields of a StreamChain stage (the TFLite schema's names)."]
    out += [f'constexpr char kField{k[0].upper()}{k[1:]}[] = "{k}";' for k in STREAM_FIELD_KEYS]
    out += ["", "// Integer options: least and greatest accepted value."]
    for k, (lo, hi) in INT_LIMITS.items():
        out.append(f"constexpr int64_t {_cname('min_' + k)} = {lo};")
        out.append(f"constexpr int64_t {_cname('max_' + k)} = {hi};")
    out += [
        "",
        "// The same limits by key (Options::Int looks an option's limits up here).",
        "struct IntLimit {",
        "  const char* key;",
        "  int64_t min;",
        "  int64_t max;",
        "};",
        "constexpr IntLimit kIntLimits[] = {",
    ]
    out += [f'    {{"{k}", {lo}, {hi}}},' for k, (lo, hi) in INT_LIMITS.items()]
    out += ["};", ""]
    out += [
        "// StreamChain stage fields: least and greatest accepted value (a boolean counts 0/1); an absent",
        "// field takes the schema's default.",
        "struct FieldLimit {",
        "  const char* key;",
        "  int64_t min;",
        "  int64_t max;",
        "};",
        "constexpr FieldLimit kFieldLimits[] = {",
    ]
    out += [f'    {{"{k}", {lo}, {hi}}},' for k, (lo, hi) in STREAM_FIELD_LIMITS.items()]
    out += [
        "};",
        "",
        "// A StreamChain body tensor's quantization (scale finite, in [min, max]; zero point in its type's range),",
        "// and the largest persistent block of one StreamChain.",
        f"constexpr double kStreamMinScale = {STREAM_MIN_SCALE!r};",
        f"constexpr double kStreamMaxScale = {STREAM_MAX_SCALE!r};",
        f"constexpr int64_t kStreamMaxBodyBytes = {STREAM_MAX_BODY_BYTES};",
        "inline bool ZeroPointInRange(TfLiteType type, int64_t zero_point) {",
        "  switch (type) {",
    ]
    for t, (lo, hi) in ZERO_POINT_LIMITS.items():
        out.append(f"    case {_TFLITE_TYPE[t]}: return zero_point >= {lo} && zero_point <= {hi};")
    out += ["    default: return false;", "  }", "}", ""]
    out += [
        f"constexpr int kMaxDims = {MAX_DIMS};",
        f"constexpr int kConvAxis = {CONV_AXIS};",
        f"constexpr int kConvRank = {CONV_RANK};",
        "",
        "// OpData bytes.",
        f"constexpr size_t kSpillOpDataBytes = {SPILL_OPDATA_BYTES};",
        f"constexpr size_t kFetchingHeaderBytes = {FETCHING_HEADER_BYTES};",
        f"constexpr size_t kFetchingConvHeaderBytes = {FETCHING_CONV_HEADER_BYTES};",
        f"constexpr size_t kFetchedOperandBytes = {FETCHED_FIXED_BYTES} + {FETCHED_POINTERS} * sizeof(void*);",
        f"constexpr size_t kPerChannelBytes = {PER_CHANNEL_BYTES};",
        f"constexpr size_t kBlockHeaderBytes = {BLOCK_HEADER_BYTES};",
        f"constexpr size_t kStreamChainOpDataBytes = {STREAM_CHAIN_OPDATA_BYTES};",
        f"constexpr size_t kStreamTensorBytes = {STREAM_TENSOR_BYTES};",
        f"constexpr size_t kStreamScheduleTensorBytes = {STREAM_SCHEDULE_TENSOR_BYTES};",
        f"constexpr size_t kStreamStageBytes = {STREAM_STAGE_BYTES};",
        f"constexpr size_t kStreamEdgeBytes = {STREAM_EDGE_BYTES};",
        f"constexpr size_t kSpillStreamBytes = {SPILL_STREAM_BYTES};",
        f"constexpr size_t kStreamInt32PerTensor = {STREAM_INT32_PER_TENSOR};",
        f"constexpr size_t kStreamInt32PerStage = {STREAM_INT32_PER_STAGE};",
        f"constexpr int kStreamMaxStageInputs = {STREAM_MAX_STAGE_INPUTS};",
        f"constexpr size_t kStreamLookupTableBytes = {STREAM_LOOKUP_TABLE_BYTES};",
        "",
        "// StreamChain: the stages it computes, and which of a stage's inputs are activations.",
        "enum class StageOp : int32_t {",
    ]
    ops = list(STREAM_STAGE_OPS)
    out += [
        f"  k{''.join(p.capitalize() for p in name.split('_'))} = {k},"
        for k, name in enumerate(ops)
    ]
    out += ["  kUnknown = -1,", "};", "", "inline StageOp ParseStageOp(const char* name) {"]
    for name in ops:
        out.append(
            f'  if (std::strcmp(name, "{name}") == 0) return StageOp::k{"".join(p.capitalize() for p in name.split("_"))};'
        )
    out += [
        "  return StageOp::kUnknown;",
        "}",
        "",
        "// Whether input k of a stage is an activation (else a constant: filter, bias, shape).",
        "inline bool IsActivationInput(StageOp op, int k) {",
        "  switch (op) {",
    ]
    for name, positions in STREAM_STAGE_OPS.items():
        cname = "k" + "".join(p.capitalize() for p in name.split("_"))
        cond = "true" if positions is None else " || ".join(f"k == {p}" for p in positions)
        out.append(f"    case StageOp::{cname}: return {cond};")
    out += [
        "    default: return false;",
        "  }",
        "}",
        "",
        "// Whether a stage requantizes per output channel (persistent multiplier and shift).",
        "inline bool PerChannelStage(StageOp op) {",
        "  return "
        + " || ".join(
            f"op == StageOp::k{''.join(p.capitalize() for p in n.split('_'))}"
            for n in STREAM_PER_CHANNEL_OPS
        )
        + ";",
        "}",
        "",
        "// Whether a stage looks elements up in a persistent int8 table (kStreamLookupTableBytes in the pool).",
        "inline bool LookupTableStage(StageOp op) {",
        "  return "
        + " || ".join(
            f"op == StageOp::k{''.join(p.capitalize() for p in n.split('_'))}"
            for n in STREAM_LOOKUP_TABLE_OPS
        )
        + ";",
        "}",
        "",
        "// QUANTIZE stages: the (input, output) types computed.",
        "inline bool StreamQuantizeTypes(TfLiteType in, TfLiteType out) {",
        "  return "
        + " ||\n         ".join(
            f"(in == {_TFLITE_TYPE[a]} && out == {_TFLITE_TYPE[b]})"
            for a, b in STREAM_QUANTIZE_TYPES
        )
        + ";",
        "}",
        "",
        "// DEQUANTIZE stages: the (input, output) types computed.",
        "inline bool StreamDequantizeTypes(TfLiteType in, TfLiteType out) {",
        "  return "
        + " ||\n         ".join(
            f"(in == {_TFLITE_TYPE[a]} && out == {_TFLITE_TYPE[b]})"
            for a, b in STREAM_DEQUANTIZE_TYPES
        )
        + ";",
        "}",
        "",
        "// Bytes per element of the types Spill and Fetching move (0: not allowed).",
        "inline size_t ElementBytes(TfLiteType type) {",
        "  switch (type) {",
    ]
    for t, n in ELEMENT_BYTES.items():
        out.append(f"    case {_TFLITE_TYPE[t]}: return {n};")
    out += [
        "    default: return 0;",
        "  }",
        "}",
        "",
        "// FetchingConv2D: the activation/filter type pairs it computes.",
        "inline bool ConvTypes(TfLiteType activation, TfLiteType filter) {",
        "  return "
        + " ||\n         ".join(
            f"(activation == {_TFLITE_TYPE[a]} && filter == {_TFLITE_TYPE[f]})"
            for a, f in CONV_TYPES
        )
        + ";",
        "}",
        "",
        "// FetchingConv2D: the bias types each activation type takes.",
        "inline bool ConvBiasType(TfLiteType activation, TfLiteType bias) {",
        "  return "
        + " ||\n         ".join(
            f"(activation == {_TFLITE_TYPE[a]} && bias == {_TFLITE_TYPE[b]})"
            for a, bs in CONV_BIAS_TYPES.items()
            for b in bs
        )
        + ";",
        "}",
        "",
        "}  // namespace contract",
        "}  // namespace tinyseg_ops",
        "}  // namespace tflite",
        "",
        "#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--header"]:
        print(
            "usage: python -m tinyseg_plugin.customops --header > tflm_ops/kernels/tinyseg_contract.h",
            file=sys.stderr,
        )
        sys.exit(2)
    sys.stdout.write(header())
