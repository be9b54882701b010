"""TFLM-exact memory planning of the arena's non-persistent part (the "head").

This follows what TFLM does when it commits its static memory plan:
AllocationInfoBuilder gives every tensor and scratch buffer a lifetime in
"allocation scopes" (graph inputs at scope 0, operator i at scope i+1,
graph outputs kept to the last scope, control-flow subgraphs nested in their
operator's scope), sizes are rounded up to 16 bytes, and GreedyMemoryPlanner
places offline-planned buffers first, then the rest largest first (a stable
sort over the reversed insertion order, as its bubble sort does) at the lowest
offset that fits among the buffers alive at the same time.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, field
from itertools import islice

from .. import deadline
from ..contract import customops
from ..errors import TinySegError
from ..ir import offline
from ..ir.graph import Graph, build_graph
from ..ir.schema import fb
from .align import ARENA_ALIGNMENT, align_up
from .kernels import BUILD_PROFILES, BuildProfile, KernelRules

OFFLINE_METADATA = offline.NAME
ONLINE = offline.ONLINE


@dataclass(frozen=True)
class Buffer:
    """One buffer of the plan: a tensor of some subgraph, or a kernel's scratch buffer."""

    kind: str  # "tensor" or "scratch"
    subgraph: int
    owner: int  # the index of what the buffer is for: its tensor, or for scratch the requesting operator
    nbytes: int  # bytes asked for
    size: int  # bytes planned (rounded up to 16)
    first: int  # first allocation scope
    last: int  # last allocation scope
    offset: int
    offline: bool = False
    request: int = 0  # for scratch: which of the operator's requests

    def alive_at(self, scope: int) -> bool:
        return self.first <= scope <= self.last

    @property
    def label(self) -> str:
        if self.kind == "tensor":
            return f"t{self.owner}" if self.subgraph == 0 else f"s{self.subgraph}:t{self.owner}"
        return f"scratch(op{self.owner}#{self.request})"


@dataclass(frozen=True)
class Tail:
    """An estimate of the persistent section (the "tail"), by category."""

    build_profile: str
    eval_tensors: int
    node_registrations: int
    io_tensors: int
    kernel_data: int
    scratch_handles: int
    variables: int
    fixed: int
    builtin_data: int = 0  # parsed operator options (TfLite<Op>Params)
    app: str = ""  # which application's allocations the estimate follows (see estimate_tail)

    @property
    def total(self) -> int:
        return (
            self.eval_tensors
            + self.node_registrations
            + self.io_tensors
            + self.kernel_data
            + self.scratch_handles
            + self.variables
            + self.fixed
            + self.builtin_data
        )


