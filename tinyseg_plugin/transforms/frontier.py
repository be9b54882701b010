"""The trade-off a user chooses from: arena head against modelled time per inference and flash
written (wear-out), over the plans the targeted search writes, each with the option that writes
it again (--frontier; the next points in every optimize run)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable

from .. import deadline
from ..ir.graph import Graph
from ..memory.boards import Board
from ..memory.cost import Traffic, estimate
from .optimizer import Options, Result, search_plans

# --frontier's walk runs at most this many searches (Tiny U-Net's staircase has 36 steps).
MAX_SEARCHES = 48


@dataclass(frozen=True)
class FrontierPoint:
    """One plan of the trade-off (planner figures; only the written model is verified)."""

    target: int | None  # the --target the search was given (None: --target min or the default)
    head: int
    latency_s: float
    flash_bytes_written: int
    wearout_inferences: float | None
    strategy: str  # the strategy of the plan ("input": the model as given)
    option: str = ""  # the optimize option that writes this plan again ("": no option)
    written: bool = False  # the plan the run wrote
    original: bool = False  # the input model (--target of its head writes it unchanged)
    traffic: tuple[int, int] = (0, 0)  # bytes written and read through storage per inference

    def as_dict(self) -> dict:
        return {
            "target_bytes": self.target,
            "option": self.option,
            "head": self.head,
            "latency_ms": round(self.latency_s * 1e3, 3),
            "flash_bytes_written_per_inference": self.flash_bytes_written,
            "bytes_written_per_inference": self.traffic[0],
            "bytes_read_per_inference": self.traffic[1],
            "wearout_inferences": None
            if self.wearout_inferences is None
            else round(self.wearout_inferences),
            "strategy": self.strategy,
            "written": self.written,
            "original": self.original,
        }

    @property
    def bytes_moved(self) -> int:
        return sum(self.traffic)

    @property
    def figures(self) -> tuple[int, float, int]:
        """What a user trades: head, modelled latency, flash written (lower is better)."""
        return (self.head, round(self.latency_s, 9), self.flash_bytes_written)


def dominates(q: FrontierPoint, p: FrontierPoint) -> bool:
    """``q`` is no worse than ``p`` in head, latency and flash written, and better in one."""
    return all(a <= b for a, b in zip(q.figures, p.figures)) and q.figures != p.figures


def option_of(o: Options) -> str:
    """The optimize option that asks for ``o``'s objective ("" for the default plan)."""
    if o.smallest:
        return "--target min"
    return "" if o.target_bytes is None else f"--target {o.target_bytes}"


def point(
    graph: Graph,
    r: Result,
    kernel_set: str,
    board: Board,
    rate: float,
    target: int | None = None,
    option: str = "",
    written: bool = False,
) -> FrontierPoint:
    """``r``'s plan as a point: its head and modelled cost on ``board``."""
    c = estimate(graph, r.traffic, board, kernel_set, rate, uses=r.uses)
    t = r.traffic
    return FrontierPoint(
        target,
        r.plan.head,
        c.latency_s,
        c.flash_bytes_written,
        c.wearout_inferences,
        r.strategy or "none",
        option,
        written,
        traffic=(t.written, t.read),
    )


def _input_point(graph: Graph, o: Options, head: int, board: Board, rate: float) -> FrontierPoint:
    """The input model: a --target of its head writes it unchanged."""
    c = estimate(graph, Traffic(0, 0), board, o.kernel_set, rate)
    return FrontierPoint(
        head, head, c.latency_s, 0, None, "input", f"--target {head}", original=True
    )


def _step(graph: Graph, o: Options, head: int, board: Board, rate: float) -> FrontierPoint | None:
    """The plan ``--target head-1`` writes, or None when it is no smaller than ``head``."""
    deadline.check("searching the next point of the trade-off")
    t = head - 1
    # The walk holds the default's plan as a point of its own (default_known: not searched again).
    r = search_plans(graph, replace(o, target_bytes=t, smallest=False), None, board, True)
    if r.plan.head >= head:
        return None
    return point(graph, r, o.kernel_set, board, rate, t, f"--target {t}")


def _run(
    graph: Graph, o: Options, board: Board, rate: float, default_known: bool = False
) -> FrontierPoint:
    deadline.check("searching the next point of the trade-off")
    r = search_plans(graph, o, None, board, default_known)
    return point(graph, r, o.kernel_set, board, rate, o.target_bytes, option_of(o))


