"""Splitting ADD/SUB/MUL over a concatenation: exact in TFLM, applied only where it fits, and what lets the
optimizer get under the three-tensor floor of a V-Net decoder block."""

from __future__ import annotations

import pytest
import synth

from tinyseg_plugin.checks.verify import verify
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.memory.planner import plan_graph
from tinyseg_plugin.transforms.optimizer import Options, search_plans
from tinyseg_plugin.transforms.passes import graph_or_none
from tinyseg_plugin.transforms.passes.distribute import split_elementwise, splittable


def _residual_over_concat(dtype: str, axis: int, concat_first: bool, opcode: str = "ADD"):
    b = synth.ModelBuilder(dtype=dtype, seed=3)
    x = b.input([1, 8, 6, 4])
    a = b.conv(x, 4)
    c = b.conv(x, 4, k=1)
    cat = b.concat([a, c, x] if axis == 3 else [a, c], axis=axis)
    y = b.conv(cat, b.shapes[cat][3]) if axis == 3 else b.concat([b.conv(a, 4), c], axis=axis)
    out = b.add(cat, y, opcode) if concat_first else b.add(y, cat, opcode)
    return build_graph(b.build([out])), out


@pytest.mark.parametrize("dtype", ["INT8", "FLOAT32"])
@pytest.mark.parametrize("axis", [3, 1])
@pytest.mark.parametrize("concat_first", [True, False])
def test_split_is_bit_exact_in_tflm(dtype: str, axis: int, concat_first: bool) -> None:
    g, _ = _residual_over_concat(dtype, axis, concat_first)
    i = next(op.index for op in g.operators if op.opcode == "ADD")
    g2 = graph_or_none(split_elementwise(g, i))
    assert g2 is not None
    ops = [op.opcode for op in g2.operators]
    parts = 3 if axis == 3 else 2
    assert ops.count("ADD") == parts and "SPLIT_V" in ops
    assert verify(g, g2, runs=3).identical


@pytest.mark.parametrize("opcode", ["SUB", "MUL"])
def test_sub_and_mul_split_exactly(opcode: str) -> None:
    g, _ = _residual_over_concat("FLOAT32", 3, True, opcode)
    i = next(op.index for op in g.operators if op.opcode == opcode)
    g2 = graph_or_none(split_elementwise(g, i))
    assert g2 is not None and [op.opcode for op in g2.operators].count(opcode) == 3
    assert verify(g, g2, runs=2).identical


def test_not_applied_where_it_does_not_fit() -> None:
    b = synth.ModelBuilder(dtype="INT8", seed=1)
    x = b.input([1, 8, 8, 4])
    a, c = b.conv(x, 4), b.conv(x, 4)
    plain = b.add(a, c)  # no concatenation
    g = build_graph(b.build([plain]))
    assert not any(splittable(g, op.index) for op in g.operators)
    assert (
        graph_or_none(
            split_elementwise(g, next(op.index for op in g.operators if op.opcode == "ADD"))
        )
        is None
    )
    assert graph_or_none(split_elementwise(g, 0)) is None  # not an elementwise operator


def test_vnet_decoder_floor_is_broken_only_by_the_split() -> None:
    """ADD(CONCATENATION(up, skip), CONV_2D(...)) holds three full tensors; splitting it lets spilling go below."""
    g = build_graph(synth.vnet_like())
    without = search_plans(g, Options(smallest=True, split=False, stream=False))
    with_split = search_plans(g, Options(smallest=True, stream=False))
    assert with_split.plan.head < without.plan.head
    assert any(s.technique == "operator splitting" for s in with_split.steps)
    assert plan_graph(with_split.graph).head == with_split.plan.head
    assert verify(g, with_split.graph, runs=3).identical