@dataclass
class Plan:
    """A memory plan: every buffer with its offset, the head, and the tail estimate."""

    graph: Graph
    kernel_set: str
    build_profile: str
    buffers: list[Buffer]
    head: int
    tail: Tail
    scopes: int  # number of allocation scopes (operators of subgraph 0 + 1, without control flow)
    unknown_ops: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.head + self.tail.total

    @property
    def exact(self) -> bool:
        """False when some operator had no scratch rule, so the head may be off."""
        return not self.unknown_ops

    def live_at(self, scope: int) -> list[Buffer]:
        """The buffers alive at ``scope``, in plan order."""
        by_scope = self.live_positions()
        if 0 <= scope < len(by_scope):
            return [self.buffers[k] for k in by_scope[scope]]
        return [b for b in self.buffers if b.alive_at(scope)]

    def live_positions(self) -> list[tuple[int, ...]]:
        """For every scope from 0 to the last one any buffer reaches, the positions in ``buffers``
        of the buffers alive there, ascending. Built once by a sweep over the scopes (a scan of every
        buffer per scope made the analysis of long models quadratic in Python steps)."""
        cached = self.__dict__.get("_live_index")
        if cached is not None and cached[0] is self.buffers and cached[1] == len(self.buffers):
            return cached[2]
        top = max((b.last for b in self.buffers), default=-1)
        starts: list[list[int]] = [[] for _ in range(top + 1)]
        ends: list[list[int]] = [[] for _ in range(top + 1)]
        for k, b in enumerate(self.buffers):
            first = max(b.first, 0)
            if first <= b.last:
                starts[first].append(k)
                ends[b.last].append(k)
        active: list[int] = []
        index: list[tuple[int, ...]] = []
        for s in range(top + 1):
            for k in starts[s]:
                insort(active, k)
            index.append(tuple(active))
            for k in ends[s]:
                del active[bisect_left(active, k)]
        self.__dict__["_live_index"] = (self.buffers, len(self.buffers), index)
        return index

    def tensor_buffer(self, tensor: int, subgraph: int = 0) -> Buffer | None:
        cached = self.__dict__.get("_tensor_index")
        if cached is None or cached[0] is not self.buffers or cached[1] != len(self.buffers):
            index: dict[tuple[int, int], Buffer] = {}
            for b in self.buffers:
                if b.kind == "tensor":
                    index.setdefault((b.owner, b.subgraph), b)  # the first one, as a scan finds it
            cached = (self.buffers, len(self.buffers), index)
            self.__dict__["_tensor_index"] = cached
        return cached[2].get((tensor, subgraph))

    def scratch_of(self, op_index: int, subgraph: int) -> list[Buffer]:
        """The scratch buffers of one operator, in plan order."""
        cached = self.__dict__.get("_scratch_index")
        if cached is None or cached[0] is not self.buffers or cached[1] != len(self.buffers):
            index: dict[tuple[int, int], list[Buffer]] = {}
            for b in self.buffers:
                if b.kind == "scratch":
                    index.setdefault((b.owner, b.subgraph), []).append(b)
            cached = (self.buffers, len(self.buffers), index)
            self.__dict__["_scratch_index"] = cached
        return cached[2].get((op_index, subgraph), [])

    def peak_scope(self) -> int:
        """The scope whose live buffers reach highest in the arena (the first such scope)."""
        best, best_top = 0, -1
        for s in range(self.scopes + 1):
            top = max((b.offset + b.size for b in self.live_at(s)), default=0)
            if top > best_top:
                best, best_top = s, top
        return best


# ---------------------------------------------------------------- lifetimes


@dataclass
class _Info:
    nbytes: int
    needs: bool
    offline: int = ONLINE
    first: int = -1
    last: int = -1


_CONTROL_FLOW = {
    "IF": ("thenSubgraphIndex", "elseSubgraphIndex"),
    "WHILE": ("condSubgraphIndex", "bodySubgraphIndex"),
    "CALL_ONCE": ("initSubgraphIndex",),
}


class _Lifetimes:
    """AllocationInfoBuilder::MarkAllocationLifetimes, recursion into control flow included."""

    def __init__(
        self, graphs: list[Graph], infos: list[list[_Info]], scratch: list[tuple[int, int, _Info]]
    ):
        self.graphs, self.infos, self.scratch, self.scope = graphs, infos, scratch, 0
        # Each operator's scratch requests in request order (looked up per operator, not scanned).
        self.scratch_of: dict[tuple[int, int], list[_Info]] = {}
        for sg, node, info in scratch:
            self.scratch_of.setdefault((sg, node), []).append(info)

    @staticmethod
    def _created(info: _Info, scope: int) -> None:
        if info.first == -1:
            info.first = scope

    def mark(self, s: int) -> None:
        g, infos = self.graphs[s], self.infos[s]
        for t in g.inputs:
            self._created(infos[t], self.scope)
            infos[t].last = self.scope
        for op in g.operators:
            self.scope += 1
            for t in op.outputs:
                self._created(infos[t], self.scope)
            start = self.scope
            for attr in _CONTROL_FLOW.get(op.opcode, ()):
                self.scope += 1
                self.mark(int(getattr(op.options, attr)))
            for t in op.inputs:
                if t >= 0:
                    infos[t].last = self.scope
            for t in op.outputs:
                infos[t].last = self.scope
            for info in self.scratch_of.get((s, op.index), ()):
                self._created(info, start)
                info.last = self.scope
        for t in g.outputs:
            self._created(infos[t], self.scope)
            infos[t].last = self.scope


# ---------------------------------------------------------------- placement


