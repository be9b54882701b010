"""Cold-range analysis (Algorithm 2 of the TinySeg paper).

A tensor is cold between two consecutive accesses (its definition counts as
one): it occupies the arena but no operator touches it. Times are allocation
scopes, as in the planner: graph inputs are defined at scope 0 and operator i
runs at scope i + 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph


@dataclass(frozen=True)
class ColdRange:
    """The longest cold range (start, end) of a tensor and its last access, plus every idle range."""

    tensor: int
    start: int
    end: int
    last: int
    idle: tuple[
        tuple[int, int], ...
    ]  # every (access, next access) pair with at least one scope between

    @property
    def length(self) -> int:
        return self.end - self.start


def scope_of(op_index: int) -> int:
    return op_index + 1


def op_of(scope: int) -> int:
    return scope - 1


def cold_ranges(graph: Graph) -> dict[int, ColdRange]:
    """Algorithm 2 for every activation tensor of the graph, keyed by tensor index."""
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    last: dict[int, int] = {}
    idle: dict[int, list[tuple[int, int]]] = {}
    act = set(graph.activations)

    def define(t: int, s: int) -> None:
        start[t] = end[t] = last[t] = s
        idle[t] = []

    for t in graph.inputs:
        if t in act:
            define(t, 0)
    for op in graph.operators:
        s = scope_of(op.index)
        for t in op.outputs:
            if t in act and t not in start:
                define(t, s)
        for t in dict.fromkeys(i for i in op.inputs if i in act):
            if t not in start:
                continue
            if end[t] - start[t] < s - last[t]:
                start[t], end[t] = last[t], s
            if s - last[t] > 1:
                idle[t].append((last[t], s))
            last[t] = s
    return {t: ColdRange(t, start[t], end[t], last[t], tuple(idle[t])) for t in start}
