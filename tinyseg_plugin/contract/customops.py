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

import array
import math
from dataclasses import dataclass, field

from flatbuffers import flexbuffers

from ..errors import TinySegError
from . import flexread, stages

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
SECTOR_BYTES = 4096  # erase unit of a RAM region (SectorInfo per 4 KB: 12 B each on Cortex-M7)


def slot_region_bytes(raw: int) -> int:
    """The bytes of a region one slot of ``raw`` bytes needs in SpillManager's ring log: its
    encoded blocks (a header per codec block, stored raw at worst) in whole sectors, and one sector
    more for where the ring's write position starts inside a sector. The one count: placement
    (memory/placement.py) and the storage header (deploy/storage_header.py) size regions by it."""
    encoded = raw + -(-raw // BLOCK_BYTES) * BLOCK_HEADER_BYTES
    return (-(-encoded // SECTOR_BYTES) + 1) * SECTOR_BYTES


MARKER_NAME = "tinyseg/transpose_conv_scratch"

PADDING = {0: "SAME", 1: "VALID"}
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}

# ---------------------------------------------------------------- the contract's numbers, defined once
# The C++ kernels read these from tflm_ops/kernels/tinyseg_contract.h, which is generated from this
# module (`python -m tinyseg_plugin.contract.header`); tests/test_contract.py fails when the
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
MAX_REGIONS = 8  # storage regions a Runtime holds (tinyseg_runtime.h Runtime::regions)
# Row sources and row sinks a Runtime holds (Runtime::sources, Runtime::sinks): StreamChain's
# "source" and "sink" entries name one by index 0..MAX_ROW_STREAMS-1.
MAX_ROW_STREAMS = 8

INT_LIMITS: dict[str, tuple[int, int]] = {
    "slot": (0, INT32_MAX),
    "region": (0, MAX_REGIONS - 1),
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
    # StreamChain's planning figures ("spilled"/"fetched" there are counts: StreamChainOptions.
    # spilled_count/fetched_count; in Fetching and FetchingConv2D "fetched" lists the fetched operands)
    "ring_bytes": (0, INT32_MAX),
    "op_scratch": (0, INT32_MAX),
    "spilled": (0, MAX_OPERANDS),
    "fetched": (0, MAX_OPERANDS),
}
CONV_AXIS = 3  # FetchingConv2D concatenates NHWC operands along channels
CONV_RANK = 4

# The keys of each operator's FlexBuffers map (quantized_bias_type is optional). A slot lives in
# storage region ``region`` of the Runtime (optional, 0 when absent: the Runtime's first region):
# Spill's "region", each fetched entry's "region", and StreamChain's "slot_regions", [slot, region]
# pairs for the slots it spills or fetches outside region 0.
KEYS: dict[str, tuple[str, ...]] = {
    SPILL: ("version", "slot", "block", "region"),
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
FETCHED_KEYS = ("position", "slot", "shape", "region")
STREAM_CHAIN_KEYS = ("version", "ring_bytes", "op_scratch", "spilled", "fetched", "block")
# The StreamChainOptions field behind each of those keys where the names differ: the contract keys
# stay as written in .tflite files; in Python a count is named a count.
STREAM_CHAIN_FIELDS = {"spilled": "spilled_count", "fetched": "fetched_count"}
STREAM_BODY_KEYS = (
    "stages",
    "tensors",
    "spill",
    "fetch",
    "rings",
    "slot_regions",
    "source",
    "sink",
    "tokens",
)
STREAM_STAGE_KEYS = ("op", "version", "inputs", "outputs", "options", "fields", "quant")
# "quant" (optional, STREAM_PER_CHANNEL_OPS stages on int8 or int16 rows): TFLM's per-channel
# requantization computed offline (contract/requant.py), multiplier[C] then shift[C] as a typed
# vector of int32, read in place from the model; absent, Prepare computes it into the persistent
# block. The limits every entry keeps (QuantizeMultiplier's range, its shift as single rounding
# saturates it):
QUANT_MULTIPLIER_LIMITS = (0, INT32_MAX)
QUANT_SHIFT_LIMITS = (-31, 30)
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
    "keepDims",
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
    "keepDims": (0, 1),
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
    "keepDims": 0,
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
# The key under which the planning form (StreamChainOptions without a body) carries the bytes its
# body takes; no kernel reads it (the planning form is never written to a file).
PLANNED_BODY_KEY = "body_bytes"

# The stages the StreamChain kernel computes are the records of contract/stages/ (one per operator
# and row type); the tables below are read from them. The chain search emits only chains of these
# (stream_stage_problem), the estimate (`analyze --stream`) plans every row-local operator.
# Each operator with a stage, and which of its inputs are activations (rows streamed or read from
# the arena; None: all of them); the others are constants (filter, bias, output shape).
STREAM_STAGE_OPS: dict[str, tuple[int, ...] | None] = {
    op: s.activations for op, s in stages.by_op().items()
}


def _stage_constants(rows: str) -> dict[str, tuple[tuple[str | None, ...], ...]]:
    """The constant inputs each stage on ``rows`` takes, by type, in order (None: an omitted
    optional input); a stage without constants is absent."""
    return {s.op: s.constants for s in stages.STAGES if s.rows == rows and s.constants != ((),)}


def _same_type_ops(rows: str) -> tuple[str, ...]:
    """The operators computed on ``rows`` whose inputs and output are of that type."""
    return tuple(s.op for s in stages.STAGES if s.rows == rows and not s.converts)


STREAM_STAGE_CONSTANTS = _stage_constants("quantized")
# Stages with per-channel requantization (multiplier and shift per output channel, kept persistent).
STREAM_PER_CHANNEL_OPS = tuple(op for op, s in stages.by_op().items() if s.per_channel)
# Stages that look each int8 element up in a 256-entry table Prepare fills from the quantization
# (as TFLM's elu.cc keeps one in its OpData), kept persistent in the same int32 pool.
STREAM_LOOKUP_TABLE_OPS = tuple(op for op, s in stages.by_op().items() if s.lookup_table)
STREAM_LOOKUP_TABLE_BYTES = 256  # one int8 output per int8 input value
# Stages that accumulate: they read each input row once and write their one-pixel output after the
# last (MEAN over height and width, a squeeze-and-excitation's squeeze). Their schedule steps are
# the input's rows, their per-channel sums (int32 or float, 4 bytes a channel) sit at the end of
# op_scratch, and one ends its chain (a node output, never a ring).
STREAM_ACCUMULATING_OPS = tuple(op for op, s in stages.by_op().items() if s.accumulates)
STREAM_ACCUMULATOR_BYTES = 4  # per channel: an int32 sum (int8 rows) or a float sum (float32)
# The (input, output) types of the QUANTIZE stages: between int8 and uint8, from float32 to int8 or
# int16 (a chain starting at a float32 tensor), between int8 and int16 (contract/stages/activation.py).
STREAM_QUANTIZE_TYPES = stages.conversions("QUANTIZE")
# Stages the kernel also computes on float32 rows (float32 inputs and output), with TFLM's
# reference float arithmetic, and their constant inputs (float32 filter and bias).
STREAM_FLOAT32_STAGE_OPS = _same_type_ops("float32")
STREAM_FLOAT32_STAGE_CONSTANTS = _stage_constants("float32")
# Stages the kernel also computes on int16 rows with int8 weights (TFLM's "16x8" quantization),
# with TFLM's reference int16 arithmetic, and their constant inputs (contract/stages/conv.py says
# which biases and why).
STREAM_INT16_STAGE_OPS = _same_type_ops("int16")
STREAM_INT16_STAGE_CONSTANTS = _stage_constants("int16")
# DEQUANTIZE stages: int8 or int16 to float32; its float32 rows are a chain output or float32
# stages' input.
STREAM_DEQUANTIZE_TYPES = stages.conversions("DEQUANTIZE")
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
# per chain-local tensor but the plain constants (stream_plain_constants): geometry, quantization,
# its ring (a RowRing)
STREAM_TENSOR_BYTES = 88
STREAM_SCHEDULE_TENSOR_BYTES = 16  # per tensor: chain_schedule.h ChainTensor
STREAM_STAGE_BYTES = 112  # per stage: operator parameters
STREAM_EDGE_BYTES = 32  # per (stage, distinct activation input): chain_schedule.h ChainEdge
SPILL_STREAM_BYTES = 208  # per spilled tensor: spill_manager.h SpillStream
STREAM_INT32_PER_TENSOR = 3  # the schedule's rows done and rows held; where its record is
STREAM_INT32_PER_STAGE = 1  # chain_schedule.h ChainStage
PER_CHANNEL_BYTES = 4  # FetchingConv2D: one int32 multiplier and one int32 shift per output channel


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
    region: int = 0  # the Runtime's storage region that holds the slot


@dataclass(frozen=True)
class SpillOptions:
    slot: int
    block: int = BLOCK_BYTES
    version: int = CONTRACT_VERSION
    region: int = 0  # the Runtime's storage region that holds the slot


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
    quant: tuple[int, ...] | None = None  # multiplier[C] then shift[C]; None: computed in Prepare


@dataclass(frozen=True)
class StreamChainOptions:
    """A streamed chain: the planner's figures (its rings, its members' largest row-step scratch,
    how many tensors it writes to storage and reads from it row by row) and its body, the
    program the StreamChain kernel runs (docs/custom_ops.md)."""

    ring_bytes: int
    op_scratch: int = 0  # the largest scratch a member operator needs for one row step
    spilled_count: int = 0  # tensors written row by row to storage (contract key "spilled")
    fetched_count: int = 0  # tensors read row by row from storage (contract key "fetched")
    block: int = BLOCK_BYTES
    version: int = CONTRACT_VERSION
    # The body: what the chain computes (the kernel's program; lowering rebuilds it as builtins).
    stages: tuple[StreamStage, ...] = ()
    tensors: tuple[StreamTensor, ...] = ()
    spill: tuple[tuple[int, int], ...] = ()  # (local id, slot): written row by row to storage
    fetch: tuple[tuple[int, int], ...] = ()  # (local id, slot): read row by row from storage
    rings: tuple[tuple[int, int], ...] = ()  # (local id, rows its ring holds)
    # (slot, region) for each slot of spill/fetch held outside the Runtime's region 0
    slot_regions: tuple[tuple[int, int], ...] = ()
    # (local id, graph input index): read row by row from the Runtime's row source of that index
    source: tuple[tuple[int, int], ...] = ()
    # (local id, graph output index): handed row by row to the Runtime's row sink of that index
    sink: tuple[tuple[int, int], ...] = ()
    # local ids of node inputs and outputs that carry no data (not read; outputs written zeros):
    # the one-element graph input and output a chain that sources or sinks keeps for TFLM
    tokens: tuple[int, ...] = ()
    # The planning form only (no body; the chain search's candidates, never written to a file):
    # the bytes of the persistent block the body takes (memory/kernels/tinyseg.py
    # stream_body_parts), so the planner's tail counts the chain's tables.
    body_bytes: int = 0

    def region_of(self, slot: int) -> int:
        """The storage region of one of the chain's slots."""
        return dict(self.slot_regions).get(slot, 0)


def is_tinyseg_op(op) -> bool:
    return op.opcode in PLANNED_OPS


# ---------------------------------------------------------------- encoding


def _fetching_map(o: FetchingOptions) -> dict:
    return {
        "version": o.version,
        "axis": o.axis,
        "operands": o.operands,
        "block": o.block,
        "fetched": [_fetched_map(f) for f in o.fetched],
    }


def _fetched_map(f: Fetched) -> dict:
    m = {"position": f.position, "slot": f.slot, "shape": list(f.shape)}
    if f.region:  # absent means region 0: plans in one region encode as before
        m["region"] = f.region
    return m


def encode(
    options: SpillOptions | FetchingOptions | FetchingConv2DOptions | StreamChainOptions,
    memo: dict | None = None,
) -> bytes:
    """FlexBuffers bytes for an operator's custom_options. ``memo`` (a run's ``Memo.encoded``,
    ir/graph.py) keeps what was encoded: the options are frozen, and the chain search encodes the
    same chains many times."""
    if memo is None:
        return _encode(options)
    data = memo.get(options)
    if data is None:
        data = memo[options] = _encode(options)
    return data


def _encode(
    options: SpillOptions | FetchingOptions | FetchingConv2DOptions | StreamChainOptions,
) -> bytes:
    if isinstance(options, StreamChainOptions):
        m = {k: getattr(options, STREAM_CHAIN_FIELDS.get(k, k)) for k in STREAM_CHAIN_KEYS}
        if not options.stages:  # planning figures only (the chain search)
            return bytes(flexbuffers.Dumps({**m, PLANNED_BODY_KEY: options.body_bytes}))
        m["stages"] = [
            {
                "op": st.op,
                "version": st.version,
                "inputs": list(st.inputs),
                "outputs": list(st.outputs),
                "options": st.options or "",
                "fields": dict(st.fields),
                **({} if st.quant is None else {"quant": array.array("i", st.quant)}),
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
        if options.slot_regions:
            m["slot_regions"] = [list(pair) for pair in options.slot_regions]
        for key in ("source", "sink"):  # absent when empty: chains without them encode as before
            if getattr(options, key):
                m[key] = [list(pair) for pair in getattr(options, key)]
        if options.tokens:
            m["tokens"] = list(options.tokens)
    elif isinstance(options, SpillOptions):
        m = {"version": options.version, "slot": options.slot, "block": options.block}
        if options.region:
            m["region"] = options.region
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
        m = flexread.loads(data)
    except Exception:  # a hostile buffer: offsets outside it, bad widths, bad text
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


def _region(m: dict) -> int:
    """A slot's storage region (absent: 0)."""
    return _int(m, "region") if "region" in m else 0


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
                _int(f, "position"),
                _int(f, "slot"),
                tuple(_int({"dim": d}, "dim") for d in shape),
                _region(f),
            )
        )
    positions = [f.position for f in fetched]
    if any(p >= operands for p in positions) or len(set(positions)) != len(positions):
        raise ValueError("fetched positions must be distinct and below `operands`")
    return FetchingOptions(
        axis=_int(m, "axis"), operands=operands, block=_int(m, "block"), fetched=tuple(fetched)
    )


INT32_MIN = -(1 << 31)


def _whole(v: object, what: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    """An integer of a StreamChain body within lo..hi (the C++ side reads each as an int32): a
    float, an infinity, a NaN or a 64-bit figure is refused here, before any arithmetic sees it."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{what} {_short(v)} is not an integer")
    if not lo <= v <= hi:
        raise ValueError(f"{what} {v} is outside {lo}..{hi}")
    return v


def _real(v: object, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{what} {_short(v)} is not a number")
    return float(v)


def _short(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _body_tensor(t: dict) -> StreamTensor:
    """One body tensor: every dimension 1..INT32_MAX (INT_LIMITS["dim"])."""
    lo, hi = INT_LIMITS["dim"]
    shape = t["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise ValueError(f"a body tensor's shape must be a list of at most {MAX_DIMS} dimensions")
    return StreamTensor(
        str(t["name"]),
        str(t["type"]),
        tuple(_whole(d, "a body tensor dimension", lo, hi) for d in shape),
        tuple(_real(x, "a body tensor scale") for x in t["scale"]),
        tuple(_whole(z, "a body tensor zero point") for z in t["zero_point"]),
        _whole(t["quantized_dimension"], "a body tensor's quantized_dimension", 0, MAX_DIMS - 1),
    )


def _quant(st: dict) -> tuple[int, ...] | None:
    """A stage's "quant" table: a typed vector of int32, which the kernel reads in place."""
    if "quant" not in st:
        return None
    if not isinstance(st["quant"], flexread.Int32s):
        raise ValueError("a stage's 'quant' must be a typed vector of int32")
    return tuple(st["quant"])


def _planned_body(m: dict) -> int:
    """The planning form's body bytes (0 when absent)."""
    v = m.get(PLANNED_BODY_KEY, 0)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= STREAM_MAX_BODY_BYTES:
        raise ValueError(f"option '{PLANNED_BODY_KEY}' is not a byte count")
    return v


def _stream_chain(m: dict) -> StreamChainOptions:
    numbers = [_int(m, k) for k in STREAM_CHAIN_KEYS[1:]]
    if not any(k in m for k in STREAM_BODY_KEYS):  # planning figures only (the chain search)
        return StreamChainOptions(*numbers, body_bytes=_planned_body(m))
    stages = tuple(
        StreamStage(
            str(st["op"]),
            tuple(_whole(i, "a stage input", -1) for i in st["inputs"]),
            tuple(_whole(o, "a stage output", 0) for o in st["outputs"]),
            str(st["options"]) or None,
            tuple(sorted(dict(st["fields"]).items())),
            _whole(st["version"], "a stage version", 0),
            _quant(st),
        )
        for st in m["stages"]
    )
    tensors = tuple(_body_tensor(t) for t in m["tensors"])
    lists = {k: m[k] for k in ("spill", "fetch", "rings")}
    lists.update({k: m.get(k, []) for k in ("source", "sink")})  # optional
    pairs = {k: tuple((_whole(a, k, 0), _whole(b, k, 0)) for a, b in v) for k, v in lists.items()}
    tokens = tuple(_whole(t, "tokens", 0) for t in m.get("tokens", []))
    regions = tuple(
        (_int({"slot": s}, "slot"), _int({"region": r}, "region"))
        for s, r in m.get("slot_regions", [])
    )
    slots = {s for _, s in pairs["spill"] + pairs["fetch"]}
    if any(s not in slots for s, _ in regions) or len({s for s, _ in regions}) != len(regions):
        raise ValueError("'slot_regions' must name distinct slots the chain spills or fetches")
    return StreamChainOptions(
        *numbers, stages=stages, tensors=tensors, slot_regions=regions, tokens=tokens, **pairs
    )


def decode(
    op, memo: dict | None = None
) -> SpillOptions | FetchingOptions | FetchingConv2DOptions | StreamChainOptions:
    """The options of a TinySeg operator (an Operator of graph.py). ``memo`` (a run's
    ``Memo.decoded``, ir/graph.py) keeps what was decoded, by opcode and bytes: the planner and the
    chain search decode the same options many times, and FlexBuffers decoding is slow in Python.
    The options are frozen dataclasses, so sharing one between operators is safe."""
    data = None if op.custom_options is None else bytes(op.custom_options)
    if memo is None:
        result = _decode(op.opcode, data)
    else:
        key = (op.opcode, data)
        result = memo.get(key)
        if result is None:
            result = memo[key] = _decode(op.opcode, data)
    if isinstance(result, str):
        raise TinySegError(f"operator {op.index} ({op.opcode}){result}")
    return result


def _decode(opcode: str, data: bytes | None):
    """The options, or the reason they are refused (a string)."""
    try:
        m = _load(opcode, data)
    except ValueError as exc:
        return f": {exc}" if data is not None else f" {exc}"
    try:
        if opcode == SPILL:
            return SpillOptions(slot=_int(m, "slot"), block=_int(m, "block"), region=_region(m))
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
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        return f": malformed options ({exc})"
    return ": not a TinySeg operator"


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
    (tinyseg_contract.h); the records of contract/stages/ hold what it computes."""
    if op not in STREAM_STAGE_OPS:
        return f"{op} is not a StreamChain stage"
    positions = STREAM_STAGE_OPS[op]
    if (
        not activations
        or len(activations) > STREAM_MAX_STAGE_INPUTS
        or (positions is not None and len(activations) != len(positions))
    ):
        return f"{op} with {len(activations)} activation inputs"
    problem = _stage_types_problem(op, activations, output) or _stage_constants_problem(
        op, output, constants
    )
    if problem:
        return problem
    if stages.conversions(op):
        if (activations[0], output) not in stages.conversions(op):
            return f"{op} {activations[0]} -> {output}"
        return None
    if stages.rule_of(op) == "pad" and paddings is not None:
        return _paddings_problem(op, paddings)
    return None


def _mixed_rows(op: str, output: str) -> stages.Stage | None:
    """The float32 or int16 record of ``op`` whose inputs and output are ``output`` (None: the
    stage is on int8 rows, or a conversion)."""
    record = stages.same_type(op, output)
    return record if record is not None and record.rows != "quantized" else None


def _stage_types_problem(op: str, activations: list[str], output: str) -> str | None:
    """Activation inputs of the output's type on float32 or int16 rows; int8 otherwise (but a
    conversion's, which its conversions check)."""
    if _mixed_rows(op, output) is not None:
        if any(t != output for t in activations):
            return f"{op} on {'/'.join(activations)} -> {output} (its stages read {output} only)"
        return None
    if not stages.conversions(op) and (output != "INT8" or any(t != "INT8" for t in activations)):
        return (
            f"{op} on {'/'.join(activations)} -> {output} (the kernel's stages are int8, "
            f"float32 for {', '.join(STREAM_FLOAT32_STAGE_OPS)} and int16 for "
            f"{', '.join(STREAM_INT16_STAGE_OPS)})"
        )
    return None


def _stage_constants_problem(op: str, output: str, constants: list[str | None]) -> str | None:
    """Constant inputs of a form its record on the rows takes (int8 rows' unless float32 or int16
    rows); a bias the record refuses with its own reason."""
    record = _mixed_rows(op, output) or stages.find(op, "quantized")
    assert record is not None  # every operator with a stage has an int8 one
    refused = record.refused_bias
    if refused and len(constants) == len(record.constants[0]) and constants[-1] == refused[0]:
        return refused[1]
    if tuple(constants) not in record.constants:
        return f"{op} with constant inputs {constants}"
    return None


def _paddings_problem(op: str, paddings: list[list[int]]) -> str | None:
    """PAD's and PADV2's paddings: NHWC, non-negative, none of the batch."""
    rows = [[int(v) for v in r] for r in paddings]
    if len(rows) != 4 or any(len(r) != 2 for r in rows):
        return f"{op} with paddings {rows} (NHWC only)"
    if any(v < 0 for r in rows for v in r):
        return f"{op} with negative paddings {rows}"
    if any(rows[0]):
        return f"{op} of the batch {rows} (height, width and channels only)"
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


def stream_plain_constants(
    o: StreamChainOptions, constants: frozenset[int] = frozenset()
) -> frozenset[int]:
    """The constant inputs of a StreamChain no stage reads as an activation (filters, biases,
    paddings, alphas): the kernel reads them through the node and gives them no tensor record
    (tinyseg_stream_body.cc PlainConstant). ``constants``: local ids of its constant inputs."""
    read = set()
    for st in o.stages:
        positions = STREAM_STAGE_OPS.get(st.op, ())
        read.update(t for k, t in enumerate(st.inputs) if positions is None or k in positions)
    return frozenset(constants - read - set(o.tokens))


# The types of a MUL operand the kernel may read whole, a one-pixel gate
# (tinyseg_stream_arithmetic.cc WholeCandidate).
STREAM_WHOLE_TYPES = ("INT8", "FLOAT32", "INT16")


def whole_index(op: str, inputs: tuple[int, ...] | list[int], candidate, constant) -> int:
    """Which of a MUL stage's two inputs the kernel reads whole (tinyseg_stream_arithmetic.cc
    WholeIndex): the one-pixel StreamChain input (``candidate(local id)``) whose other operand is
    an activation (not ``constant(local id)``, not omitted) that is no candidate; -1: none."""
    if not stages.reads_whole(op) or len(inputs) != 2:
        return -1
    cand = [t >= 0 and bool(candidate(t)) for t in inputs]
    const = [t < 0 or bool(constant(t)) for t in inputs]
    for k in (0, 1):
        if cand[k] and not cand[1 - k] and not const[1 - k]:
            return k
    return -1


def stream_chain_body_bytes(
    o: StreamChainOptions,
    out_channels: list[int],
    num_inputs: int,
    num_outputs: int,
    constants: frozenset[int] = frozenset(),
    whole: frozenset[tuple[int, int]] = frozenset(),
) -> int:
    """The persistent block StreamChain's Prepare allocates for its tables (tinyseg_stream.cc):
    the sum of ``stream_chain_body_parts``."""
    return sum(
        stream_chain_body_parts(o, out_channels, num_inputs, num_outputs, constants, whole).values()
    )


def stream_chain_body_parts(
    o: StreamChainOptions,
    out_channels: list[int],
    num_inputs: int,
    num_outputs: int,
    constants: frozenset[int] = frozenset(),
    whole: frozenset[tuple[int, int]] = frozenset(),
) -> dict[str, int]:
    """What StreamChain's persistent block holds, in bytes by part: per chain-local tensor (the
    operator's inputs and outputs but its tokens, which have no record, then the body's tensors)
    its schedule entry and, but for the plain constants (``stream_plain_constants``), its record;
    per stage its record; per edge its row map; per spilled tensor its SpillStream; int32 arrays:
    rows done and held per tensor, the schedule's stages, every stage's operands, the outputs
    the schedule pulls (the operator's but its tokens, then the spilled, then the sunk); and
    multiplier and shift per output channel of the requantizing stages without a "quant" table
    (those read theirs from the model), then the lookup table of
    each table stage (ELU), in the same pool.
    ``out_channels``: each stage's output channels; ``constants``: local ids of constant inputs;
    ``whole``: (stage, local id) of MUL operands read whole (no edge, ``whole_index``)."""
    num_local = num_inputs + num_outputs + len(o.tensors) - len(set(o.tokens))
    stages = len(o.stages)
    edges = sum(
        len([t for t in stream_activation_inputs(st, constants) if (k, t) not in whole])
        for k, st in enumerate(o.stages)
    )
    operands = sum(len(st.inputs) for st in o.stages)
    schedule = (
        STREAM_INT32_PER_TENSOR * num_local
        + STREAM_INT32_PER_STAGE * stages
        + operands
        + num_outputs
        - sum(num_inputs <= t < num_inputs + num_outputs for t in o.tokens)
        + len(o.spill)
        + len(o.sink)
    )
    return {
        "tensors": STREAM_TENSOR_BYTES * (num_local - len(stream_plain_constants(o, constants)))
        + STREAM_SCHEDULE_TENSOR_BYTES * num_local,
        "stages": STREAM_STAGE_BYTES * stages,
        "edges": STREAM_EDGE_BYTES * edges,
        "spill streams": SPILL_STREAM_BYTES * len(o.spill),
        "schedule": 4 * schedule,
        "per-channel": 4
        * sum(
            2 * c
            for st, c in zip(o.stages, out_channels)
            if st.op in STREAM_PER_CHANNEL_OPS and st.quant is None
        ),
        "lookup tables": STREAM_LOOKUP_TABLE_BYTES
        * sum(st.op in STREAM_LOOKUP_TABLE_OPS for st in o.stages),
    }


def operand_sources(op, o: "FetchingOptions") -> list["Fetched | int"]:
    """The operand expansion, written once: operand k is the fetched entry whose position is k,
    otherwise the next in-RAM input (of ``op.inputs``, without FetchingConv2D's filter and bias)."""
    ram = list(op.inputs if op.opcode == FETCHING else op.inputs[:-2])
    ram = ram[: max(o.operands - len(o.fetched), 0)]  # the rest: tokens (token_inputs)
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


def token_inputs(op, o: "FetchingOptions") -> list[int]:
    """The inputs of a Fetching or FetchingConv2D after its in-RAM operands (and before
    FetchingConv2D's filter and bias): tokens, zero-element tensors that carry no data and stand
    for the edges from the writers of its fetched slots (transforms/passes/link.py)."""
    ram = list(op.inputs if op.opcode == FETCHING else op.inputs[:-2])
    return [int(t) for t in ram[max(o.operands - len(o.fetched), 0) :]]


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


# RESIZE_BILINEAR stages (int8): TFLM's fixed-point source positions, in 1/1024ths of a row.
BILINEAR_ONE = 1 << 10


def bilinear_scale(in_size: int, out_size: int, align_corners: bool) -> int:
    """TFLM's int8 RESIZE_BILINEAR scale along one axis: input rows per output row times 1024,
    rounded (reference_ops::ResizeBilinearInteger's integer arithmetic)."""
    if align_corners and out_size > 1:
        return (BILINEAR_ONE * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    return (BILINEAR_ONE * in_size + out_size // 2) // out_size


def bilinear_row_rule(
    in_h: int, out_h: int, align_corners: bool, half_pixel: bool
) -> tuple[int, int, int, int, int] | None:
    """(num, den, offset, before, after) of the rows output row y of an int8 RESIZE_BILINEAR reads
    (rows.RowMap).

    TFLM's source position p = y * scale + offset (1/1024ths of a row; offset = scale / 2 - 512
    with half-pixel centres, else 0) reads rows max(p / 1024, 0) and min(ceil(p / 1024), in_h - 1):
    the anchor p // 1024 and the row below it, so the window is two rows. p > -1024 always, so C's
    truncation and the floor agree once clipped at row 0. None where TFLM's int32 positions are 0
    for every row or overflow, or where the last row's lower input lies past the input (TFLM clamps
    only the upper one). The C++ stage (tinyseg_stream_layout.cc PrepareResizeBilinear) computes
    the same and refuses the same."""
    if min(in_h, out_h) < 1 or (align_corners and half_pixel):
        return None
    scale = bilinear_scale(in_h, out_h, align_corners)
    offset = scale // 2 - BILINEAR_ONE // 2 if half_pixel else 0
    if scale < 1 or (out_h - 1) * scale + max(offset, 0) + BILINEAR_ONE > INT32_MAX:
        return None
    if (out_h - 1) * scale + offset >= BILINEAR_ONE * in_h:
        return (
            None  # a scale rounded up: the last row's lower input is past the input (TFLM reads it)
        )
    return scale, BILINEAR_ONE, offset, 0, 1


# RESIZE_BILINEAR stages (float32): TFLM's float source positions (reference_ops::ResizeBilinear).
BILINEAR_FLOAT_MAX_SIZE = 1 << 15  # heights the float rule covers (its int64 arithmetic)
BILINEAR_FLOAT_UNIT = 1 << 20  # the slack's denominator


def bilinear_float_row_rule(
    in_h: int, out_h: int, align_corners: bool, half_pixel: bool
) -> tuple[int, int, int, int, int] | None:
    """(num, den, offset, before, after) of the rows output row y of a float32 RESIZE_BILINEAR
    reads (rows.RowMap).

    TFLM computes the position p' = y * s (half-pixel centres: (y + 0.5) * s - 0.5) in float32,
    s = in_h / out_h (align_corners: (in_h - 1) / (out_h - 1)), and reads rows max(floor(p'), 0)
    and min(ceil(p'), in_h - 1). With s = n / d as a fraction, the exact position is
    (y * 2n + offset) / 2d (offset = n - d with half-pixel centres, else 0), and its floor is the
    anchor. p' lies within a slack of the exact p: 0 when s is dyadic and every value fits
    float32's mantissa (then every operation is exact, whatever the compiler fuses), else
    (in_h + 1) / 2^20, four times the error bound of float32's few roundings there. before and
    after cover [floor(p - slack), ceil(p + slack)] clipped to the input for every row: the two
    rows TFLM blends where the positions are exact, a row more on a side the slack reaches. None
    for sizes past 2^15, align_corners onto one input row, both flags, or a lower row that could
    lie past the input. The C++ stage (tinyseg_stream_float.cc BilinearFloatRule) computes the
    same in the same integers."""
    if (
        min(in_h, out_h) < 1
        or max(in_h, out_h) > BILINEAR_FLOAT_MAX_SIZE
        or (align_corners and half_pixel)
    ):
        return None
    corners = align_corners and out_h > 1
    num, den = (in_h - 1, out_h - 1) if corners else (in_h, out_h)
    if num < 1:
        return None
    g = math.gcd(num, den)
    exact = (den // g) & (den // g - 1) == 0 and 4 * (out_h + 1) * max(num // g, den // g) < 1 << 24
    q = 2 * den * BILINEAR_FLOAT_UNIT
    slack = 0 if exact else 2 * den * (in_h + 1)
    offset = num - den if half_pixel else 0
    before = after = -INT32_MAX - 1
    for y in range(out_h):
        p = (2 * y * num + offset) * BILINEAR_FLOAT_UNIT
        if (p + slack) // q > in_h - 1:
            return None
        lo = max((p - slack) // q, 0)
        hi = min(-((-(p + slack)) // q), in_h - 1)
        anchor = (2 * y * num + offset) // (2 * den)
        before = max(before, anchor - lo)
        after = max(after, hi - anchor)
    return 2 * num, 2 * den, offset, before, after
