"""The optimization loop (Algorithm 1): plan, find cold ranges, transform, until the target is met
or a step no longer lowers the peak. Every figure comes from the TFLM-exact planner."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from .. import deadline
from ..contract import customops
from ..ir.graph import Graph
from ..memory.boards import DEFAULT_BOARD, Board, load_board
from ..memory.coldrange import ColdRange, cold_ranges
from ..memory.cost import Traffic, compute_seconds, costs_nothing, place, storage_time
from ..memory.placement import Placement, SlotUse
from ..memory.planner import Plan, align_up, plan_graph
from .passes import Rewrite, graph_or_none
from .passes.distribute import concat_operand, split_elementwise
from .passes.fuse import fuse_concat, fuse_conv
from .passes.layout import LayoutRequest, improve_layout
from .passes.reorder import OrderRequest, reorder
from .passes.scratch import narrow_transpose_convs
from .passes.spill import SpillPlan, apply_spill, partial_plans, spillable, spilled_bytes
from .passes.static import NOTHING, static_shapes
from .search import Budget, Limits, Objective, Score, best_of


@dataclass(frozen=True)
class Step:
    """One row of the Figure-11-style table: what was done and the memory after it."""

    technique: str
    detail: str
    head: int
    total: int


@dataclass(frozen=True)
class SpillRecord:
    tensor: int
    name: str
    bytes: int
    cold_start: int
    cold_end: int
    partial: bool
    slot: int

    @property
    def bytes_moved(self) -> int:
        """Bytes written and read back per inference (before compression)."""
        return 2 * self.bytes

    @property
    def use(self) -> SlotUse:
        """Its storage slot: written once, fetched back once per inference."""
        return SlotUse(self.slot, self.bytes, self.bytes, self.bytes)


@dataclass
class Options:
    kernel_set: str = "reference"
    build_profile: str = "host64"
    # The --target: bytes of head to reach; None: the default, the smallest total (head + tail
    # estimate) of the plans that cost nothing (memory/cost.py costs_nothing); ``smallest``:
    # --target min, the smallest head at any price (the floor of every --target).
    target_bytes: int | None = None
    smallest: bool = False
    partial: bool = True
    fuse: bool = True
    scratch: bool = True
    layout: bool = True  # offline-planned arena layout when it beats TFLM's greedy placement
    reorder: bool = True  # off when a host (tflite-tools) has already reordered
    split: bool = True  # split an elementwise operator over a concatenation when spilling is stuck
    stream: bool = True  # StreamChain: chains of row-local operators run row by row
    # --stream-io: the graph's inputs and outputs come in and go out row by row through the
    # application's row sources and sinks (tinyseg::Runtime), not held whole in the arena
    stream_io: bool = False
    limits: Limits = field(default_factory=Limits)  # what each search may spend
    # stage types (operator, row type: stream.stage_key) the chains may not hold
    stages_off: frozenset[tuple[str, str]] = frozenset()

    @property
    def by_total(self) -> bool:
        """Whether the searches rank plans by the total (head + tail estimate) rather than the head:
        the default's; a target, --target min included, bounds the head (``objective_for``'s
        objective agrees: search.Objective.by_total)."""
        return self.target_bytes is None and not self.smallest


STREAMING = "streaming"  # the streaming strategy's candidate (Candidate.strategy)


def objective_for(o: Options, graph: Graph, board: Board) -> Objective:
    """The objective a run's options ask for (search.Objective), priced on ``board``;
    ``graph``: the input model, whose operators give the compute the 1% is of."""
    seconds = storage_seconds(board, compute_seconds(graph, board, o.kernel_set))
    if o.smallest:
        objective = Objective(0, seconds)  # a target no plan fits: the smallest head, then time
    elif o.target_bytes is not None:
        objective = Objective(o.target_bytes, seconds)
    else:
        objective = Objective(None, seconds, costs_nothing(graph, board, o.kernel_set))
    assert objective.by_total == o.by_total, "the spill loop and the objective rank alike"
    return objective


def _search_target(o: Options) -> int | None:
    """The head the spill loop aims at: 0 (below every head) for --target min."""
    return 0 if o.smallest else o.target_bytes


@dataclass
class Result:
    graph: Graph
    plan: Plan
    original: Plan
    steps: list[Step] = field(default_factory=list)
    spills: list[SpillRecord] = field(default_factory=list)
    chains: list[dict] = field(
        default_factory=list
    )  # streamed chains (stream_search.choice_dict's entries)
    stream_bytes: int = 0  # bytes the row spills and fetches move per inference
    stream_written: int = 0  # of those, bytes the row spills write
    strategy: str = ""  # the strategy whose candidate was kept ("" when none changed the model)
    considered: list["Candidate"] = field(default_factory=list)  # the other strategies' candidates
    # Row-local operators the StreamChain kernel does not compute (stream.stage_gaps): where
    # optimize's chains stop short of analyze --stream's estimate.
    not_streamed: list = field(default_factory=list)
    # --stream-io: why each graph input or output that still sits whole in the arena does
    io_not_streamed: list[str] = field(default_factory=list)
    row_uses: tuple[SlotUse, ...] = ()  # the row spills' slots (stream_search.row_uses)
    placement: Placement | None = None  # each slot's region in the written model (with a board)

    @property
    def traffic(self) -> Traffic:
        """The written model's storage traffic per inference, for the cost model (memory/cost.py)."""
        return _traffic(self.spills, self.stream_bytes, self.stream_written)

    @property
    def uses(self) -> tuple[SlotUse, ...]:
        """The written model's storage slots (memory/placement.py places them)."""
        return tuple(s.use for s in self.spills) + self.row_uses


