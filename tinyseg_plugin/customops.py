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

from dataclasses import dataclass, field

from flatbuffers import flexbuffers

from .errors import TinySegError

SPILL = "Spill"
FETCHING = "Fetching"
FETCHING_CONV_2D = "FetchingConv2D"
TINYSEG_OPS = (SPILL, FETCHING, FETCHING_CONV_2D)
CONTRACT_VERSION = 1

BLOCK_BYTES = 1024  # codec block size the optimizer asks for
BLOCK_HEADER_BYTES = 8  # tflm_ops/core codec: header of one encoded block
MARKER_NAME = "tinyseg/transpose_conv_scratch"

PADDING = {0: "SAME", 1: "VALID"}
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}


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


BIAS_TYPES = {0: "NONE", 2: "INT32", 4: "INT64"}  # schema TensorType of Conv2DOptions.quantized_bias_type


@dataclass(frozen=True)
class FetchingConv2DOptions:
    fetching: FetchingOptions
    conv: ConvParams = field(default_factory=ConvParams)
    band_rows: int = 1
    quantized_bias_type: str = "NONE"  # one of BIAS_TYPES' values


def is_tinyseg_op(op) -> bool:
    return op.opcode in TINYSEG_OPS


# ---------------------------------------------------------------- encoding


def _fetching_map(o: FetchingOptions) -> dict:
    return {
        "version": o.version, "axis": o.axis, "operands": o.operands, "block": o.block,
        "fetched": [{"position": f.position, "slot": f.slot, "shape": list(f.shape)} for f in o.fetched],
    }


def encode(options: SpillOptions | FetchingOptions | FetchingConv2DOptions) -> bytes:
    """FlexBuffers bytes for an operator's custom_options."""
    if isinstance(options, SpillOptions):
        m = {"version": options.version, "slot": options.slot, "block": options.block}
    elif isinstance(options, FetchingOptions):
        m = _fetching_map(options)
    else:
        m = _fetching_map(options.fetching)
        c = options.conv
        m.update({
            "padding": c.padding, "stride_h": c.stride_h, "stride_w": c.stride_w, "dilation_h": c.dilation_h,
            "dilation_w": c.dilation_w, "activation": c.activation, "band_rows": options.band_rows,
            "quantized_bias_type": options.quantized_bias_type,
        })
    return bytes(flexbuffers.Dumps(m))


def _load(op) -> dict:
    if op.custom_options is None:
        raise TinySegError(f"operator {op.index} ({op.opcode}) has no custom options")
    try:
        m = flexbuffers.Loads(bytearray(op.custom_options))
    except Exception:
        raise TinySegError(f"operator {op.index} ({op.opcode}): custom options are not a FlexBuffers map") from None
    if not isinstance(m, dict):
        raise TinySegError(f"operator {op.index} ({op.opcode}): custom options are not a FlexBuffers map")
    if m.get("version") != CONTRACT_VERSION:
        raise TinySegError(f"operator {op.index} ({op.opcode}): contract version {m.get('version')}, this tool speaks {CONTRACT_VERSION}")
    return m


def _fetching(m: dict) -> FetchingOptions:
    return FetchingOptions(
        axis=int(m["axis"]), operands=int(m["operands"]), block=int(m["block"]),
        fetched=tuple(Fetched(int(f["position"]), int(f["slot"]), tuple(int(d) for d in f["shape"])) for f in m["fetched"]),
    )


def decode(op) -> SpillOptions | FetchingOptions | FetchingConv2DOptions:
    """The options of a TinySeg operator (an Operator of graph.py)."""
    m = _load(op)
    try:
        if op.opcode == SPILL:
            return SpillOptions(slot=int(m["slot"]), block=int(m["block"]))
        if op.opcode == FETCHING:
            return _fetching(m)
        if op.opcode == FETCHING_CONV_2D:
            conv = ConvParams(str(m["padding"]), int(m["stride_h"]), int(m["stride_w"]), int(m["dilation_h"]),
                              int(m["dilation_w"]), str(m["activation"]))
            bias_type = str(m.get("quantized_bias_type", "NONE"))
            if bias_type not in BIAS_TYPES.values():
                raise ValueError(f"quantized_bias_type {bias_type!r}")
            return FetchingConv2DOptions(_fetching(m), conv, int(m["band_rows"]), bias_type)
    except (KeyError, TypeError, ValueError) as exc:
        raise TinySegError(f"operator {op.index} ({op.opcode}): malformed options ({exc})") from None
    raise TinySegError(f"operator {op.index}: {op.opcode} is not a TinySeg operator")


# ---------------------------------------------------------------- memory each kernel asks for


def staging_bytes(block: int) -> int:
    """One encoded block: what Spill and the fetching kernels stage between the codec and storage."""
    return block + BLOCK_HEADER_BYTES


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
    if isinstance(o, SpillOptions):
        return [staging_bytes(o.block)]
    if isinstance(o, FetchingOptions):
        return [staging_bytes(o.block)]
    return [band_buffer_bytes(graph, op, o), staging_bytes(o.fetching.block)]


def persistent_bytes(graph, op, pointer_bytes: int) -> int:
    """OpData each kernel keeps (see docs/custom_ops.md), rounded to 16 bytes."""
    o = decode(op)
    if isinstance(o, SpillOptions):
        return 16
    per_fetched = 16 + 2 * pointer_bytes
    if isinstance(o, FetchingOptions):
        return _align(32 + per_fetched * len(o.fetched))
    channels = graph.tensors[op.outputs[0]].shape[-1]
    return _align(64 + per_fetched * len(o.fetching.fetched)) + 2 * _align(4 * channels)


def _align(n: int) -> int:
    return (n + 15) // 16 * 16


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