def greedy_place(
    sizes: list[int], firsts: list[int], lasts: list[int], offline: list[int]
) -> list[int]:
    """GreedyMemoryPlanner::CalculateOffsetsIfNeeded: offsets for each buffer, in insertion order.

    TFLM walks every placed buffer in offset order for each new one (quadratic in buffers). The
    walk's result depends only on the placed buffers whose lifetimes overlap the new one's, taken
    in offset order (ties at one offset give the same result in any order), so the placed buffers
    are kept by offset, and at one offset by lifetime: buffers of a positive size that share an
    offset were placed because their lifetimes are disjoint, so those overlapping a lifetime are one
    slice found by bisection. The walk then costs the number of distinct offsets below the result,
    not the number of buffers. Offline offsets may overlap and zero-sized buffers overlap
    anything: then the plain walk (``_walk_place``) is taken, which gives the same offsets.
    """
    n = len(sizes)
    if n == 0:
        return []
    head_ids = [i for i in range(n) if offline[i] != ONLINE]
    online = [i for i in range(n) if offline[i] == ONLINE]
    online.reverse()  # filled from the tail of the array in insertion order
    online.sort(key=lambda i: -sizes[i])  # stable, like the planner's bubble sort
    return first_fit(head_ids + online, sizes, firsts, lasts, offline)


def first_fit(
    order: list[int],
    sizes: list[int],
    firsts: list[int],
    lasts: list[int],
    offline: list[int] | None = None,
) -> list[int]:
    """Place the buffers in ``order`` (ids into the other lists) each at the lowest offset where it
    overlaps no buffer placed before it that is alive at the same time (``offline``: fixed offsets,
    ONLINE for none); offsets by id, ONLINE for ids not in ``order``. See greedy_place."""
    n = len(sizes)
    if offline is None:
        offline = [ONLINE] * n
    if any(sizes[i] <= 0 or lasts[i] < firsts[i] for i in order):
        return _walk_place(order, sizes, firsts, lasts, offline)
    offsets = [ONLINE] * n
    levels: list[int] = []  # distinct offsets, ascending
    groups: dict[
        int, tuple[list[int], list[int], list[int]]
    ] = {}  # offset -> firsts, lasts, sizes by first
    previous = None  # (first, last, size, offset) of the buffer placed just before, when online
    for k, i in enumerate(order):
        f, l, size = firsts[i], lasts[i], sizes[i]
        if offline[i] != ONLINE:
            cand = offline[i]
        else:
            cand, start = 0, 0
            if previous is not None and previous[:3] == (f, l, size):
                # The same lifetime and size as the buffer placed just before (a stack, such as many
                # graph inputs): nothing below that one's offset fitted then, nothing overlapping it
                # starts below its end, so the walk resumes at its end.
                cand = previous[3] + size
                start = bisect_left(levels, cand)
            for off in islice(levels, start, None):
                g_first, g_last, g_size = groups[off]
                hi = bisect_right(g_first, l)  # members that start by l ...
                lo = bisect_left(
                    g_last, f, 0, hi
                )  # ... and end at f or later (lasts ascend with firsts)
                if lo >= hi:
                    continue
                if off - cand >= size:
                    break
                end = off + (g_size[lo] if hi - lo == 1 else max(g_size[lo:hi]))
                if end > cand:
                    cand = end
        offsets[i] = cand
        previous = (f, l, size, cand) if offline[i] == ONLINE else None
        group = groups.get(cand)
        if group is None:
            insort(levels, cand)
            groups[cand] = ([f], [l], [size])
            continue
        g_first, g_last, g_size = group
        pos = bisect_right(g_first, f)
        if (pos > 0 and g_last[pos - 1] >= f) or (pos < len(g_first) and g_first[pos] <= l):
            # lifetimes overlapping at one offset (offline offsets can): the plain walk from here on
            return _walk_place(order, sizes, firsts, lasts, offline, offsets, k + 1)
        g_first.insert(pos, f)
        g_last.insert(pos, l)
        g_size.insert(pos, size)
    return offsets


def _walk_place(
    order: list[int],
    sizes: list[int],
    firsts: list[int],
    lasts: list[int],
    offline: list[int],
    offsets: list[int] | None = None,
    start: int = 0,
) -> list[int]:
    """TFLM's walk over every placed buffer in offset order: ``order[:start]`` already has ``offsets``."""
    if offsets is None:
        offsets = [ONLINE] * len(sizes)
    placed: list[
        tuple[int, int]
    ] = []  # (offset, id), kept sorted by offset; ties after existing entries
    for k, i in enumerate(order):
        if k < start:
            _insert_sorted(placed, offsets[i], i, first=(k == 0))
            continue
        if offline[i] != ONLINE:
            cand = offline[i]
        elif k == 0:
            cand = 0
        else:
            cand = 0
            f, l, size = firsts[i], lasts[i], sizes[i]
            for off, j in placed:
                if firsts[j] > l or f > lasts[j]:
                    continue
                if off - cand >= size:
                    break
                cand = max(cand, off + sizes[j])
        offsets[i] = cand
        _insert_sorted(placed, cand, i, first=(k == 0))
    return offsets