def _traffic(spills: list[SpillRecord], stream_bytes: int, stream_written: int) -> Traffic:
    """A spill writes its bytes once and fetches them back once; row spills write each row once
    and read it once per fetch; every spill and row spill is its own write stream."""
    written = sum(s.bytes for s in spills) + stream_written
    read = sum(s.bytes for s in spills) + stream_bytes - stream_written
    streams = len(spills) + (1 if stream_written else 0)
    return Traffic(written, read, streams)


def _plan(g: Graph, o: Options) -> Plan:
    return plan_graph(g, o.kernel_set, o.build_profile)


def _peak_scopes(plan: Plan) -> list[int]:
    """Scopes where the arena's top reaches the head."""
    return [
        s
        for s in range(plan.scopes + 1)
        if max((b.offset + b.size for b in plan.live_at(s)), default=0) == plan.head
    ]


def _candidates(g: Graph, plan: Plan) -> list[ColdRange]:
    """Cold ranges of tensors live where the arena reaches its head, each the idle range that spans
    such a scope (a tensor read several times has several): the most crowded such scope first, then
    the longest range (Algorithm 3's order)."""
    crs = cold_ranges(g)
    found: dict[
        tuple[int, int, int], tuple[int, int]
    ] = {}  # (tensor, start, end) -> (live bytes, size)
    for s in _peak_scopes(plan):
        live = plan.live_at(s)
        load = sum(b.size for b in live)
        for b in live:
            if b.kind != "tensor" or b.subgraph != g.subgraph or not spillable(g, b.owner):
                continue
            cr = crs.get(b.owner)
            if cr is None:
                continue
            for start, end in cr.idle:
                if start < s < end:
                    key = (b.owner, start, end)
                    found[key] = (max(load, found.get(key, (0, 0))[0]), b.size)
    # Ranges spanning the most crowded peak scope first: spilling there is what can lower the head
    # when the greedy placement's top is reached at many scopes; then the longest, as Algorithm 3.
    ranked = sorted(found, key=lambda k: (-found[k][0], -(k[2] - k[1]), -found[k][1], k))
    return [ColdRange(t, start, end, crs[t].last, crs[t].idle) for t, start, end in ranked]


def _fetch_index(g: Graph, slot: int) -> int | None:
    for op in g.operators:
        if op.opcode == customops.FETCHING:
            if any(f.slot == slot for f in customops.decode(op, g.memo.decoded).fetched):
                return op.index
    return None


