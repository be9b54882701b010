"""The objective a user means: without --target, the smallest total (head + tail estimate) of the
plans that write no flash and add at most 1% modelled latency; with --target, of the plans whose
head fits, the one that moves the fewest bytes through storage per inference (then the smaller
total); --target min, the smallest head (then the least modelled storage time). Every plan written
here is checked bit-exact in the tflite-micro wheel."""

from __future__ import annotations

from pathlib import Path

import pytest
import synth
from conftest import shared_model

from tinyseg_plugin import pipeline
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import model_to_bytes
from tinyseg_plugin.transforms.optimizer import Options
from tinyseg_plugin.transforms.search import Objective


def _moved(out: pipeline.Outcome) -> int:
    r = out.result
    return sum(s.bytes_moved for s in r.spills) + r.stream_bytes


def _optimize(
    data: bytes, target: int | str | None, runs: int | None = 3, board: str = "generic"
) -> pipeline.Outcome:
    from tinyseg_plugin.memory.boards import load_board

    run = pipeline.Run(
        Options(**pipeline.target_fields(target)), runs=runs, board=load_board(board), nearby=False
    )
    return pipeline.optimize(data, run, "model")


def test_the_objective_ranks_fitting_plans_by_traffic_then_total() -> None:
    o = Objective(100)  # no board: bytes moved stand in for time; scores of (head, tail, traffic)
    assert o.score(90, 0, 0, 0) < o.score(50, 0, 5, 5)  # both fit: less traffic wins
    assert o.score(50, 0, 5, 5) < o.score(90, 0, 5, 5)  # same traffic: the smaller total
    assert o.score(100, 0, 10**9, 0) < o.score(101, 0, 0, 0)  # fitting beats not fitting
    assert o.score(150, 0, 5, 5) < o.score(200, 0, 0, 0)  # neither fits: the smaller head
    estimate = Objective()  # analyze --stream's: the head, then traffic
    assert estimate.score(50, 0, 10**9, 0) < estimate.score(51, 0, 0, 0)


def test_with_a_board_the_objective_ranks_by_modelled_time() -> None:
    """On flash a written byte costs far more than a read one (program and erase): a plan that
    writes less wins over one that moves fewer bytes in all (the generic board: every slot in its
    one flash region)."""
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.memory.cost import Traffic, region_cost
    from tinyseg_plugin.memory.placement import SlotUse
    from tinyseg_plugin.transforms.optimizer import storage_seconds

    board = load_board("generic")
    seconds = storage_seconds(board)
    region = board.spill

    def uses(written: int, read: int) -> list[SlotUse]:
        return [SlotUse(0, written, written, read)]

    assert seconds(uses(1000, 5000)) == region_cost(region, Traffic(1000, 5000)).storage_s
    o = Objective(100, seconds)
    few_writes, many_writes = (64 * 1024, 512 * 1024), (256 * 1024, 0)
    assert sum(few_writes) > sum(many_writes)
    assert seconds(uses(*few_writes)) < seconds(uses(*many_writes))
    assert o.score(90, 0, *few_writes, uses(*few_writes)) < o.score(
        90, 0, *many_writes, uses(*many_writes)
    )
    assert Objective(100).score(90, 0, *few_writes) > Objective(100).score(90, 0, *many_writes)


def test_slots_in_free_ram_cost_less_than_in_flash() -> None:
    """nicla-vision: a slot the DTCM holds costs copies at its bandwidth; one too large for it
    goes to flash and pays programs and erases."""
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.memory.placement import SlotUse, slot_region_bytes
    from tinyseg_plugin.transforms.optimizer import storage_seconds

    board = load_board("nicla-vision")
    seconds = storage_seconds(board)
    dtcm = board.region("dtcm").free
    raw = dtcm  # the largest slot whose ring log (slot_region_bytes) the DTCM holds, to 64 B
    while slot_region_bytes(raw) > dtcm:
        raw -= 64
    fits = [SlotUse(0, raw, raw, raw)]
    over = [SlotUse(0, dtcm + 1, dtcm + 1, dtcm + 1)]
    assert seconds(fits) == raw / board.region("dtcm").read_bandwidth * 2
    assert seconds(over) > 1000 * seconds(fits)


def test_a_target_the_skips_fit_under_moves_nothing_through_storage(tiny_unet: Path) -> None:
    """Tiny U-Net, --target 160KB: the streamed plan with every skip kept in RAM, not the spilled
    model (153,600 B through storage per inference)."""
    out = _optimize(tiny_unet.read_bytes(), 160_000)
    assert out.result.plan.head <= 160_000
    assert _moved(out) == 0
    assert out.verification is not None and out.verification.identical


