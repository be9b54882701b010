"""The optimizer lowers the head, every result is bit-exact in TFLM, and the contract round-trips."""

from __future__ import annotations

import numpy as np
import pytest
import synth

from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.checks.verify import verify
from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import model_to_bytes, parse_model
from tinyseg_plugin.memory.planner import plan_graph
from tinyseg_plugin.transforms.optimizer import Options, search_plans
from tinyseg_plugin.transforms.passes import Rewrite, Skip, graph_or_none
from tinyseg_plugin.transforms.passes.layout import LayoutRequest
from tinyseg_plugin.transforms.passes.lower import lower
from tinyseg_plugin.transforms.passes.reorder import OrderRequest
from tinyseg_plugin.transforms.passes.scratch import accumulator_bound, narrow_transpose_convs
from tinyseg_plugin.transforms.passes.spill import SpillPlan, apply_spill


@pytest.fixture(scope="module")
def unet_graph():
    return build_graph(synth.tiny_unet_like())


def _graph_of(result, graph):
    """The rewritten graph, or the input graph when the pass skipped."""
    return result.graph if isinstance(result, Rewrite) else graph


def _laid(result, graph, plan):
    """improve_layout's answer as (graph, plan, how): the input's when no layout beats the greedy one."""
    return (
        (result.graph, result.plan, result.detail)
        if isinstance(result, Rewrite)
        else (graph, plan, "")
    )


def test_tiny_unet_reference_reaches_153600_bit_exact(unet_graph) -> None:
    r = search_plans(unet_graph, Options(smallest=True, kernel_set="reference", stream=False))
    assert r.original.head == 307_200
    assert r.plan.head <= 153_600
    assert verify(unet_graph, r.graph, runs=3).identical
    ops = [op.opcode for op in r.graph.operators]
    assert customops.SPILL in ops and customops.FETCHING_CONV_2D in ops


@pytest.mark.parametrize(
    "runtime, build_profile", [("reference", "host64"), ("cmsis-nn", "cortex-m")]
)
def test_tiny_unet_streams_under_64000_bit_exact(
    unet_graph, runtime: str, build_profile: str
) -> None:
    """By default optimize streams the Tiny U-Net (StreamChain operators only) to a head of
    at most 64,000 B (66,000 with CMSIS-NN), total at most 74,000, verified bit-exact."""
    r = search_plans(
        unet_graph, Options(smallest=True, kernel_set=runtime, build_profile=build_profile)
    )
    assert {op.opcode for op in r.graph.operators} == {customops.STREAM_CHAIN}
    assert r.plan.head <= (64_000 if runtime == "reference" else 66_000) and r.plan.total <= 74_000
    assert r.chains and not r.spills and r.stream_bytes > 0 and r.steps[-1].technique == "streaming"
    assert verify(unet_graph, r.graph, runs=10).identical


def test_optimized_model_survives_serialisation(unet_graph) -> None:
    r = search_plans(unet_graph, Options(smallest=True))
    again = build_graph(parse_model(model_to_bytes(r.graph.model)))
    assert plan_graph(again).head == r.plan.head
    for op in again.operators:
        if customops.is_tinyseg_op(op):
            customops.decode(op)  # options decode after a round trip


def test_head_of_custom_ops_model_is_what_tflm_sees_after_lowering(unet_graph) -> None:
    """The lowered model is a real model: its TFLM head is what the planner says of it."""
    r = search_plans(unet_graph, Options(smallest=True))
    low = lower(r.graph).graph
    assert plan_graph(low).head == interpreter.arena_usage(model_to_bytes(low.model)).head


def test_partial_spill_splits_rows_and_verifies(unet_graph) -> None:
    narrowed = narrow_transpose_convs(unet_graph)
    g, _ = narrowed.graph, list(narrowed.notes)
    skip = g.operators[1].outputs[0]  # the first DoubleConv's output, 80x120x8
    from tinyseg_plugin.memory.coldrange import cold_ranges

    cr = cold_ranges(g)[skip]
    g2 = apply_spill(g, SpillPlan(skip, cr.start, cr.end, rows=30, axis=1, slot=0)).graph
    ops = [op.opcode for op in g2.operators]
    assert "SPLIT_V" in ops and ops.count(customops.SPILL) == 1 and "CONCATENATION" in ops
    assert verify(g, g2, runs=2).identical


