"""Row streaming: which operators can run row by row, and what a chain of them costs.

A *row-local* operator computes output row y of an NHWC tensor from a window of rows of
each activation input (a 3x3 convolution: three rows; an elementwise ADD: one row). A
*chain* of such operators can run row by row: every intermediate tensor lives in a ring
buffer holding only the rows some consumer's window still needs, and every row is
computed once (no halo recomputation). This module is the analysis stage of streaming:

- ``row_map`` gives, for one operator and one of its inputs, the input rows output row y
  reads (TFLM's own padding and row loops, the same arithmetic as tflm_ops/core band.h);
- ``simulate`` runs a chain's pull schedule row by row and measures the rows each ring
  must hold, and the order rows are produced (each exactly once);
- ``find_chains`` finds the maximal chains of row-local operators of a graph.

``kernel_computes`` says which operators the StreamChain kernel computes as stages; `optimize`
chains only those, while `analyze --stream` estimates over every row-local operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..contract import customops, stages
from ..contract.rows import RowMap
from ..ir.graph import Graph, Operator
from ..ir.schema import TYPE_SIZES

# Every operator with a row rule (contract/stages/: the stages' and the estimated ones').
ROW_LOCAL = stages.row_local()
# Operators that read every input row once and write one pixel after the last (customops.
# STREAM_ACCUMULATING_OPS): a MEAN over height and width. Their steps are the input's rows.
ACCUMULATING = frozenset(customops.STREAM_ACCUMULATING_OPS)


def _padding_top(in_h: int, out_h: int, stride: int, eff_kernel: int) -> int:
    """TFLM's ComputePaddingHeightWidth (top = total // 2; odd padding goes below)."""
    total = max((out_h - 1) * stride + eff_kernel - in_h, 0)
    return total // 2


def _nhwc(graph: Graph, t: int) -> tuple[int, int, int, int] | None:
    shape = graph.tensors[t].shape
    return tuple(shape) if len(shape) == 4 else None  # type: ignore[return-value]


def activation_inputs(graph: Graph, op: Operator) -> list[int]:
    """The operator's inputs that live in the arena (not constants), in order, without repeats."""
    seen: list[int] = []
    for t in op.inputs:
        if t >= 0 and not graph.tensors[t].is_constant and t not in seen:
            seen.append(t)
    return seen


def row_map(graph: Graph, op: Operator, t: int) -> RowMap | None:
    """The rows of activation input ``t`` that each output row of ``op`` reads, or None when
    ``op`` is not row-local for that input (then it cannot join a chain). The operator's rule
    (contract/stages/: a stage's, or an estimated operator's) picks the map (_ROW_MAPS)."""
    if len(op.outputs) != 1:
        return None
    if op.opcode in ACCUMULATING:  # step y reads input row y; the one pixel comes after the last
        if not mean_hw(graph, op) or op.inputs[0] != t:
            return None
        in_h = graph.tensors[t].shape[1]
        return RowMap(in_h, in_h)
    out, inp = _nhwc(graph, op.outputs[0]), _nhwc(graph, t)
    if out is None or inp is None or out[0] != 1 or inp[0] != 1:
        return None
    in_h, out_h = inp[1], out[1]
    if in_h < 1 or out_h < 1 or 0 in inp or 0 in out:
        return None  # an empty tensor has no rows to stream
    rows = _ROW_MAPS.get(stages.rule_of(op.opcode) or "")
    return rows(graph, op, t, in_h, out_h) if rows is not None else None


def _identity_rows(graph: Graph, op: Operator, t: int, in_h: int, out_h: int) -> RowMap | None:
    """Output row y reads input row y (a one-pixel operand read whole: every row reads it)."""
    if whole_operand(graph, op, t):
        return RowMap(in_h, out_h, 0, 1)  # every output row reads the one pixel
    if in_h != out_h:
        return None  # broadcast along height: every output row reads the whole input
    return RowMap(in_h, out_h)


def _concatenation_rows(graph: Graph, op: Operator, t: int, in_h: int, out_h: int) -> RowMap | None:
    """Identity rows, along channels only."""
    o = op.options
    if o is None or o.axis % 4 != 3:
        return None
    return _identity_rows(graph, op, t, in_h, out_h)


def _windowed_rows(graph: Graph, op: Operator, t: int, in_h: int, out_h: int) -> RowMap | None:
    """A convolution's or a pool's window of rows around y * stride, TFLM's top padding above it;
    with dilation the window spans the taps and the rows between them (a contiguous band)."""
    o = op.options
    if o is None or op.inputs[0] != t:
        return None
    if stages.rule_of(op.opcode) == "pool":
        kh, stride, dil = o.filterHeight, o.strideH, 1
    else:
        filt = graph.tensors[op.inputs[1]].shape
        if len(filt) != 4:
            return None
        kh, stride, dil = filt[1], o.strideH, (o.dilationHFactor or 1)
    if kh < 1 or stride < 1 or dil < 1:
        return None
    eff = (kh - 1) * dil + 1
    top = _padding_top(in_h, out_h, stride, eff) if o.padding == 0 else 0
    return RowMap(in_h, out_h, stride, 1, top, eff - 1 - top)