def _kept(found: list[FrontierPoint], marked: bool) -> list[FrontierPoint]:
    """The points no other found point dominates, one per figures (the first found), the largest
    head first; with ``marked``, the written plan, the input and the default plan stay whatever
    dominates them (the default ranks by the total, head + tail, so a plan of a lower head and a
    larger tail can beat it in these figures alone)."""
    by_figures: dict[tuple, FrontierPoint] = {}
    for p in found:
        q = by_figures.setdefault(p.figures, p)
        if p is not q and (p.written or p.original):  # one row for both marks, the run's option
            by_figures[p.figures] = replace(
                p if p.written else q,
                written=p.written or q.written,
                original=p.original or q.original,
            )
    points = list(by_figures.values())
    kept = [
        p
        for p in points
        if (marked and (p.written or p.original or p.option == ""))
        or not any(dominates(q, p) for q in points)
    ]
    return sorted(kept, key=lambda p: (-p.head, p.latency_s))


def frontier(
    graph: Graph,
    o: Options,
    board: Board,
    rate: float = 1.0,
    known: list[FrontierPoint] = (),
    searches: int = MAX_SEARCHES,
    notes: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[FrontierPoint]:
    """The plans no other plan found beats in head, modelled latency and flash written, each with
    the option that writes it again, the input and the written plan marked. Found by walking the
    targeted search's staircase down: from the input's head h, --target h-1 writes a plan of head
    h' < h, then --target h'-1, until the head stops falling or reaches --target min's; the
    default plan, --target min's and ``known`` (the run's nearby points, the written one marked;
    their searches are not run again) join them. One search per step, at most ``searches``, and
    none the run's --time-limit has no room for: ``notes`` then says where the walk stopped.
    ``progress`` hears of each step: its count, the head reached and the seconds a step takes."""
    base = replace(o, target_bytes=None, smallest=False)
    found = list(known)
    have = {p.option for p in found}
    for other in (base, replace(base, smallest=True)):
        if option_of(other) not in have:
            found.append(_run(graph, other, board, rate))
    floor = min(p.head for p in found if p.option == "--target min")
    head = _input_head(graph, o)
    found.append(_input_point(graph, o, head, board, rate))
    done, took, stopped = 0, 0.0, False
    while head > floor:  # room for one more search: twice the last one's time
        if done == searches or deadline.remaining(math.inf) < 2 * took + 1:
            stopped = True
            break
        start = time.monotonic()
        p = _step(graph, base, head, board, rate)
        done, took = done + 1, time.monotonic() - start
        if p is None:
            break
        found.append(p)
        head = p.head
        if progress is not None:
            progress(
                f"frontier step {done} (at most {searches}): head {head:,} B, walking down to "
                f"{floor:,} B, {took:.1f} s a step"
            )
    if stopped and notes is not None:
        notes += [
            f"the walk stopped at head {head:,} B after {done} searches (at most {searches}, "
            "within --time-limit):",
            f"  plans between it and --target min's {floor:,} B are not listed; --target "
            f"{head - 1} continues it",
        ]
    return _kept(found, marked=True)


def _input_head(graph: Graph, o: Options) -> int:
    """The input's head as the planner commits it."""
    from ..memory.planner import plan_graph

    return plan_graph(graph, o.kernel_set, o.build_profile).head


def nearby(
    graph: Graph, o: Options, written: Result, board: Board, rate: float, took: float = 0.0
) -> list:
    """The written plan and the next two or three points of --frontier's walk, each with the
    option that writes it again, so every run shows what RAM costs in time and wear: from the
    default plan, the next step down and --target min's; from a --target run, the default plan
    above and the next step below; from --target min, the default and a target halfway between.
    Two searches, each only while --time-limit leaves twice ``took`` (the written plan's search);
    a point another of them beats in every figure is left out."""
    asked = option_of(o)
    here = point(graph, written, o.kernel_set, board, rate, o.target_bytes, asked, True)
    base = replace(o, target_bytes=None, smallest=False)

    def room() -> bool:
        return deadline.remaining(math.inf) >= 2 * took + 1

    found = [here]
    if asked and room():
        found.append(_run(graph, base, board, rate))
    if o.smallest:
        high = found[-1].head
        if high - here.head > 2 * 1024 and room():
            halfway = replace(base, target_bytes=(here.head + high) // 2)
            found.append(_run(graph, halfway, board, rate))
    elif room():
        below = _step(graph, base, here.head, board, rate)
        found += [below] if below is not None else []
    if not asked and room():
        # The written plan is the default's: a --target min point above it is dropped by _kept.
        found.append(_run(graph, replace(base, smallest=True), board, rate, default_known=True))
    return _kept(found, marked=True)