@pytest.mark.parametrize("target", [229_000, 200_000, 180_000])
def test_target_between_the_steps_spills_only_what_it_needs(unet_graph, target) -> None:
    """Paper's point on flash traffic: with a byte budget, the skip is spilled in part, just enough
    slices (channels, so the part fuses into the skip concatenation) to meet the target. (The
    spill strategy alone: streaming meets these targets with nothing moved, and wins.)"""
    r = search_plans(unet_graph, Options(target_bytes=target, stream=False))
    before = next(
        s.head for s in r.steps if s.technique == "scratch narrowing"
    )  # head the spill starts from
    assert before == 230_400 and r.plan.head <= target
    assert len(r.spills) == 1
    s = r.spills[0]
    skip = unet_graph.tensors[s.tensor]
    slice_bytes = skip.nbytes // skip.shape[3]
    assert s.partial and s.bytes < skip.nbytes
    assert (
        before - target <= s.bytes < before - target + slice_bytes
    )  # the needed bytes, rounded up to a slice
    if target == 200_000:
        assert verify(unet_graph, r.graph, runs=2).identical


def test_target_below_the_partial_steps_spills_the_whole_skip(unet_graph) -> None:
    r = search_plans(unet_graph, Options(target_bytes=160_000, stream=False))
    assert [(s.partial, s.bytes) for s in r.spills] == [(False, 76_800)]


def test_switches_turn_techniques_off(unet_graph) -> None:
    r = search_plans(unet_graph, Options(smallest=True, fuse=False, scratch=False))
    ops = {op.opcode for op in r.graph.operators}
    assert customops.FETCHING_CONV_2D not in ops
    assert all(not op.intermediates for op in r.graph.operators)
    assert r.plan.head < 307_200


def test_int16_accumulator_only_when_provable() -> None:
    b = synth.ModelBuilder(seed=3)
    x = b.input([1, 4, 4, 16])
    y = b.transpose_conv(x, 4)
    g = build_graph(b.build([y]))
    bound = accumulator_bound(g, 0)
    assert (
        bound is not None and bound > 32767
    )  # random int8 weights over 16 channels cannot be proven
    narrowed = narrow_transpose_convs(g)
    g2, marks = narrowed.graph, list(narrowed.notes)
    assert marks[0][1].startswith("INT32")
    # One input channel with tiny weights is provably safe.
    b = synth.ModelBuilder(seed=3)
    x = b.input([1, 4, 4, 1])
    y = b.transpose_conv(x, 2)
    m = b.build([y])
    w = m.buffers[m.subgraphs[0].tensors[m.subgraphs[0].operators[0].inputs[1]].buffer]
    w.data[:] = 1
    g = build_graph(m)
    assert accumulator_bound(g, 0) <= 32767
    narrowed = narrow_transpose_convs(g)
    g2, marks = narrowed.graph, list(narrowed.notes)
    assert marks == [(0, "INT16")]
    assert plan_graph(g2).head < plan_graph(g).head
    assert verify(g, g2, runs=2).identical


def test_contract_round_trip_and_bad_options() -> None:
    from tinyseg_plugin.errors import TinySegError
    from tinyseg_plugin.ir.graph import Operator

    o = customops.FetchingConv2DOptions(
        customops.FetchingOptions(
            3, 3, (customops.Fetched(0, 7, (1, 8, 8, 4)), customops.Fetched(2, 300, (1, 8, 8, 2)))
        ),
        customops.ConvParams("VALID", 2, 2, 1, 1, "RELU6"),
        band_rows=4,
    )
    op = Operator(
        0, customops.FETCHING_CONV_2D, (1, 2, 3), (4,), custom_options=customops.encode(o)
    )
    assert customops.decode(op) == o  # slots above 255 survive (the prototype used single bytes)
    with pytest.raises(TinySegError, match="FlexBuffers|malformed|version"):
        customops.decode(Operator(0, customops.SPILL, (1,), (), custom_options=b"\x01\x02\x03"))