def _transpose_conv_rows(
    graph: Graph, op: Operator, t: int, in_h: int, out_h: int
) -> RowMap | None:
    """Inputs: output_shape, filter, input[, bias]; output row y reads the input rows whose filter
    rows reach it (stages.transpose_conv_window): one row when stride >= kernel height, else a
    window of about ceil(kernel / stride)."""
    o = op.options
    if o is None or len(op.inputs) < 3 or op.inputs[2] != t:
        return None
    filt = graph.tensors[op.inputs[1]].shape
    if len(filt) != 4:
        return None
    rows = stages.transpose_conv_window(in_h, out_h, filt[1], o.strideH, o.padding)
    return None if rows is None else RowMap(in_h, out_h, 1, o.strideH, rows[1], rows[2])


def _nearest_rows(graph: Graph, op: Operator, t: int, in_h: int, out_h: int) -> RowMap | None:
    """Output row y reads input row y // factor (an integer factor, no align_corners)."""
    o = op.options
    if o is None or o.alignCorners or op.inputs[0] != t or out_h % in_h:
        return None
    return RowMap(in_h, out_h, 1, out_h // in_h)


def _bilinear_rows(graph: Graph, op: Operator, t: int, in_h: int, out_h: int) -> RowMap | None:
    """TFLM's source rows: the fixed-point rule (int8) or the float rule (float32)."""
    o = op.options
    if o is None or op.inputs[0] != t or (o.alignCorners and o.halfPixelCenters):
        return None  # TFLM's Prepare refuses both
    align, half = bool(o.alignCorners), bool(o.halfPixelCenters)
    if graph.tensors[t].dtype == "FLOAT32":  # TFLM's float positions
        rule = customops.bilinear_float_row_rule(in_h, out_h, align, half)
        if rule is None:
            return None
        num, den, offset, before, after = rule
        return RowMap(in_h, out_h, num, den, before, after, offset)
    if graph.tensors[t].dtype != "INT8":
        return None
    return bilinear_rows(in_h, out_h, align, half)


def _padded_rows(graph: Graph, op: Operator, t: int, in_h: int, out_h: int) -> RowMap | None:
    """Output row y reads input row y - top (constant paddings, none of the batch)."""
    pads = graph.buffer_array(op.inputs[1]) if len(op.inputs) > 1 else None
    if op.inputs[0] != t or pads is None or pads.shape != (4, 2) or pads[0].any():
        return None
    top = int(pads[1][0])
    return RowMap(in_h, out_h, 1, 1, top, -top) if top >= 0 else None  # y reads y - top


# The row map of each rule (contract/stages/record.py RULES; an accumulating stage's is row_map's).
_ROW_MAPS: dict[str, Callable[[Graph, Operator, int, int, int], RowMap | None]] = {
    "convolution": _windowed_rows,
    "depthwise": _windowed_rows,
    "pool": _windowed_rows,
    "transpose_convolution": _transpose_conv_rows,
    "resize_nearest": _nearest_rows,
    "resize_bilinear": _bilinear_rows,
    "pad": _padded_rows,
    "elementwise": _identity_rows,
    "conversion": _identity_rows,
    "broadcast": _identity_rows,
    "concatenation": _concatenation_rows,
}


def mean_problem(graph: Graph, op: Operator) -> str | None:
    """Why a MEAN is no accumulating stage (None: it is one): it must average a batch-1 NHWC
    tensor with rows over height and width (a constant axis of 1 and 2, or -3 and -2, once each)
    into 1 x 1 x 1 x C with keep_dims, or 1 x C without (the same C values in memory). The row
    types are stage_problem's (int8, float32, int16 with zero point 0)."""
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return "a MEAN without its input and constant axis"
    x = _nhwc(graph, op.inputs[0])
    if x is None or x[0] != 1 or 0 in x:
        return "a MEAN of a tensor that is not batch-1 NHWC with rows"
    axis = graph.buffer_array(op.inputs[1]) if graph.tensors[op.inputs[1]].is_constant else None
    axes = [int(a) for a in np.asarray(axis).reshape(-1)] if axis is not None else []
    if sorted(a % 4 for a in axes if -4 <= a <= 3) != [1, 2] or len(axes) != 2:
        return f"a MEAN over axes {axes} (the stage averages height and width, 1 and 2)"
    keep = op.options is not None and bool(op.options.keepDims)
    want = [1, 1, 1, x[3]] if keep else [1, x[3]]
    if list(graph.tensors[op.outputs[0]].shape) != want:
        return (
            f"a MEAN {'with' if keep else 'without'} keep_dims into "
            f"{list(graph.tensors[op.outputs[0]].shape)} (not {' x '.join(map(str, want))})"
        )
    return None


def mean_hw(graph: Graph, op: Operator) -> bool:
    """Whether ``op`` is a MEAN the accumulating stage computes (``mean_problem``)."""
    return stages.rule_of(op.opcode) == "mean" and mean_problem(graph, op) is None


def steps(graph: Graph, i: int) -> int:
    """The rows operator ``i`` computes in a chain: its output's, or its input's for an
    accumulating stage (one step per input row, the one-pixel output written at the last)."""
    op = graph.operators[i]
    t = op.inputs[0] if op.opcode in ACCUMULATING else op.outputs[0]
    return graph.tensors[t].shape[1]


def _one_pixel(graph: Graph, t: int) -> bool:
    x = graph.tensors[t]
    return (
        not x.is_constant
        and x.dtype in ("INT8", "FLOAT32", "INT16")
        and len(x.shape) == 4
        and tuple(x.shape[:3]) == (1, 1, 1)
        and x.shape[3] >= 1
    )


def checked_log2(x: float) -> int | None:
    """TFLM's CheckedLog2 in its float arithmetic: the rounded log2 of ``x``, or None when that is
    not within 1e-3 of an integer (its int16 LOGISTIC and TANH refuse such an output scale)."""
    v = np.float32(np.log(np.float32(x))) * (np.float32(1.0) / np.log(np.float32(2.0)))
    r = np.round(v)
    return int(r) if abs(v - r) < np.float32(1e-3) else None


def whole_operand(graph: Graph, op: Operator, t: int) -> bool:
    """Whether ``t`` is a MUL operand of one pixel (1 x 1 x 1 x C, int8, float32 or int16, not a
    constant) whose other operand is an activation of more than one pixel: the kernel reads it
    whole from the arena and broadcasts it over every row, a squeeze-and-excitation gate
    (contract/bodies.py whole_index, tinyseg_stream_arithmetic.cc WholeIndex). ``find_chains``
    keeps its producer out of chains, so it is always a chain input."""
    if not stages.reads_whole(op.opcode) or len(op.inputs) != 2 or t not in op.inputs or t < 0:
        return False
    other = op.inputs[1 - op.inputs.index(t)]
    return (
        _one_pixel(graph, t)
        and other >= 0
        and not graph.tensors[other].is_constant
        and not _one_pixel(graph, other)
    )


def _feeds_whole_operand(graph: Graph, op: Operator) -> bool:
    """Whether the operator's output is some MUL's one-pixel operand read whole (``whole_operand``):
    such an operator stays out of chains, so the gate is in the arena when the MUL's chain runs."""
    t = op.outputs[0] if op.outputs else -1
    return t >= 0 and any(
        whole_operand(graph, graph.operators[c], t) for c in graph.consumers.get(t, [])
    )


def bilinear_rows(in_h: int, out_h: int, align_corners: bool, half_pixel: bool) -> RowMap | None:
    """The rows output row y of an int8 RESIZE_BILINEAR reads (customops.bilinear_row_rule)."""
    rule = customops.bilinear_row_rule(in_h, out_h, align_corners, half_pixel)
    if rule is None:
        return None
    num, den, offset, before, after = rule
    return RowMap(in_h, out_h, num, den, before, after, offset)


def row_bytes(graph: Graph, t: int) -> int:
    """Bytes of one row of an NHWC tensor (batch 1)."""
    tensor = graph.tensors[t]
    return tensor.shape[2] * tensor.shape[3] * TYPE_SIZES.get(tensor.dtype, 0)


def is_row_local(graph: Graph, op: Operator) -> bool:
    ins = activation_inputs(graph, op)
    return (
        op.opcode in ROW_LOCAL and bool(ins) and all(row_map(graph, op, t) is not None for t in ins)
    )


# ---------------------------------------------------------------- the pull schedule of one chain


@dataclass
class ChainCost:
    """What running a chain row by row costs: ring rows per tensor and rows computed."""

    ops: tuple[int, ...]
    inputs: tuple[int, ...]  # chain inputs read whole from the arena
    fetched: tuple[int, ...]  # chain inputs read row by row from storage
    outputs: tuple[
        int, ...
    ]  # tensors written whole to the arena (read after the chain, or graph outputs)
    spilled: tuple[int, ...]  # tensors written row by row to storage
    ring_rows: dict[int, int] = field(default_factory=dict)  # tensor -> rows its ring holds at most
    ring_bytes: dict[int, int] = field(default_factory=dict)
    rows_computed: dict[int, int] = field(default_factory=dict)  # op -> output rows computed
    op_scratch: int = 0  # the largest scratch one member needs for one row step (set by the pass)

    @property
    def rings(self) -> int:
        return sum(self.ring_bytes.values())


def chain_io(graph: Graph, ops: list[int]) -> tuple[list[int], list[int], list[int]]:
    """(inputs, outputs, intermediates) of a chain: what it reads from before it, what is read
    after it (or is a graph output), and what only its own operators read."""
    members = set(ops)
    produced = [graph.operators[i].outputs[0] for i in ops]
    produced_set, graph_outputs = set(produced), set(graph.outputs)  # sets: chains run to thousands
    inputs: list[int] = []
    seen: set[int] = set()
    for i in ops:
        for t in activation_inputs(graph, graph.operators[i]):
            if t not in produced_set and t not in seen:
                inputs.append(t)
                seen.add(t)
    outputs, inner = [], []
    for t in produced:
        outside = t in graph_outputs or any(c not in members for c in graph.consumers.get(t, []))
        (outputs if outside else inner).append(t)
    return inputs, outputs, inner


def simulate(
    graph: Graph,
    ops: list[int],
    spilled: frozenset[int] = frozenset(),
    fetched: frozenset[int] = frozenset(),
    trace: list[tuple[int, int]] | None = None,
    fetches: list[tuple[int, int, int]] | None = None,
) -> ChainCost:
    """Run the chain's pull schedule and measure it.

    The chain's outputs are produced row by row, top to bottom, one row of each in turn; a
    row is computed when some reader's window first needs it and dropped when no reader's
    window will read it again. A ring holds the rows between those two moments: intermediates
    and spilled outputs that chain members read, and inputs in ``fetched`` (read row by row
    from storage). Outputs not in ``spilled`` are written whole to the arena and need no ring.
    A spilled tensor no member reads still has a ring of one row: the row is computed there
    and handed to storage. Every row of every operator is computed exactly once (asserted). ``trace`` collects the
    (operator, row) steps in order; tflm_ops/core chain_schedule.h is the same schedule in C++
    (``schedule_program`` gives it this chain, and tests/test_stream.py compares the two).
    ``fetches`` collects (steps in ``trace`` so far, tensor, row) for each row read from storage,
    so that a storage model can replay the chain (benchmarks/runtime_table.py)."""
    inputs, outputs, inner = chain_io(graph, ops)
    producer = {graph.operators[i].outputs[0]: i for i in ops}
    maps, readers = _chain_maps(graph, ops)
    streamed = set(producer) | (set(inputs) & set(fetched))
    height = {t: graph.tensors[t].shape[1] for t in streamed}
    for t, i in producer.items():
        height[t] = steps(graph, i)  # an accumulating stage's output: one step per input row
    done = {t: 0 for t in streamed}  # rows produced (or fetched) so far
    computed = {i: 0 for i in ops}
    inner_set = set(inner)
    ringed = [t for t in streamed if t in inner_set or t in spilled or t in fetched]
    ringed = [
        t for t in ringed if readers.get(t) or t in spilled
    ]  # a spilled row is computed into its ring
    held = {t: 0 for t in ringed}
    pulls, reads = _windows(graph, ops, maps, readers, done, height, ringed)
    note = _note_rings(done, height, reads, held)
    pull = _puller(producer, pulls, done, computed, note, held, trace, fetches)
    order = [t for t in outputs if t not in spilled] + [t for t in outputs if t in spilled]
    progress = True
    while progress:
        progress = False
        for t in order:  # one row of each output in turn
            if done[t] < height[t]:
                pull(t, done[t])
                progress = True
    for t in inner:  # an intermediate no output needs (dead code) is still computed
        if done[t] < height[t]:
            pull(t, height[t] - 1)
    cost = _chain_cost(graph, ops, inputs, outputs, spilled, fetched, computed)
    for t in ringed:
        rows = min(max(held[t], 1), height[t])
        cost.ring_rows[t] = rows
        cost.ring_bytes[t] = rows * row_bytes(graph, t)
    return cost


def _chain_cost(
    graph: Graph,
    ops: list[int],
    inputs: list[int],
    outputs: list[int],
    spilled: frozenset[int],
    fetched: frozenset[int],
    computed: dict[int, int],
) -> ChainCost:
    """The chain's cost without its rings, after every member computed each of its rows once."""
    for i in ops:
        if computed[i] != steps(graph, i):
            raise AssertionError(f"operator {i}: {computed[i]} rows computed")
    return ChainCost(
        tuple(ops),
        tuple(t for t in inputs if t not in fetched),
        tuple(t for t in inputs if t in fetched),
        tuple(t for t in outputs if t not in spilled),
        tuple(t for t in outputs if t in spilled),
        rows_computed=computed,
    )


def _windows(
    graph: Graph, ops: list[int], maps, readers, done, height, ringed
) -> tuple[dict, dict]:
    """Each member's streamed inputs with their flat windows, and each ringed tensor's readers
    (output, its height, the flat window)."""
    out_of = {i: graph.operators[i].outputs[0] for i in ops}
    pulls = {
        i: [
            (u, _flat(maps[(i, u)]))
            for u in activation_inputs(graph, graph.operators[i])
            if u in done
        ]
        for i in ops
    }
    reads = {
        t: [(out_of[r], height[out_of[r]], _flat(maps[(r, t)])) for r in readers.get(t, [])]
        for t in ringed
    }
    return pulls, reads


def _chain_maps(
    graph: Graph, ops: list[int]
) -> tuple[dict[tuple[int, int], RowMap], dict[int, list[int]]]:
    """Each (member, activation input)'s row map, and each tensor's readers in the chain."""
    maps: dict[tuple[int, int], RowMap] = {}
    readers: dict[int, list[int]] = {}
    for i in ops:
        op = graph.operators[i]
        for t in activation_inputs(graph, op):
            m = row_map(graph, op, t)
            if m is None:
                raise ValueError(f"operator {i} ({op.opcode}) is not row-local")
            maps[(i, t)] = m
            readers.setdefault(t, []).append(i)
    return maps, readers


# Precomputed for speed (the chain search simulates thousands of chains): each operator's
# streamed inputs with their windows, and each ringed tensor's readers. A window is inlined as
# (num, den, offset, before, after, last input row): RowMap.window's arithmetic, without calls.
def _flat(m: RowMap) -> tuple[int, int, int, int, int, int]:
    return m.num, m.den, m.offset, m.before, m.after, m.in_h - 1


def _note_rings(done: dict, height: dict, reads: dict, held: dict) -> Callable[[int], None]:
    """simulate's ``note``: bound to its schedule's state."""

    def note(t: int) -> None:
        """Record how many rows t's ring holds now: from the first row that the next output row
        of some in-chain reader reads, to the last row produced. Called when a row of t is
        produced: only then can the count grow (a reader's step only moves its first row down)."""
        d = done[t]
        low = height[t]
        for out, out_h, (num, den, offset, before, after, last) in reads[t]:
            y = done[out]
            if y < out_h:
                anchor = (y * num + offset) // den
                lo, hi = anchor - before, anchor + after
                if lo < 0:
                    lo = 0
                if hi > last:
                    hi = last
                if lo <= hi and lo < low:
                    low = lo
        if low > d:
            low = d
        if d - low > held[t]:
            held[t] = d - low

    return note


def _puller(
    producer: dict,
    pulls: dict,
    done: dict,
    computed: dict,
    note: Callable[[int], None],
    held: dict,
    trace: list[tuple[int, int]] | None,
    fetches: list[tuple[int, int, int]] | None,
) -> Callable[[int, int], None]:
    """simulate's ``pull``: bound to its schedule's state."""

    def pull(t0: int, row0: int) -> None:
        """Produce rows of t0 up to `row0` (inclusive), pulling each input row a window needs
        first. Depth-first with an explicit stack, not recursion: a chain of a thousand operators
        would exceed Python's recursion limit. Each frame is [tensor, last row wanted, next input
        to look at, the row being produced (-1: none yet)]; the steps come in the order the
        recursive form takes them."""
        stack = [[t0, row0, 0, -1]]
        while stack:
            frame = stack[-1]
            t, row, k, y = frame
            if y < 0:
                y = done[t]
                if y > row:
                    stack.pop()
                    continue
                frame[3] = y
            i = producer.get(t)
            if i is not None:
                inputs_i = pulls[i]
                pushed = False
                while k < len(inputs_i):
                    u, (num, den, offset, before, after, last) = inputs_i[k]
                    k += 1
                    anchor = (y * num + offset) // den
                    lo, hi = anchor - before, anchor + after
                    if lo < 0:
                        lo = 0
                    if hi > last:
                        hi = last
                    if lo <= hi and done[u] <= hi:
                        frame[2] = k
                        stack.append([u, hi, 0, -1])
                        pushed = True
                        break
                if pushed:
                    continue
                computed[i] += 1
                if trace is not None:
                    trace.append((i, y))
            elif fetches is not None:
                fetches.append((len(trace) if trace is not None else 0, t, done[t]))
            done[t] += 1
            if t in held:
                note(t)
            frame[2], frame[3] = 0, -1

    return pull


def transpose_conv_row_scratch(in_w: int, filter_w: int, out_c: int, stride_w: int) -> int:
    """Scratch of the StreamChain TRANSPOSE_CONV stage's CMSIS-NN row (tinyseg_stream_cmsis.cc,
    CmsisTransposeConvRowBytes): one int32 accumulator row as arm_transpose_conv_s8 sizes it,
    ((in_w - 1) * stride_w + max(filter_w, stride_w)) * out_c int32."""
    return ((in_w - 1) * stride_w + max(filter_w, stride_w)) * out_c * 4


def row_step_scratch(
    graph: Graph, op: Operator, whole_scratch: list[int], implementation: str = "reference"
) -> int:
    """Scratch one operator of a chain needs while it computes one step of rows, given what its
    kernel requests when it runs whole and which implementation the runtime gives it
    (KernelRules.implementation_of): TRANSPOSE_CONV accumulates only the output row it computes
    (int32, as the StreamChain kernel does), and with CMSIS-NN an int8 one needs the larger of
    that and CMSIS-NN's accumulator row, transpose_conv_row_scratch (wider than the output
    row when the stride exceeds the kernel width with VALID padding); every other kernel's scratch
    (CMSIS-NN's im2col and the like) does not depend on the height, so it is kept."""
    if op.opcode in ACCUMULATING:  # its per-channel sums, held from the first row to the last
        return graph.tensors[op.inputs[0]].shape[3] * customops.STREAM_ACCUMULATOR_BYTES
    if op.opcode == "TRANSPOSE_CONV":
        out = graph.tensors[op.outputs[0]]
        row = out.shape[2] * out.shape[3] * (8 if out.dtype == "INT16" else 4)  # int64 for 16x8
        inp, f = graph.tensors[op.inputs[2]], graph.tensors[op.inputs[1]]
        if (
            implementation == "cmsis-nn"
            and inp.dtype == "INT8"
            and len(f.shape) == 4
            and len(inp.shape) == 4
        ):
            out_c, _, f_w, _ = f.shape
            stride_w = op.options.strideW if op.options is not None else 1
            return max(row, transpose_conv_row_scratch(inp.shape[2], f_w, out_c, stride_w))
        return row
    return sum(whole_scratch)


def chain_op_scratch(graph: Graph, ops: list[int], scratch: Callable[[int], int]) -> int:
    """The StreamChain's op_scratch: the largest row-step scratch of its other members (they take
    turns with one buffer), then the accumulating stages' sums after it (they live from the
    chain's first row to its last, so no other member may reuse them; tinyseg_stream_reduce.cc
    finds them at the end)."""
    held = sum(scratch(i) for i in ops if graph.operators[i].opcode in ACCUMULATING)
    turns = max(
        (scratch(i) for i in ops if graph.operators[i].opcode not in ACCUMULATING), default=0
    )
    return turns + (-turns % 4 if held else 0) + held  # the sums start 4-byte aligned


def kernel_computes(graph: Graph, op: Operator) -> bool:
    """Whether the StreamChain kernel computes this operator as a stage (``stage_problem``)."""
    return stage_problem(graph, op) is None


def stage_problem(graph: Graph, op: Operator) -> str | None:
    """Why the StreamChain kernel does not compute this operator as a stage, None when it does
    (customops' rules, and the shapes its Prepare accepts: no broadcast but PRELU's alpha over
    rows and ADD/SUB/MUL's across width and channels, RESIZE_NEAREST_NEIGHBOR rows that TFLM's
    float arithmetic maps to y // factor, PADV2's pad value of the output's quantization). Float32
    stages follow the same shape rules; a float32 RESIZE_BILINEAR needs
    customops.bilinear_float_row_rule. The operator's record (contract/stages/) says which inputs
    are activations and its rule picks the shape checks (_ADMISSIONS)."""
    record = stages.record_of(op.opcode)
    if not op.outputs or not op.inputs:
        return "it has no inputs or no outputs"
    out = graph.tensors[op.outputs[0]]
    sorted_inputs = _admitted_operands(graph, op, record)
    if isinstance(sorted_inputs, str):
        return sorted_inputs
    operands, acts, consts = sorted_inputs
    paddings = None
    if record is not None and record.rule == "pad":
        paddings = _paddings(graph, op, record, out, acts)
        if isinstance(paddings, str):
            return paddings
    if not acts:
        return "no activation input"
    problem = customops.stream_stage_problem(
        op.opcode, [graph.tensors[t].dtype for t in operands], out.dtype, consts, paddings
    ) or _quantization_problem(graph, op, operands, out)
    if problem:
        return problem
    assert record is not None  # stream_stage_problem refuses any other operator
    if record.same_shape and graph.tensors[acts[0]].shape != out.shape:
        return "an output shape other than its input's"
    admit = _ADMISSIONS.get(record.rule)
    return admit(graph, op, record, acts, operands) if admit is not None else None


def _admitted_operands(
    graph: Graph, op: Operator, record: stages.Stage | None
) -> tuple[list[int], list[int], list[str | None]] | str:
    """(activation operands, those not constant, the other inputs' types), or why an activation
    position holds a constant or nothing (ADD, SUB and MUL may take a constant there)."""
    positions = record.activations if record is not None else ()
    binary = record is not None and record.rule == "broadcast"
    acts: list[int] = []
    consts: list[str | None] = []
    operands: list[int] = []
    for k, t in enumerate(op.inputs):
        activation = positions is None or k in positions
        if activation and (t < 0 or (graph.tensors[t].is_constant and not binary)):
            return "a constant or omitted operand where the kernel streams rows"
        if activation:
            operands.append(t)
            if not graph.tensors[t].is_constant:
                acts.append(t)
        else:
            consts.append(graph.tensors[t].dtype if t >= 0 else None)
    return operands, acts, consts


def _paddings(
    graph: Graph, op: Operator, record: stages.Stage, out, acts: list[int]
) -> list[list[int]] | str:
    """PAD's and PADV2's constant 4x2 paddings (or why not): adding up to the output's shape, and
    PADV2's pad value a constant scalar in the output's quantization (as TFLM's Prepare)."""
    inputs = 1 + len(record.constants[0])  # the input, the paddings[, the pad value]
    pads = graph.buffer_array(op.inputs[1]) if len(op.inputs) == inputs else None
    if pads is None or pads.shape != (4, 2) or len(out.shape) != 4:
        return "paddings that are not a constant 4x2 table"
    if inputs > 2:
        value = graph.tensors[op.inputs[2]]
        if not value.is_constant or int(np.prod(value.shape)) != 1:
            return "a pad value that is not a constant scalar"
        if out.dtype != "INT16" and (  # TFLM copies an int16 one's bits whatever its scale
            list(value.scales) != list(out.scales)
            or list(value.zero_points) != list(out.zero_points)
        ):
            return "a pad value that is not a constant in the output's quantization"
    paddings = pads.tolist()
    x = graph.tensors[acts[0]].shape if acts else ()
    if len(x) != 4 or any(x[k] + paddings[k][0] + paddings[k][1] != out.shape[k] for k in range(4)):
        return "paddings that do not add up to the output's shape"
    return paddings


def _quantization_problem(graph: Graph, op: Operator, operands: list[int], out) -> str | None:
    """Per-tensor quantization, int16 zero points 0, and the output scale an int16 record needs
    (LOGISTIC's and TANH's 2^-15, as TFLM's Prepare checks)."""
    quantized = [  # float32 has no scale
        t for t in operands + [op.outputs[0]] if graph.tensors[t].dtype != "FLOAT32"
    ]
    if any(len(graph.tensors[t].scales) != 1 for t in quantized):
        return "per-channel quantization of an activation (per-tensor only)"
    if any(
        graph.tensors[t].dtype == "INT16" and graph.tensors[t].zero_points[0] != 0
        for t in quantized
    ):
        return "an int16 activation with a zero point other than 0 (TFLM's int16 kernels need 0)"
    record = stages.find(op.opcode, "int16") if out.dtype == "INT16" else None
    log2 = record.output_scale_log2 if record is not None else None
    if log2 is not None and checked_log2(out.scales[0]) != log2:
        return (
            f"an int16 {op.opcode} whose output scale is not 2^{log2} (TFLM's int16 kernel "
            "needs it)"
        )
    return None


def _broadcast_admission(
    graph: Graph, op: Operator, record: stages.Stage, acts: list[int], operands: list[int]
) -> str | None:
    """ADD, SUB and MUL broadcast across width and channels as TFLM's kernels do; a row needs rows
    of the same height (an activation, or a constant read row by row: a detection head's grid) or
    one row for all (a constant)."""
    out = graph.tensors[op.outputs[0]]
    whole = [t for t in acts if whole_operand(graph, op, t)]
    for t in operands:
        if t in whole:
            continue  # a gate read whole from the arena and broadcast over every row
        shape = (1,) * (4 - len(graph.tensors[t].shape)) + tuple(graph.tensors[t].shape)
        if (
            len(shape) != 4
            or shape[0] != 1
            or any(d not in (1, o) for d, o in zip(shape[2:], out.shape[2:]))
        ):
            return f"a broadcast of {list(shape)} the kernel does not make"
        if shape[1] != out.shape[1] and not (graph.tensors[t].is_constant and shape[1] == 1):
            return f"a broadcast over rows ({list(shape)})"
    return None


def _elementwise_admission(
    graph: Graph, op: Operator, record: stages.Stage, acts: list[int], operands: list[int]
) -> str | None:
    """An alpha input (PRELU's) broadcast over the rows, the same for each."""
    if record.alpha != "input":
        return None
    alpha = graph.tensors[op.inputs[1]].shape
    return None if len(alpha) < 3 or alpha[-3] == 1 else "an alpha that varies over rows"


def _nearest_admission(
    graph: Graph, op: Operator, record: stages.Stage, acts: list[int], operands: list[int]
) -> str | None:
    """Rows TFLM's float arithmetic maps to y // factor, an integer factor, no align_corners."""
    o = op.options
    in_h, out_h = graph.tensors[acts[0]].shape[1], graph.tensors[op.outputs[0]].shape[1]
    if o is None or o.alignCorners or out_h % in_h:
        return "align_corners or a factor that is not an integer"
    scale = np.float32(in_h) / np.float32(out_h)
    offset = np.float32(0.5 if o.halfPixelCenters else 0.0)
    exact = all(
        min(int(np.floor((np.float32(y) + offset) * scale)), in_h - 1) == y // (out_h // in_h)
        for y in range(out_h)
    )
    return None if exact else "rows that TFLM's float arithmetic does not map to y // factor"


def _bilinear_admission(
    graph: Graph, op: Operator, record: stages.Stage, acts: list[int], operands: list[int]
) -> str | None:
    """Its channels, and rows (int8: and columns) TFLM's arithmetic maps to a window of two."""
    o = op.options
    x, out = graph.tensors[acts[0]], graph.tensors[op.outputs[0]]
    if o is None or (o.alignCorners and o.halfPixelCenters):
        return "align_corners with half_pixel_centers (TFLM refuses both)"
    if len(x.shape) != 4 or len(out.shape) != 4 or x.shape[3] != out.shape[3]:
        return "an output with other channels than its input"
    if x.dtype == "FLOAT32":  # float positions (customops.bilinear_float_row_rule)
        if row_map(graph, op, acts[0]) is None:
            return "float32 rows past the float rule (a size past 2^15, or one input row)"
        return None
    if row_map(graph, op, acts[0]) is None:
        return "a scale TFLM's fixed-point rows cannot express (0 or past int32)"
    if (
        customops.bilinear_row_rule(
            x.shape[2], out.shape[2], bool(o.alignCorners), bool(o.halfPixelCenters)
        )
        is None
    ):
        return "a width scale TFLM's fixed-point columns cannot express (0 or past int32)"
    return None


# The shape checks of each rule beyond stream_stage_problem's types (contract/stages/record.py
# RULES; the others have none).
_ADMISSIONS: dict[str, Callable[..., str | None]] = {
    "broadcast": _broadcast_admission,
    "elementwise": _elementwise_admission,
    "resize_nearest": _nearest_admission,
    "resize_bilinear": _bilinear_admission,
}


@dataclass(frozen=True)
class Gap:
    """A row-local operator the StreamChain kernel does not compute, and why: the estimate
    (`analyze --stream`) streams it, `optimize` cuts its chains there."""

    operator: int
    opcode: str
    reason: str


def stage_gaps(graph: Graph) -> list[Gap]:
    """What keeps `optimize`'s chains shorter than the estimate's, operator by operator."""
    gaps = []
    for op in graph.operators:
        if is_row_local(graph, op):
            reason = stage_problem(graph, op)
            if reason is not None:
                gaps.append(Gap(op.index, op.opcode, reason))
    return gaps


def stage_key(graph: Graph, op: Operator) -> tuple[str, str]:
    """The stage type of ``op``: its operator and its row type (contract/stages/ keys), from its
    first activation input's type and its output's, as the kernel's RowsOf picks the rows."""
    ins = activation_inputs(graph, op)
    first = graph.tensors[ins[0]].dtype if ins else ""
    return op.opcode, stages.rows_of(
        first, graph.tensors[op.outputs[0]].dtype if op.outputs else ""
    )


def find_chains(
    graph: Graph, kernel_only: bool = False, off: frozenset[tuple[str, str]] = frozenset()
) -> list[list[int]]:
    """Maximal runs of consecutive row-local operators (in schedule order) that are connected:
    each operator after the first reads a tensor an earlier member produced; an accumulating stage
    (a MEAN over height and width) ends its chain. ``kernel_only``:
    only operators the StreamChain kernel computes (for models that will run; the estimate
    plans every row-local operator). ``off``: stage types (``stage_key``) no chain may hold."""
    chains: list[list[int]] = []
    current: list[int] = []
    produced: set[int] = set()
    for op in graph.operators:
        if (
            is_row_local(graph, op)
            and (not kernel_only or kernel_computes(graph, op))
            and not _feeds_whole_operand(graph, op)
            and not (off and stage_key(graph, op) in off)
        ):
            if current and not any(t in produced for t in activation_inputs(graph, op)):
                chains.append(current)
                current, produced = [], set()
            current.append(op.index)
            produced.add(op.outputs[0])
            if op.opcode in ACCUMULATING:  # its one pixel is a node output: the chain ends here
                chains.append(current)
                current, produced = [], set()
        elif current:
            chains.append(current)
            current, produced = [], set()
    if current:
        chains.append(current)
    return [c for c in chains if len(c) > 1]


def schedule_program(graph: Graph, ops: list[int], cost: ChainCost) -> str:
    """The chain as chain_schedule.h's program (the input of tflm_ops/tools/chain_schedule_check.cc):
    tensors (height, producing stage, streamed, ring rows), stages, edges in each stage's input
    order, and the outputs in the order simulate asks them for rows."""
    streamed = [graph.operators[i].outputs[0] for i in ops] + list(cost.fetched)
    whole = list(cost.inputs)
    tensors = streamed + whole
    index = {t: k for k, t in enumerate(tensors)}
    stage_of = {i: k for k, i in enumerate(ops)}
    lines = [str(len(tensors))]
    for t in tensors:
        producer = stage_of.get(graph.producers.get(t, -1), -1) if t in streamed else -1
        rows = steps(graph, ops[producer]) if producer >= 0 else graph.tensors[t].shape[1]
        lines.append(f"{rows} {producer} {int(t in streamed)} {cost.ring_rows.get(t, 0)}")
    lines.append(str(len(ops)))
    lines += [str(index[graph.operators[i].outputs[0]]) for i in ops]
    edges = []
    for i in ops:
        op = graph.operators[i]
        for t in activation_inputs(graph, op):
            if whole_operand(graph, op, t):
                continue  # read whole: no schedule edge (as the kernel)
            m = row_map(graph, op, t)
            edges.append(
                f"{stage_of[i]} {index[t]} {m.in_h} {m.num} {m.den} {m.offset} {m.before} {m.after}"
            )
    lines += [str(len(edges))] + edges
    order = list(cost.outputs) + list(cost.spilled)
    lines += [str(len(order)), " ".join(str(index[t]) for t in order)]
    return "\n".join(lines) + "\n"
