"""Where to cut chains for streaming: the TFLM-exact planner is the judge.

Streaming a whole maximal chain is rarely best: a skip tensor read far down the chain then
needs a ring of all the rows in flight between its producer and its reader. Cutting the chain
there and moving the skip through storage row by row removes it from the arena, but each cut
also keeps the tensor at the cut whole. ``choose_streaming`` cuts greedily, one cut at a time,
and for each candidate spills (greedily, largest first) the crossing tensors that the objective
ranks better. The objective (search.Objective) ranks the plans: the default's, of the plans that
cost nothing, the smallest total (head + tail estimate: every chain's tables count, so each
candidate's planning form carries its body's bytes, passes/stream.py); with a target, of the
plans whose head fits it, the least storage time; --target min, the smallest head; analyze
--stream's estimate, the head, then the bytes moved through storage per inference."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir.graph import Graph
from ..memory.kernels import BUILD_PROFILES, KernelRules
from ..memory.placement import SlotUse
from ..memory.planner import plan_graph
from .passes import Rewrite
from .passes.stream import ChainRequest, io_problem, row_slots, stream_chains
from .search import Budget, Limits, Objective, Score, best_of
from .stream import (
    ACCUMULATING,
    ChainCost,
    activation_inputs,
    find_chains,
    row_step_scratch,
    simulate,
    stage_key,
)

# Where each climb stops, as fractions of the budget the starting points leave, for 1 to 4 starts
# (a fourth only for chains through RESIZE_BILINEAR).
SHARES = ((1.0,), (0.6, 1.0), (0.5, 0.75, 1.0), (0.4, 0.6, 0.8, 1.0))


@dataclass(frozen=True)
class Streamed:
    """A streaming the search made: the rewritten graph and what each chain costs."""

    graph: Graph  # StreamChain operators in place of the chains
    chains: tuple[ChainCost, ...]
    spilled: tuple[int, ...]  # tensors (of the input graph) that move through storage row by row
    slots: dict[int, int] = field(default_factory=dict)  # spilled tensor -> its storage slot


@dataclass(frozen=True)
class StreamChoice:
    streamed: Streamed | None  # None: no chain lowers the head
    head: int  # head of the streamed graph (or of the input graph when streamed is None)
    base_head: int  # head without streaming
    storage_bytes: int  # bytes written to and read from storage per inference (each fetch counted)
    plans: int  # planner runs the search made


def row_uses(graph: Graph, streamed: Streamed) -> tuple[SlotUse, ...]:
    """The storage slots of a streaming's row spills: each spilled tensor is written once and read
    once per chain that fetches it (memory/placement.py places them)."""
    fetches = Counter(t for c in streamed.chains for t in c.fetched)
    out = []
    for t in streamed.spilled:
        n = graph.tensors[t].nbytes
        out.append(SlotUse(streamed.slots[t], n, n, n * fetches[t], row=True))
    return tuple(out)


def row_io(graph: Graph, segments: list[list[int]]) -> tuple[frozenset[int], frozenset[int]]:
    """The graph inputs and outputs these chains can stream through row sources and sinks
    (passes/stream.py ``io_problem``)."""
    position = {i: k for k, seg in enumerate(segments) for i in seg}
    ok = [
        t
        for t in list(graph.inputs) + list(graph.outputs)
        if io_problem(graph, t, position) is None
    ]
    return (
        frozenset(t for t in ok if t in graph.inputs),
        frozenset(t for t in ok if t not in graph.inputs),
    )


def _segments(chains: list[list[int]], cuts: frozenset[int]) -> list[list[int]]:
    """Split each maximal chain after every operator index in cuts; keep parts of 2+ operators."""
    out: list[list[int]] = []
    for chain in chains:
        part: list[int] = []
        for i in chain:
            part.append(i)
            if i in cuts:
                out.append(part)
                part = []
        out.append(part)
    return [p for p in out if len(p) > 1]


def _spillable(graph: Graph, segments: list[list[int]], shared: bool = False) -> list[int]:
    """Tensors produced by one segment and read only by later segments (never a graph output).
    ``shared``: also those read inside their own segment as well as by later ones: the producing
    chain writes each row to storage as it computes it, its own readers take the row from its
    ring, and the later chains fetch it (one write and one read where a cut before the own reader
    would move the tensor twice). Every optimize search asks for them (search.Objective.searching);
    analyze --stream's estimate does not. Order: the largest first, the shared ones after the
    others, so the greedy spills of a cut set first take what a search without them takes."""
    where = {i: k for k, seg in enumerate(segments) for i in seg}
    out = []
    for k, seg in enumerate(segments):
        for i in seg:
            t = graph.operators[i].outputs[0]
            readers = graph.consumers.get(t, [])
            if t in graph.outputs or not readers or graph.operators[i].opcode in ACCUMULATING:
                continue  # an accumulating stage's one pixel is written whole
            if not all(r in where and where[r] >= k for r in readers):
                continue
            later = [r for r in readers if where[r] > k]
            # A tensor its own chain only averages (a squeeze-and-excitation's input, read again
            # by the later MUL) is worth a shared spill in every search: the MEAN holds none of it.
            own = [r for r in readers if where[r] == k]
            averaged = all(graph.operators[r].opcode in ACCUMULATING for r in own)
            if later and (shared or averaged):
                out.append((not averaged, -graph.tensors[t].nbytes, len(out), t))
    return [t for *_, t in sorted(out)]


@dataclass
class _Search:
    """One choose_streaming run: the candidates (cut sets and row spills) it builds, prices and
    climbs through, with its memos of chains simulated and candidates priced."""

    graph: Graph
    kernel_set: str
    build_profile: str
    objective: Objective
    budget: Budget
    chains: list[list[int]]
    scratch: dict[int, int]
    stream_io: bool
    measured: dict[tuple, ChainCost] = field(default_factory=dict)
    # each chain's body bytes (passes/stream.py, the planning form)
    bodies: dict[tuple, int] = field(default_factory=dict)
    priced_before: dict[tuple[frozenset[int], frozenset[int]], Score] = field(default_factory=dict)

    @property
    def shared(self) -> bool:
        return self.objective.searching  # skips spilled by a chain that also reads them

    @property
    def positions(self) -> list[int]:
        """Where a cut may go: after any member but a chain's last."""
        return [i for chain in self.chains for i in chain[:-1]]

    def cost(self, streamed: Streamed) -> Score:
        graph, budget = self.graph, self.budget
        budget.planned()
        stored = set(streamed.spilled)  # row sources and sinks move no storage bytes
        written = sum(
            graph.tensors[t].nbytes for c in streamed.chains for t in c.spilled if t in stored
        )
        read = sum(
            graph.tensors[t].nbytes for c in streamed.chains for t in c.fetched if t in stored
        )
        plan = plan_graph(streamed.graph, self.kernel_set, self.build_profile)
        return self.objective.score(
            plan.head, plan.tail.total, written, read, row_uses(graph, streamed)
        )

    def measure(
        self, g: Graph, ops: list[int], spilled: frozenset[int], fetched: frozenset[int]
    ) -> ChainCost:
        key = (tuple(ops), spilled, fetched)
        if key not in self.measured:
            self.measured[key] = simulate(g, ops, spilled=spilled, fetched=fetched)
            self.budget.simulated(sum(self.measured[key].rows_computed.values()))
        return self.measured[key]

    def build(self, cuts: frozenset[int], spilled: frozenset[int], body: bool = False) -> Streamed:
        graph = self.graph
        segments = _segments(self.chains, cuts)
        sourced, sunk = row_io(graph, segments) if self.stream_io else (frozenset(), frozenset())
        request = ChainRequest(
            segments,
            spilled,
            self.scratch.__getitem__,
            measure=self.measure,
            body=body,
            sourced=sourced,
            sunk=sunk,
            body_bytes=self.bodies,
        )
        done = stream_chains(graph, request)
        assert isinstance(done, Rewrite), done  # the search only asks for chains it found
        return Streamed(done.graph, done.notes, tuple(sorted(spilled)), row_slots(graph, spilled))

    def priced(self, cuts: frozenset[int], spilled: frozenset[int]) -> Score:
        """``cost(build(...))``, once per (cuts, spills): the climbs meet the same candidates
        again. A repeat still counts as a planner run, so the budget ends the search where it
        did without the memo and the plan found stays the same."""
        key = (cuts, spilled)
        if key in self.priced_before:
            self.budget.planned()
        else:
            self.priced_before[key] = self.cost(self.build(cuts, spilled))
        return self.priced_before[key]

    def evaluate(self, cuts: frozenset[int]) -> tuple[Score, frozenset[int]] | None:
        segments = _segments(self.chains, cuts)
        if not segments:
            return None
        spilled: frozenset[int] = frozenset()
        best = self.priced(cuts, spilled)
        for t in _spillable(self.graph, segments, self.shared):
            if self.budget.spent():  # the greedy spills of one cut set may be many planner runs too
                break
            c = self.priced(cuts, spilled | {t})
            if c < best:
                best, spilled = c, spilled | {t}
        return best, spilled

    def climb(self, seed: frozenset[int], share: float):
        """Hill-climb from a set of cuts, one cut added or removed per round, the best move first,
        until no move lowers the objective or this climb's share of the budget is spent."""
        start = self.evaluate(seed)
        if start is None:
            return None
        here, cuts = start, seed

        def toggle(i: int) -> frozenset[int]:
            return cuts - {i} if i in cuts else cuts | {i}

        def attempt(i: int):
            r = self.evaluate(toggle(i))
            return None if r is None else (r[0], r)

        positions = self.positions
        while not self.budget.spent(share):
            round_best = best_of(positions, attempt, self.budget, share)
            if round_best is None or round_best[0][0] >= here[0]:
                break
            here, cuts = round_best[0], toggle(round_best[1])
        return here, cuts