def test_property_random_models_never_worse_and_bit_exact() -> None:
    improved = 0
    for seed in range(40):
        g = build_graph(synth.random_unet(seed))
        r = search_plans(g, Options(smallest=True))
        assert r.plan.head <= r.original.head, f"seed {seed}"
        improved += r.plan.head < r.original.head
        v = verify(g, r.graph, runs=1, seed=seed)
        assert v.identical, f"seed {seed}: {v.detail}"
    assert improved >= 10


def test_model_that_cannot_improve_is_unchanged() -> None:
    b = synth.ModelBuilder(seed=1)
    x = b.input([1, 8, 8, 4])
    g = build_graph(b.build([b.conv(x, 4)]))
    r = search_plans(g, Options(smallest=True))
    assert r.plan.head == r.original.head and r.graph is g and not r.spills


def test_reorder_finds_the_memory_minimising_order() -> None:
    from tinyseg_plugin.transforms.passes.reorder import reorder

    b = synth.ModelBuilder(seed=2)
    x = b.input([1, 32, 32, 2])
    a = b.conv(x, 16, k=1)  # two wide branches computed first, reduced later: a poor order
    c = b.conv(x, 16, k=1)
    pa = b.pool(a)
    pc = b.pool(c)
    g = build_graph(b.build([b.add(pa, pc)]))
    g2 = _graph_of(reorder(g, OrderRequest(lambda h: plan_graph(h).head, lambda i: 0)), g)
    assert plan_graph(g2).head < plan_graph(g).head
    assert plan_graph(g2).head == interpreter.arena_usage(model_to_bytes(g2.model)).head
    assert verify(g, g2, runs=2).identical


def test_offline_layout_is_what_tflm_lays_out() -> None:
    from tinyseg_plugin.transforms.passes.layout import improve_layout

    found = 0
    for seed in range(200):
        g = build_graph(synth.random_unet(seed))
        p = plan_graph(g)
        g2, p2, _ = _laid(improve_layout(g, LayoutRequest(p, plan_graph)), g, p)
        if g2 is g:
            continue
        found += 1
        assert p2.head < p.head
        assert interpreter.arena_usage(model_to_bytes(g2.model)).head == p2.head
        assert verify(g, g2, runs=1).identical
        if found == 3:
            break
    assert found >= 1


def test_many_tensors_and_float32() -> None:
    """Past 255 tensors (the prototype's single-byte indices broke there) and in float32."""
    g = build_graph(synth.chain(120, size=16, channels=8))
    assert len(g.tensors) > 255
    r = search_plans(g, Options(smallest=True))
    assert r.plan.head <= r.original.head
    assert verify(g, r.graph, runs=1).identical
    f = build_graph(synth.tiny_unet_like(dtype="FLOAT32"))
    rf = search_plans(f, Options(smallest=True))
    assert rf.plan.head < rf.original.head and rf.chains  # float32 stages stream
    assert verify(f, rf.graph, runs=1).identical


def _skips_model(reread: bool):
    b = synth.ModelBuilder(seed=4)
    x = b.input([1, 16, 16, 4])
    a = b.conv(x, 8)
    c = b.conv(a, 8)
    y = b.pool(c)
    for _ in range(4):
        y = b.conv(y, 8)
    up = b.transpose_conv(y, 8)
    out = b.conv(b.concat([a, up, c]), 8)
    if reread:
        out = b.add(out, b.conv(c, 8))  # `c` is read again after the concatenation
    return build_graph(b.build([out])), a, c


def _spill_both(g, a, c):
    from tinyseg_plugin.memory.coldrange import cold_ranges

    crs = cold_ranges(g)
    g1 = apply_spill(g, SpillPlan(a, crs[a].start, crs[a].end, slot=0)).graph
    crs1 = cold_ranges(g1)
    c1 = next(t.index for t in g1.tensors if t.name == g.tensors[c].name)
    return apply_spill(g1, SpillPlan(c1, crs1[c1].start, crs1[c1].end, slot=1)).graph