def _tail(plan: Plan, o: Options) -> int:
    """What the spill loop adds to a plan's head to rank it: the tail estimate when the search
    ranks by the total (``Options.by_total``), else nothing (a target bounds the head)."""
    return plan.tail.total if o.by_total else 0


def _rank(plan: Plan, o: Options) -> int:
    """The head, plus the tail estimate when the search ranks by the total."""
    return plan.head + _tail(plan, o)


def _best_fusion(g: Graph, slot: int, o: Options) -> tuple[Graph, str]:
    """Try merging the new Fetching into its CONCATENATION and/or CONV_2D; keep what lowers the
    head (or the total, ``_rank``) most."""
    best, best_head, how = g, _rank(_plan(g, o), o), ""
    i = _fetch_index(g, slot)
    if i is None:
        return g, ""
    options: list[tuple[Graph | None, str]] = [
        (graph_or_none(fuse_conv(g, i)), "Fetching+Conv2D -> FetchingConv2D")
    ]
    # Merge into concatenations as far as they go (a partial spill's CONCATENATION, then the skip's),
    # trying the convolution after each merge.
    merged, label = g, "Fetching"
    for _ in range(4):
        j = _fetch_index(merged, slot)
        nxt = graph_or_none(fuse_concat(merged, j)) if j is not None else None
        if nxt is None:
            break
        merged, label = nxt, label + "+Concatenation"
        options.append((merged, label))
        j = _fetch_index(merged, slot)
        if j is not None:
            options.append(
                (graph_or_none(fuse_conv(merged, j)), label + "+Conv2D -> FetchingConv2D")
            )
    for cand, label in options:
        if cand is None:
            continue
        h = _rank(_plan(cand, o), o)
        if h < best_head:
            best, best_head, how = cand, h, label
    return best, how


@dataclass(frozen=True)
class _Found:
    """One accepted step of the loop: the new graph, its plan, its score (``_rank``'s, of the head
    with an offline layout when that is lower) and head, the table rows, the spill made."""

    graph: Graph
    plan: Plan
    score: int
    head: int
    steps: list[Step]
    spill: SpillRecord


def _score(g: Graph, plan: Plan, o: Options, beat: int) -> int:
    """The head this graph reaches: TFLM's greedy placement, or the offline layout the last step will
    store when that is lower (the layout leaves the tail as it is). The layout is only tried when the
    greedy head does not already beat ``beat`` (it costs a few plans), so a spill whose gain the
    greedy placement hides by fragmenting still counts."""
    if plan.head < beat or not o.layout:
        return plan.head
    laid = improve_layout(g, LayoutRequest(plan, lambda x: _plan(x, o)))
    return min(plan.head, laid.plan.head) if isinstance(laid, Rewrite) else plan.head


def _spill_step(
    g: Graph, plan: Plan, score: int, o: Options, slot: int, ok: Callable | None = None
) -> _Found | None:
    """Algorithm 3: spill the first candidate (in ``_candidates``' order) that lowers ``score``
    (``_rank``: the head, or without a target the total).

    With a byte budget, a candidate is first tried as partial spills of just the bytes the budget
    needs (smallest first): the first that meets the budget is taken, so no more is moved through
    flash than the target asks for. Failing that, the whole tensor, and of the tries the one that
    lowers the peak most. ``ok``: whether the plan with that spill still costs nothing (the
    default's search), None: any spill will do."""
    target = _search_target(o)
    need = score - target if target else None  # a target > 0 ranks by the head
    found = best_of(
        _candidates(g, plan),
        lambda cr: _try_spill(g, cr, score, o, slot, need, ok),
        Budget.of(o.limits, tries=True),
        first=True,
    )
    return None if found is None else found[0]


