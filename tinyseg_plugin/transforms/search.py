"""What a search may spend, and the one way the searches try candidates.

The spill loop (optimizer.spill_and_fuse: which tensor to spill next) and the chain search
(stream_search.choose_streaming: where to cut chains, which skips to stream through storage) both
try candidates, replan, and keep what the objective ranks first (``Objective``: the smallest
total, head + tail estimate, or with a target a head that fits it). A run's ``Limits`` (optimizer.Options,
held by pipeline.Run) say what they may spend; each search counts what it spends in a ``Budget``
(counts, not seconds, so an answer is the same on any machine) and tries candidates through
``best_of``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence, TypeVar

from .. import deadline
from ..memory.placement import SlotUse

# Planner runs times the graph's operators (400 runs on the Tiny U-Net, about 40 on a 500-operator
# graph).
MAX_WORK = 40_000
# Rows the chain simulations compute, summed (the other half of the chain search's budget).
MAX_ROW_STEPS = 2_000_000
# Candidates the spill loop tries per round, longest cold range first.
MAX_TRIES = 8

C = TypeVar("C")  # a candidate
R = TypeVar("R")  # what trying it gave


@dataclass(frozen=True, order=True)
class Score:
    """A plan as the objective ranks it: ``key`` decides (see ``Objective.score``); the head, the
    tail estimate and the bytes moved through storage per inference are carried for the report."""

    key: tuple[int, ...]
    head: int = field(compare=False)
    tail: int = field(compare=False)
    moved: int = field(compare=False)

    @property
    def total(self) -> int:
        """Head + tail estimate: the arena the plan needs."""
        return self.head + self.tail

    @property
    def fits(self) -> bool:
        return self.key[0] == 0


@dataclass(frozen=True)
class Objective:
    """What the user asked for. Where the searches want the least RAM they rank by the total (head
    + tail estimate: the arena the application must give, and the tail grows with every operator a
    pass adds); ``--target`` bounds the head alone. ``free`` set (optimize without --target): of
    the plans that cost nothing (``free(uses)``: no flash written, at most 1% latency added,
    memory/cost.py), the smallest total, then the least storage time; a plan that costs something
    ranks after every one that does not, by its total. With a target: of the plans whose head
    fits, the one whose storage traffic costs the least time per inference (``seconds(uses)``:
    each slot's traffic in the board region that holds it, memory/placement.py and
    memory/cost.py; without a board, bytes moved stand in for time), then the fewer bytes written
    (flash wear), then the smaller total; a plan that does not fit ranks after every plan that
    does, by its head (how far it is from fitting), then its storage time and bytes written.
    --target min is the target 0, which no plan fits: the smallest head, then the storage time
    and bytes written. Neither (analyze --stream's estimate of the streamed head): the smallest
    head, then the least storage traffic."""

    target: int | None = None
    seconds: Callable[[Sequence[SlotUse]], float] | None = field(default=None, compare=False)
    free: Callable[[Sequence[SlotUse]], bool] | None = field(default=None, compare=False)

    @property
    def searching(self) -> bool:
        """An optimize search (a target or the default's), not analyze --stream's estimate: it
        is offered every candidate, shared row spills included (stream_search._spillable)."""
        return self.target is not None or self.free is not None

    @property
    def by_total(self) -> bool:
        """Whether plans are ranked by their total: the default's; a target (--target min is the
        target 0) ranks a plan that does not meet it by the head, which is what it bounds."""
        return self.target is None and self.free is not None

    def score(
        self, head: int, tail: int, written: int, read: int, uses: Sequence[SlotUse] = ()
    ) -> Score:
        """``tail``: the plan's tail estimate (memory/planner.py estimate_tail); ``uses``: the
        plan's slots (their traffic sums to ``written`` and ``read``)."""
        moved, total = written + read, head + tail
        if self.target is None and self.free is None:
            return Score((0, head, moved), head, tail, moved)
        if self.target is None:
            if not self.free(uses):
                return Score((1, total, moved), head, tail, moved)
            return Score((0, total, self._time(uses, moved), written), head, tail, moved)
        if head <= self.target:
            return Score((0, self._time(uses, moved), written, total), head, tail, moved)
        return Score((1, head, self._time(uses, moved), written), head, tail, moved)

    def _time(self, uses: Sequence[SlotUse], moved: int) -> int:
        """Storage time in microseconds (bytes moved without a board)."""
        return moved if self.seconds is None else round(self.seconds(uses) * 1e6)

    def worst(self, head: int) -> Score:
        """A score below every plan's (a start that gave no plan)."""
        return Score((2, head, 0), head, 0, 0)


@dataclass(frozen=True)
class Limits:
    """What one search may spend: ``work``, planner runs times the graph's operators; ``rows``,
    rows the chain simulations compute; ``tries``, candidates the spill loop tries per round."""

    work: int = MAX_WORK
    rows: int = MAX_ROW_STEPS
    tries: int = MAX_TRIES


@dataclass
class Budget:
    """Limits and what has been spent against them. ``tries``: candidates per ``best_of`` call
    (None: no limit); ``operators`` weights each planner run by the size of the graph planned."""

    work: int = MAX_WORK
    rows: int = MAX_ROW_STEPS
    tries: int | None = None
    operators: int = 1
    plans: int = 0
    steps: int = 0

    @classmethod
    def of(cls, limits: Limits, operators: int = 1, tries: bool = False) -> "Budget":
        """A fresh budget under ``limits`` (``tries``: also bound the candidates per call)."""
        return cls(limits.work, limits.rows, limits.tries if tries else None, operators)

    def planned(self) -> None:
        self.plans += 1

    def simulated(self, rows: int) -> None:
        self.steps += rows

    @property
    def share_spent(self) -> float:
        """The part of the planner work already spent, 0 to 1."""
        return min(self.plans * max(self.operators, 1) / self.work, 1.0)

    def spent(self, share: float = 1.0) -> bool:
        """Whether ``share`` of the planner work or of the simulated rows is used up."""
        return (
            self.plans * max(self.operators, 1) >= share * self.work
            or self.steps >= share * self.rows
        )


def best_of(
    candidates: Iterable[C],
    attempt: Callable[[C], tuple[object, R] | None],
    budget: Budget,
    share: float = 1.0,
    first: bool = False,
) -> tuple[R, C] | None:
    """Try the candidates in order while ``share`` of the budget lasts (and at most
    ``budget.tries`` of them); ``attempt`` gives (score, result) or None when the candidate does
    not apply. The result with the lowest score wins, the earlier one on a tie; ``first``: the
    first result wins."""
    best: tuple[object, R, C] | None = None
    for k, cand in enumerate(candidates):
        if (budget.tries is not None and k >= budget.tries) or budget.spent(share):
            break
        deadline.check("searching for a plan")
        got = attempt(cand)
        if got is None:
            continue
        if best is None or got[0] < best[0]:  # type: ignore[operator]
            best = (got[0], got[1], cand)
        if first:
            break
    return None if best is None else (best[1], best[2])