def test_two_fetched_operands_in_one_operator() -> None:
    from tinyseg_plugin.transforms.passes.fuse import fuse_concat

    g, a, c = _skips_model(reread=False)
    g2 = _spill_both(g, a, c)
    for _ in range(4):
        for op in g2.operators:
            if op.opcode == customops.FETCHING:
                fused = graph_or_none(fuse_concat(g2, op.index))
                if fused is not None:
                    g2 = fused
                    break
    fetches = [customops.decode(op) for op in g2.operators if op.opcode == customops.FETCHING]
    assert any(len(o.fetched) == 2 for o in fetches), fetches
    assert verify(g, g2, runs=2).identical


def test_victim_with_several_readers_after_its_cold_range() -> None:
    g, a, c = _skips_model(reread=True)
    g2 = _spill_both(g, a, c)
    fetched_c = next(
        op.outputs[0]
        for op in g2.operators
        if op.opcode == customops.FETCHING and customops.decode(op).fetched[0].slot == 1
    )
    assert len(g2.consumers[fetched_c]) == 2
    assert verify(g, g2, runs=2).identical


def test_optimize_writes_nothing_when_verification_fails(tmp_path, monkeypatch) -> None:
    """A pass that changed the function must be caught: exit 4, no files."""
    from tinyseg_plugin import cli
    from tinyseg_plugin.ir.modelio import save_model
    from tinyseg_plugin.transforms import optimizer

    model = tmp_path / "m.tflite"
    save_model(synth.tiny_unet_like(), model)
    real = optimizer.search_plans

    def broken(graph, o, progress=None, board=None):
        r = real(graph, o, progress, board)
        other = build_graph(synth.tiny_unet_like(seed=5))  # same shapes, other weights
        r.graph = other
        return r

    monkeypatch.setattr(optimizer, "search_plans", broken)
    rc = cli.main(
        [
            "optimize",
            str(model),
            "-o",
            str(tmp_path / "o.tflite"),
            "--report",
            str(tmp_path / "r.json"),
            "-q",
        ]
    )
    assert rc == 4
    assert not (tmp_path / "o.tflite").exists() and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("dtype", ["INT8", "FLOAT32"])
def test_quantized_all_fetched_conv_is_left_unfused(dtype: str) -> None:
    """Contract v1: a quantized FetchingConv2D with every operand fetched has no in-RAM tensor to take
    the input quantization from, so the pass must leave Fetching + CONV_2D as they are."""
    from conftest import spilled_skip_graphs

    from tinyseg_plugin.transforms.passes.fuse import fuse_conv

    g, g2 = spilled_skip_graphs(dtype)
    fetch = next(op.index for op in g2.operators if op.opcode == customops.FETCHING)
    fused = graph_or_none(fuse_conv(g2, fetch))
    assert (fused is None) == (dtype == "INT8")
    if fused is not None:
        assert verify(g, fused, runs=2).identical


def _wide(kind: str):
    return build_graph(synth.wide_branches(0, 110, kind))


def test_reorder_of_a_wide_graph_falls_back_to_the_greedy_order() -> None:
    """110 parallel branches (220 operators): the exact search gives up at its budget (it used to spend
    30 s of CPU and return nothing); the greedy order still interleaves each branch with its ADD."""
    from tinyseg_plugin.transforms.passes.reorder import min_peak_order, reorder

    g = _wide("conv")
    assert min_peak_order(g, lambda i: 0, state_budget=2_000) is None
    g2 = _graph_of(reorder(g, OrderRequest(lambda h: plan_graph(h).head, lambda i: 0)), g)
    assert (
        plan_graph(g).head == 110 * 64 + 128
    )  # every branch output live at once, plus the input and a sum
    assert plan_graph(g2).head == 4 * 64  # input, running sum, one branch, the new sum
    assert verify(g, g2, runs=1).identical


def test_reorder_search_stops_at_a_counted_move_budget() -> None:
    """The search ends by counting what it tried, never by a clock: a starved move budget gives the
    greedy order, the same on every call, while the default budget finishes."""
    from tinyseg_plugin.transforms.passes.reorder import min_peak_order

    g = _random_dag(3)
    assert min_peak_order(g, lambda i: 0) is not None
    assert min_peak_order(g, lambda i: 0, move_budget=2) is None
    assert min_peak_order(g, lambda i: 0, move_budget=2) is None


