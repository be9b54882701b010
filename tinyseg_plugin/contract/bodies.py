"""Every TinySeg operator checked against its graph as its kernel's Prepare checks it, with the C++
kernels' limits (contract/customops.py, generated into tinyseg_contract.h): tinyseg_stream*.cc's
Prepare refuses exactly these StreamChain bodies, tinyseg_fetching_conv.cc these FetchingConv2D
operators. Loading a model, `verify` and the lowering call validate_graph, so a hostile model is
refused with one line before anything runs it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

from .. import deadline
from ..errors import TinySegError
from . import stages
from .customops import (
    ELEMENT_BYTES,
    INT16_MAX,
    INT32_MAX,
    INT_LIMITS,
    MAX_ROW_STREAMS,
    QUANT_MULTIPLIER_LIMITS,
    QUANT_SHIFT_LIMITS,
    STREAM_ACCUMULATING_OPS,
    STREAM_ACCUMULATOR_BYTES,
    STREAM_FIELD_DEFAULTS,
    STREAM_FIELD_LIMITS,
    STREAM_MAX_BODY_BYTES,
    STREAM_MAX_SCALE,
    STREAM_MAX_STAGE_INPUTS,
    STREAM_MIN_SCALE,
    STREAM_PER_CHANNEL_OPS,
    STREAM_STAGE_OPS,
    STREAM_WHOLE_TYPES,
    TINYSEG_OPS,
    ZERO_POINT_LIMITS,
    Fetched,
    FetchingConv2DOptions,
    FetchingOptions,
    SpillOptions,
    StreamChainOptions,
    StreamStage,
    StreamTensor,
    bilinear_float_row_rule,
    bilinear_row_rule,
    decode,
    operand_sources,
    stream_chain_body_bytes,
    token_inputs,
)
from .customops import (
    whole_index as customops_whole_index,
)
from .requant import requantization
from .rows import RowMap
from .stages import Stage


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
    sourced: bool = False  # read from a Runtime row source ("source")
    sunk: bool = False  # handed to a Runtime row sink ("sink")
    token: bool = False  # a node input or output that carries no data ("tokens")


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
    if kind == "output" and len(shape) == 2 and shape[0] == 1:
        shape = (1, 1, 1, shape[1])  # a MEAN's 1 x C (keep_dims false): one row of C values
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


def whole_candidate(op: str, x: _Local) -> bool:
    """A MUL operand the kernel may read whole from the arena rather than row by row
    (tinyseg_stream_arithmetic.cc WholeCandidate): a StreamChain input of one pixel, 1 x 1 x 1 x C,
    such as a squeeze-and-excitation gate broadcast over every row."""
    return (
        stages.reads_whole(op)
        and x.kind == "input"
        and not x.constant
        and x.row_bytes > 0
        and x.dtype in STREAM_WHOLE_TYPES
        and x.height == 1
        and x.width == 1
    )


def whole_index(op: str, loc: list[_Local], inputs: tuple[int, ...] | list[int]) -> int:
    """Which of a MUL stage's two inputs is read whole (customops.whole_index over
    ``whole_candidate``); -1: none."""
    return customops_whole_index(
        op, inputs, lambda t: whole_candidate(op, loc[t]), lambda t: loc[t].constant
    )


def _constant(graph, loc: list[_Local], lid: int, what: str):
    """The graph tensor behind a constant input of a stage (a StreamChain input)."""
    if lid < 0 or loc[lid].kind != "input" or loc[lid].graph_index < 0:
        raise _BodyError(f"{what} is not one of the StreamChain's inputs")
    return graph.tensors[loc[lid].graph_index]


def _check_quant(name: str, st: StreamStage, x: _Local, out: _Local, flt) -> None:
    """A stage's "quant" table as the kernel's Prepare takes it: on int8 or int16 rows only, of
    2 * channels entries within the contract's limits, equal to TFLM's own arithmetic."""
    if st.quant is None:
        return
    if out.dtype == "FLOAT32":
        raise _BodyError(f"{name} on float32 rows has a 'quant' table (it requantizes nothing)")
    if len(st.quant) != 2 * out.channels:
        raise _BodyError(
            f"{name}'s 'quant' table has {len(st.quant)} entries "
            f"(multiplier and shift for {out.channels} channels: {2 * out.channels})"
        )
    (m_lo, m_hi), (s_lo, s_hi) = QUANT_MULTIPLIER_LIMITS, QUANT_SHIFT_LIMITS
    c = out.channels
    if not all(m_lo <= m <= m_hi for m in st.quant[:c]) or not all(
        s_lo <= v <= s_hi for v in st.quant[c:]
    ):
        raise _BodyError(
            f"{name}'s 'quant' table leaves the limits "
            f"(multipliers {m_lo}..{m_hi}, shifts {s_lo}..{s_hi})"
        )
    if st.quant != requantization(x.scale, tuple(flt.scales), out.scale, c):
        raise _BodyError(f"{name}'s 'quant' table is not TFLM's requantization of its scales")


@dataclass
class _Check:
    """One stage under check: what its rule's check reads, and the row maps of its activation
    inputs it sets (identity until the rule says otherwise, ``rows``)."""

    graph: object
    o: StreamChainOptions
    loc: list[_Local]
    name: str
    st: StreamStage
    record: Stage
    acts: list[int]
    consts: list[int]
    x: _Local  # its first activation input
    out: _Local
    f: dict[str, int]
    kernel: bool
    rowmap: dict[int, RowMap]
    # The inputs whose rows the stage maps itself (tinyseg_stream_internal.h RowRule::resamples):
    # they may have other rows than the output (a convolution, a pool, PAD, a resize); the others
    # are elementwise.
    resampled: set[int] = field(default_factory=set)

    def rows(self, **window: int) -> None:
        """The first activation input's row map: the rule's window (rows.RowMap's fields)."""
        a = self.acts[0]
        self.rowmap[a] = replace(self.rowmap[a], **window)
        self.resampled.add(a)

    @property
    def same(self) -> bool:
        """Its first activation input has its output's height, width and channels."""
        x, out = self.x, self.out
        return (x.height, x.width, x.channels) == (out.height, out.width, out.channels)


def _stage_operands(name: str, st: StreamStage, loc: list[_Local]) -> tuple[list[int], list[int]]:
    """A stage's streamed activation inputs (no constant, none read whole, without repeats) and
    its constant inputs, as PrepareStage sorts them."""
    positions = STREAM_STAGE_OPS[st.op]
    acts: list[int] = []
    consts: list[int] = []
    for j, lid in enumerate(st.inputs):
        if positions is not None and j not in positions:
            consts.append(lid)
            continue
        if lid < 0:
            raise _BodyError(f"{name} omits an activation input")
        if loc[lid].constant or j == whole_index(st.op, loc, st.inputs):
            continue
        if loc[lid].row_bytes <= 0:
            raise _BodyError(f"{name} reads local tensor {lid}, which has no rows")
        if lid not in acts:
            acts.append(lid)
    if not acts:
        raise _BodyError(f"{name} reads no streamed tensor")
    return acts, consts


def _check_types(c: _Check) -> None:
    """The stage's row types: a conversion's (input, output) pair of its records, else every
    activation input of the output's type and a record of the operator on that type."""
    x, out = c.x, c.out
    if c.record.rule == "conversion":
        if (c.kernel and (x.dtype, out.dtype) not in stages.conversions(c.st.op)) or not c.same:
            raise _BodyError(
                f"{c.name}: {x.dtype} {x.height}x{x.width}x{x.channels} -> "
                f"{out.dtype} {out.height}x{out.width}x{out.channels}"
            )
    elif c.kernel and not (
        all(c.loc[a].dtype == out.dtype for a in c.acts) and stages.same_type(c.st.op, out.dtype)
    ):
        raise _BodyError(f"{c.name} on {out.dtype} rows (the kernel does not compute it on them)")


def _check_stage(
    graph,
    o: StreamChainOptions,
    loc: list[_Local],
    k: int,
    st: StreamStage,
    edges: list[tuple[int, int, RowMap]],
    kernel: bool,
) -> None:
    """What tinyseg_stream.cc's PrepareStage refuses; appends the stage's edges with their row maps.
    ``kernel`` False (the lowering of an estimate's chain, whose stages may be float32): the
    geometry and structure only, not the types the kernel computes. The stage's rule (its
    record's, contract/stages/) picks the check of its shape and rows (_RULE_CHECKS)."""
    name = f"stage {k} ({st.op})"
    acts, consts = _stage_operands(name, st, loc)
    out_id = st.outputs[0]
    out = loc[out_id]
    if out.row_bytes <= 0 or out.kind == "input":
        raise _BodyError(
            f"{name} writes local tensor {out_id}, a StreamChain input or a tensor without rows"
        )
    f = _stage_fields(k, st)
    rowmap = {a: RowMap(loc[a].height, out.height) for a in acts}
    record = stages.record_of(st.op)
    c = _Check(graph, o, loc, name, st, record, acts, consts, loc[acts[0]], out, f, kernel, rowmap)
    _check_types(c)
    _RULE_CHECKS[record.rule](c)
    for a in acts:
        m = c.rowmap[a]
        if a not in c.resampled and m.in_h != m.out_h:
            raise _BodyError(
                f"{name}'s input rows ({m.in_h}) differ from its output rows ({m.out_h})"
            )
        edges.append((k, a, m))


def _conv_constants(c: _Check):
    """A convolution's filter and bias (None: omitted) graph tensors: a TRANSPOSE_CONV's after its
    output shape."""
    first = 1 if c.record.rule == "transpose_convolution" else 0
    flt = _constant(c.graph, c.loc, c.consts[first], f"{c.name}'s filter")
    bias_lid = c.consts[first + 1] if len(c.consts) > first + 1 else -1
    bias = _constant(c.graph, c.loc, bias_lid, f"{c.name}'s bias") if bias_lid >= 0 else None
    return flt, bias


def _conv_types(c: _Check, flt, bias) -> bool:
    """Filter and bias of a form the record on the output's rows takes (its constants: [output
    shape,] filter, bias; a bias omitted or absent)."""
    record = stages.same_type(c.st.op, c.out.dtype)
    if record is None:
        return False
    at = len(record.constants[0]) - 2  # the filter's position
    filters = {form[at] for form in record.constants}
    biases = {form[at + 1] if len(form) > at + 1 else None for form in record.constants}
    return flt.dtype in filters and (bias.dtype if bias is not None else None) in biases


def _check_conv(c: _Check) -> None:
    """CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV: filter and bias of the output's channels and of
    the types the kernel takes, the "quant" table, and TFLM's geometry."""
    x, out = c.x, c.out
    flt, bias = _conv_constants(c)
    dw = c.record.rule == "depthwise"
    fs = tuple(flt.shape)
    ok = (
        len(fs) == 4
        and fs[3 if dw else 0] == out.channels
        and (not dw or (fs[0] == 1 and x.channels and out.channels % x.channels == 0))
        and (bias is None or bias.elements == out.channels)
        and (not c.kernel or _conv_types(c, flt, bias))
    )
    if not ok:
        raise _BodyError(
            f"{c.name} needs an int8 filter of {out.channels} output channels and an int32 bias"
        )
    if c.kernel:
        _check_quant(c.name, c.st, x, out, flt)
    if c.record.rule == "transpose_convolution":
        _check_transpose_conv_rows(c, fs)
    else:
        _check_conv_rows(c, fs, dw)


def _check_transpose_conv_rows(c: _Check, fs: tuple[int, ...]) -> None:
    """A TRANSPOSE_CONV's output size as TFLM's padding implies it; its window of input rows
    (stages.transpose_conv_window); one accumulator row fits in op_scratch after the
    accumulators."""
    x, out, f = c.x, c.out, c.f
    sh = f["strideH"]
    rows = stages.transpose_conv_window(x.height, out.height, fs[1], sh, f["padding"])
    if rows is None or fs[3] != x.channels:
        raise _BodyError(f"{c.name}'s geometry does not match its tensors")
    held = accumulator_bytes(c.o, c.loc)
    row = out.width * out.channels * (8 if out.dtype == "INT16" else 4)  # int64 for 16x8
    if c.o.op_scratch - held < row:
        raise _BodyError(
            f"{c.name}: op_scratch {c.o.op_scratch} less the accumulators' {held} is smaller "
            f"than one accumulator row ({row} bytes)"
        )
    c.rows(den=sh, before=rows[1], after=rows[2])


def _check_conv_rows(c: _Check, fs: tuple[int, ...], dw: bool) -> None:
    """A CONV_2D or DEPTHWISE_CONV_2D's output size as TFLM computes it; its window of rows."""
    x, out, f = c.x, c.out, c.f
    fh, fw = fs[1], fs[2]
    sh, sw, dh, dwf = f["strideH"], f["strideW"], f["dilationHFactor"], f["dilationWFactor"]
    oh = _out_size(x.height, fh, sh, dh, f["padding"])
    ow = _out_size(x.width, fw, sw, dwf, f["padding"])
    if (oh, ow) != (out.height, out.width) or (not dw and fs[3] != x.channels):
        raise _BodyError(
            f"{c.name}'s geometry does not match its tensors "
            f"({x.height}x{x.width} -> {out.height}x{out.width})"
        )
    top = _pad_top(x.height, oh, fh, sh, dh)
    c.rows(num=sh, before=top, after=(fh - 1) * dh + 1 - 1 - top)


def _check_pool(c: _Check) -> None:
    """MAX_POOL_2D, AVERAGE_POOL_2D: its filter size, the input's channels, TFLM's output size."""
    x, out, f = c.x, c.out, c.f
    fh, fw = dict(c.st.fields).get("filterHeight"), dict(c.st.fields).get("filterWidth")
    if fh is None or fw is None or x.channels != out.channels:
        raise _BodyError(f"{c.name} needs its filter size and the input's channels")
    sh, sw = f["strideH"], f["strideW"]
    oh, ow = (
        _out_size(x.height, fh, sh, 1, f["padding"]),
        _out_size(x.width, fw, sw, 1, f["padding"]),
    )
    if (oh, ow) != (out.height, out.width):
        raise _BodyError(f"{c.name}'s geometry does not match its tensors")
    top = _pad_top(x.height, oh, fh, sh, 1)
    c.rows(num=sh, before=top, after=fh - 1 - top)


def _check_concatenation(c: _Check) -> None:
    """Along channels without activation; inputs of the output's height, width and (int8) its
    quantization, (int16) zero points 0; channels adding up to the output's."""
    out, f, loc, kernel = c.out, c.f, c.loc, c.kernel
    if f["axis"] not in (3, -1) or f["fusedActivationFunction"] != 0:
        raise _BodyError(f"{c.name} along axis {f['axis']} (channels only, no activation)")
    if any(
        (loc[a].height, loc[a].width) != (out.height, out.width)
        or (
            kernel
            and out.dtype == "INT8"  # float32 has no quantization to compare
            and (loc[a].scale != out.scale or loc[a].zero_point != out.zero_point)
        )
        or (  # int16: TFLM copies whatever the scales, with every zero point 0
            kernel and out.dtype == "INT16" and (loc[a].zero_point or out.zero_point)
        )
        for a in c.acts
    ):
        raise _BodyError(
            f"{c.name}'s inputs differ from its output in height, width or quantization"
        )
    if sum(loc[lid].channels for lid in c.st.inputs if lid >= 0) != out.channels:
        raise _BodyError(f"{c.name}'s input channels do not add up to its output's")


def _check_broadcast(c: _Check) -> None:
    """ADD, SUB, MUL: two operands broadcast to the output across width and channels, each an
    activation of the output's rows, a constant of one row or of the output's rows (row y read
    for output row y: a detection head's grid), or a one-pixel input read whole."""
    st, loc, out = c.st, c.loc, c.out
    if len(st.inputs) != 2:
        raise _BodyError(f"{c.name} takes two inputs")
    whole = whole_index(st.op, loc, st.inputs)
    for j, lid in enumerate(st.inputs):
        if loc[lid].constant:
            t = c.graph.tensors[loc[lid].graph_index]
            shape = (1,) * (4 - len(t.shape)) + tuple(t.shape)
            if (
                len(shape) != 4
                or (c.kernel and t.dtype != c.x.dtype)
                or shape[1] not in (1, out.height)
            ):
                raise _BodyError(
                    f"{c.name}: a constant operand has one row or the output's rows, of the "
                    "output's type"
                )
        else:
            shape = (1, loc[lid].height, loc[lid].width, loc[lid].channels)
            if j == whole:
                _check_whole(c, lid)
            elif shape[1] != out.height:
                raise _BodyError(f"{c.name}'s rows do not broadcast")
        if shape[0] != 1 or shape[2] not in (1, out.width) or shape[3] not in (1, out.channels):
            raise _BodyError(f"{c.name}'s operands do not broadcast to its output")


def _check_whole(c: _Check, lid: int) -> None:
    """An operand read whole: of the output's type, 1 x 1 x 1 x C in the graph."""
    if c.kernel and c.loc[lid].dtype != c.out.dtype:
        raise _BodyError(f"{c.name}: its one-pixel input has the output's type")
    t = c.graph.tensors[c.loc[lid].graph_index]
    if len(t.shape) != 4 or t.shape[0] != 1:
        raise _BodyError(f"{c.name}: an input read whole is 1 x 1 x 1 x C")


def _check_resize_nearest(c: _Check) -> None:
    """RESIZE_NEAREST_NEIGHBOR by an integer factor of rows, without align_corners."""
    x, out = c.x, c.out
    if c.f["alignCorners"] or x.channels != out.channels or out.height % x.height:
        raise _BodyError(f"{c.name} by an integer factor, without align_corners")
    c.rows(den=out.height // x.height)


def _check_resize_bilinear(c: _Check) -> None:
    """RESIZE_BILINEAR: rows (and int8 columns) TFLM's arithmetic maps to a window of two."""
    x, out = c.x, c.out
    align, half = bool(c.f["alignCorners"]), bool(c.f["halfPixelCenters"])
    if out.dtype == "FLOAT32":  # float positions: the float rule; columns need none
        rows = bilinear_float_row_rule(x.height, out.height, align, half)
        cols = rows if x.width > 0 and out.width > 0 else None
    else:
        rows = bilinear_row_rule(x.height, out.height, align, half)
        cols = bilinear_row_rule(x.width, out.width, align, half)
    if x.channels != out.channels or rows is None or cols is None:
        raise _BodyError(
            f"{c.name}: align_corners with half_pixel_centers, other channels, or a scale "
            "past TFLM's fixed-point rows"
        )
    num, den, offset, before, after = rows
    c.rows(num=num, den=den, offset=offset, before=before, after=after)


def _check_pad(c: _Check) -> None:
    """PAD, PADV2: constant non-negative paddings of height, width and channels that add up to the
    output's shape; output row y reads input row y - top."""
    x, out, graph = c.x, c.out, c.graph
    pads = graph.buffer_array(
        _constant(graph, c.loc, c.consts[0] if c.consts else -1, f"{c.name}'s paddings").index
    )
    if pads is None or pads.shape != (4, 2) or (pads < 0).any() or pads[0].any():
        raise _BodyError(
            f"{c.name} pads height, width and channels only, with constant non-negative paddings"
        )
    if (out.height, out.width, out.channels) != (
        x.height + int(pads[1].sum()),
        x.width + int(pads[2].sum()),
        x.channels + int(pads[3].sum()),
    ):
        raise _BodyError(f"{c.name}'s output is not its input plus the paddings")
    top = int(pads[1][0])
    c.rows(before=top, after=-top)


def _check_accumulating(c: _Check) -> None:
    """MEAN (_check_mean): one schedule step per input row, the one pixel written at the last."""
    x = c.x
    _check_mean(c.graph, c.o, c.loc, c.name, c.consts, x, c.out, c.f)
    c.rowmap[c.acts[0]] = RowMap(x.height, x.height)  # one step per input row
    c.out.height = x.height  # the schedule's steps; the one pixel is written at the last


def _check_elementwise(c: _Check) -> None:
    """One input, its output's shape (an activation); LEAKY_RELU's alpha is a field."""
    x, out = c.x, c.out
    if not c.same:
        raise _BodyError(
            f"{c.name}: input {x.height}x{x.width}x{x.channels}, "
            f"output {out.height}x{out.width}x{out.channels}"
        )
    if c.record.alpha == "field" and not isinstance(dict(c.st.fields).get("alpha"), (int, float)):
        raise _BodyError(f"{c.name} needs its alpha")


# The check of each rule (contract/stages/record.py RULES); a conversion's is _check_types'.
_RULE_CHECKS: dict[str, Callable[[_Check], None]] = {
    "convolution": _check_conv,
    "depthwise": _check_conv,
    "transpose_convolution": _check_conv,
    "pool": _check_pool,
    "concatenation": _check_concatenation,
    "broadcast": _check_broadcast,
    "resize_nearest": _check_resize_nearest,
    "resize_bilinear": _check_resize_bilinear,
    "pad": _check_pad,
    "mean": _check_accumulating,
    "elementwise": _check_elementwise,
    "conversion": lambda c: None,
}


def accumulator_bytes(o: StreamChainOptions, loc: list[_Local]) -> int:
    """The accumulating stages' per-channel sums at the end of op_scratch (their input's channels,
    STREAM_ACCUMULATOR_BYTES each): tinyseg_stream_body.cc Count sums the same."""
    return sum(
        loc[st.outputs[0]].channels * STREAM_ACCUMULATOR_BYTES
        for st in o.stages
        if st.op in STREAM_ACCUMULATING_OPS and 0 <= st.outputs[0] < len(loc)
    )


def _check_mean(graph, o, loc, name, consts, x: _Local, out: _Local, f: dict) -> None:
    """What tinyseg_stream_reduce.cc's PrepareMean refuses: a MEAN other than over height and
    width, an output other than the chain's 1 x 1 x 1 x C with keep_dims or 1 x C without, a
    second accumulating stage in the chain, and an op_scratch without room for the sums."""
    axis = graph.buffer_array(
        _constant(graph, loc, consts[0] if consts else -1, f"{name}'s axis").index
    )
    axes = sorted(int(a) % 4 for a in axis.reshape(-1)) if axis is not None else []
    if axes != [1, 2] or any(not -4 <= int(a) <= 3 for a in axis.reshape(-1)):
        raise _BodyError(f"{name} over axes {axes} (height and width, 1 and 2, only)")
    rank = len(graph.tensors[out.graph_index].shape) if out.graph_index >= 0 else 0
    if (
        out.kind != "output"
        or (out.height, out.width, out.channels) != (1, 1, x.channels)
        or rank != (4 if f["keepDims"] else 2)
    ):
        raise _BodyError(
            f"{name} writes a StreamChain output of 1 x 1 x 1 x {x.channels} with keep_dims, "
            f"1 x {x.channels} without"
        )
    if sum(st.op in STREAM_ACCUMULATING_OPS for st in o.stages) > 1:
        raise _BodyError(f"{name}: a chain has at most one accumulating stage")
    held = accumulator_bytes(o, loc)
    if o.op_scratch < held or (o.op_scratch - held) % 4:
        raise _BodyError(
            f"{name}: op_scratch {o.op_scratch} holds no 4-byte aligned {held}-byte accumulator "
            f"({x.channels} sums) at its end"
        )


def _dry_run(
    loc: list[_Local], stages: int, outputs: list[int], edges: list[tuple[int, int, RowMap]]
) -> None:
    """chain_schedule.h's pull schedule, bookkeeping only (as the kernel's Prepare runs it): refuses a
    ring shorter than the rows its readers hold at once, and a cycle. The edges are indexed by
    stage and by tensor read, in their order, and the pulls run on a stack of their own, so that a
    chain of thousands of stages takes time linear in its size and no Python recursion."""
    done = [0] * len(loc)
    stage_out = {s: t for t, x in enumerate(loc) if (s := x.producer) >= 0}
    streamed = [x.producer >= 0 or x.fetched or x.sourced for x in loc]
    by_stage: dict[int, list[tuple[int, RowMap]]] = {}
    readers: dict[int, list[tuple[int, RowMap]]] = {}
    for s, u, m in edges:
        by_stage.setdefault(s, []).append((u, m))
        readers.setdefault(u, []).append((s, m))

    def note(t: int) -> None:
        if loc[t].ring <= 0:
            return
        low = loc[t].height
        for s, m in readers.get(t, ()):
            out = stage_out[s]
            if done[out] < loc[out].height:
                lo, hi = m.window(done[out])
                if lo <= hi and lo < low:
                    low = lo
        held = done[t] - min(low, done[t])
        if held > loc[t].ring:
            raise _BodyError(
                f"the ring of local tensor {t} holds {loc[t].ring} rows, its readers need {held}"
            )

    def pull(t: int, row: int) -> None:
        # Each frame: [tensor, row, depth, next edge of its stage]; the kernel's recursion, unrolled.
        stack = [[t, row, 0, 0]]
        while stack:
            frame = stack[-1]
            t, row, depth, i = frame
            if i == 0 and done[t] > row:
                stack.pop()
                continue
            mine = by_stage.get(loc[t].producer, ())
            while i < len(mine):
                u, m = mine[i]
                i += 1
                if streamed[u]:
                    lo, hi = m.window(done[t])
                    if lo <= hi:
                        if depth + 1 > stages:
                            raise _BodyError("its stages read each other in a cycle")
                        frame[3] = i
                        stack.append([u, hi, depth + 1, 0])
                        break
            else:
                frame[3] = 0
                done[t] += 1
                note(t)
                for u, _ in mine:
                    note(u)

    progress = True
    while progress:
        progress = False
        for t in outputs:
            if done[t] < loc[t].height:
                pull(t, done[t])
                progress = True
    for s in range(stages):
        t = stage_out[s]
        if done[t] < loc[t].height:
            pull(t, loc[t].height - 1)


def _pairs(o: StreamChainOptions, loc: list[_Local]) -> None:
    """rings, spill and fetch as tinyseg_stream_body.cc's PreparePairs reads them."""
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
    if o.ring_bytes + o.spilled_count * o.block > INT32_MAX:
        raise _BodyError("its rings and row-stream blocks exceed 2^31-1 bytes")


def _row_streams(o: StreamChainOptions, loc: list[_Local], n_in: int, n_out: int) -> None:
    """source, sink and tokens as tinyseg_stream_body.cc's CountRowStreams and PrepareRowStreams
    read them (after _pairs: a sourced or sunk tensor has a ring and is not fetched or spilled).
    Tokens are the node's last inputs and last outputs: the kernel keeps no record of them."""
    ins = sum(0 <= t < n_in for t in o.tokens)
    outs = len(o.tokens) - ins
    if (
        len(set(o.tokens)) != len(o.tokens)
        or any(not 0 <= t < n_in + n_out for t in o.tokens)
        or any(t < n_in - ins or n_in <= t < n_in + n_out - outs for t in o.tokens)
    ):
        raise _BodyError(
            f"tokens {list(o.tokens)} must be distinct node inputs and outputs (0..{n_in + n_out - 1}), "
            "the node's last inputs and last outputs"
        )
    for t in o.tokens:
        loc[t].token = True
    for key in ("source", "sink"):
        pairs = getattr(o, key)
        if len(pairs) > MAX_ROW_STREAMS:
            raise _BodyError(f"it has {len(pairs)} {key} entries (at most {MAX_ROW_STREAMS})")
        seen: set[int] = set()
        for i, (lid, index) in enumerate(pairs):
            x = loc[lid] if 0 <= lid < len(loc) else None
            if (
                x is None
                or not 0 <= index < MAX_ROW_STREAMS
                or index in seen
                or x.kind != "body"
                or x.row_bytes <= 0
                or not x.ring
                or x.fetched
                or x.spilled
                or x.sourced
                or x.sunk
            ):
                raise _BodyError(
                    f"{key}[{i}] = [{lid}, {index}] must name a body tensor with a ring, not "
                    f"fetched, spilled, sourced or sunk, and an index 0..{MAX_ROW_STREAMS - 1} "
                    "the list names once"
                )
            seen.add(index)
            x.sourced, x.sunk = x.sourced or key == "source", x.sunk or key == "sink"


def _stage_outputs(o: StreamChainOptions, loc: list[_Local]) -> None:
    """Each stage's output: one writer, not a fetched, sourced or token tensor, a ring unless a
    node output, and not sunk when the stage accumulates (MEAN)."""
    for k, st in enumerate(o.stages):
        if any(0 <= i < len(loc) and loc[i].token for i in st.inputs):
            raise _BodyError(f"stage {k} ({st.op}) reads a token (a tensor that carries no data)")
        out = loc[st.outputs[0]]
        if out.producer >= 0 or out.fetched or out.sourced or out.token:
            raise _BodyError(
                f"stage {k} ({st.op}) writes local tensor {st.outputs[0]}, which another stage "
                "writes, a fetch or source reads, or which is a token"
            )
        if out.kind != "output" and not out.ring:
            raise _BodyError(
                f"stage {k} ({st.op}) writes body tensor {st.outputs[0]}, which has no ring"
            )
        if out.sunk and st.op in STREAM_ACCUMULATING_OPS:
            raise _BodyError(f"stage {k} ({st.op}) accumulates: its output cannot be sunk")
        out.producer = k


def _chain_locals(graph, op, o: StreamChainOptions, kernel: bool) -> list[_Local]:
    """The chain's local tensors: the node's inputs and outputs, then the body's tensors."""
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
    return loc + [_body_tensor(j, t, kernel) for j, t in enumerate(o.tensors)]


def _stage_channels(o: StreamChainOptions, loc: list[_Local], kernel: bool) -> list[int]:
    """Each stage's output channels, after its operator, its counts of inputs and outputs and
    its local ids are checked as PrepareStages reads them."""
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
    return channels


def _check_tables(op, o: StreamChainOptions, loc: list[_Local], channels: list[int]) -> None:
    """The persistent block its tables need, within STREAM_MAX_BODY_BYTES."""
    n_in = len(op.inputs)
    constants = frozenset(k for k, x in enumerate(loc[:n_in]) if x.constant)
    whole = frozenset(
        (k, st.inputs[j])
        for k, st in enumerate(o.stages)
        if (j := whole_index(st.op, loc, st.inputs)) >= 0
    )
    body = stream_chain_body_bytes(o, channels, n_in, len(op.outputs), constants, whole)
    if body > STREAM_MAX_BODY_BYTES:
        raise _BodyError(f"its tables need {body} bytes (at most {STREAM_MAX_BODY_BYTES})")


def _check_reads(op, o: StreamChainOptions, loc, edges) -> list[int]:
    """Every read after its tensor is made (an input, a fetch or source, an earlier stage); every
    output, spilled or sunk tensor made by a stage. Returns the tensors the schedule pulls."""
    n_in = len(op.inputs)
    for s, t, _ in edges:
        x = loc[t]
        if x.kind != "input" and not (x.fetched or x.sourced) and not 0 <= x.producer < s:
            raise _BodyError(
                f"stage {s} reads local tensor {t} before any earlier stage, fetch or source "
                "makes it"
            )
    nodes = [t for t in range(n_in, n_in + len(op.outputs)) if not loc[t].token]
    outputs = nodes + [lid for lid, _ in o.spill] + [lid for lid, _ in o.sink]
    if any(loc[t].producer < 0 for t in outputs):
        raise _BodyError("an output (not a token), a spilled or a sunk tensor is made by no stage")
    return outputs


def _check_body(graph, op, o: StreamChainOptions, kernel: bool) -> None:
    loc = _chain_locals(graph, op, o, kernel)
    if o.spilled_count != len(o.spill) or o.fetched_count != len(o.fetch):
        raise _BodyError(
            f"spilled {o.spilled_count} / fetched {o.fetched_count} disagree with its spill and "
            "fetch lists"
        )
    _check_tables(op, o, loc, _stage_channels(o, loc, kernel))
    _pairs(o, loc)
    _row_streams(o, loc, len(op.inputs), len(op.outputs))
    edges: list[tuple[int, int, RowMap]] = []
    unknown = False  # a stage of an estimate's chain the kernel has no row map for: no dry run
    for k, st in enumerate(o.stages):
        if st.op in STREAM_STAGE_OPS:
            _check_stage(graph, o, loc, k, st, edges, kernel)
        else:
            unknown = True
    _stage_outputs(o, loc)
    outputs = _check_reads(op, o, loc, edges)
    if not unknown:
        _dry_run(loc, len(o.stages), outputs, edges)


def validate_body(graph, op, kernel: bool = True) -> None:
    """Refuse a StreamChain whose body the kernel refuses in Prepare (TinySegError, one line).
    ``kernel`` False: a chain of an estimate (`analyze --stream`'s search, which may stream float32
    or other row-local operators the kernel does not compute) that only the lowering runs: its
    structure, geometry, rings and numbers are checked, not the stages' types."""
    o = decode(op, graph.memo.decoded)
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
    n_ram = o.fetching.operands - len(o.fetching.fetched)
    if not 0 <= n_ram <= len(op.inputs) - 2:
        return (
            f"operands is {o.fetching.operands}: {n_ram} in-RAM inputs with "
            f"{len(o.fetching.fetched)} fetched entries, and it has {len(op.inputs) - 2}"
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
    return _operands_problem(graph, op, o, filt.shape[3])


def _operands_problem(graph, op, o: FetchingConv2DOptions, in_channels: int) -> str | None:
    """CheckOperands of tinyseg_fetching_conv.cc: every operand, fetched or in RAM, rank 4 with the
    output's batch and operand 0's height and width, their channels adding up to the filter's."""
    batch = graph.tensors[op.outputs[0]].shape[0]
    shapes = [
        tuple(s.shape) if isinstance(s, Fetched) else tuple(graph.tensors[s].shape)
        for s in operand_sources(op, o.fetching)
    ]
    for k, shape in enumerate(shapes):
        if len(shape) != 4 or shape[0] != batch or shape[1:3] != shapes[0][1:3]:
            return f"operand {k} is {list(shape)}, operand 0 {list(shapes[0])}, the batch {batch}"
    if sum(s[3] for s in shapes) != in_channels:
        return (
            f"its operands' channels add up to {sum(s[3] for s in shapes)}, the filter reads "
            f"{in_channels}"
        )
    return None


@dataclass(frozen=True)
class _Write:
    """What a slot holds after an operator wrote it. The kernels' CheckSlot (tinyseg_common.cc)
    compares a reader's region and byte count with it at Invoke; the lowering for the fallback check
    substitutes the written tensor for the fetched one, so its shape and type must be the reader's
    too, or the fallback would check another computation than the kernels run."""

    op: str  # "operator 4 (Spill)"
    region: int
    dtype: str | None
    shape: tuple[int, ...]
    nbytes: int
    released_by: str = ""  # the Fetching or FetchingConv2D that released it (release_after_fetch)


def _tensor_desc(dtype: str | None, shape: tuple[int, ...], nbytes: int) -> str:
    return f"{dtype} {list(shape)} ({nbytes:,} B)"


def _read_slot(
    written: dict[int, _Write],
    here: str,
    slot: int,
    region: int,
    dtype: str | None,
    shape: tuple[int, ...],
) -> None:
    """Refuse a read of ``slot`` that the kernels refuse at Invoke (no live tensor in that region,
    another byte count) or that computes something else than its lowering (another shape or type)."""
    nbytes = math.prod(shape) * ELEMENT_BYTES.get(dtype or "", 0)
    w = written.get(slot)
    tail = "; the file is damaged: optimize the original model again"
    if w is None:
        raise TinySegError(f"{here}: fetches slot {slot}, which nothing before it spills{tail}")
    if w.released_by:
        raise TinySegError(
            f"{here}: fetches slot {slot}, which {w.released_by} already fetched and the Runtime "
            f"released (release_after_fetch) with no Spill in between{tail}"
        )
    if region != w.region:
        raise TinySegError(
            f"{here}: fetches slot {slot} from storage region {region}, where {w.op} spilled it to "
            f"region {w.region}{tail}"
        )
    if (dtype, tuple(shape), nbytes) != (w.dtype, w.shape, w.nbytes):
        raise TinySegError(
            f"{here}: fetches slot {slot} as {_tensor_desc(dtype, tuple(shape), nbytes)}, where "
            f"{w.op} spilled {_tensor_desc(w.dtype, w.shape, w.nbytes)}{tail}"
        )


def _chain_slots(graph, op, o: StreamChainOptions, here: str, written: dict[int, _Write]) -> None:
    """A StreamChain's row fetches checked, then its row spills recorded (it releases nothing)."""
    loc = list(op.inputs) + list(op.outputs)

    def described(lid: int) -> tuple[str | None, tuple[int, ...]]:
        if lid < len(loc):
            t = graph.tensors[loc[lid]] if loc[lid] >= 0 else None
            return (t.dtype, tuple(t.shape)) if t is not None else (None, ())
        t = o.tensors[lid - len(loc)]
        return t.dtype, tuple(t.shape)

    for lid, slot in o.fetch:
        dtype, shape = described(lid)
        _read_slot(written, here, slot, o.region_of(slot), dtype, shape)
    for lid, slot in o.spill:
        dtype, shape = described(lid)
        nbytes = math.prod(shape) * ELEMENT_BYTES.get(dtype or "", 0)
        written[slot] = _Write(here, o.region_of(slot), dtype, shape, nbytes)


def _check_tokens(graph, here: str, tokens: list[int]) -> None:
    """A Spill's output and a fetching operator's inputs past its operands are tokens: zero
    elements, as the kernels' Prepare (tinyseg_common.cc CheckTokens) requires."""
    for t in tokens:
        if t < 0 or math.prod(graph.tensors[t].shape) != 0:
            shape = list(graph.tensors[t].shape) if t >= 0 else "omitted"
            raise TinySegError(
                f"{here}: tensor {t} ({shape}) stands where a token goes, and a token has zero "
                "elements; the file is damaged: optimize the original model again"
            )


def validate_graph(graph, kernel: bool = True) -> None:
    """Every TinySeg operator of the graph as its kernel's Prepare checks it, and every fetch
    against what was spilled to its slot before it, as the kernels' CheckSlot checks it at Invoke
    (the same region, a live tensor of the same bytes) and as the lowering assumes it (the same
    type and shape): TinySegError with one line naming the operator, the slot and the reason.
    ``kernel``: see validate_body (the lowering passes False)."""
    written: dict[int, _Write] = {}  # slot -> its latest write before this operator
    for op in graph.operators:
        if op.opcode not in TINYSEG_OPS:
            continue
        deadline.check("checking TinySeg's operators")
        o = decode(op, graph.memo.decoded)
        here = f"operator {op.index} ({op.opcode})"
        if isinstance(o, StreamChainOptions):
            validate_body(graph, op, kernel)
            _chain_slots(graph, op, o, here, written)
        elif isinstance(o, SpillOptions):
            _check_tokens(graph, here, list(op.outputs))
            t = graph.tensors[op.inputs[0]] if op.inputs and op.inputs[0] >= 0 else None
            dtype, shape = (t.dtype, tuple(t.shape)) if t is not None else (None, ())
            nbytes = t.nbytes if t is not None else 0
            written[o.slot] = _Write(here, o.region, dtype, shape, nbytes)
        else:
            fetching = o if isinstance(o, FetchingOptions) else o.fetching
            if isinstance(o, FetchingOptions) and o.operands - len(o.fetched) > len(op.inputs):
                raise TinySegError(
                    f"{here}: operands is {o.operands} with {len(o.fetched)} fetched entries, "
                    f"but it has {len(op.inputs)} inputs; the file is damaged: optimize the "
                    "original model again"
                )
            _check_tokens(graph, here, token_inputs(op, fetching))
            dtype = graph.tensors[op.outputs[0]].dtype if op.outputs else None
            for f in fetching.fetched:
                _read_slot(written, here, f.slot, f.region, dtype, tuple(f.shape))
            for f in fetching.fetched:  # Runtime::release_after_fetch, on by default
                written[f.slot] = replace(written[f.slot], released_by=here)
            if isinstance(o, FetchingConv2DOptions):
                problem = _fetching_conv_problem(graph, op, o)
                if problem:
                    raise TinySegError(
                        f"{here}: {problem}; the file is damaged: optimize the original model again"
                    )