def _seeds(graph: Graph, chains: list[list[int]], positions: list[int]) -> list[frozenset[int]]:
    """The cut sets the search climbs from (choose_streaming says why each), distinct, in order."""
    resizing = [
        i
        for c in chains
        for i in c
        if any(
            graph.tensors[t].shape[1] != graph.tensors[graph.operators[i].outputs[0]].shape[1]
            for t in activation_inputs(graph, graph.operators[i])
        )
    ]
    at = set(positions)
    resized = frozenset(i for i in resizing if i in at)
    before = frozenset(
        graph.producers[t]
        for i in resizing
        for t in activation_inputs(graph, graph.operators[i])
        if graph.producers.get(t) in at
    )
    seeds = list(dict.fromkeys((before, frozenset(), resized)))  # distinct, in this order
    # A fourth start, only where a chain runs through a RESIZE_BILINEAR: each one alone in its
    # chain, the chains as they were before it was a stage. The chain through it can be long (88
    # operators in MoveNet at 192), and within the budget the climb from no cut then stopped at a
    # head of 425,168 B where this start reaches 305,936 B, what the search found before.
    bilinear = [i for c in chains for i in c if graph.operators[i].opcode == "RESIZE_BILINEAR"]
    if bilinear:
        inputs = [t for i in bilinear for t in activation_inputs(graph, graph.operators[i])]
        alone = frozenset({graph.producers.get(t, -1) for t in inputs} | set(bilinear)) & at
        seeds = list(dict.fromkeys(seeds + [alone]))
    return seeds