def _try_spill(
    g: Graph,
    cr: ColdRange,
    score: int,
    o: Options,
    slot: int,
    need: int | None,
    ok: Callable | None = None,
) -> tuple[int, _Found] | None:
    """Spill ``cr``'s tensor (partially first, when a byte budget allows), or None when no way of
    spilling it lowers the peak (or, with ``ok``, none that still costs nothing)."""
    t = cr.tensor
    target = _search_target(o)
    size = g.tensors[t].nbytes
    plans = []
    if o.partial and need is not None and size > need:
        plans = partial_plans(g, t, cr, need)
    plans.append(SpillPlan(t, cr.start, cr.end))
    chosen = None
    for sp in plans:
        g2 = apply_spill(g, replace(sp, slot=slot)).graph
        how = ""
        if o.fuse:
            g2, how = _best_fusion(g2, slot, o)
        p2 = _plan(g2, o)
        s2 = _score(g2, p2, o, score - _tail(p2, o))
        r2 = s2 + _tail(p2, o)
        if r2 >= score:
            continue
        if chosen is None or r2 < chosen[3]:
            chosen = (sp, g2, p2, r2, how, s2)
        if target is None or s2 <= target:
            chosen = (sp, g2, p2, r2, how, s2)
            break
    if chosen is None:
        return None
    sp, g2, p2, r2, how, s2 = chosen
    spilled = spilled_bytes(g, sp)
    record = SpillRecord(t, g.tensors[t].name, spilled, cr.start, cr.end, sp.rows is not None, slot)
    if ok is not None and not ok(record):
        return None
    name = record.name
    short = name if len(name) <= 40 else name[:18] + "..." + name[-19:]
    kind = "partial spilling" if sp.rows is not None else "tensor spilling"
    part = (
        f" ({sp.rows} of {g.tensors[t].shape[sp.axis]} slices along axis {sp.axis})"
        if sp.rows is not None
        else ""
    )
    note = " (head with an offline layout)" if s2 < p2.head else ""
    steps = [
        Step(
            kind,
            f"t{t} '{short}' {spilled:,} B{part} over scopes {cr.start}-{cr.end}{note}",
            s2,
            p2.total,
        )
    ]
    if how:
        steps.append(Step("fused fetching", how + note, s2, p2.total))
    return r2, _Found(g2, p2, r2, s2, steps, record)


def _split_then_spill(
    g: Graph, plan: Plan, score: int, o: Options, slot: int, ok: Callable | None = None
) -> _Found | None:
    """When no spill lowers the peak, split an elementwise operator over a concatenation that runs at
    the peak (passes/distribute.py) and keep the split only if a spill then lowers the peak."""
    for i in (s - 1 for s in _peak_scopes(plan) if 0 < s <= len(g.operators)):
        g2 = graph_or_none(split_elementwise(g, i))
        if g2 is None:
            continue
        p1 = _plan(g2, o)
        found = _spill_step(g2, p1, score, o, slot, ok)
        if found is None:
            continue
        op = g.operators[i]
        parts = len(g.operators[concat_operand(g, i)[1]].inputs)
        split = Step(
            "operator splitting",
            f"op {i} {op.opcode} over CONCATENATION split into {parts} slices",
            p1.head,
            p1.total,
        )
        return _Found(
            found.graph, found.plan, found.score, found.head, [split] + found.steps, found.spill
        )
    return None


@dataclass
class Candidate:
    """What one strategy proposes: the model, its plan, the table rows that made it, and the
    storage traffic it costs per inference."""

    strategy: str
    graph: Graph
    plan: Plan
    steps: list[Step] = field(default_factory=list)
    spills: list[SpillRecord] = field(default_factory=list)
    chains: list[dict] = field(default_factory=list)
    stream_bytes: int = 0
    stream_written: int = 0  # of stream_bytes, bytes the row spills write
    row_uses: tuple[SlotUse, ...] = ()  # the row spills' slots

    @property
    def traffic(self) -> Traffic:
        return _traffic(self.spills, self.stream_bytes, self.stream_written)

    @property
    def uses(self) -> tuple[SlotUse, ...]:
        return tuple(s.use for s in self.spills) + self.row_uses

    @property
    def bytes_moved(self) -> int:
        """Bytes through storage per inference (spills written and read back, row spills and fetches)."""
        return sum(s.bytes_moved for s in self.spills) + self.stream_bytes

    def score(self, objective: Objective) -> Score:
        t = self.traffic
        return objective.score(self.plan.head, self.plan.tail.total, t.written, t.read, self.uses)


