"""The memory of TinySeg's own kernels (Spill, Fetching, FetchingConv2D, StreamChain) and of a
TRANSPOSE_CONV narrowed by its scratch marker: the scratch each requests in Prepare and the
persistent bytes each keeps, as the C++ kernels allocate them (docs/custom_ops.md). The same for
every kernel set: ``KernelRules`` routes these operators here."""

from __future__ import annotations

from typing import Sequence

from ...contract.customops import (
    BLOCK_HEADER_BYTES,
    FETCHED_FIXED_BYTES,
    FETCHED_POINTERS,
    FETCHING_CONV_HEADER_BYTES,
    FETCHING_HEADER_BYTES,
    PER_CHANNEL_BYTES,
    SPILL_OPDATA_BYTES,
    STREAM_CHAIN_OPDATA_BYTES,
    STREAM_WHOLE_TYPES,
    ConvParams,
    FetchingConv2DOptions,
    FetchingOptions,
    ScratchMarker,
    SpillOptions,
    StreamChainOptions,
    decode,
    stream_chain_body_parts,
    whole_index,
)
from ...ir.graph import Tensor
from ..align import align_up


def fetched_operand_bytes(pointer_bytes: int) -> int:
    return FETCHED_FIXED_BYTES + FETCHED_POINTERS * pointer_bytes


def staging_bytes(block: int) -> int:
    """One encoded block: what Spill and the fetching kernels stage between the codec and storage."""
    return block + BLOCK_HEADER_BYTES


def stream_chain_scratch(o: StreamChainOptions) -> list[int]:
    """A streamed chain's scratch: one buffer for every ring and, per spilled tensor, the block
    its rows collect in before the codec encodes it; then the member operators' own scratch
    (shared: one runs at a time). Row streams need no staging block: SpillStream programs from
    its own units and FetchRange decodes into the ring."""
    first = o.ring_bytes + o.spilled_count * o.block
    return ([first] if first else []) + ([o.op_scratch] if o.op_scratch else [])


def band_input_rows(conv: ConvParams, filter_h: int, band_rows: int) -> int:
    return (filter_h - 1) * conv.dilation_h + 1 + conv.stride_h * (band_rows - 1)


def band_buffer_bytes(graph, op, o: FetchingConv2DOptions) -> int:
    """The band of the virtual concatenation (all input channels) that one step of FetchingConv2D
    convolves: rows x input width x input channels, capped at the input height."""
    filt = graph.tensors[op.inputs[-2]]
    _, in_h, in_w, _ = o.fetching.fetched[0].shape
    rows = min(band_input_rows(o.conv, filt.shape[1], o.band_rows), in_h)
    return rows * in_w * filt.shape[3] * graph.tensors[op.outputs[0]].itemsize


def scratch_requests(graph, op, kernel_set: str) -> list[int]:
    """Scratch buffers each TinySeg kernel requests in Prepare, in order (same for every kernel set)."""
    o = decode(op, graph.memo.decoded)
    if isinstance(o, StreamChainOptions):
        return stream_chain_scratch(o)
    if isinstance(o, SpillOptions):
        return [staging_bytes(o.block)]
    if isinstance(o, FetchingOptions):
        return [staging_bytes(o.block)]
    return [band_buffer_bytes(graph, op, o), staging_bytes(o.fetching.block)]


def persistent_bytes(graph, op, pointer_bytes: int) -> int:
    """OpData each kernel keeps (see docs/custom_ops.md), each allocation rounded to 16 bytes."""
    o = decode(op, graph.memo.decoded)
    if isinstance(o, StreamChainOptions):
        # The planning form (the chain search) has no body: it carries the body's bytes, which
        # stream_body_parts counted from the body before it was left out.
        body = sum(stream_chain_parts(graph, op).values()) if o.stages else o.body_bytes
        return align_up(STREAM_CHAIN_OPDATA_BYTES) + align_up(body)
    if isinstance(o, SpillOptions):
        return align_up(SPILL_OPDATA_BYTES)
    per_fetched = fetched_operand_bytes(pointer_bytes)
    if isinstance(o, FetchingOptions):
        return align_up(FETCHING_HEADER_BYTES + per_fetched * len(o.fetched))
    channels = graph.tensors[op.outputs[0]].shape[-1]
    return align_up(
        FETCHING_CONV_HEADER_BYTES + per_fetched * len(o.fetching.fetched)
    ) + 2 * align_up(PER_CHANNEL_BYTES * channels)


def stream_chain_parts(graph, op) -> dict[str, int]:
    """A StreamChain's persistent block by part (customops.stream_chain_body_parts), before the
    16-byte rounding; the OpData (STREAM_CHAIN_OPDATA_BYTES) is allocated beside it."""
    inputs = [graph.tensors[t] if t >= 0 else None for t in op.inputs]
    return stream_body_parts(
        decode(op, graph.memo.decoded), inputs, [graph.tensors[t] for t in op.outputs]
    )


def stream_body_parts(
    o: StreamChainOptions, inputs: Sequence[Tensor | None], outputs: Sequence[Tensor]
) -> dict[str, int]:
    """The persistent block of a StreamChain whose body is ``o``, by part, from the tensors of its
    node (``inputs``, None where omitted, and ``outputs``). The one count of it: the planner's
    (``stream_chain_parts``, on a rewritten graph) and the chain search's, which counts each
    candidate chain from its body before it leaves the body out (passes/stream.py)."""
    shapes = [tuple(x.shape) if x is not None else () for x in [*inputs, *outputs]]
    shapes += [t.shape for t in o.tensors]
    channels = [
        shapes[st.outputs[0]][-1] if st.outputs and shapes[st.outputs[0]] else 0 for st in o.stages
    ]
    constants = frozenset(k for k, x in enumerate(inputs) if x is not None and x.is_constant)
    whole = _whole_operands(inputs, o, constants)
    return stream_chain_body_parts(o, channels, len(inputs), len(outputs), constants, whole)


def _whole_operands(
    inputs: Sequence[Tensor | None], o: StreamChainOptions, constants: frozenset[int]
) -> frozenset[tuple[int, int]]:
    """(stage, local id) of the MUL operands the kernel reads whole, without a schedule edge: a
    one-pixel input of the operator (as tinyseg_stream_body.cc WholeInput sees its tensors)."""

    def candidate(t: int) -> bool:
        if t >= len(inputs) or inputs[t] is None or t in constants:
            return False
        x = inputs[t]
        return (
            x.dtype in STREAM_WHOLE_TYPES
            and len(x.shape) == 4
            and x.shape[1] == 1
            and x.shape[2] == 1
            and x.shape[3] > 0
        )

    return frozenset(
        (k, st.inputs[j])
        for k, st in enumerate(o.stages)
        if (j := whole_index(st.op, st.inputs, candidate, constants.__contains__)) >= 0
    )


def transpose_conv_scratch(graph, op, marker: ScratchMarker) -> list[int]:
    out = graph.tensors[op.outputs[0]]
    if marker.accumulator == "INT16":
        return [out.elements * 2]
    rows = min(max(marker.band_rows, 1), out.shape[1])
    return [rows * out.shape[2] * out.shape[3] * 4]