def _insert_sorted(placed: list[tuple[int, int]], offset: int, i: int, first: bool) -> None:
    """Insert like the planner's linked list: before the first entry with a strictly larger offset,
    except that a new entry goes in front of the list head only when the head's offset is larger."""
    if first or not placed:
        placed.append((offset, i))
        return
    if placed[0][0] > offset:
        placed.insert(0, (offset, i))
        return
    for pos in range(1, len(placed)):
        if placed[pos][0] > offset:
            placed.insert(pos, (offset, i))
            return
    placed.append((offset, i))


# ---------------------------------------------------------------- the plan


def plan_graph(
    graph: Graph, kernel_set: str = "reference", build_profile: str | BuildProfile = "host64"
) -> Plan:
    """Plan the whole model behind ``graph`` as TFLM would, and estimate its tail."""
    deadline.check("planning the arena")
    profile = BUILD_PROFILES[build_profile] if isinstance(build_profile, str) else build_profile
    rules = KernelRules(kernel_set, profile)
    model = graph.model
    graphs = [
        graph if s == graph.subgraph else build_graph(model, s, memo=graph.memo)
        for s in range(len(model.subgraphs))
    ]
    offsets = offline.read(model)
    total_tensors = sum(len(g.tensors) for g in graphs)
    if offsets is not None and len(offsets) != total_tensors:
        raise TinySegError(
            f"OfflineMemoryAllocation metadata has {len(offsets)} offsets but the model has {total_tensors} tensors"
        )
    infos: list[list[_Info]] = []
    k = 0
    for g in graphs:
        row = []
        for t in g.tensors:
            needs = not t.is_constant and not t.is_variable and t.nbytes != 0
            off = ONLINE
            if offsets is not None:
                off = offsets[k]
                if t.is_variable and off != ONLINE:
                    needs = True
            k += 1
            row.append(_Info(t.nbytes, needs, off))
        infos.append(row)
    scratch: list[tuple[int, int, _Info]] = []
    requests: list[tuple[int, int, int]] = []
    for s, g in enumerate(graphs):
        for op in g.operators:
            for r, nbytes in enumerate(rules.scratch_requests(g, op)):
                scratch.append((s, op.index, _Info(nbytes, True)))
                requests.append((s, op.index, r))
    marker = _Lifetimes(graphs, infos, scratch)
    marker.mark(0)

    entries: list[tuple[str, int, int, _Info, int]] = []
    for s, row in enumerate(infos):
        for t, info in enumerate(row):
            if info.needs:
                entries.append(("tensor", s, t, info, 0))
    for (s, node, info), (_, _, r) in zip(scratch, requests):
        entries.append(("scratch", s, node, info, r))
    sizes = [align_up(e[3].nbytes) for e in entries]
    placed = greedy_place(
        sizes,
        [e[3].first for e in entries],
        [e[3].last for e in entries],
        [e[3].offline for e in entries],
    )
    buffers = [
        Buffer(
            kind, s, idx, info.nbytes, size, info.first, info.last, off, info.offline != ONLINE, r
        )
        for (kind, s, idx, info, r), size, off in zip(entries, sizes, placed)
    ]
    head = max((b.offset + b.size for b in buffers), default=0)
    tail = estimate_tail(graphs, rules, len(scratch))
    return Plan(
        graph,
        kernel_set,
        profile.name,
        buffers,
        head,
        tail,
        marker.scope,
        sorted(rules.unknown_ops),
    )


def head_without_io(plan: Plan) -> int:
    """The head when the graph's own inputs and outputs are not held in the arena (an application
    that streams them in and out, and the way msf-CNN counts its peaks)."""
    return head_without(plan, set(plan.graph.inputs) | set(plan.graph.outputs))