def test_reorder_runs_constant_fed_operators_right_before_their_reader() -> None:
    """110 DEQUANTIZEs of weights read no activation: the search does not branch on them, so it finishes."""
    from tinyseg_plugin.transforms.passes.reorder import min_peak_order

    g = _wide("dequantize-int8")
    order = min_peak_order(g, lambda i: 0, state_budget=2_000)
    assert order is not None and sorted(order) == list(range(len(g.operators)))
    from tinyseg_plugin.transforms.passes.reorder import apply_order

    g2 = apply_order(g, order).graph
    assert plan_graph(g2).head == 3 * 256  # running sum, one dequantized weight, the new sum
    assert verify(g, g2, runs=1).identical


def _random_dag(seed: int):
    rng = np.random.default_rng(seed)
    b = synth.ModelBuilder(seed=seed)
    ts = [b.input([1, 4, 4, int(rng.choice([2, 4]))])]
    for _ in range(7):
        a = ts[int(rng.integers(len(ts)))]
        if rng.random() < 0.4 and len(ts) > 1:
            same = [t for t in ts if b.shapes[t] == b.shapes[a] and t != a]
            if same:
                ts.append(b.add(a, same[int(rng.integers(len(same)))]))
                continue
        ts.append(b.conv(a, int(rng.choice([2, 4, 8])), k=1))
    read = {i for op in b.operators for i in op.inputs}
    return build_graph(b.build([t for t in ts[1:] if t not in read]))


@pytest.mark.parametrize("seed", range(6))
def test_exact_reorder_search_matches_brute_force(seed: int) -> None:
    """The bounded search (incremental live bytes, deferred sources, cut by the best found) finds the
    minimum peak over every topological order of small random DAGs."""
    import itertools

    from tinyseg_plugin.transforms.passes.reorder import _model, _step, min_peak_order

    g = _random_dag(seed)
    m = _model(g, lambda i: 0)

    def peak(order):
        live, done, pk = m.initial, 0, 0
        for o in order:
            if m.preds[o] & ~done:
                return None
            during, live, done = _step(m, live, done, o)
            pk = max(pk, during)
        return pk

    best = min(
        p for p in map(peak, itertools.permutations(range(len(g.operators)))) if p is not None
    )
    order = min_peak_order(g, lambda i: 0)
    assert peak(order) == best


def test_reorder_leaves_a_cyclic_graph_alone() -> None:
    """Two operators reading each other's output: no topological order exists; the pass must not raise."""
    from tinyseg_plugin.transforms.passes.reorder import min_peak_order, reorder

    b = synth.ModelBuilder(seed=0)
    x = b.input([1, 4, 4, 4])
    a = b.conv(x, 4)
    c = b.conv(a, 4)
    m = b.build([b.add(c, x)])
    first = m.subgraphs[0].operators[0]
    first.inputs = [c, first.inputs[1], first.inputs[2]]  # a = conv(c), c = conv(a)
    g = build_graph(m)
    assert min_peak_order(g, lambda i: 0) is None
    assert isinstance(reorder(g, OrderRequest(lambda h: plan_graph(h).head, lambda i: 0)), Skip)


def test_a_scalar_activation_is_never_spilled() -> None:
    """TFLM's audio preprocessor (public corpus) has rank-0 activations: spilling one made a
    Fetching whose `shape` option the contract refuses (rank 1..6), and optimize exited 2 on a
    valid model. A scalar has nothing to fetch: it is not spillable."""
    from tinyseg_plugin.transforms.passes.spill import spillable

    b = synth.ModelBuilder(seed=3)
    x = b.input([1, 1, 1, 1])
    scalar = b.reshape(x, [])
    g = build_graph(b.build([b.reshape(scalar, [1, 1, 1, 1])]))
    assert g.tensors[scalar].shape == () and not spillable(g, scalar)
    assert spillable(g, x) or x in g.inputs
