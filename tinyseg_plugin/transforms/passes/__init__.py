"""Graph-to-graph passes, all with one contract: a pass takes the graph and a request saying where
or how to rewrite it, and returns a ``Rewrite`` (the new graph over an edited copy of the model, and
where each tensor of the old graph went) or a ``Skip`` with the reason it does not apply. The input
graph is never changed; the Editor (edit.py) is the only code that touches the flatbuffer object API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TypeVar, Union

from ...ir.graph import Graph
from ...memory.planner import Plan
from .edit import Edited


@dataclass(frozen=True)
class Rewrite:
    """A pass applied: the new graph, ``remap`` (old tensor index -> new; absent: removed) and a
    short note for the step table."""

    graph: Graph
    remap: dict[int, int]
    detail: str = ""
    plan: Plan | None = None  # the new graph's plan, when the pass had to measure it anyway
    notes: tuple = ()  # what the pass did, item by item (e.g. the operators it marked)

    @staticmethod
    def of(
        edited: Edited, detail: str = "", plan: Plan | None = None, notes: tuple = ()
    ) -> "Rewrite":
        return Rewrite(edited.graph, edited.remap, detail, plan, notes)


@dataclass(frozen=True)
class Skip:
    """A pass that does not apply here, and why (for reports and for the reader of a search)."""

    reason: str


PassResult = Union[Rewrite, Skip]
Request = TypeVar("Request")
Pass = Callable[[Graph, Request], PassResult]  # every pass has this shape


def graph_or_none(result: PassResult) -> Graph | None:
    """The rewritten graph, or None for a skip: for searches that only compare heads."""
    return result.graph if isinstance(result, Rewrite) else None