def head_without(plan: Plan, tensors: set[int]) -> int:
    """The head when ``tensors`` (of the plan's subgraph) take no arena bytes: the same placement
    run over every other buffer in the same order, so the figure is TFLM's for such a model."""
    kept = [
        b
        for b in plan.buffers
        if not (b.kind == "tensor" and b.subgraph == plan.graph.subgraph and b.owner in tensors)
    ]
    placed = greedy_place(
        [b.size for b in kept],
        [b.first for b in kept],
        [b.last for b in kept],
        [b.offset if b.offline else ONLINE for b in kept],
    )
    return max((o + b.size for o, b in zip(placed, kept)), default=0)


def plan_model(
    model: "fb.ModelT", kernel_set: str = "reference", build_profile: str = "host64"
) -> Plan:
    return plan_graph(build_graph(model), kernel_set, build_profile)


# ---------------------------------------------------------------- the tail

# (sizeof, alignof) of TFLM's runtime structures at 90b983c (g++ 12 x86-64 and
# arm-none-eabi-g++ 12 -mcpu=cortex-m7), and what the application's setup puts at
# the far end of the tail: one tail profile (_TAIL_PROFILES) per build and application. A build
# profile whose name has no tail profile gets "host64"'s (8-byte pointers) or "cortex-m"'s (4).
_LP64 = {
    "builtin_allocator": (16, 8),  # MicroBuiltinDataAllocator: vtable + pointer
    "eval_tensor": (24, 8),  # TfLiteEvalTensor
    "node": (64, 8),  # NodeAndRegistration
    "tensor": (64, 8),  # TfLiteTensor (TF_LITE_STATIC_MEMORY)
    "quant": (24, 8),  # TfLiteAffineQuantization
    "handle": (8, 8),  # ScratchBufferHandle
    "pointer": 8,
    "resource_variables": (16, 40),  # MicroResourceVariables, one MicroResourceVariable
}
_ILP32 = {
    "builtin_allocator": (8, 4),
    "eval_tensor": (12, 4),
    "node": (32, 4),
    "tensor": (32, 4),
    "quant": (12, 4),
    "handle": (4, 4),
    "pointer": 4,
    "resource_variables": (12, 20),
}
# (SingleArenaBufferAllocator, GreedyMemoryPlanner, MicroAllocator): what
# MicroInterpreter(model, resolver, arena, size) makes, and the Recording* variant
# that RecordingMicroInterpreter and the Python wheel make.
_PLAIN64 = ((72, 8), (72, 8), (72, 8))
_PLAIN32 = ((36, 4), (44, 4), (36, 4))
_TAIL_PROFILES: dict[str, dict] = {
    "host64": {  # the tflite-micro Python wheel: Bazel, USE_TFLM_COMPRESSION, RecordingMicroAllocator
        **_LP64,
        "app": "tflite-micro Python wheel (RecordingMicroAllocator, LP64, compression build)",
        "setup": ((104, 8), (72, 8), (272, 8)),
        "subgraph_allocations": (24, 8),  # with the compressed-tensor list
        "compression": True,
        "resource_variables_in_arena": True,  # the wheel creates them for VAR_HANDLE models
        # The wheel (0.dev20261023, g8f6596d) is newer than 90b983c: its ParseFullyConnected
        # allocates 32 bytes with 8-byte alignment (read from its _runtime.so), 90b983c 16.
        "builtin_overrides": {"FULLY_CONNECTED": (32, 8)},
    },
    "host64-make": {  # x86-64 Makefile build, plain MicroInterpreter
        **_LP64,
        "app": "x86-64 Makefile build, MicroInterpreter on an arena",
        "setup": _PLAIN64,
        "subgraph_allocations": (16, 8),
        "compression": False,
    },
    "host64-make-recording": {  # the same with RecordingMicroInterpreter (tests/tflm_probe)
        **_LP64,
        "app": "x86-64 Makefile build, RecordingMicroInterpreter",
        "setup": ((104, 8), (72, 8), (248, 8)),
        "subgraph_allocations": (16, 8),
        "compression": False,
    },
    "host64-make-recording-tinyseg": {  # the same after `tinyseg tflm install` (tests/tflm_e2e)
        **_LP64,
        "app": "x86-64 Makefile build with TinySeg installed, RecordingMicroInterpreter",
        "setup": ((104, 8), (72, 8), (248, 8)),
        "subgraph_allocations": (16, 8),
        "compression": False,
        "tinyseg_installed": True,
    },
    "cortex-m": {  # firmware: arm-none-eabi Makefile build, plain MicroInterpreter
        **_ILP32,
        "app": "Cortex-M firmware (Makefile build, MicroInterpreter on an arena, ILP32)",
        "setup": _PLAIN32,
        "subgraph_allocations": (8, 4),
        "compression": False,
    },
    "cortex-m-recording": {  # the same with RecordingMicroInterpreter (tests/tflm_probe)
        **_ILP32,
        "app": "Cortex-M Makefile build, RecordingMicroInterpreter (ILP32)",
        "setup": ((52, 4), (44, 4), (124, 4)),
        "subgraph_allocations": (8, 4),
        "compression": False,
    },
    "cortex-m-recording-tinyseg": {  # the same after `tinyseg tflm install` (tests/tflm_e2e, qemu-arm)
        **_ILP32,
        "app": "Cortex-M Makefile build with TinySeg installed, RecordingMicroInterpreter (ILP32)",
        "setup": ((52, 4), (44, 4), (124, 4)),
        "subgraph_allocations": (8, 4),
        "compression": False,
        "tinyseg_installed": True,
    },
}


