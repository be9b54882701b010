"""Operator reordering: a topological order of the operators that lowers the arena head.

Like tflite-tools' reorder pass, it searches the orders of a DAG for the one with the lowest peak of
live activation bytes (dynamic programming over the sets of executed operators, memoised), and adds a
greedy order; unlike it, each candidate is then judged by the TFLM-exact planner, so the order kept is
the one TFLM will really lay out best.

Bounded: the live bytes are carried from state to state (each step adds the operator's outputs and
frees the inputs it read last, no rescan), operators that read no activation (a DEQUANTIZE of
weights, a constant-fed branch) are not searched but run right before their first reader (running
them earlier only keeps their output live longer), and the search stops at a budget of states and of
moves tried (both counted, never timed: one model always gets one order, on any machine and under
any load), returning only the greedy order. So a wide graph (hundreds of parallel branches) costs a fraction
of a second instead of a minute.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

from ...ir.graph import Graph
from ...memory.planner import align_up
from . import Rewrite, Skip
from .edit import Editor

# ResUNet-a (213 operators) needs under 10,000 states and 12,508 moves; the most any corpus model
# that finishes needs is 45,818 moves (MoveNet). Detection networks with 250 operators and wide graphs
# of 100+ parallel branches need more than any budget and get the greedy order: they stop at the
# state budget after 98,000-232,000 moves, or at the move budget, 0.5-1.7 s of CPU at the 90,000 to
# 420,000 moves per second measured on the corpus (scripts/reorder_moves.py).
STATE_BUDGET = 25_000
MOVE_BUDGET = 150_000


@dataclass
class _Model:
    """The DAG as bitmasks: what the search needs, computed once."""

    n: int
    preds: list[int]  # operators (bitmask) whose activation outputs each operator reads
    out_bytes: list[int]  # bytes each operator's activation outputs add when it runs
    dead_bytes: list[
        int
    ]  # of those, the outputs nothing reads (freed as soon as the operator ends)
    scratch: list[int]
    reads: list[
        list[tuple[int, int, bool]]
    ]  # per operator: (users bitmask, bytes, kept) of each input read
    initial: int  # live bytes before any operator runs (graph inputs)
    sources: int  # operators that read no activation: run lazily, not searched


def _model(graph: Graph, scratch: Callable[[int], int]) -> _Model:
    n = len(graph.operators)
    act = set(graph.activations)
    outs = set(graph.outputs)
    size = {t: align_up(graph.tensors[t].nbytes) for t in act}
    users: dict[int, int] = {}
    for t in act:
        mask = 0
        for c in graph.consumers.get(t, []):
            mask |= 1 << c
        users[t] = mask
    preds = [0] * n
    out_bytes = [0] * n
    dead_bytes = [0] * n
    reads: list[list[tuple[int, int, bool]]] = [[] for _ in range(n)]
    sources = 0
    for op in graph.operators:
        seen = set()
        for t in op.inputs:
            if t < 0 or t not in act or t in seen:
                continue
            seen.add(t)
            p = graph.producers.get(t)
            if p is not None and p != op.index:
                preds[op.index] |= 1 << p
            # A tensor nobody produces and that is no graph input is never live (the planner skips it).
            if p is not None or t in graph.input_set:
                reads[op.index].append((users[t], size[t], t in outs))
        out_bytes[op.index] = sum(size[t] for t in dict.fromkeys(op.outputs) if t in act)
        dead_bytes[op.index] = sum(
            size[t]
            for t in dict.fromkeys(op.outputs)
            if t in act and not users[t] and t not in outs
        )
        if not seen:
            sources |= 1 << op.index
    initial = sum(size[t] for t in dict.fromkeys(graph.inputs) if t in act)
    return _Model(
        n, preds, out_bytes, dead_bytes, [scratch(i) for i in range(n)], reads, initial, sources
    )


def _step(m: _Model, live: int, done: int, o: int) -> tuple[int, int, int]:
    """Run operator ``o`` after the set ``done``: (bytes during it, live bytes after it, new set)."""
    during = live + m.out_bytes[o] + m.scratch[o]
    new = done | 1 << o
    freed = m.dead_bytes[o]
    for users, nbytes, kept in m.reads[o]:
        if not kept and not users & ~new:
            freed += nbytes
    return during, live + m.out_bytes[o] - freed, new


def _expand(m: _Model, o: int, done: int) -> list[int]:
    """The operators to run for ``o``: its not yet run source predecessors (recursively), then ``o``."""
    seq: list[int] = []
    pending = m.preds[o] & m.sources & ~done
    while pending:
        p = (pending & -pending).bit_length() - 1
        pending &= pending - 1
        for q in _expand(m, p, done):
            if q not in seq:
                seq.append(q)
                done |= 1 << q
    seq.append(o)
    return seq


def _run(m: _Model, live: int, done: int, o: int) -> tuple[int, int, int, tuple[int, ...]]:
    """``_step`` over ``_expand``: (peak during, live after, new set, operators run)."""
    peak = 0
    seq = _expand(m, o, done)
    for q in seq:
        during, live, done = _step(m, live, done, q)
        peak = max(peak, during)
    return peak, live, done, tuple(seq)


class _Budget(Exception):
    pass


def min_peak_order(
    graph: Graph,
    scratch: Callable[[int], int],
    state_budget: int = STATE_BUDGET,
    move_budget: int = MOVE_BUDGET,
) -> list[int] | None:
    """The order with the lowest peak of live bytes, or None if the search exceeds its budget."""
    m = _model(graph, scratch)
    full = (1 << m.n) - 1
    # A source nothing reads (a graph output made from constants) is searched like any operator.
    read = 0
    for o in range(m.n):
        read |= m.preds[o]
    lonely = m.sources & ~read
    searched = [o for o in range(m.n) if not (m.sources & ~lonely) >> o & 1]
    memo: dict[int, tuple[int, tuple[int, ...]]] = {}
    moves_tried = 0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * m.n + 100))

    def best(done: int, live: int) -> tuple[int, tuple[int, ...]]:
        hit = memo.get(done)
        if hit is not None:
            return hit
        if done == full:
            return 0, ()
        nonlocal moves_tried
        if len(memo) >= state_budget or moves_tried >= move_budget:
            raise _Budget
        moves = []
        for o in searched:
            if done >> o & 1 or m.preds[o] & ~m.sources & ~done:
                continue
            during, after, new, seq = _run(m, live, done, o)
            moves_tried += 1
            moves.append((during, after, o, new, seq))
        moves.sort()  # lowest peak first: a good answer early prunes the rest
        result: tuple[int, tuple[int, ...]] | None = None
        for during, after, _, new, seq in moves:
            if result is not None and during >= result[0]:
                break  # this and every later move peak at least at `during`: none can beat `result`
            rest, order = best(new, after)
            cand = (max(during, rest), seq + order)
            if result is None or cand[0] < result[0]:
                result = cand
        if result is None:
            raise _Budget  # nothing is ready: not a DAG in this order (a cycle); leave the order alone
        memo[done] = result
        return result

    try:
        return list(best(0, m.initial)[1])
    except _Budget:
        return None


def greedy_order(graph: Graph, scratch: Callable[[int], int]) -> list[int]:
    """List scheduling: among ready operators, run the one that leaves the fewest live bytes
    (sources run right before their first reader)."""
    m = _model(graph, scratch)
    read = 0
    for o in range(m.n):
        read |= m.preds[o]
    lazy = m.sources & read
    done, live, order = 0, m.initial, []
    while len(order) < m.n:
        best = None
        for o in range(m.n):
            if done >> o & 1 or lazy >> o & 1 or m.preds[o] & ~lazy & ~done:
                continue
            peak, after, new, seq = _run(m, live, done, o)
            key = (after, peak, o)
            if best is None or key < best[0]:
                best = (key, new, seq)
        if (
            best is None
        ):  # only lazy sources left (cannot happen: each has a reader); run them in order
            rest = [o for o in range(m.n) if not done >> o & 1]
            order.extend(rest)
            break
        (live, _, _), done, seq = best
        order.extend(seq)
    return order


def apply_order(graph: Graph, order: list[int]) -> Rewrite:
    ed = Editor(graph)
    ed.reorder(order)
    return Rewrite.of(ed.commit(), "memory-minimising topological order")


@dataclass(frozen=True)
class OrderRequest:
    """How to judge an order (the head of a graph) and what each operator's kernel asks as scratch."""

    head_of: Callable[[Graph], int]
    scratch: Callable[[int], int]


def reorder(graph: Graph, request: OrderRequest) -> Rewrite | Skip:
    """The best of: the original order, the searched order and the greedy order, by TFLM-exact head."""
    head_of, scratch = request.head_of, request.scratch
    best, best_head = None, head_of(graph)
    identity = list(range(len(graph.operators)))
    candidates = []
    for order in (min_peak_order(graph, scratch), greedy_order(graph, scratch)):
        if order and order != identity and order not in candidates:
            candidates.append(order)
    for order in candidates:
        g = apply_order(graph, order)
        h = head_of(g.graph)
        if h < best_head:
            best, best_head = g, h
    return best if best is not None else Skip("no order lowers the head")
