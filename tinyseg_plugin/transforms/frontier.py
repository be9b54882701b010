"""The trade-off a user chooses from: arena head against modelled time per inference (and flash
written, wear-out), over the plans the search writes for a spread of targets (--frontier)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir.graph import Graph
from ..memory.boards import Board
from ..memory.cost import Traffic, estimate
from .optimizer import Options, Result, optimize


@dataclass(frozen=True)
class FrontierPoint:
    """One plan of the trade-off between arena head and modelled time (planner figures; only the
    written model is verified)."""

    target: int | None  # the --target the search was given (None: --target min, the smallest head)
    head: int
    latency_s: float
    flash_bytes_written: int
    wearout_inferences: float | None
    strategy: str
    option: str = ""  # the optimize option that writes this plan ("" in the --frontier table)
    written: bool = False  # the plan the run wrote (nearby)

    def as_dict(self) -> dict:
        return {
            "target_bytes": self.target,
            "head": self.head,
            "latency_ms": round(self.latency_s * 1e3, 3),
            "flash_bytes_written_per_inference": self.flash_bytes_written,
            "wearout_inferences": None
            if self.wearout_inferences is None
            else round(self.wearout_inferences),
            "strategy": self.strategy,
        }


def frontier(
    graph: Graph, o: Options, board: Board, rate: float = 1.0, points: int = 5
) -> list[FrontierPoint]:
    """The Pareto points (no other plan has both a smaller head and less modelled time) among the
    plans the search writes for ``points`` targets spread from the smallest head to the input's
    head, and the input itself, on the run's board. Each target is a whole search: this costs
    about ``points`` times one optimize run, so it is asked for (--frontier), not done always."""
    floor = optimize(graph, replace(o, target_bytes=None, smallest=True), None, board)
    top = floor.original.head
    targets: list[int | None] = [None]
    targets += sorted(
        {floor.plan.head + (top - floor.plan.head) * k // points for k in range(1, points)}
    )
    found: list[FrontierPoint] = []
    for t in targets:
        r = floor if t is None else optimize(graph, replace(o, target_bytes=t), None, board)
        found.append(point(graph, r, o.kernel_set, board, rate, t))
    free = optimize(graph, replace(o, target_bytes=None, smallest=False), None, board)
    found.append(point(graph, free, o.kernel_set, board, rate, None, "no --target"))
    c = estimate(graph, Traffic(0, 0), board, o.kernel_set, rate)
    found.append(FrontierPoint(top, top, c.latency_s, 0, None, "input"))
    pareto = [
        p
        for p in found
        if not any(
            (q.head <= p.head and q.latency_s <= p.latency_s)
            and (q.head < p.head or q.latency_s < p.latency_s)
            for q in found
        )
    ]
    unique = {(p.head, round(p.latency_s, 9)): p for p in sorted(pareto, key=lambda p: p.head)}
    return list(unique.values())


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
    return FrontierPoint(
        target,
        r.plan.head,
        c.latency_s,
        c.flash_bytes_written,
        c.wearout_inferences,
        r.strategy or "none",
        option,
        written,
    )


def option_of(o: Options) -> str:
    """The optimize option that asks for ``o``'s objective."""
    if o.smallest:
        return "--target min"
    return "no --target" if o.target_bytes is None else f"--target {o.target_bytes}"


def nearby(
    graph: Graph, o: Options, written: Result, board: Board, rate: float, search: bool = True
) -> list:
    """The written plan and, with ``search``, the next points of the trade-off, each with the
    option that writes it, so a user sees what RAM costs in time and wear: the default's plan and
    --target min's, and, from the default or --target min, a target halfway between their heads.
    Each point is the plan ``optimize`` writes for its option (the same search), so the option
    reproduces it; a point no better in head or in latency than another is left out. ``search``
    costs one or two searches (optimize --frontier asks for it); without it, the written plan."""
    here = point(graph, written, o.kernel_set, board, rate, o.target_bytes, option_of(o), True)
    if not search:
        return [here]
    default = replace(o, target_bytes=None, smallest=False)
    smallest = replace(o, target_bytes=None, smallest=True)
    asked = option_of(o)
    runs = {asked: written}
    for other in (default, smallest):
        if option_of(other) != asked:
            runs[option_of(other)] = optimize(graph, other, None, board)
    low, high = runs["--target min"].plan.head, runs["no --target"].plan.head
    if o.target_bytes is None and high - low > 2 * 1024:
        between = replace(o, target_bytes=(low + high) // 2, smallest=False)
        runs[option_of(between)] = optimize(graph, between, None, board)
    others = [
        point(graph, r, o.kernel_set, board, rate, None, opt)
        for opt, r in runs.items()
        if opt != asked
    ]
    kept = [here]
    for p in others:
        worse = any(_beats(q, p) for q in [here] + others)
        if not worse and not any(_same(p, q) for q in kept):
            kept.append(p)
    return sorted(kept, key=lambda p: -p.head)


def _same(p: FrontierPoint, q: FrontierPoint) -> bool:
    return p.head == q.head and round(p.latency_s, 9) == round(q.latency_s, 9)


def _beats(q: FrontierPoint, p: FrontierPoint) -> bool:
    """``q`` is no worse than ``p`` in head and latency, and better in one."""
    return q.head <= p.head and q.latency_s <= p.latency_s and not _same(p, q)