# sizeof(tinyseg_ops::TransposeConvMarker) (tflm_ops/kernels/tinyseg_transpose_conv.h): an enum
# and an int, on LP64 and ILP32 alike.
TINYSEG_MARKER_BYTES = 8


def estimate_tail(graphs: list[Graph], rules: KernelRules, scratch_count: int) -> Tail:
    """The persistent section, allocation by allocation, in the order TFLM makes them.

    TFLM's tail allocator moves down by each allocation's size and then down to
    its alignment, so we replay that: the application's allocator objects,
    StartModelAllocation (builtin data allocator, SubgraphAllocations, then the
    TfLiteEvalTensor and NodeAndRegistration arrays of every subgraph), the parsed
    builtin options of every operator, every kernel's Init and Prepare allocations
    (16-byte aligned), the scratch buffer handles, the variable tensors, and the
    input/output pointer arrays and TfLiteTensors (with quantization) that
    MicroInterpreter::AllocateTensors keeps. Which application and build is
    assumed comes from the build profile (see _TAIL_PROFILES): "host64" is the tflite-micro
    Python wheel, "cortex-m" a firmware that constructs a plain MicroInterpreter
    on its arena. The arena's end is assumed 16-byte aligned.
    """
    pb = rules.build_profile.pointer_bytes
    sz = (
        _TAIL_PROFILES.get(rules.build_profile.name)
        or _TAIL_PROFILES["host64" if pb == 8 else "cortex-m"]
    )
    used = 0

    def phase(allocs) -> int:
        nonlocal used
        start = used
        for size, align in allocs:
            used = (used + size + align - 1) // align * align
        return used - start

    main = graphs[0]
    ops = [(g, op) for g in graphs for op in g.operators]
    setup = list(sz["setup"])
    n_vars = sum(1 for _, op in ops if op.opcode == "VAR_HANDLE")
    if sz.get("resource_variables_in_arena") and n_vars:
        rv, one = sz["resource_variables"]
        setup += [(rv, ARENA_ALIGNMENT), (one * n_vars, ARENA_ALIGNMENT)]
    setup += [
        sz["builtin_allocator"],
        (sz["subgraph_allocations"][0] * len(graphs), sz["subgraph_allocations"][1]),
    ]
    fixed = phase(setup)
    eval_tensors = phase(
        (sz["eval_tensor"][0] * len(g.tensors), sz["eval_tensor"][1]) for g in graphs
    )
    nodes = phase((sz["node"][0] * len(g.operators), sz["node"][1]) for g in graphs)
    builtin = phase(rules.builtin_data(op, sz.get("builtin_overrides")) for _, op in ops)
    kernel_total = sum(rules.persistent_bytes(g, op) for g, op in ops)
    if sz["compression"] != rules.default_compression():
        # the kernel rules assume their usual build for this pointer width; compression
        # only changes the size of some kernels' OpData
        for _, op in ops:
            if not op.is_custom:
                kernel_total += align_up(rules.opdata_bytes(op.opcode, sz["compression"]))
                kernel_total -= align_up(rules.opdata_bytes(op.opcode))

    # A model holding TinySeg operators or TRANSPOSE_CONV scratch markers runs only in a TFLM with
    # TinySeg installed, whatever the build profile says.
    installed = bool(sz.get("tinyseg_installed")) or any(
        customops.is_tinyseg_op(op)
        or (op.opcode == "TRANSPOSE_CONV" and customops.transpose_conv_marker(g, op))
        for g, op in ops
    )
    if installed:
        # `tinyseg tflm install`: TRANSPOSE_CONV's OpData (reference and CMSIS-NN) carries a
        # TinySeg TransposeConvMarker; whether that adds 16 bytes depends on the OpData's size.
        for _, op in ops:
            if op.opcode == "TRANSPOSE_CONV":
                base = rules.opdata_bytes(op.opcode, sz["compression"])
                kernel_total += align_up(base + TINYSEG_MARKER_BYTES) - align_up(base)

    def first_kernel_allocation() -> int:
        """Bytes of the first kernel allocation: all Inits run before any Prepare."""
        for g, op in ops:
            if op.is_custom:
                if rules.persistent_bytes(g, op):
                    return rules.persistent_bytes(
                        g, op
                    )  # TinySeg's kernels: taken as 16-byte sized
                continue
            n = rules.opdata_bytes(op.opcode, sz["compression"])
            if n and op.opcode == "TRANSPOSE_CONV" and installed:
                n += TINYSEG_MARKER_BYTES
            if n:
                return n
        for g, op in ops:
            if not op.is_custom and rules.prepare_allocations(g, op):
                return rules.prepare_allocations(g, op)[0]
        return 0

    # Every kernel allocation is 16-byte aligned, so only the first one can end on a
    # smaller padding (when the builtin data before it left the tail unaligned).
    first = first_kernel_allocation()
    kernel_allocs = [(first, ARENA_ALIGNMENT), (kernel_total - align_up(first), ARENA_ALIGNMENT)]
    kernel = phase(kernel_allocs if kernel_total else [])
    handles = phase([(sz["handle"][0] * scratch_count, sz["handle"][1])] if scratch_count else [])
    offsets = offline.read(main.model)
    var_allocs, k = [], 0
    for g in graphs:
        for t in g.tensors:
            if t.is_variable and (offsets is None or offsets[k] == ONLINE):
                var_allocs.append((t.nbytes, ARENA_ALIGNMENT))
            k += 1
    variables = phase(var_allocs)
    io_allocs: list[tuple[int, int]] = []
    for group in (main.inputs, main.outputs):
        io_allocs.append((sz["pointer"] * len(group), ARENA_ALIGNMENT))
        for ti in group:
            t = main.tensors[ti]
            io_allocs.append(sz["tensor"])
            if t.scales and t.zero_points:
                io_allocs += [sz["quant"], (4 + 4 * len(t.scales), 4)]
    io = phase(io_allocs)
    return Tail(
        build_profile=rules.build_profile.name,
        eval_tensors=eval_tensors,
        node_registrations=nodes,
        io_tensors=io,
        kernel_data=kernel,
        scratch_handles=handles,
        variables=variables,
        fixed=fixed,
        builtin_data=builtin,
        app=sz["app"],
    )