def storage_seconds(
    board: Board | None, compute_s: float = 0.0
) -> Callable[[Sequence[SlotUse]], float] | None:
    """What one inference's storage traffic costs in time, each slot's in the region that holds
    it, for the objective: memory/cost.py ``storage_time`` (``compute_s``: the inference's
    compute, when an erase worker erases); None without a board."""
    if board is None:
        return None
    return lambda uses: storage_time(board, uses, None, compute_s)


def search_plans(
    graph: Graph,
    o: Options,
    progress: Callable[[str], None] | None = None,
    board: Board | None = None,
    default_known: bool = False,
) -> Result:
    """The shared prefix (reordering), then each strategy's candidate; the best by the objective
    (``objective_for``: by default the smallest total of the plans that cost nothing on ``board``,
    the generic board when None; with a target, of the plans that fit, the one whose storage
    traffic costs the least modelled time; --target min, the smallest head) is the result, the
    others are listed as considered. Slots are placed in ``board``'s regions when one is given.
    ``default_known``: the caller holds the default's plan already (--target min, and a target
    whose plan moves bytes, then skip re-running the default's search, see ``_settle``)."""
    say = progress or (lambda _msg: None)
    plan = _plan(graph, o)
    res = Result(graph, plan, plan, [Step("original", "", plan.head, plan.total)])
    g = graph
    fixed = static_shapes(g)
    if isinstance(fixed, Rewrite):
        g, plan = fixed.graph, _plan(fixed.graph, o)
        res.steps.append(Step("static shapes", fixed.detail, plan.head, plan.total))
        say(f"static shapes: head {plan.head:,} B")
    elif fixed.reason != NOTHING:
        say(f"static shapes skipped: {fixed.reason}")
    if o.reorder and len(g.operators) > 1:
        from ..memory.kernels import BUILD_PROFILES, KernelRules

        rules = KernelRules(o.kernel_set, BUILD_PROFILES[o.build_profile])
        ordered = reorder(
            g,
            OrderRequest(
                lambda x: _plan(x, o).head,
                lambda i: sum(align_up(s) for s in rules.scratch_requests(g, g.operators[i])),
            ),
        )
        if isinstance(ordered, Rewrite):
            g2 = ordered.graph
            plan = _plan(g2, o)
            g = g2
            res.steps.append(
                Step(
                    "operator reordering",
                    "memory-minimising topological order",
                    plan.head,
                    plan.total,
                )
            )
            say(f"reordered: head {plan.head:,} B")
    deadline.check("reordering the operators")
    priced = board if board is not None else load_board(DEFAULT_BOARD)
    best, candidates = _settle(graph, g, plan, o, priced, say, default_known)
    res.graph, res.plan = best.graph, best.plan
    res.steps.extend(best.steps)
    res.spills, res.chains, res.stream_bytes = best.spills, best.chains, best.stream_bytes
    res.stream_written = best.stream_written
    res.row_uses = best.row_uses
    res.strategy = best.strategy if best.steps else ""
    res.considered = [c for c in candidates if c is not best and c.steps]
    if o.stream:
        from .stream import stage_gaps

        res.not_streamed = stage_gaps(g)
    if o.stream_io:
        res.io_not_streamed = _io_not_streamed(g, res.chains)
    if board is not None:
        _place(res, board, compute_seconds(graph, board, o.kernel_set), say)
    _link(res, o)
    return res


def _link(res: Result, o: Options) -> None:
    """Token edges for the slots and names for the StreamChains (passes/link.py), so viewers
    draw one connected graph; the plan is measured again (the head stays, the tail grows by the
    tokens' tensor records)."""
    from .passes.link import link_slots

    linked = link_slots(res.graph)
    if isinstance(linked, Rewrite):
        res.graph = linked.graph
        res.plan = _plan(res.graph, o)