_Planned = tuple[Score, frozenset[int], frozenset[int]]  # a plan's score, cuts and row spills


@dataclass
class _Tidy:
    """The chain search's last step, from a climb's plan (``score``, ``cuts``, ``spills``):
    drop each cut and each spill the objective does not need (a cut also when the plan ranks the
    same: fewer operators, a smaller tail). First those whose drop keeps the head; then, where the
    objective ranks by the total, those whose tables cost more than the head they save (in one
    pass, an early drop that traded head for tail left a later cut needed: ResUNet-a's default plan
    kept 624 B more), and a cut beside each one left or each one moved by an operator (the climbs
    also spend rounds on tail bytes and one may end before it tries them: the Tiny U-Net's
    smallest total at any price kept 304 B more), or the plan with every operator of one stage type
    cut out of its chain (a plan the search with that stage type left out can reach, where longer
    chains led the climbs elsewhere: MCUNet-320KB's --stream-io plan kept a head 23,232 B larger),
    dropping again after each round that takes one. ``priced(cuts, spills)``: a plan's score."""

    graph: Graph
    chains: list[list[int]]
    shared: bool  # _spillable's
    positions: set[int]  # where a cut may go
    objective: Objective
    priced: Callable[[frozenset[int], frozenset[int]], Score]
    types: dict[int, tuple[str, str]]  # each chain member's stage type (stream.stage_key)
    bar: Score  # what a plan with a stage type cut out must rank before: the best tidied so far
    score: Score = field(init=False)
    cuts: frozenset[int] = field(init=False)
    spills: frozenset[int] = field(init=False)

    def run(self, score: Score, cuts: frozenset[int], spills: frozenset[int]) -> _Planned:
        """The plan (``score``, ``cuts``, ``spills``) tidied."""
        self.score, self.cuts, self.spills = score, cuts, spills
        self.drops(keep_head=True)
        if self.objective.by_total:
            self.drops(keep_head=False)
            # each round ranks strictly better: it ends
            while self.beside() or self.without_a_type():
                self.drops(keep_head=False)
        return self.score, self.cuts, self.spills

    def _try(
        self, cuts: frozenset[int], spills: frozenset[int]
    ) -> tuple[Score, frozenset[int]] | None:
        """The score with these cuts and those of ``spills`` that still apply (and those spills);
        None: no chain is left."""
        segments = _segments(self.chains, cuts)
        if not segments:
            return None
        kept = frozenset(t for t in spills if t in _spillable(self.graph, segments, self.shared))
        return self.priced(cuts, kept), kept

    def drops(self, keep_head: bool) -> None:
        for kind in ("cut", "spill"):
            for item in sorted(self.cuts if kind == "cut" else self.spills):
                cuts = self.cuts - {item} if kind == "cut" else self.cuts
                got = self._try(cuts, self.spills if kind == "cut" else self.spills - {item})
                if got and _drop(self.objective, got[0], self.score, kind == "cut", keep_head):
                    self.score, self.cuts, self.spills = got[0], cuts, got[1]

    def without_a_type(self) -> bool:
        """Try the plan with every operator of one stage type cut out of its chain (a cut before
        and after each), for each stage type the chains hold, and take the best if it also ranks
        before ``bar``; whether one was taken."""
        before = {c[k + 1]: c[k] for c in self.chains for k in range(len(c) - 1)}
        held: dict[tuple[str, str], set[int]] = {}
        for seg in _segments(self.chains, self.cuts):
            for i in seg:
                held.setdefault(self.types[i], set()).update({i, before.get(i, i)})
        best = None
        for t in sorted(held):
            cuts = self.cuts | (held[t] & self.positions)
            got = self._try(cuts, self.spills)
            if got and got[0] < min(self.bar, self.score, best[0] if best else self.bar):
                best = (got[0], cuts, got[1])
        if best is None:
            return False
        self.score, self.cuts, self.spills = best
        return True

    def beside(self) -> bool:
        """Try a cut beside each cut, and each cut moved to a neighbour (the climbs add or remove
        one cut a move, so a cut one operator off is two moves away: MCUNet-320KB's default plan
        kept 12,000 B more head with CMSIS-NN); whether one was taken."""
        taken = False
        for cut in sorted(self.cuts):
            for near in (cut - 1, cut + 1):
                if near not in self.positions or near in self.cuts:
                    continue
                options = [self.cuts | {near}]
                if cut in self.cuts:  # not moved already
                    options.append(self.cuts - {cut} | {near})
                for cuts in options:
                    got = self._try(cuts, self.spills)
                    if got and got[0] < self.score:
                        self.score, self.cuts, self.spills, taken = got[0], cuts, got[1], True
                        break
        return taken