def test_a_tight_target_spills_the_big_skip_once(tiny_unet: Path) -> None:
    """--target 100KB: the big skip is written once by its chain (which also pools it) and read
    once by the decoder's: 153,600 B per inference, where cutting before the pool moved 230,400."""
    out = _optimize(tiny_unet.read_bytes(), 100_000)
    assert out.result.plan.head <= 100_000
    assert _moved(out) <= 153_600
    assert out.verification is not None and out.verification.identical


def test_target_min_keeps_the_smallest_head(tiny_unet: Path) -> None:
    out = _optimize(tiny_unet.read_bytes(), "min")
    assert out.result.plan.head <= 34_752
    assert out.verification is not None and out.verification.identical


@pytest.mark.parametrize("source", ["tiny_unet", "random_unet_4", "random_unet_7", "person_detect"])
def test_a_looser_target_never_costs_more(source: str, tiny_unet: Path) -> None:
    """Targets from loose to tight: the bytes moved, the modelled latency and the flash bytes written
    per inference never fall as the target tightens, each plan meets its target or is the smallest
    head reached, and each written plan is bit-exact in the wheel (1 random input + 3 edge cases)."""
    if source == "tiny_unet":
        data = tiny_unet.read_bytes()
    elif source == "person_detect":  # a public model (shared/models)
        data = shared_model("person_detect.tflite").read_bytes()
    else:
        data = model_to_bytes(synth.random_unet(int(source.rsplit("_", 1)[1]), dtype="INT8"))
    free = _optimize(data, "min", runs=None)
    original = free.result.original.head
    floor = free.result.plan.head
    if floor >= original:
        pytest.skip(f"{source}: no pass lowers its head")
    targets = sorted({floor + (original - floor) * k // 5 for k in range(5)}, reverse=True)
    figures = []
    for t in targets:
        out = _optimize(data, t, runs=1)
        assert out.result.plan.head <= t or out.result.plan.head <= floor
        assert out.verification is None or out.verification.identical
        assert out.unchanged is not None or out.verification is not None
        figures.append((_moved(out), out.cost.latency_s, out.cost.flash_bytes_written))
    for k in range(3):
        column = [f[k] for f in figures]
        assert column == sorted(column), list(zip(targets, figures))


def test_the_frontier_trades_head_for_modelled_time(tiny_unet: Path, tmp_path: Path) -> None:
    """--frontier on the Nicla Vision: plans no other listed one beats in head, latency and flash
    written, the largest head first, each with its option; --target min's the smallest, the
    written plan and the input marked once; the same points in the report and a plot."""
    import json

    from tinyseg_plugin.cli import main

    out, report, plot = tmp_path / "o.tflite", tmp_path / "r.json", tmp_path / "f.png"
    args = [str(tiny_unet), "-o", str(out), "--unverified", "--board", "nicla-vision"]
    assert main(["optimize", *args, "--frontier-plot", str(plot), "--report", str(report)]) == 0
    points = json.loads(report.read_text())["frontier"]
    assert len(points) >= 3
    heads = [p["head"] for p in points]
    assert heads == sorted(heads, reverse=True) and len(set(heads)) == len(heads)
    assert [p["written"] for p in points].count(True) == 1
    assert [p["original"] for p in points].count(True) == 1 and points[0]["original"]
    assert points[-1]["option"] == "--target min" and points[-1]["head"] <= 34_752
    written = next(p for p in points if p["written"])
    assert written["option"] == "" and written["flash_bytes_written_per_inference"] == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_target_min_tries_streaming_when_spilling_moves_nothing() -> None:
    """A chain of convolutions: nothing to spill (the spill strategy moves 0 B and changes
    nothing), yet streaming lowers the head; --target min streams it."""
    data = model_to_bytes(synth.chain(4, size=32, channels=8))
    out = _optimize(data, "min", runs=None)
    assert out.unchanged is None and out.result.strategy == "streaming"
    assert out.result.plan.head < out.result.original.head


def test_target_min_is_never_above_the_default_head() -> None:
    """The streaming search climbs from a few starts within a budget, and the climb --target min
    drives (spills priced in) can end above the head the default's climb reaches: on a float
    DeepLabV3 at 257x257 with --stream-io, --target min's climb ends at a head of 3,223,552 B and
    the default's search at 1,977,184 B. A small DeepLabV3 under a tight budget ends the same way (a head of
    22,480 B against the default's 22,192 B): --target min keeps the default's plan when its head
    is smaller, and a target of the default's head is met."""
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.transforms.search import Limits

    data = model_to_bytes(synth.deeplab_like(0))
    limits = Limits(work=5000)
    heads = {}
    for target in (None, "min", "default"):
        at = heads[None] if target == "default" else target
        o = Options(stream_io=True, limits=limits, **pipeline.target_fields(at))
        run = pipeline.Run(o, runs=3, board=load_board("generic"), nearby=False)
        out = pipeline.optimize(data, run, "deeplab_like")
        assert out.verification is not None and out.verification.identical
        heads[target] = out.result.plan.head
    assert heads["min"] <= heads[None], heads
    assert heads["default"] <= heads[None], heads


@pytest.mark.parametrize("seed, up, before", [(58, (2,), 3712), (19, (3, 4), 2368)])
def test_target_min_keeps_the_estimates_plan(seed: int, up: tuple[int, ...], before: int) -> None:
    """--target min's climb is offered every candidate (row spills that two chains share), and
    within its budget it can end above the plan the estimate's narrower climb finds (`analyze
    --stream`): these random U-Nets wrote heads of 3,712 B and 2,368 B against estimates of
    3,360 B and 2,224 B. That plan is a candidate --target min keeps, so its head is at most the
    estimate's, and the plan written is verified."""
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.transforms.stream_search import choose_streaming

    model = synth.random_unet(seed, up_kernels=up)
    estimate = choose_streaming(build_graph(model), kernel_only=True).head
    assert estimate < before
    out = _optimize(model_to_bytes(model), "min")
    assert out.verification is not None and out.verification.identical
    assert out.result.plan.head <= estimate


def test_the_default_ranks_plans_that_cost_nothing_first() -> None:
    """A plan that writes flash or adds time ranks after every free one, whatever its head."""
    o = Objective(None, None, lambda uses: not uses)
    assert o.score(90, 0, 0, 0, ()) < o.score(10, 0, 5, 5, ["a slot"])
    assert o.score(50, 0, 0, 0, ()) < o.score(90, 0, 0, 0, ())  # both free: the smaller total


def test_the_default_plan_costs_nothing(tiny_unet: Path) -> None:
    """Tiny U-Net, no options: no flash written, at most 1% over the compute (1,211 ms of 1,199.0),
    the smallest total of the free plans the search finds: 163,280 B (a 153,120 B head); verified."""
    out = _optimize(tiny_unet.read_bytes(), None, runs=1)
    assert out.cost.flash_bytes_written == 0
    assert out.cost.latency_s <= 1.01 * out.cost.compute_s and out.cost.latency_s <= 1.211
    assert out.result.plan.total <= 163_280 and out.result.plan.head <= 153_120
    assert out.verification is not None and out.verification.identical


def test_on_nicla_vision_the_default_keeps_the_qspi_untouched(tiny_unet: Path) -> None:
    """--board nicla-vision, no target: slots only in the free DTCM, at most 1% over 1,199.0 ms,
    a head no larger than --target 64KB's (63,008 B, no flash written)."""
    out = _optimize(tiny_unet.read_bytes(), None, runs=None, board="nicla-vision")
    assert out.cost.flash_bytes_written == 0
    assert out.cost.latency_s <= 1.01 * out.cost.compute_s
    assert out.result.plan.head <= 63_008
    assert out.fits is not None and "axi-sram" in out.fits


def test_a_target_the_default_plan_meets_writes_the_default_plan(tiny_unet: Path) -> None:
    """--stream-io on the Nicla Vision: the default's plan (43,200 B, its row spills in the DTCM,
    no flash written) meets --target 43200, whose own climb ends at 32,224 B writing 19,200 B of
    flash per inference; the target's search keeps the default's plan, the least storage time."""
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.transforms.optimizer import search_plans

    board = load_board("nicla-vision")
    graph = build_graph(load_model(tiny_unet))
    free = search_plans(graph, Options(stream_io=True), None, board)
    assert free.plan.head == 43_200
    targeted = search_plans(graph, Options(stream_io=True, target_bytes=43_200), None, board)
    assert targeted.chains == free.chains and targeted.plan.head == free.plan.head


def test_an_unreachable_target_writes_the_plan_of_target_min(tiny_unet: Path) -> None:
    data = tiny_unet.read_bytes()
    smallest, unreachable = _optimize(data, "min", runs=None), _optimize(data, 1, runs=None)
    assert not unreachable.target_met and smallest.target_met
    assert unreachable.data == smallest.data


@pytest.mark.parametrize("model", ["tiny_unet", "person_detect.tflite"])
def test_target_min_moves_no_more_than_a_target_of_its_own_head(
    model: str, tiny_unet: Path
) -> None:
    """Every objective is offered the same candidates: at its own head, --target min's plan is
    the one the target of that head writes, or moves less."""
    data = (tiny_unet if model == "tiny_unet" else shared_model(model)).read_bytes()
    smallest = _optimize(data, "min", runs=None)
    same = _optimize(data, smallest.result.plan.head, runs=None)
    assert same.result.plan.head == smallest.result.plan.head
    assert _moved(smallest) <= _moved(same)
    assert smallest.cost.latency_s <= same.cost.latency_s


@pytest.mark.parametrize("name, moved", [("vnet2d", 983_040), ("attention_unet", 2_918_400)])
def test_target_min_on_the_larger_models_moves_no_more_than_a_target_did(
    name: str, moved: int, example_models: dict[str, Path]
) -> None:
    """--target 65536 (V-Net 2D) and --target 89504 (Attention U-Net) moved these bytes at the
    smallest head; --target min reaches that head or lower and moves no more."""
    if name not in example_models:
        pytest.skip(f"{name}: needs TensorFlow to build (make models-deps)")
    out = _optimize(example_models[name].read_bytes(), "min", runs=None)
    assert out.result.plan.head <= {"vnet2d": 65_536, "attention_unet": 89_504}[name]
    assert _moved(out) <= moved


def test_the_printed_next_points_are_what_their_options_write(
    tiny_unet: Path, tmp_path: Path, capsys
) -> None:
    """Every run, even with -q, prints under 'plans on' the written plan and the next two or
    three points, each with an option; optimize with it writes that head and latency."""
    import re

    from tinyseg_plugin.cli import main

    for asked in ([], ["--target", "100000"]):
        args = ["optimize", str(tiny_unet), "-o", str(tmp_path / "o"), "--unverified", "-q"]
        assert main([*args, *asked]) == 0
        text = capsys.readouterr().out
        rows = re.findall(r"(written|       ) head +([\d,]+) B +([\d,.]+) ms .*written  (.*)", text)
        assert 3 <= len(rows) <= 4 and [r[0] for r in rows].count("written") == 1, text
        assert "--frontier" not in text
        for mark, head, ms, option in rows:
            target = None if option == "no --target" else option.split()[-1]
            out = _optimize(tiny_unet.read_bytes(), target, runs=None)
            assert f"{out.result.plan.head:,}" == head, option
            assert f"{out.cost.latency_s * 1e3:,.2f}" == ms, option


def test_without_a_target_the_total_ranks_first_and_for_target_min_the_head() -> None:
    """Plan a has the smaller head, plan b the smaller head + tail: the default takes b (ranked by
    head, a would win); --target min (the target 0, which no plan fits) and any target a plan is
    over take a, the head being what a target bounds (ranked by total, b would win); among plans
    that fit, the same traffic is broken by the total."""
    a, b = (100, 50), (120, 10)  # (head, tail): a's head is smaller, b's total
    assert a[0] < b[0] and sum(a) > sum(b)
    free = Objective(None, None, lambda uses: True)
    assert free.by_total and Options().by_total
    assert free.score(*b, 0, 0) < free.score(*a, 0, 0)
    assert free.score(*a, 0, 0).total == 150 and free.score(*b, 0, 0).head == 120
    smallest, over = Objective(0), Objective(90)  # --target min; a target neither fits
    assert not Options(smallest=True).by_total and not Options(target_bytes=90).by_total
    for o in (smallest, over):
        assert not o.by_total
        assert o.score(*a, 0, 0) < o.score(*b, 0, 0)
        assert o.score(*a, 5, 5) < o.score(*b, 0, 0)  # the head before the traffic
    fits = Objective(200)  # both fit, same traffic: the smaller total
    assert fits.score(*b, 5, 5) < fits.score(*a, 5, 5)
    assert fits.score(*a, 0, 0) < fits.score(*b, 5, 5)  # less traffic first
    # analyze --stream's estimate is of the streamed head: it still ranks by the head
    assert Objective().score(*a, 0, 0) < Objective().score(*b, 0, 0)


def _streamed(graph, chains: list[list[int]]):
    """The plan of ``graph`` with these chains streamed (nothing spilled), as the search builds it."""
    from tinyseg_plugin.memory.kernels import BUILD_PROFILES, KernelRules
    from tinyseg_plugin.memory.planner import plan_graph
    from tinyseg_plugin.transforms.passes.stream import ChainRequest, stream_chains
    from tinyseg_plugin.transforms.stream import row_step_scratch

    rules = KernelRules("reference", BUILD_PROFILES["host64"])

    def scratch(i: int) -> int:
        op = graph.operators[i]
        needs = rules.scratch_requests(graph, op) or []
        return row_step_scratch(graph, op, needs, rules.implementation_of(op.opcode))

    return plan_graph(stream_chains(graph, ChainRequest(chains, op_scratch=scratch)).graph)


def test_the_default_writes_the_smaller_total_not_the_smaller_head(tiny_unet: Path) -> None:
    """Two of the Tiny U-Net's plans that cost nothing: its first three operators streamed as a
    chain of their own (153,120 B head, 163,440 B total) or left to TFLM (153,600 B head, 163,312 B
    total: one StreamChain fewer in the tail). The objective ranks the second first, a ranking by
    head alone the first; the search writes neither of the two's larger total (it finds 163,280 B:
    operators 1 and 2 streamed, operator 0 left to TFLM)."""
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.transforms.optimizer import objective_for, search_plans

    graph = build_graph(load_model(tiny_unet))
    decoder = list(
        range(3, 25)
    )  # the operators up to the last convolution, the output QUANTIZE not
    two, one = _streamed(graph, [[0, 1, 2], decoder]), _streamed(graph, [decoder])
    assert (two.head, two.total) == (153_120, 163_440)
    assert (one.head, one.total) == (153_600, 163_312)
    board = load_board("generic")
    objective = objective_for(Options(), graph, board)
    assert objective.score(one.head, one.tail.total, 0, 0) < objective.score(
        two.head, two.tail.total, 0, 0
    )
    by_head = Objective(None, None, objective.free)  # the check can fail: the tail left out,
    assert by_head.score(two.head, 0, 0, 0) < by_head.score(one.head, 0, 0, 0)  # two wins
    written = search_plans(graph, Options(), None, board)
    assert written.plan.total == 163_280 < one.total
    assert [c["operators"] for c in written.chains] == [[1, 2], decoder]


def _monotone():
    """benchmarks/monotone.py: the plans written with every stage type and with one left out."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import monotone
    finally:
        sys.path.pop(0)
    return monotone


# The random U-Nets whose --target min comparison takes under 1.5 CPU seconds, of the 30 (0..29)
# python benchmarks/monotone.py checks: on all 30 no stage type left out gave a better plan.
@pytest.mark.parametrize("seed", [2, 3, 5, 8, 10, 17, 18, 20, 21, 23, 27, 28])
def test_a_stage_type_more_never_makes_the_target_min_plan_worse(seed: int) -> None:
    """--target min ranks by the head, then the bytes moved through storage: the plan written with
    every stage type ranks no worse than any written with one of its chains' stage types left
    out of every chain (optimizer.Options.stages_off)."""
    monotone = _monotone()
    graph = build_graph(synth.random_unet(seed, up_kernels=(2, 3, 4)))
    every, fewer = monotone.compare(graph, smallest=True)
    assert len(fewer) >= 4  # stage types the chains hold
    for t, f in fewer:
        assert monotone.rank(every, True) <= monotone.rank(f, True), (t, every, f)


def test_the_default_tidy_cuts_a_stage_type_out_where_that_ranks_better() -> None:
    """The public person detector: its chains' longest climb left the default plan with a larger
    tail than a search without one of its stage types found; the tidy step's plan with that type
    cut out of every chain reaches it, so no stage type left out ranks better."""
    from tinyseg_plugin.ir.modelio import load_model

    monotone = _monotone()
    graph = build_graph(load_model(shared_model("person_detect.tflite")))
    every, fewer = monotone.compare(graph, smallest=False)
    assert len(fewer) >= 3
    for t, f in fewer:
        assert monotone.rank(every, False) <= monotone.rank(f, False), (t, every, f)


def test_the_monotone_check_finds_a_default_plan_a_stage_type_makes_worse() -> None:
    """The comparison can fail: under the default objective (free plans, then the total), random
    U-Net 11's plan without some stage type ranks better (docs/design/streaming.md says why)."""
    monotone = _monotone()
    every, fewer = monotone.compare(build_graph(synth.random_unet(11, up_kernels=(2, 3, 4))), False)
    assert any(monotone.rank(f, False) < monotone.rank(every, False) for _, f in fewer)