def _io_not_streamed(g: Graph, chains: list[dict]) -> list[str]:
    """Why each graph input or output the written chains do not stream stays whole."""
    from .passes.stream import io_problem

    position = {i: k for k, c in enumerate(chains) for i in c["operators"]}
    streamed = {t for c in chains for t in c["sources"] + c["sinks"]}
    ends = [t for t in list(g.inputs) + list(g.outputs) if t not in streamed]
    return [io_problem(g, t, position) or "" for t in ends]


def _settle(
    graph: Graph,
    g: Graph,
    plan: Plan,
    o: Options,
    board: Board,
    say: Callable[[str], None],
    default_known: bool = False,
) -> tuple[Candidate, list[Candidate]]:
    """The best candidate for ``o``'s objective, and every candidate tried. A target no plan
    meets is searched as --target min. Every objective is offered the same candidates (shared row
    spills included), so the plan written at a head moves no more than ``--target <that head>``
    writes (tests/test_objective.py checks it on real models)."""
    objective = objective_for(o, graph, board)
    best, candidates = _strategies(g, plan, o, objective, say)
    if o.target_bytes is not None and not best.score(objective).fits:
        o = replace(o, target_bytes=None, smallest=True)
        objective = objective_for(o, graph, board)
        best, candidates = _strategies(g, plan, o, objective, say)
    if (o.smallest or (o.target_bytes is not None and best.bytes_moved > 0)) and not default_known:
        # The searches climb from a few starts within a budget: the default's climb, which may
        # move no bytes, can end at a lower head than the climb the target drove (a float
        # DeepLabV3 with --stream-io: 1,977,184 B free, 3,223,552 B from --target min's climb),
        # and a target's climb that moves bytes can miss the default's free plan below it (the
        # Tiny U-Net with --stream-io on the Nicla Vision, --target 43200: 32,224 B writing
        # 19,200 B of flash per inference, where the default's 43,200 B writes none).
        free = replace(o, target_bytes=None, smallest=False)
        other, _ = _strategies(g, plan, free, objective_for(free, graph, board), lambda _m: None)
        if other.score(objective) < best.score(objective):
            candidates = [other if c.strategy == other.strategy else c for c in candidates]
            best = other
    if o.smallest and o.stream and not default_known:
        # So can the estimate's climb (analyze --stream: no row spill shared by two chains), whose
        # smaller space the budget covers further (TensorFlow's segmentation-tutorial model:
        # 102,144 B where the climb offered every candidate ends at 112,896 B).
        plain = streaming(g, o, lambda _m: None, Objective())
        if plain is not None and plain.score(objective) < best.score(objective):
            candidates = [plain if c.strategy == plain.strategy else c for c in candidates]
            best = plain
    return best, candidates


def _strategies(
    g: Graph,
    plan: Plan,
    o: Options,
    objective: Objective,
    say: Callable[[str], None],
) -> tuple[Candidate, list[Candidate]]:
    """Each strategy's candidate for ``objective`` and the best of them."""
    best = spill_and_fuse(g, plan, o, say, objective)
    candidates = [best]
    # With a target that the spill strategy meets moving nothing, no streaming can do better.
    met = o.target_bytes is not None and best.score(objective).fits and best.bytes_moved == 0
    if o.stream and not met:
        deadline.check("spilling and fusing")
        streamed = streaming(g, o, say, objective)
        if streamed is not None:
            candidates.append(streamed)
            if streamed.score(objective) < best.score(objective):
                best = streamed
    return best, candidates


def _place(res: Result, board: Board, compute_s: float, say: Callable[[str], None]) -> None:
    """Each slot of the result into a region of ``board`` (memory/placement.py; ``compute_s``:
    the input's modelled compute), written into the model's options; a plan whose slots all stay
    in the spill region (region 0) is not rewritten."""
    from .passes.regions import place_slots

    if not res.uses:
        return
    res.placement = place(board, res.uses, compute_s)
    placed = place_slots(res.graph, res.placement)
    if isinstance(placed, Rewrite):
        res.graph = placed.graph
        res.steps.append(Step("slot placement", placed.detail, res.plan.head, res.plan.total))
        say(placed.detail)