def _tidy_all(
    graph: Graph, chains: list[list[int]], search: _Search, plans: list[_Planned]
) -> _Planned:
    """Each plan tidied (``_Tidy``), the best first, so a plan with a stage type cut out is taken
    only where it ranks before every plan tidied so far (a climb's plan far behind the best is not
    tidied further for nothing); the best of them, the first on a tie."""
    at = set(search.positions)
    types = {i: stage_key(graph, graph.operators[i]) for c in chains for i in c}
    done: dict[int, _Planned] = {}
    for k in sorted(range(len(plans)), key=lambda k: plans[k][0]):
        bar = min([plans[k][0]] + [d[0] for d in done.values()])
        tidy = _Tidy(graph, chains, search.shared, at, search.objective, search.priced, types, bar)
        done[k] = tidy.run(*plans[k])
    return min((done[k] for k in sorted(done)), key=lambda t: t[0])


def _drop(objective: Objective, c: Score, best: Score, cut: bool, keep_head: bool) -> bool:
    """Whether the plan ``c`` without a cut (``cut``) or a spill replaces ``best``: an optimize
    search's objective ranks it better (or, a cut, the same); analyze --stream's estimate, the same
    head or lower with less traffic. ``keep_head``: only if the head does not grow."""
    if keep_head and c.head > best.head:
        return False
    if objective.searching:
        return c < best or (cut and c.key == best.key)
    return c.head <= best.head and (c.moved < best.moved or (cut and c.moved == best.moved))