def offline_conflict(graph: Graph) -> str | None:
    """Two tensors that OfflineMemoryAllocation puts on shared bytes while both are live, or None."""
    if offline.read(graph.model) is None:
        return None
    return plan_conflict(plan_graph(graph))


def plan_conflict(plan: Plan) -> str | None:
    """Two offline-placed tensors of ``plan`` on shared bytes while both are live, or None (online
    buffers are placed around everything live, so only the fixed ones can collide)."""
    fixed = sorted(
        (b for b in plan.buffers if b.offline and b.kind == "tensor" and b.nbytes),
        key=lambda b: b.offset,
    )
    for i, a in enumerate(fixed):
        for b in fixed[i + 1 :]:
            if b.offset >= a.offset + a.nbytes:
                break  # sorted by offset: no later buffer reaches into a either
            if a.first <= b.last and b.first <= a.last:
                return (
                    f"its OfflineMemoryAllocation metadata puts {a.label} ({a.nbytes:,} B at offset {a.offset:,}) "
                    f"and {b.label} ({b.nbytes:,} B at offset {b.offset:,}) on the same bytes while both are live "
                    f"(scopes {max(a.first, b.first)}-{min(a.last, b.last)}); TFLM would honour it and compute "
                    "garbage: remove the metadata or plan the offsets again"
                )
    return None
