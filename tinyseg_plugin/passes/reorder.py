"""Operator reordering: a topological order of the operators that lowers the arena head.

Like tflite-tools' reorder pass, it searches the orders of a DAG for the one with the lowest peak of
live activation bytes (dynamic programming over the sets of executed operators, memoised, with a
state budget), and adds a greedy order for graphs too wide to search; unlike it, each candidate
is then judged by the TFLM-exact planner, so the order kept is the one TFLM will really lay out best.
"""
from __future__ import annotations

import sys
from functools import lru_cache
from typing import Callable

from ..graph import Graph
from ..planner import align_up
from .edit import Editor

STATE_BUDGET = 200_000


def _model(graph: Graph, scratch: Callable[[int], int]):
    n = len(graph.operators)
    act = set(graph.activations)
    size = {t: align_up(graph.tensors[t].nbytes) for t in act}
    preds = [0] * n
    for op in graph.operators:
        for t in op.inputs:
            p = graph.producers.get(t)
            if p is not None and p != op.index and t in act:
                preds[op.index] |= 1 << p
    users = {t: [c for c in graph.consumers.get(t, []) if t in act] for t in act}
    outs = set(graph.outputs)
    return n, act, size, preds, users, outs, [scratch(i) for i in range(n)]


def _live_after(done: int, graph: Graph, act, size, users, outs) -> int:
    total = 0
    for t in act:
        p = graph.producers.get(t)
        if p is None:
            produced = t in graph.inputs
        else:
            produced = bool(done >> p & 1)
        if not produced:
            continue
        if t in outs or any(not (done >> c & 1) for c in users[t]):
            total += size[t]
    return total


def min_peak_order(graph: Graph, scratch: Callable[[int], int]) -> list[int] | None:
    """The order with the lowest peak of live bytes, or None if the search exceeds its budget."""
    n, act, size, preds, users, outs, scr = _model(graph, scratch)
    full = (1 << n) - 1
    states = 0

    sys.setrecursionlimit(max(10_000, 4 * n + 100))

    class Budget(Exception):
        pass

    @lru_cache(maxsize=None)
    def best(done: int) -> tuple[int, tuple[int, ...]]:
        nonlocal states
        states += 1
        if states > STATE_BUDGET:
            raise Budget
        if done == full:
            return 0, ()
        live = _live_after(done, graph, act, size, users, outs)
        result = None
        for o in range(n):
            if done >> o & 1 or preds[o] & ~done:
                continue
            op = graph.operators[o]
            during = live + sum(size[t] for t in op.outputs if t in act) + scr[o]
            rest, order = best(done | 1 << o)
            cand = (max(during, rest), (o,) + order)
            if result is None or cand[0] < result[0]:
                result = cand
        return result

    try:
        return list(best(0)[1])
    except Budget:
        return None
    finally:
        best.cache_clear()


def greedy_order(graph: Graph, scratch: Callable[[int], int]) -> list[int]:
    """List scheduling: among ready operators, run the one that leaves the fewest live bytes."""
    n, act, size, preds, users, outs, scr = _model(graph, scratch)
    done, order = 0, []
    for _ in range(n):
        ready = [o for o in range(n) if not done >> o & 1 and not preds[o] & ~done]
        o = min(ready, key=lambda r: (_live_after(done | 1 << r, graph, act, size, users, outs), r))
        order.append(o)
        done |= 1 << o
    return order


def apply_order(graph: Graph, order: list[int]) -> Graph:
    ed = Editor(graph)
    ed.reorder(order)
    return ed.graph()


def reorder(graph: Graph, head_of: Callable[[Graph], int], scratch: Callable[[int], int]) -> Graph:
    """The best of: the original order, the searched order and the greedy order, by TFLM-exact head."""
    best, best_head = graph, head_of(graph)
    identity = list(range(len(graph.operators)))
    candidates = [o for o in (min_peak_order(graph, scratch), greedy_order(graph, scratch)) if o and o != identity]
    for order in candidates:
        g = apply_order(graph, order)
        h = head_of(g)
        if h < best_head:
            best, best_head = g, h
    return best
