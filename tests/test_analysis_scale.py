"""Long and wide models analyse in near-linear time with the same results as the plain algorithms.

Nothing here is timed: the shapes that were quadratic (a long chain, thousands of graph inputs, a
chain of RELUs under --stream) must work, and the indexed placement and live sets must equal the
plain walk and scan they replace. benchmarks/analyze_speed.py prints the CPU seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import synth

from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.cli import main
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import model_to_bytes, save_model
from tinyseg_plugin.memory.analysis import analyze_graph, to_dict
from tinyseg_plugin.memory.planner import ONLINE, _walk_place, greedy_place, plan_graph
from tinyseg_plugin.transforms.passes import layout


def _greedy_order(sizes: list[int], offline: list[int]) -> list[int]:
    """The order GreedyMemoryPlanner places buffers in (offline first, then largest first over the
    reversed insertion order, stable)."""
    online = [i for i in range(len(sizes)) if offline[i] == ONLINE][::-1]
    online.sort(key=lambda i: -sizes[i])
    return [i for i in range(len(sizes)) if offline[i] != ONLINE] + online


def _random_buffers(rng: np.random.Generator) -> tuple[list[int], list[int], list[int], list[int]]:
    n = int(rng.integers(1, 60))
    scopes = int(rng.integers(1, 30))
    sizes, firsts, lasts, offline = [], [], [], []
    for _ in range(n):
        if sizes and rng.random() < 0.3:  # a stack: the same lifetime and size as the one before
            sizes.append(sizes[-1])
            firsts.append(firsts[-1])
            lasts.append(lasts[-1])
        else:
            sizes.append(16 * int(rng.integers(0 if rng.random() < 0.05 else 1, 8)))
            f = int(rng.integers(-1, scopes))
            firsts.append(f)
            lasts.append(int(rng.integers(max(f, 0), scopes + 1)) if rng.random() > 0.02 else f - 1)
        offline.append(16 * int(rng.integers(0, 10)) if rng.random() < 0.1 else ONLINE)
    return sizes, firsts, lasts, offline


def test_indexed_placement_equals_the_walk() -> None:
    """greedy_place (indexed by offset and lifetime, stacks resumed) gives TFLM's walk's offsets on
    random buffers: stacks of equal buffers, zero sizes, unreached lifetimes, overlapping offline
    offsets."""
    rng = np.random.default_rng(7)
    for trial in range(3000):
        sizes, firsts, lasts, offline = _random_buffers(rng)
        expected = _walk_place(_greedy_order(sizes, offline), sizes, firsts, lasts, offline)
        assert greedy_place(sizes, firsts, lasts, offline) == expected, f"trial {trial}"


def _plain_first_fit(buffers, key) -> dict[int, int]:
    """layout.first_fit as it was: every placed buffer rescanned and sorted for each new one."""
    placed: list[tuple[int, int, int, int]] = []
    out: dict[int, int] = {}
    for i in sorted(range(len(buffers)), key=lambda k: key(buffers[k])):
        b = buffers[i]
        busy = sorted((o, o + s) for o, s, f, l in placed if not (f > b.last or b.first > l))
        cand = 0
        for lo, hi in busy:
            if lo - cand >= b.size:
                break
            cand = max(cand, hi)
        out[i] = cand
        placed.append((cand, b.size, b.first, b.last))
    return out


@pytest.mark.parametrize("model", ["chain", "unused_inputs", "random_unet", "wide_branches"])
def test_layout_first_fit_equals_the_plain_scan(model: str) -> None:
    m = {
        "chain": lambda: synth.chain(300),
        "unused_inputs": lambda: synth.unused_inputs(200),
        "random_unet": lambda: synth.random_unet(3),
        "wide_branches": lambda: synth.wide_branches(),
    }[model]()
    plan = plan_graph(build_graph(m))
    for name, key in layout.ORDERS.items():
        assert layout.first_fit(plan.buffers, key) == _plain_first_fit(plan.buffers, key), name


def test_live_sets_equal_a_scan_of_every_buffer() -> None:
    for m in (synth.chain(400), synth.unused_inputs(50), synth.random_real(2), synth.vnet_like()):
        plan = plan_graph(build_graph(m))
        for s in range(-1, plan.scopes + 3):
            assert plan.live_at(s) == [b for b in plan.buffers if b.alive_at(s)], s
        for b in plan.buffers:
            if b.kind == "tensor":
                assert plan.tensor_buffer(b.owner, b.subgraph) is b


def test_many_unused_graph_inputs_match_tflm() -> None:
    """Hundreds of graph inputs alive together at scope 0 (the stacked placement): the head equals
    the real interpreter's."""
    m = synth.unused_inputs(300)
    real = interpreter.arena_usage(model_to_bytes(m))
    plan = plan_graph(build_graph(m))
    assert plan.head == real.head
    assert plan.head > 300 * 16  # every unused input has its own 16 bytes


def test_long_chain_analyses(tmp_path: Path) -> None:
    """A 3,000-operator chain with skips analyses; each row's live set and byte split are those a
    scan of every buffer gives."""
    path = tmp_path / "chain.tflite"
    model = synth.chain(3000)
    save_model(model, path)
    assert main(["analyze", str(path), "--json", str(tmp_path / "a.json")]) == 0
    d = json.loads((tmp_path / "a.json").read_text())
    assert len(d["operators"]) == 3000
    g = build_graph(model)
    a = analyze_graph(g)
    for row in a.ops[::97]:
        live = [b for b in a.plan.buffers if b.alive_at(row.scope)]
        assert row.live == tuple(b.label for b in live)
        assert row.live_bytes == sum(b.size for b in live)
        op = g.operators[row.index]
        assert row.output_bytes == sum(
            b.size for b in live if b.kind == "tensor" and b.owner in op.outputs
        )
        assert row.input_bytes == sum(
            b.size
            for b in live
            if b.kind == "tensor" and b.owner in op.inputs and b.owner not in op.outputs
        )
    assert to_dict(a)["head"] == d["head"]


def test_relu_chain_streams(tmp_path: Path, capsys) -> None:
    """1,100 standalone RELUs: `analyze --stream` walks the chain without deep recursion."""
    path = tmp_path / "relus.tflite"
    save_model(synth.relu_chain(1100), path)
    assert main(["analyze", str(path), "--stream", "--json", str(tmp_path / "s.json")]) == 0
    d = json.loads((tmp_path / "s.json").read_text())
    assert "stream" in d
    assert len(d["operators"]) == 1101
