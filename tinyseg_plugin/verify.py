"""Proof by execution: lower TinySeg's operators back to builtins and compare with the original in TFLM.

Lowering: Spill is removed; a Fetching becomes CONCATENATION (or, with a single operand,
disappears and its readers read the spilled tensor again); FetchingConv2D becomes
CONCATENATION then CONV_2D; scratch markers are dropped. The OfflineMemoryAllocation layout is
kept (tensor by tensor), so the check runs the arena layout the optimizer wrote. The lowered model computes
what the optimized model's operators are specified to compute, so equal outputs in
the real interpreter on random inputs show the rewrite preserved the function.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import customops, tflm
from .errors import TinySegError
from .graph import Graph
from .modelio import model_to_bytes
from .passes.edit import Editor, Op
from .planner import ONLINE, offline_offsets

_PAD = {v: k for k, v in customops.PADDING.items()}
_ACT = {v: k for k, v in customops.ACTIVATIONS.items()}
_BIAS = {v: k for k, v in customops.BIAS_TYPES.items()}


def lower(graph: Graph) -> Graph:
    """The builtin-only equivalent of an optimized graph (refused, as its kernels would refuse it, when
    a TinySeg operator is malformed: a lowering of it would compute something else). An estimate's
    chain may hold stages the kernel does not compute: only its structure is checked here."""
    customops.validate_graph(graph, kernel=False)
    slots: dict[int, int] = {}
    for op in graph.operators:
        if op.opcode == customops.SPILL:
            slots[customops.decode(op).slot] = op.inputs[0]
    ed = Editor(graph)
    ed.drop_intermediates_named(customops.MARKER_NAME)
    layout = _layout_by_tensor(graph, set(slots.values()))
    new_ops: list[int | Op] = []  # kept operators by position, new ones as built
    renames: list[tuple[int, int, int]] = []  # (old, new, from this position of new_ops on)
    alias: dict[int, int] = {}  # a removed single-operand Fetching's output -> the tensor it stands for

    def resolve(t: int) -> int:
        """Follow renames to the end: a fetched tensor that was spilled again is still the first tensor."""
        while t in alias:
            t = alias[t]
        return t

    for op in graph.operators:
        if op.opcode == customops.SPILL:
            continue
        if op.opcode == customops.STREAM_CHAIN:
            new_ops.extend(_lower_chain(ed, op, slots, resolve))
            continue
        if op.opcode in (customops.FETCHING, customops.FETCHING_CONV_2D):
            o = customops.decode(op)
            fo = o if isinstance(o, customops.FetchingOptions) else o.fetching
            operands = []
            for src in customops.operand_sources(op, fo):
                if isinstance(src, customops.Fetched):
                    if src.slot not in slots:
                        raise TinySegError(f"operator {op.index}: fetches slot {src.slot}, which no Spill fills")
                    operands.append(resolve(slots[src.slot]))
                else:
                    operands.append(src)
            target = op.outputs[0]
            if op.opcode == customops.FETCHING and len(operands) == 1:
                alias[target] = operands[0]
                renames.append((target, operands[0], len(new_ops)))
                continue
            if op.opcode == customops.FETCHING:
                new_ops.append(ed.concatenation(operands, target, fo.axis))
                continue
            filt, bias = op.inputs[-2], op.inputs[-1]
            if len(operands) == 1:
                cat = operands[0]
            else:
                shape = list(graph.tensors[operands[0]].shape)
                shape[3] = graph.tensors[filt].shape[3]
                cat = ed.tensor_like(operands[0], f"{graph.tensors[target].name}/lowered_concat", shape)
                new_ops.append(ed.concatenation(operands, cat, 3))
            c = o.conv
            new_ops.append(ed.conv2d([cat, filt] + ([bias] if bias >= 0 else []), target, padding=_PAD[c.padding],
                                     stride_h=c.stride_h, stride_w=c.stride_w, dilation_h=c.dilation_h,
                                     dilation_w=c.dilation_w, activation=_ACT[c.activation],
                                     quantized_bias_type=_BIAS[o.quantized_bias_type]))  # int16 without bias: int32/int64 sums
            continue
        new_ops.append(op.index)
    ed.rebuild(new_ops)
    for old, new, start in renames:
        ed.rename_uses(old, new, start)
        ed.rename_outputs(old, new)
    if layout is not None:
        ed.offline_offsets(layout)
    return ed.graph()


def _lower_chain(ed: Editor, op, slots: dict[int, int], resolve) -> list[Op]:
    """A StreamChain's body as builtins: its tensors made whole, a fetched one being the tensor the
    chain that spilled it made (``slots``, filled here in operator order)."""
    o = customops.decode(op)
    try:
        return _lower_body(ed, op, o, slots, resolve)
    except (IndexError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TinySegError(f"operator {op.index} (StreamChain): malformed body ({exc})") from None


def _lower_body(ed: Editor, op, o: "customops.StreamChainOptions", slots: dict[int, int], resolve) -> list[Op]:
    ids = list(op.inputs) + list(op.outputs)
    fetched = dict(o.fetch)
    for t in o.tensors:
        lid = len(ids)
        if lid in fetched:
            if fetched[lid] not in slots:
                raise TinySegError(f"operator {op.index}: fetches slot {fetched[lid]}, which nothing before it spills")
            ids.append(resolve(slots[fetched[lid]]))
        else:
            ids.append(ed.quantized_tensor(t.name, t.dtype, t.shape, t.scales, t.zero_points, t.quantized_dimension))
    for lid, slot in o.spill:
        slots[slot] = ids[lid]
    return [ed.builtin(st.op, [ids[i] if i >= 0 else -1 for i in st.inputs], [ids[i] for i in st.outputs],
                       st.options, dict(st.fields), st.version) for st in o.stages]


def _layout_by_tensor(graph: Graph, spilled: set[int]) -> dict[int, int] | None:
    """The optimized model's OfflineMemoryAllocation for this subgraph, by tensor index.

    The lowered model runs the layout the device runs, except for what the lowering itself changes:
    a spilled tensor stays in RAM until its lowered reader, and the lowered concatenation of a
    FetchingConv2D is new, so those are planned online (TFLM places them around the offline ones).
    None without the metadata."""
    offsets = offline_offsets(graph.model)
    if offsets is None:
        return None
    base = sum(len(sg.tensors or []) for sg in graph.model.subgraphs[: graph.subgraph])
    return {i: offsets[base + i] for i in range(len(graph.tensors))
            if i not in spilled and offsets[base + i] != ONLINE}


def random_inputs(model: bytes, seed: int, details: list[dict] | None = None) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for d in details if details is not None else tflm.input_details(model):
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            out.append(rng.normal(0, 1, size=d["shape"]).astype(dt))
        elif dt.kind == "b":
            out.append(rng.integers(0, 2, size=d["shape"]).astype(dt))
        else:
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, info.max, size=d["shape"], endpoint=True, dtype=dt))
    return out


def _extremes(dt: np.dtype) -> tuple:
    if dt.kind == "f":
        return (-1e3, 1e3) if dt.itemsize >= 4 else (-1e2, 1e2)
    if dt.kind == "b":
        return (False, True)
    info = np.iinfo(dt)
    return (info.min, info.max)


def edge_inputs(details: list[dict]) -> list[list[np.ndarray]]:
    """All-minimum, all-maximum and alternating min/max inputs: where saturation and rounding bugs show."""
    lo = [np.full(d["shape"], _extremes(np.dtype(d["dtype"]))[0], dtype=np.dtype(d["dtype"])) for d in details]
    hi = [np.full(d["shape"], _extremes(np.dtype(d["dtype"]))[1], dtype=np.dtype(d["dtype"])) for d in details]
    alt = []
    for d in details:
        a, b = _extremes(np.dtype(d["dtype"]))
        n = int(np.prod(d["shape"], dtype=np.int64))
        alt.append(np.where(np.arange(n) % 2 == 0, a, b).astype(np.dtype(d["dtype"])).reshape(d["shape"]))
    return [lo, hi, alt]


EDGE_NAMES = ("all-minimum", "all-maximum", "alternating")


LOWERED = "lowered"  # the fallback: TinySeg operators lowered to builtins, run in the tflite-micro wheel
REAL_KERNELS = "real-kernels"  # the model as written, TinySeg's kernels in a host build of a TFLM tree


@dataclass(frozen=True)
class Verification:
    runs: int  # random inputs compared
    identical: bool
    detail: str = ""
    edge_cases: int = 0  # edge-case inputs compared besides the random ones
    check: str = LOWERED  # which of the two checks ran
    tflm_dir: str = ""  # the TFLM tree of the real-kernel check

    def describe(self) -> str:
        """One phrase naming the check, for the output line and the report."""
        if self.check == REAL_KERNELS:
            return (f"real-kernel check: the model as written, TinySeg kernels in a host build of TFLM "
                    f"{self.tflm_dir}")
        return "fallback check: TinySeg operators lowered to builtins in the tflite-micro wheel (no TFLM tree)"


def arena_for(graph: Graph) -> int:
    """An arena that holds the model with room to spare (the lowered model may need more than the
    original), so models beyond the default 64 MiB can be checked too."""
    from .planner import plan_graph

    try:
        need = plan_graph(graph).total
    except TinySegError:
        return tflm.DEFAULT_ARENA
    return max(tflm.DEFAULT_ARENA, 2 * need + (16 << 20))


def _describe(details: list[dict]) -> str:
    return ", ".join(f"{np.dtype(d['dtype'])}{list(d['shape'])}" for d in details) or "none"


def verify(original: Graph, optimized: Graph, runs: int = 3, seed: int = 0,
           seconds: float = tflm.RUN_SECONDS, edge_cases: bool = True, tflm_dir: str | None = None,
           progress=None) -> Verification:
    """Run the original and the optimized model on ``runs`` random inputs (and the edge cases);
    outputs must be bit-identical. With ``tflm_dir`` (a TFLM tree) the optimized model runs as written
    with TinySeg's kernels (devicecheck.py); without, its lowering runs in the tflite-micro wheel.
    Every run is a child process bounded by ``seconds``."""
    if runs < 1:
        raise TinySegError(f"verification needs at least one random input (got {runs})")
    if tflm_dir:
        return verify_real_kernels(original, optimized, tflm_dir, runs, seed, seconds, edge_cases, progress)
    a = model_to_bytes(original.model)
    b = model_to_bytes(lower(optimized).model)
    labels = ["the original", "the optimized model (lowered to builtins)"]
    arena = arena_for(original)
    da, db = tflm.compare_inputs([a, b], labels, arena_size=arena)
    if [(tuple(d["shape"]), np.dtype(d["dtype"])) for d in da] != [(tuple(d["shape"]), np.dtype(d["dtype"])) for d in db]:
        raise TinySegError(f"the models' inputs differ: {_describe(da)} against {_describe(db)}; "
                           "they cannot compute the same function")
    batches = [random_inputs(a, seed + r, da) for r in range(runs)]
    names = [f"random input {r}" for r in range(runs)]
    if edge_cases:
        batches += edge_inputs(da)
        names += list(EDGE_NAMES)
    ya_all, yb_all = tflm.run_models([a, b], batches, labels, arena_size=arena, seconds=seconds)
    n_edge = len(batches) - runs
    for r, (ya, yb) in enumerate(zip(ya_all, yb_all)):
        if len(ya) != len(yb):
            return Verification(runs, False, f"{len(ya)} outputs against {len(yb)}", n_edge)
        for k, (p, q) in enumerate(zip(ya, yb)):
            if p.shape != q.shape or p.dtype != q.dtype or not np.array_equal(p, q, equal_nan=p.dtype.kind == "f"):
                diff = int(np.count_nonzero(p != q)) if p.shape == q.shape else -1
                return Verification(runs, False, f"output {k} differs on {names[r]} ({diff} elements)", n_edge)
    return Verification(runs, True, "", n_edge)


def _details(graph: Graph) -> list[dict]:
    out = []
    for t in graph.inputs:
        tensor = graph.tensors[t]
        if tensor.numpy_dtype is None:
            raise TinySegError(f"input {tensor.name!r} has type {tensor.dtype}, which the check cannot feed")
        out.append({"shape": tuple(tensor.shape), "dtype": np.dtype(tensor.numpy_dtype)})
    return out


def _split(graph: Graph, data: bytes) -> list[np.ndarray]:
    """One batch of the runner's output bytes as the graph's output arrays."""
    arrays, at = [], 0
    for t in graph.outputs:
        tensor = graph.tensors[t]
        n = tensor.elements * tensor.itemsize
        dt = np.dtype(tensor.numpy_dtype) if tensor.numpy_dtype else np.uint8
        arrays.append(np.frombuffer(data[at:at + n], dtype=dt).reshape(tensor.shape if tensor.numpy_dtype else (-1,)))
        at += n
    return arrays


def verify_real_kernels(original: Graph, optimized: Graph, tflm_dir: str, runs: int = 3, seed: int = 0,
                        seconds: float = tflm.RUN_SECONDS, edge_cases: bool = True, progress=None) -> Verification:
    """Both models in one host build of ``tflm_dir`` with TinySeg's kernels: the optimized one exactly as
    written (offline layout, scratch markers, Spill/Fetching/FetchingConv2D through the C++ codec into
    host-RAM storage). Built once and cached (devicecheck.prepare)."""
    from . import devicecheck

    customops.validate_graph(optimized)  # the kernels refuse it in Prepare; say why before building
    exe = devicecheck.prepare(tflm_dir, progress=progress)
    da, db = _details(original), _details(optimized)
    if [(d["shape"], d["dtype"]) for d in da] != [(d["shape"], d["dtype"]) for d in db]:
        raise TinySegError(f"the models' inputs differ: {_describe(da)} against {_describe(db)}; "
                           "they cannot compute the same function")
    a = model_to_bytes(original.model)
    b = model_to_bytes(optimized.model)
    batches = [random_inputs(a, seed + r, da) for r in range(runs)]
    names = [f"random input {r}" for r in range(runs)]
    if edge_cases:
        batches += edge_inputs(da)
        names += list(EDGE_NAMES)
    n_edge = len(batches) - runs
    arena = arena_for(original)
    ra = devicecheck.run(exe, a, batches, arena, seconds, "the original")
    rb = devicecheck.run(exe, b, batches, arena, seconds, "the optimized model")
    done = dict(check=REAL_KERNELS, tflm_dir=str(tflm_dir))
    spills = sum(1 if op.opcode == customops.SPILL else len(customops.decode(op).spill)
                 for op in optimized.operators if op.opcode in (customops.SPILL, customops.STREAM_CHAIN)) * len(batches)
    if rb.stats.get("spills") != spills:  # the TinySeg kernels must really have run: each Spill and each StreamChain row stream, once per input
        return Verification(runs, False, f"the TinySeg kernels ran {rb.stats.get('spills')} spills, "
                                         f"the model asks for {spills}", n_edge, **done)
    if [(original.tensors[t].shape, original.tensors[t].dtype) for t in original.outputs] != \
            [(optimized.tensors[t].shape, optimized.tensors[t].dtype) for t in optimized.outputs]:
        return Verification(runs, False, "the models' outputs have other shapes or types", n_edge, **done)
    for r, (pa, pb) in enumerate(zip(ra.outputs, rb.outputs)):
        if pa == pb:
            continue
        for k, (p, q) in enumerate(zip(_split(original, pa), _split(optimized, pb))):
            if p.tobytes() != q.tobytes():
                diff = int(np.count_nonzero(p != q)) if p.shape == q.shape else -1
                return Verification(runs, False, f"output {k} differs on {names[r]} ({diff} elements)", n_edge, **done)
        return Verification(runs, False, f"outputs differ on {names[r]}", n_edge, **done)
    return Verification(runs, True, "", n_edge, **done)
