"""The trade-off a user chooses from: arena head against modelled time per inference (and flash
written, wear-out), over the plans the search writes for a spread of targets (--frontier)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir.graph import Graph
from ..memory.boards import Board
from ..memory.cost import Traffic, estimate
from .optimizer import Options, optimize


@dataclass(frozen=True)
class FrontierPoint:
    """One plan of the trade-off between arena head and modelled time (planner figures; only the
    written model is verified)."""

    target: int | None  # the --target the search was given (None: the smallest head)
    head: int
    latency_s: float
    flash_bytes_written: int
    wearout_inferences: float | None
    strategy: str

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
    floor = optimize(graph, replace(o, target_bytes=None), None, board)
    top = floor.original.head
    targets: list[int | None] = [None]
    targets += sorted(
        {floor.plan.head + (top - floor.plan.head) * k // points for k in range(1, points)}
    )
    found: list[FrontierPoint] = []
    for t in targets:
        r = floor if t is None else optimize(graph, replace(o, target_bytes=t), None, board)
        c = estimate(graph, r.traffic, board, o.kernel_set, rate, uses=r.uses)
        found.append(
            FrontierPoint(
                t,
                r.plan.head,
                c.latency_s,
                c.flash_bytes_written,
                c.wearout_inferences,
                r.strategy or "none",
            )
        )
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