def choose_streaming(
    graph: Graph,
    kernel_set: str = "reference",
    build_profile: str = "host64",
    limits: Limits = Limits(),
    kernel_only: bool = False,
    objective: Objective = Objective(),
    stream_io: bool = False,
    off: frozenset[tuple[str, str]] = frozenset(),
) -> StreamChoice:
    """The chains (and row spills) that best meet ``objective``, judged by the planner.
    ``kernel_only``: chains of the stages the StreamChain kernel computes (a model to run).
    ``stream_io``: graph inputs one chain alone reads come in through row sources, and graph
    outputs only their own chain reads go out through row sinks (``row_io``), so the arena holds
    neither whole. ``off``: stage types no chain may hold (stream.stage_key)."""
    original = plan_graph(graph, kernel_set, build_profile)
    base = original.head
    chains = find_chains(graph, kernel_only, off)
    budget = Budget.of(limits, len(graph.operators))
    budget.planned()
    rules = KernelRules(kernel_set, BUILD_PROFILES[build_profile])
    scratch = {
        i: row_step_scratch(
            graph,
            graph.operators[i],
            rules.scratch_requests(graph, graph.operators[i]) or [],
            rules.implementation_of(graph.operators[i].opcode),
        )
        for chain in chains
        for i in chain
    }
    if not chains:
        return StreamChoice(None, base, base, 0, budget.plans)

    search = _Search(
        graph, kernel_set, build_profile, objective, budget, chains, scratch, stream_io
    )
    # Up to three climbs, from: a cut before wherever the height changes (after the producers of a
    # pool's, strided convolution's or up-sampling's inputs: an encoder's skip then crosses chains
    # and can be spilled, and fetched both by the down-sampling chain and by the decoder's); no cut;
    # and a cut after wherever the height changes (the resizing operator ends its chain). The most
    # promising start climbs first, with half of what the starts left of the budget (SHARES): a
    # climb of a large graph rarely finishes a round, and an even split starved the one that
    # mattered (a MobileNetV2 kept 10% more head with thirds, ResUNet-a missed its target with
    # the old two starts).
    seeds = _seeds(graph, chains, search.positions)
    current: frozenset[int] = frozenset()
    unstreamed = objective.score(base, original.tail.total, 0, 0)
    best_cost, found, spills = unstreamed, False, frozenset()
    starts = {seed: search.evaluate(seed) for seed in seeds}
    seeds.sort(
        key=lambda seed: starts[seed][0] if starts[seed] is not None else objective.worst(base)
    )
    spent = budget.share_spent  # the starts' greedy spills
    ends: dict[tuple[frozenset[int], frozenset[int]], Score] = {}  # each climb's plan
    for seed, share in zip(seeds, SHARES[len(seeds) - 1]):
        result = search.climb(seed, spent + share * (1.0 - spent))
        if result is not None:
            ends.setdefault((result[1], result[0][1]), result[0][0])
        if result is not None and (not found or result[0][0] < best_cost):
            (best_cost, spills), current, found = result + (True,)
    # The best climb's plan, tidied (_Tidy); where the objective ranks by the total, every climb's:
    # the tail a climb's plan carries is what tidying takes away, so the best plan before it need
    # not be the best after (the public person detector's --stream-io plan kept 1,616 B more).
    tidied = [(best_cost, current, spills)]
    if objective.by_total:
        tidied = [(score, cuts, kept) for (cuts, kept), score in ends.items()]
    if tidied:
        best_cost, current, spills = _tidy_all(graph, chains, search, tidied)
    if not found or not best_cost < unstreamed:
        return StreamChoice(None, base, base, 0, budget.plans)
    # The chosen chains with their bodies (the same plan).
    best = search.build(current, spills, body=True)
    return StreamChoice(best, best_cost.head, base, best_cost.moved, budget.plans)


def choice_dict(choice: StreamChoice, graph: Graph) -> dict:
    """The JSON form of a streaming choice (the "stream" key of `tinyseg analyze --stream --json`)."""
    chains = []
    stored = set(choice.streamed.spilled) if choice.streamed else set()
    for c in choice.streamed.chains if choice.streamed else ():
        chains.append(
            {
                "operators": list(c.ops),
                "opcodes": [graph.operators[i].opcode for i in c.ops],
                "reads": list(c.inputs),
                "fetches": [t for t in c.fetched if t in stored],
                "sources": [t for t in c.fetched if t not in stored],  # graph inputs, row by row
                "writes": list(c.outputs),
                "spills": [t for t in c.spilled if t in stored],
                "sinks": [t for t in c.spilled if t not in stored],  # graph outputs, row by row
                "ring_rows": {str(t): r for t, r in c.ring_rows.items()},
                "ring_bytes": c.rings,
                "op_scratch": c.op_scratch,
            }
        )
    return {
        "estimate": True,  # analyze --stream plans every row-local operator; optimize, the kernel's stages
        "head_without_streaming": choice.base_head,
        "head": choice.head,
        "storage_bytes_per_inference": choice.storage_bytes,
        "chains": chains,
    }
