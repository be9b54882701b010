"""Algorithm 2 of the paper, checked on its Figure 5 example and on a U-Net skip."""

from __future__ import annotations

import synth

from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.memory.coldrange import cold_ranges, scope_of


def _figure5_graph():
    """Operators 0..9; tensor 1 is defined by operator 1, used by operators 2 and 9 (paper Figure 5)."""
    b = synth.ModelBuilder(dtype="FLOAT32", seed=0)
    x = b.input([1, 4, 4, 2])
    t0 = b.conv(x, 2, k=1)  # operator 0
    t1 = b.conv(t0, 2, k=1)  # operator 1 defines tensor "1"
    y = b.conv(t1, 2, k=1)  # operator 2 uses it
    for _ in range(6):  # operators 3..8 do not touch it
        y = b.conv(y, 2, k=1)
    out = b.add(y, t1)  # operator 9 uses it again
    return build_graph(b.build([out])), t1


def test_figure5_longest_cold_range() -> None:
    g, t1 = _figure5_graph()
    cr = cold_ranges(g)[t1]
    # In operator ids: defined at 1, first cold range 1->2, then 2->9 is longer and wins; last use 9.
    assert (cr.start, cr.end, cr.last) == (scope_of(2), scope_of(9), scope_of(9))
    assert cr.length == 7
    assert cr.idle == ((scope_of(2), scope_of(9)),)


def test_tensor_used_once_right_away_has_a_unit_cold_range() -> None:
    g, _ = _figure5_graph()
    crs = cold_ranges(g)
    t = g.operators[3].outputs[0]
    assert crs[t].length == 1 and crs[t].idle == ()


def test_graph_input_is_defined_at_scope_zero() -> None:
    g, _ = _figure5_graph()
    cr = cold_ranges(g)[g.inputs[0]]
    assert cr.start == 0 and cr.end == scope_of(0)


def test_unet_skip_has_the_longest_cold_range() -> None:
    b = synth.ModelBuilder(seed=1)
    x = b.input([1, 16, 16, 3])
    skip = b.conv(x, 4)
    y = b.pool(skip)
    y = b.conv(y, 8)
    y = b.conv(y, 8)
    up = b.transpose_conv(y, 4)
    out = b.concat([skip, up])
    g = build_graph(b.build([out]))
    crs = cold_ranges(g)
    longest = max(crs.values(), key=lambda c: c.length)
    assert longest.tensor == skip
    assert (longest.start, longest.end) == (scope_of(1), scope_of(5))