def spill_and_fuse(
    g: Graph,
    plan: Plan,
    o: Options,
    say: Callable[[str], None],
    objective: Objective = Objective(),
) -> Candidate:
    """Scratch narrowing, then spills (with fused fetching and operator splitting) until the target
    is met or no spill lowers the head (without a target, the total, as a spill adds operators to
    the tail, and only by spills that keep the plan free, ``objective.free``), then an offline
    layout when it beats TFLM's placement."""
    cand = Candidate("spill and fuse", g, plan)
    if o.scratch:
        narrowed = narrow_transpose_convs(g)
        if isinstance(narrowed, Rewrite):
            p2 = _plan(narrowed.graph, o)
            if _rank(p2, o) < _rank(plan, o):
                g, plan = narrowed.graph, p2
                cand.steps.append(Step("scratch narrowing", narrowed.detail, plan.head, plan.total))
                say(f"scratch narrowing: head {plan.head:,} B")
    slot = (
        max(
            (
                customops.decode(op, g.memo.decoded).slot
                for op in g.operators
                if op.opcode == customops.SPILL
            ),
            default=-1,
        )
        + 1
    )
    score = _score(g, plan, o, plan.head) + _tail(plan, o)
    target = _search_target(o)
    free = objective.free
    ok = None if free is None else (lambda rec: free(cand.uses + (rec.use,)))
    while target is None or score > target:
        found = _spill_step(g, plan, score, o, slot, ok)
        if found is None and o.split:
            found = _split_then_spill(g, plan, score, o, slot, ok)
        if found is None:
            break
        g, plan, score = found.graph, found.plan, found.score
        cand.steps.extend(found.steps)
        cand.spills.append(found.spill)
        slot += 1
        say(f"spilled t{found.spill.tensor} ({found.spill.bytes:,} B): head {found.head:,} B")
    if o.layout and (target is None or plan.head > target):
        laid = improve_layout(g, LayoutRequest(plan, lambda x: _plan(x, o)))
        if isinstance(laid, Rewrite):
            g, plan = laid.graph, laid.plan
            cand.steps.append(Step("offline arena layout", laid.detail, plan.head, plan.total))
            say(f"offline layout: head {plan.head:,} B")
    cand.graph, cand.plan = g, plan
    return cand


def streaming(
    g: Graph, o: Options, say: Callable[[str], None], objective: Objective = Objective()
) -> Candidate | None:
    """The (reordered) input's chains of operators the StreamChain kernel computes, with the cuts and
    row spills the planner picks; None when no chain is worth streaming."""
    from .stream_search import choice_dict, choose_streaming, row_uses

    choice = choose_streaming(
        g,
        o.kernel_set,
        o.build_profile,
        o.limits,
        kernel_only=True,
        objective=objective,
        stream_io=o.stream_io,
        off=o.stages_off,
    )
    if choice.streamed is None:
        return None
    streamed = _plan(choice.streamed.graph, o)
    summary = choice_dict(choice, g)
    chains = summary["chains"]
    detail = f"{len(chains)} StreamChain operators; row spills move {choice.storage_bytes:,} B per inference"
    sources, sinks = (sum(len(c[k]) for c in chains) for k in ("sources", "sinks"))
    if sources or sinks:
        detail += (
            f"; rows in from {sources} row source{'s' * (sources != 1)}, out to {sinks} row "
            f"sink{'s' * (sinks != 1)}"
        )
    say(f"streaming: head {streamed.head:,} B")
    return Candidate(
        STREAMING,
        choice.streamed.graph,
        streamed,
        [Step("streaming", detail, streamed.head, streamed.total)],
        chains=chains,
        stream_bytes=choice.storage_bytes,
        stream_written=sum(g.tensors[t].nbytes for t in choice.streamed.spilled),
        row_uses=row_uses(g, choice.streamed),
    )
