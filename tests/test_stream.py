"""Row streaming, the analysis stage (planning only): row windows against TFLM's own
row loops, the pull schedule (every row once, rings of the rows a window needs), the chain search
against the planner, and `tinyseg analyze --stream`. No TFLM kernel runs chains yet, so nothing
here claims more than planner figures."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest
import synth
from conftest import stage_ops

from tinyseg_plugin.cli import main
from tinyseg_plugin.contract import customops, stages
from tinyseg_plugin.contract.bodies import validate_graph
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model
from tinyseg_plugin.memory.align import align_up
from tinyseg_plugin.memory.kernels import BUILD_PROFILES, KernelRules
from tinyseg_plugin.memory.kernels.tinyseg import stream_chain_parts
from tinyseg_plugin.memory.planner import plan_graph
from tinyseg_plugin.transforms import stream, stream_search
from tinyseg_plugin.transforms.passes import Rewrite, Skip
from tinyseg_plugin.transforms.passes.edit import Editor
from tinyseg_plugin.transforms.passes.stream import ChainRequest, stream_chains
from tinyseg_plugin.transforms.search import Limits

TINY = Path(__file__).resolve().parents[1] / "examples" / "models" / "tiny_unet.tflite"


def _tflm_rows(in_h: int, kh: int, stride: int, dil: int, same: bool) -> list[set[int]]:
    """The input rows each output row of TFLM's conv/pool loop reads (kernels/padding.h)."""
    eff = (kh - 1) * dil + 1
    out_h = (in_h + stride - 1) // stride if same else (in_h + stride - eff) // stride
    total = max((out_h - 1) * stride + eff - in_h, 0) if same else 0
    top = total // 2
    return [
        {y * stride - top + k * dil for k in range(kh)} & set(range(in_h)) for y in range(out_h)
    ]


@pytest.mark.parametrize("same", [True, False])
def test_windows_cover_exactly_the_rows_tflm_reads(same):
    cases = 0
    for in_h in range(1, 18):
        for kh in range(1, 6):
            for stride in range(1, 4):
                for dil in range(1, 3):
                    rows = _tflm_rows(in_h, kh, stride, dil, same)
                    if not rows:
                        continue
                    eff = (kh - 1) * dil + 1
                    top = stream._padding_top(in_h, len(rows), stride, eff) if same else 0
                    m = stream.RowMap(in_h, len(rows), stride, 1, top, eff - 1 - top)
                    for y, read in enumerate(rows):
                        lo, hi = m.window(y)
                        assert read <= set(range(lo, hi + 1)), (in_h, kh, stride, dil, y)
                        # the band TFLM's loop spans (rows between dilated taps included), clipped
                        first = y * stride - top
                        assert (lo, hi) == (max(first, 0), min(first + eff - 1, in_h - 1))
                        if dil == 1 and read:
                            assert (lo, hi) == (min(read), max(read))
                        cases += 1
    assert cases > 1000


def test_upsampling_reads_one_row():
    m = stream.RowMap(10, 20, 1, 2)  # TRANSPOSE_CONV stride 2, kernel 2: output row y reads y // 2
    assert [m.window(y) for y in range(4)] == [(0, 0), (0, 0), (1, 1), (1, 1)]


def test_transpose_conv_windows_hold_the_rows_tflms_scatter_reaches():
    """stages.transpose_conv_window against TFLM's scatter, enumerated: input row i adds to output
    rows i * stride - pad + [0, kernel); every output row's window holds the input rows that reach
    it and at most one row more on each side; an output size TFLM's padding does not give for the
    input's is refused."""
    cases = 0
    for in_h in range(1, 9):
        for k in range(1, 6):
            for s in range(1, 4):
                for padding in (0, 1):  # SAME, VALID
                    for out_h in range(1, in_h * s + k + 2):
                        rows = stages.transpose_conv_window(in_h, out_h, k, s, padding)
                        size = -(-out_h // s) if padding == 0 else (out_h - k + s) // s
                        if size != in_h:
                            assert rows is None, (in_h, out_h, k, s, padding)
                            continue
                        pad = max((size - 1) * s + k - out_h, 0) // 2
                        assert rows is not None and rows[0] == pad
                        m = stream.RowMap(in_h, out_h, 1, s, rows[1], rows[2])
                        for y in range(out_h):
                            reach = {i for i in range(in_h) if 0 <= y + pad - i * s < k}
                            lo, hi = m.window(y)
                            assert reach <= set(range(lo, hi + 1)), (in_h, out_h, k, s, y)
                            if reach:
                                assert min(reach) - lo <= 1 and hi - max(reach) <= 1
                        cases += 1
    assert cases > 300
    # Keras' Conv2DTranspose(3, strides=2, padding="same"): rows y // 2 - 1 .. y // 2
    assert stages.transpose_conv_window(10, 20, 3, 2, 0) == (0, 1, 0)
    assert stages.transpose_conv_window(10, 20, 2, 2, 0) == (0, 0, 0)  # one row, as before


def test_pad_reads_the_row_above_its_padding():
    m = stream.RowMap(6, 8, 1, 1, 1, -1)  # PAD with one row on top (row_map's form for PAD)
    lo, hi = m.window(0)
    assert lo > hi  # padding: reads nothing
    assert [m.window(y) for y in (1, 3, 6)] == [(0, 0), (2, 2), (5, 5)]
    assert m.window(7)[0] > m.window(7)[1]  # the bottom padding row


def test_tiny_unet_is_one_row_local_chain():
    g = build_graph(load_model(TINY))
    assert all(stream.is_row_local(g, op) for op in g.operators)
    assert stream.find_chains(g) == [list(range(len(g.operators)))]


def test_transpose_conv_row_scratch_follows_the_runtime():
    """A TRANSPOSE_CONV stage's row-step scratch: one output row of int32 for the reference
    arithmetic, at least CMSIS-NN's accumulator row where the runtime's TRANSPOSE_CONV is
    CMSIS-NN's (the kernel's CmsisTransposeConvRowBytes; tinyseg_stream_test.cc runs the same
    figures). Stride = kernel with SAME padding: the two are equal."""
    g = build_graph(load_model(TINY))
    tconvs = [op for op in g.operators if op.opcode == "TRANSPOSE_CONV"]
    assert len(tconvs) == 3
    for op in tconvs:
        _, _, in_w, _ = g.tensors[op.inputs[2]].shape
        _, _, out_w, out_c = g.tensors[op.outputs[0]].shape
        assert stream.row_step_scratch(g, op, [123], "reference") == out_w * out_c * 4
        assert (
            stream.row_step_scratch(g, op, [123], "cmsis-nn")
            == stream.transpose_conv_row_scratch(in_w, 2, out_c, 2)
            == out_w * out_c * 4
        )
    # VALID, stride 2 over a kernel width 1, 5 input columns: 9 output columns, 10 in CMSIS-NN's row
    assert stream.transpose_conv_row_scratch(5, 1, 4, 2) == 10 * 4 * 4
    implementation = {
        r: KernelRules(r, BUILD_PROFILES["cortex-m"]).implementation_of("TRANSPOSE_CONV")
        for r in ("reference", "cmsis-nn", "arduino", "zephyr", "edge-impulse", "esp-idf")
    }
    assert implementation == {
        "reference": "reference",
        "cmsis-nn": "cmsis-nn",
        "arduino": "reference",
        "zephyr": "reference",
        "edge-impulse": "reference",
        "esp-idf": "reference",
    }


def test_int16_stage_scratch_is_the_s16_functions_buffer():
    """An int16 stage's row-step scratch for the CMSIS-NN runtime is the buffer its s16 function
    asks for (the kernel's CmsisConvRowS16 and CmsisAveragePoolRowS16 use it from op_scratch):
    arm_convolve_s16's two int16 im2col columns for CONV_2D, one int32 per channel for
    arm_avgpool_s16 with DSP (the Cortex-M7), none for arm_depthwise_conv_s16 and arm_max_pool_s16;
    none at all for the reference kernels. The Cortex-M7 run of these models
    (test_tflm_runtime.py, int16 cases) finds every such row computed by the s16 function."""
    g = build_graph(synth.int16_stages_chain())
    seen = set()
    for op in g.operators:
        inp = g.tensors[op.inputs[0]]
        if inp.dtype != "INT16" or op.opcode not in (
            "CONV_2D",
            "DEPTHWISE_CONV_2D",
            "MAX_POOL_2D",
            "AVERAGE_POOL_2D",
        ):
            continue
        seen.add(op.opcode)
        c, want = inp.shape[3], 0
        if op.opcode == "CONV_2D":
            _, f_h, f_w, _ = g.tensors[op.inputs[1]].shape
            want = 2 * c * f_h * f_w * 2
        elif op.opcode == "AVERAGE_POOL_2D":
            want = c * 4
        for kernel_set, expected in (("cmsis-nn", want), ("reference", 0)):
            rules = KernelRules(kernel_set, BUILD_PROFILES["cortex-m"])
            requests = rules.scratch_requests(g, op) or []
            got = stream.row_step_scratch(g, op, requests, rules.implementation_of(op.opcode))
            assert got == expected, (op.opcode, kernel_set)
    assert seen == {"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"}


def test_pull_schedule_rings():
    g = build_graph(load_model(TINY))
    cost = stream.simulate(g, list(range(len(g.operators))))  # raises if a row is computed twice
    assert all(
        cost.rows_computed[i] == g.tensors[g.operators[i].outputs[0]].shape[1] for i in cost.ops
    )
    # a 3x3 convolution's input needs exactly 3 rows; the transposed convolution's input 1
    conv2 = g.operators[2]
    assert cost.ring_rows[conv2.inputs[0]] == 3
    tconv = next(op for op in g.operators if op.opcode == "TRANSPOSE_CONV")
    assert cost.ring_rows[tconv.inputs[2]] == 1
    # the skip of the first level is read 60+ rows of operators later: its ring holds many rows
    skip = g.operators[2].outputs[0]
    assert cost.ring_rows[skip] > 20
    assert cost.ring_bytes[skip] == cost.ring_rows[skip] * 120 * 8


def test_spilled_skip_takes_no_ring_in_its_producer():
    g = build_graph(load_model(TINY))
    skip = g.operators[2].outputs[0]
    s = stream_chains(
        g, ChainRequest([[0, 1, 2], [3, 4, 5], list(range(6, len(g.operators)))], frozenset({skip}))
    )
    assert isinstance(s, Rewrite)
    first, second, third = s.notes
    assert first.spilled == (skip,) and first.ring_rows[skip] == 1  # the row it hands to storage
    assert second.fetched == (skip,) and second.ring_rows[skip] == 2  # MAX_POOL_2D 2x2 reads 2 rows
    assert third.fetched == (skip,) and third.ring_rows[skip] == 1  # CONCATENATION reads 1 row
    ops = [op.opcode for op in s.graph.operators]
    assert ops == [customops.STREAM_CHAIN] * 3
    # the skip is nowhere in the arena: no operator of the streamed graph reads or writes it whole
    plan = plan_graph(s.graph)
    assert all(b.nbytes != g.tensors[skip].nbytes or b.kind == "scratch" for b in plan.buffers)


def test_chains_must_be_consecutive_and_spills_read_by_chains_only():
    g = build_graph(load_model(TINY))
    gap = stream_chains(g, ChainRequest([[0, 2]]))
    assert isinstance(gap, Skip) and "consecutive" in gap.reason
    skip = g.operators[2].outputs[0]
    # the CONCATENATION that reads the skip is in no chain
    unread = stream_chains(g, ChainRequest([[0, 1, 2], [3, 4, 5]], frozenset({skip})))
    assert isinstance(unread, Skip) and f"tensor {skip}" in unread.reason
    assert isinstance(stream_chains(g, ChainRequest([])), Skip)


@pytest.mark.parametrize(
    "runtime,build_profile", [("reference", "host64"), ("cmsis-nn", "cortex-m")]
)
def test_search_lowers_the_tiny_unet_head(runtime, build_profile):
    g = build_graph(load_model(TINY))
    choice = stream_search.choose_streaming(g, runtime, build_profile)
    assert choice.base_head == plan_graph(g, runtime, build_profile).head
    assert choice.streamed is not None
    # the planner's head of the streamed graph is the figure reported
    assert choice.head == plan_graph(choice.streamed.graph, runtime, build_profile).head
    assert choice.head <= 64_000  # the streaming target for the Tiny U-Net (as a plan)
    # every chain phase holds at least its whole inputs, whole outputs and rings at once
    for c in choice.streamed.chains:
        whole = sum(g.tensors[t].nbytes for t in c.inputs + c.outputs)
        assert choice.head >= whole + c.rings
    ops = [i for c in choice.streamed.chains for i in c.ops]
    assert ops == sorted(set(ops))


@pytest.mark.parametrize("seed", range(6))
def test_search_never_worse_on_random_unets(seed):
    g, choice = _random(seed)
    assert choice.head <= choice.base_head
    if choice.streamed is not None:
        assert choice.head == plan_graph(choice.streamed.graph).head


def test_analyze_stream_cli(capsys):
    assert main(["analyze", str(TINY), "--stream"]) == 0
    out = capsys.readouterr().out
    assert "ESTIMATE" in out and "head streamed (estimate" in out
    assert main(["analyze", str(TINY), "--stream", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    s = d["stream"]
    assert s["estimate"] is True and s["head"] < s["head_without_streaming"] == d["head"]
    assert sum(len(c["operators"]) for c in s["chains"]) <= len(d["operators"])
    assert main(["analyze", str(TINY), "--json"]) == 0
    assert "stream" not in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("build_profile", ["host64", "cortex-m"])
def test_the_planning_form_has_the_tail_of_the_written_chains(build_profile: str) -> None:
    """The chain search plans without the bodies but with the bytes each takes (customops
    StreamChainOptions.body_bytes): its tail is the written model's to the byte, with row spills
    and row sources and sinks; left out (0, as before), the tail misses every chain's tables."""
    g = build_graph(load_model(TINY))
    segments = [[0, 1, 2], [3, 4, 5], list(range(6, 26))]
    spilled = frozenset({g.operators[2].outputs[0]})
    io = dict(sourced=frozenset(g.inputs), sunk=frozenset(g.outputs))
    for extra in ({}, io):
        planned, written = (
            plan_graph(
                stream_chains(g, ChainRequest(segments, spilled, body=body, **extra)).graph,
                build_profile=build_profile,
            )
            for body in (False, True)
        )
        assert planned.tail == written.tail and planned.head == written.head
        chains = [o for o in written.graph.operators if o.opcode == customops.STREAM_CHAIN]
        tables = sum(align_up(sum(stream_chain_parts(written.graph, op).values())) for op in chains)
        assert tables > 0 and customops.decode(
            next(o for o in planned.graph.operators if o.opcode == customops.STREAM_CHAIN)
        ).body_bytes == sum(stream_chain_parts(written.graph, chains[0]).values())
        without = stream_chains(g, ChainRequest(segments, spilled, body=False, **extra)).graph
        ed = Editor(without)
        for op in without.operators:
            if op.opcode == customops.STREAM_CHAIN:
                o = dataclasses.replace(customops.decode(op), body_bytes=0)
                ed.replace(
                    op.index,
                    ed.custom(op.opcode, op.inputs, op.outputs, customops.encode(o)),
                )
        bare = plan_graph(ed.commit().graph, build_profile=build_profile)
        assert bare.tail.total == written.tail.total - tables  # the check can fail


def test_validate_accepts_a_chain_the_kernel_runs_and_refuses_the_rest():
    """A StreamChain with its body of kernel stages runs in TFLM (tinyseg_stream.cc); a
    planning-only one (no body, the search's form) or one whose body holds a stage the kernel
    does not compute is refused, with the reason."""
    from tinyseg_plugin.ir.validate import tflm_refusals

    g = build_graph(load_model(TINY))
    assert not tflm_refusals(stream_chains(g, ChainRequest([[0, 1, 2]])).graph)
    planning = tflm_refusals(stream_chains(g, ChainRequest([[0, 1, 2]], body=False)).graph)
    assert [r.opcode for r in planning] == [customops.STREAM_CHAIN] and "planning-only" in planning[
        0
    ].reason
    s = stream_chains(g, ChainRequest([[0, 1, 2]]))
    op = next(o for o in s.graph.operators if o.opcode == customops.STREAM_CHAIN)
    o = customops.decode(op)
    bad = dataclasses.replace(
        o, stages=(dataclasses.replace(o.stages[0], op="SOFTMAX"),) + o.stages[1:]
    )
    ed = Editor(s.graph)
    ed.replace(
        op.index, ed.custom(customops.STREAM_CHAIN, op.inputs, op.outputs, customops.encode(bad))
    )
    refused = tflm_refusals(ed.graph())
    assert refused and "SOFTMAX" in refused[0].reason


# ---------------------------------------------------------------- the body: lowering is bit-exact


@functools.lru_cache(maxsize=None)
def _streamed_tiny():
    g = build_graph(load_model(TINY))
    return g, stream_search.choose_streaming(g).streamed


@functools.lru_cache(maxsize=None)
def _random(seed: int):
    g = build_graph(synth.random_unet(seed))
    return g, stream_search.choose_streaming(g, limits=Limits(work=2_000))


def test_body_lowers_to_the_original_operators():
    from tinyseg_plugin.transforms.passes.lower import lower

    g, s = _streamed_tiny()
    low = lower(s.graph).graph
    assert [op.opcode for op in low.operators] == [op.opcode for op in g.operators]
    assert [op.version for op in low.operators] == [op.version for op in g.operators]
    for a, b in zip(g.operators, low.operators):
        assert [g.tensors[t].shape for t in a.outputs] == [low.tensors[t].shape for t in b.outputs]
        assert [(g.tensors[t].scales, g.tensors[t].zero_points) for t in a.outputs] == [
            (low.tensors[t].scales, low.tensors[t].zero_points) for t in b.outputs
        ]


def test_streamed_tiny_unet_verifies_bit_exact_in_tflm():
    """The chain bodies, lowered to builtins, compute the original bit for bit in the tflite-micro
    wheel (10 random inputs and the edge cases): the options lose nothing the kernel will need."""
    from tinyseg_plugin.checks.verify import verify

    g, s = _streamed_tiny()
    v = verify(g, s.graph, runs=10)
    assert v.identical, v.detail


def test_a_changed_body_fails_verification():
    """The check above can fail: the same chains with one intermediate's scale doubled do not verify."""
    from tinyseg_plugin.checks.verify import verify
    from tinyseg_plugin.transforms.passes.edit import Editor

    g, s = _streamed_tiny()
    op = s.graph.operators[0]
    o = customops.decode(op)
    t = o.tensors[0]
    assert t.scales
    bad = dataclasses.replace(
        o, tensors=(dataclasses.replace(t, scales=tuple(2 * x for x in t.scales)),) + o.tensors[1:]
    )
    ed = Editor(s.graph)
    ed.replace(0, ed.custom(customops.STREAM_CHAIN, op.inputs, op.outputs, customops.encode(bad)))
    v = verify(g, ed.graph(), runs=1, edge_cases=False)
    assert not v.identical


def test_body_round_trips_through_flexbuffers():
    _, s = _streamed_tiny()
    for op in s.graph.operators:
        o = customops.decode(op)
        assert customops.decode(dataclasses.replace(op, custom_options=customops.encode(o))) == o
        assert o.stages and all(st.op in stream.ROW_LOCAL for st in o.stages)


@pytest.mark.parametrize("seed", range(6))
def test_streamed_random_unets_verify(seed):
    from tinyseg_plugin.checks.verify import verify

    g, choice = _random(seed)
    if choice.streamed is None:
        pytest.skip("no chain lowers this model's head")  # counted below: most do stream
    v = verify(g, choice.streamed.graph, runs=1)
    assert v.identical, v.detail


def test_most_random_unets_stream():
    streamed = sum(_random(s)[1].streamed is not None for s in range(6))
    assert streamed >= 4


# ---------------------------------------------------------------- the C++ schedule is the same schedule

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def schedule_tool(tmp_path_factory) -> Path:
    """tflm_ops/tools/chain_schedule_check.cc over the core's chain_schedule.cc, built with g++."""
    import shutil
    import subprocess

    cxx = shutil.which("g++")
    if cxx is None:
        pytest.fail("g++ is needed (scripts/install-native-deps.sh installs it)")
    exe = tmp_path_factory.mktemp("schedule") / "chain_schedule_check"
    subprocess.run(
        [
            cxx,
            "-std=c++14",
            "-O1",
            "-Wall",
            "-Werror",
            "-I",
            str(ROOT / "tflm_ops/core/include"),
            str(ROOT / "tflm_ops/tools/chain_schedule_check.cc"),
            str(ROOT / "tflm_ops/core/src/chain_schedule.cc"),
            str(ROOT / "tflm_ops/core/src/codec.cc"),  # StatusName
            str(ROOT / "tflm_ops/core/src/crc32.cc"),  # the codec's block check
            "-o",
            str(exe),
        ],
        check=True,
    )
    return exe


def _compare(tool: Path, g, ops, cost) -> None:
    import subprocess

    trace: list[tuple[int, int]] = []
    again = stream.simulate(
        g, list(ops), frozenset(cost.spilled), frozenset(cost.fetched), trace=trace
    )
    assert again.ring_rows == cost.ring_rows
    run = subprocess.run(
        [str(tool)],
        input=stream.schedule_program(g, list(ops), cost),
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = run.stdout.split("\n")
    assert "status ok" in lines, run.stdout[-300:]
    steps = [tuple(int(x) for x in ln.split()[1:]) for ln in lines if ln.startswith("step ")]
    assert [(ops[s], r) for s, r in steps] == trace  # the same rows in the same order
    held = {int(ln.split()[1]): int(ln.split()[2]) for ln in lines if ln.startswith("held ")}
    tensors = [g.operators[i].outputs[0] for i in ops] + list(cost.fetched) + list(cost.inputs)
    for k, t in enumerate(tensors):
        if t in cost.ring_rows:
            assert cost.ring_rows[t] == min(max(held[k], 1), g.tensors[t].shape[1]), t


def test_cpp_schedule_equals_python_on_the_tiny_unet(schedule_tool):
    g, s = _streamed_tiny()
    for c in s.chains:
        _compare(schedule_tool, g, c.ops, c)
    whole = list(range(len(g.operators)))  # the whole network as one chain: 48-row skip rings
    _compare(schedule_tool, g, whole, stream.simulate(g, whole))


@pytest.mark.parametrize("seed", range(6))
def test_cpp_schedule_equals_python_on_random_unets(schedule_tool, seed):
    g, choice = _random(seed)
    for chain in stream.find_chains(g):
        _compare(schedule_tool, g, chain, stream.simulate(g, chain))
    for c in choice.streamed.chains if choice.streamed else ():
        _compare(schedule_tool, g, c.ops, c)


@pytest.mark.parametrize("out, align, half", [((24, 32), False, True), ((40, 52), False, True)])
def test_cpp_schedule_equals_python_through_half_pixel_resizes(schedule_tool, out, align, half):
    """Row maps with an offset term (a half-pixel RESIZE_BILINEAR's): the C++ schedule takes the
    same rows in the same order and the rings hold the two rows a window reads."""
    g = build_graph(synth.bilinear_seg(out=out, align_corners=align, half_pixel_centers=half))
    resizes = [i for i, op in enumerate(g.operators) if op.opcode == "RESIZE_BILINEAR"]
    assert any(stream.row_map(g, g.operators[i], g.operators[i].inputs[0]).offset for i in resizes)
    for chain in stream.find_chains(g):
        _compare(schedule_tool, g, chain, stream.simulate(g, chain))


def test_cpp_schedule_refuses_a_ring_the_plan_made_too_small(schedule_tool):
    import subprocess

    g = build_graph(load_model(TINY))
    whole = list(range(len(g.operators)))
    cost = stream.simulate(g, whole)
    skip = g.operators[2].outputs[0]
    small = dataclasses.replace(cost, ring_rows={**cost.ring_rows, skip: cost.ring_rows[skip] - 1})
    run = subprocess.run(
        [str(schedule_tool)],
        input=stream.schedule_program(g, whole, small),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1 and "status out_of_range" in run.stdout


def test_empty_tensors_are_not_streamed():
    """A zero-height tensor (validate lets empty tensors through) joins no chain: no division by
    its height, no rows to stream."""
    from tinyseg_plugin.ir.graph import Tensor

    g = build_graph(load_model(TINY))
    op = next(o for o in g.operators if o.opcode == "CONV_2D")
    x = op.inputs[0]
    t = g.tensors[x]
    g.tensors[x] = Tensor(t.index, t.name, (1, 0, t.shape[2], t.shape[3]), t.dtype, 0, False, False)
    assert stream.row_map(g, op, x) is None
    assert not stream.is_row_local(g, op)


# ---------------------------------------------------------------- what the StreamChain kernel computes


@pytest.mark.parametrize(
    "op, acts, out, consts, ok",
    [
        ("CONV_2D", ["INT8"], "INT8", ["INT8", "INT32"], True),
        ("CONV_2D", ["INT8"], "INT8", ["INT8", None], True),
        ("CONV_2D", ["INT16"], "INT16", ["INT8", "INT64"], True),  # int16 stages (16x8)
        ("CONV_2D", ["INT16"], "INT16", ["INT8", "INT32"], True),  # TFLM's int32 accumulator
        ("CONV_2D", ["INT16"], "INT16", ["INT16", "INT64"], False),  # int8 weights
        ("CONV_2D", ["FLOAT32"], "FLOAT32", ["FLOAT32", "FLOAT32"], True),  # float32 stages
        ("CONV_2D", ["FLOAT32"], "FLOAT32", ["INT8", "INT32"], False),  # float32 filter and bias
        ("CONV_2D", ["INT8"], "INT8", ["FLOAT32", "FLOAT32"], False),
        ("CONV_2D", ["INT8"], "FLOAT32", ["FLOAT32", "FLOAT32"], False),  # one type of rows
        ("TRANSPOSE_CONV", ["FLOAT32"], "FLOAT32", ["INT32", "FLOAT32", None], True),
        ("ADD", ["FLOAT32", "INT8"], "FLOAT32", [], False),
        ("SUB", ["FLOAT32", "FLOAT32"], "FLOAT32", [], True),
        ("TANH", ["FLOAT32"], "FLOAT32", [], True),
        ("PADV2", ["FLOAT32"], "FLOAT32", ["INT32", "FLOAT32"], True),
        ("PADV2", ["FLOAT32"], "FLOAT32", ["INT32", "INT8"], False),  # a float32 pad value
        ("PRELU", ["FLOAT32"], "FLOAT32", ["FLOAT32"], True),
        ("PRELU", ["FLOAT32"], "FLOAT32", ["INT8"], False),  # a float32 alpha
        ("RESIZE_BILINEAR", ["FLOAT32"], "FLOAT32", ["INT32"], True),
        ("ELU", ["FLOAT32"], "INT8", [], False),  # one type of rows
        ("QUANTIZE", ["UINT8"], "INT8", [], True),
        ("QUANTIZE", ["FLOAT32"], "INT8", [], True),  # an int8 chain from a float32 tensor
        ("QUANTIZE", ["FLOAT32"], "INT16", [], True),  # an int16 chain from a float32 tensor
        ("QUANTIZE", ["FLOAT32"], "INT32", [], False),
        ("ADD", ["INT8", "INT8"], "INT8", [], True),
        ("ADD", ["INT8"], "INT8", [], False),  # two operands
        ("PRELU", ["INT8"], "INT8", ["INT8"], True),
        ("RESIZE_NEAREST_NEIGHBOR", ["INT8"], "INT8", ["INT32"], True),
        ("SOFTMAX", ["INT8"], "INT8", [], False),
        ("DEPTHWISE_CONV_2D", ["INT8"], "INT8", ["INT8", "INT32"], True),
        ("AVERAGE_POOL_2D", ["INT8"], "INT8", [], True),
        ("PAD", ["INT8"], "INT8", ["INT32"], True),
        ("PAD", ["INT8"], "INT8", ["INT64"], False),  # TFLM's PAD reads the paddings as int32
        ("PAD", ["FLOAT32"], "FLOAT32", ["INT32"], True),
        ("PAD", ["INT8"], "INT8", [], False),  # the paddings are a constant input
        ("MIRROR_PAD", ["INT8"], "INT8", ["INT32"], False),
        ("RELU", ["INT8"], "INT8", [], True),
        ("RELU6", ["INT8"], "INT8", [], True),
        ("RELU", ["INT16"], "INT16", [], True),  # an int16 stage (16x8)
        ("RELU6", ["UINT8"], "UINT8", [], False),
        ("RELU", ["INT8"], "INT8", ["INT8"], False),  # no constant inputs
        ("RELU6", ["INT8", "INT8"], "INT8", [], False),  # one operand
        ("RELU_N1_TO_1", ["INT8"], "INT8", [], False),  # not a stage
        ("SUB", ["INT8", "INT8"], "INT8", [], True),
        ("SUB", ["INT16", "INT16"], "INT16", [], True),  # int16 stages (16x8)
        ("MUL", ["INT16", "INT16"], "INT16", [], True),
        ("PAD", ["INT16"], "INT16", ["INT32"], True),
        ("RESIZE_NEAREST_NEIGHBOR", ["INT16"], "INT16", ["INT32"], True),
        ("PADV2", ["INT16"], "INT16", ["INT32", "INT16"], True),  # an int16 stage (16x8)
        ("TRANSPOSE_CONV", ["INT16"], "INT16", ["INT32", "INT8", "INT64"], True),
        ("TRANSPOSE_CONV", ["INT16"], "INT16", ["INT32", "INT8", "INT32"], False),
        ("SUB", ["INT16", "INT8"], "INT16", [], False),  # int16 stages read int16 only
        ("SUB", ["INT8"], "INT8", [], False),  # two operands
        ("DEQUANTIZE", ["INT8"], "FLOAT32", [], True),
        ("DEQUANTIZE", ["INT16"], "FLOAT32", [], True),  # int16 stages' rows to float32
        ("DEQUANTIZE", ["UINT8"], "FLOAT32", [], False),
        ("DEQUANTIZE", ["INT8"], "INT8", [], False),
        ("RELU", ["FLOAT32"], "FLOAT32", [], True),  # float32 stages read a DEQUANTIZE's rows
        ("TANH", ["INT8"], "INT8", [], True),
        ("HARD_SWISH", ["INT8"], "INT8", [], True),
        ("LEAKY_RELU", ["INT8"], "INT8", [], True),
        ("TANH", ["INT16"], "INT16", [], True),  # int16 (its output scale: stream.py)
        ("HARD_SWISH", ["FLOAT32"], "FLOAT32", [], True),
        ("LEAKY_RELU", ["INT8"], "INT8", ["INT8"], False),  # no constant inputs
        ("PADV2", ["INT8"], "INT8", ["INT32", "INT8"], True),
        ("PADV2", ["INT8"], "INT8", ["INT32"], False),  # the pad value is an input
        ("PADV2", ["INT8"], "INT8", ["INT32", "INT16"], False),
        ("ELU", ["INT8"], "INT8", [], True),
        ("ELU", ["FLOAT32"], "FLOAT32", [], True),  # TFLM's float ELU, no table
        ("ELU", ["INT16"], "INT16", [], False),
        ("ELU", ["INT8"], "INT8", ["INT8"], False),  # no constant inputs
    ],
)
def test_stage_rules(op, acts, out, consts, ok):
    assert (customops.stream_stage_problem(op, acts, out, consts) is None) == ok


@pytest.mark.parametrize(
    "paddings, ok",
    [
        ([[0, 0], [1, 1], [1, 1], [0, 0]], True),
        ([[0, 0], [2, 0], [0, 3], [0, 0]], True),
        ([[0, 0], [0, 0], [0, 0], [0, 0]], True),
        ([[1, 0], [1, 1], [1, 1], [0, 0]], False),  # batch
        ([[0, 0], [1, 1], [1, 1], [0, 1]], True),  # channels too
        ([[0, 0], [0, 0], [0, 0], [2, 32]], True),  # channels only
        ([[0, 0], [0, 0], [0, 0], [0, -1]], False),  # negative channels
        ([[0, 0], [-1, 1], [1, 1], [0, 0]], False),  # negative
        ([[0, 0], [1, 1], [1, 1]], False),  # not NHWC
    ],
)
def test_pad_stage_rules(paddings, ok):
    assert (
        customops.stream_stage_problem("PAD", ["INT8"], "INT8", ["INT32"], paddings) is None
    ) == ok


def test_pads_are_streamed_bit_exact():
    """PAD in front of VALID convolutions (on the model's input, symmetric, asymmetric, one axis),
    with RELU and RELU6: every PAD goes inside a StreamChain, the lowered chains match the unfused
    graph; a PAD of channels is a stage too."""
    import numpy as np

    from tinyseg_plugin.checks.verify import verify

    g = build_graph(synth.padded_unet())
    pads = [op for op in g.operators if op.opcode == "PAD"]
    assert len(pads) == 5 and all(stream.kernel_computes(g, op) for op in pads)
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    assert all(op.opcode == customops.STREAM_CHAIN for op in streamed.operators)
    stages = [st.op for op in streamed.operators for st in customops.decode(op).stages]
    assert stages.count("PAD") == 5
    v = verify(g, streamed, runs=2)
    assert v.identical, v.detail

    # Rows added only below (MoveNet's stride-2 convolutions have such PADs): the identity's row map
    # with one more output row, a valid body.
    b = synth.ModelBuilder(dtype="INT8")
    x = b.input([1, 9, 9, 3])
    y = b.conv(
        b.pad(b.conv(x, 4), [[0, 0], [0, 1], [0, 1], [0, 0]]), 4, stride=2, padding=synth.VALID
    )
    g3 = build_graph(b.build([b.conv(y, 4)]))
    streamed = stream_search.choose_streaming(g3, kernel_only=True).streamed
    assert streamed is not None
    chains = [op for op in streamed.graph.operators if op.opcode == customops.STREAM_CHAIN]
    assert [st.op for op in chains for st in customops.decode(op).stages].count("PAD") == 1
    validate_graph(streamed.graph)  # the body check `verify` and `analyze` run on a model
    v = verify(g3, streamed.graph, runs=2)
    assert v.identical, v.detail

    b = synth.ModelBuilder(dtype="INT8")
    x = b.input([1, 8, 8, 3])
    y = b.pad(x, [[0, 0], [1, 1], [1, 1], [0, 1]])
    g2 = build_graph(b.build([b.conv(y, 4, padding=synth.VALID)]))
    pad = next(op for op in g2.operators if op.opcode == "PAD")
    assert stream.row_map(g2, pad, x) is not None  # row-local (the estimate plans it) ...
    assert stream.kernel_computes(g2, pad)  # ... and a stage: channel padding
    assert np.array_equal(g2.buffer_array(pad.inputs[1])[3], [0, 1])


def test_a_pad_of_the_bottom_rows_only_is_written_and_read_back():
    """PAD [0, 1] on the height (as TensorFlow pads a stride-2 SAME convolution of an even input,
    e.g. the public OpenMV FOMO detector): the stage keeps input row y at output row y and adds a
    row below. The body check mirrors the kernel's (a padding stage may change the rows), so the
    model optimize writes loads again and verifies."""
    from tinyseg_plugin import pipeline
    from tinyseg_plugin.ir.modelio import model_to_bytes
    from tinyseg_plugin.transforms.optimizer import Options

    b = synth.ModelBuilder(dtype="INT8", seed=3)
    x = b.input([1, 16, 16, 3])
    y = b.conv(b.pad(x, [[0, 0], [0, 1], [0, 1], [0, 0]]), 8, k=3, stride=2, padding=synth.VALID)
    y = b.conv(b.pad(y, [[0, 0], [0, 1], [0, 1], [0, 0]]), 8, k=3, stride=2, padding=synth.VALID)
    data = model_to_bytes(b.build([b.conv(y, 4, k=1)]))
    out = pipeline.optimize(data, pipeline.Run(Options(smallest=True), runs=1), "m")
    assert out.verification is not None and out.verification.identical
    written = pipeline.load(out.data, "written")
    stages = stage_ops(written)
    assert stages.count("PAD") == 2


def test_standalone_activations_are_streamed_bit_exact():
    """RELU (requantizing and not) and RELU6 as operators of their own: the kernel computes them,
    the search puts every one inside a StreamChain, and the lowered chains match the unfused graph."""
    from tinyseg_plugin.checks.verify import verify

    g = build_graph(synth.activations_unet())
    acts = [op for op in g.operators if op.opcode in ("RELU", "RELU6")]
    assert len(acts) == 4 and all(stream.kernel_computes(g, op) for op in acts)
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    assert all(op.opcode == customops.STREAM_CHAIN for op in streamed.operators)
    stages = [st.op for op in streamed.operators for st in customops.decode(op).stages]
    assert stages.count("RELU") == 2 and stages.count("RELU6") == 2
    v = verify(g, streamed, runs=2)
    assert v.identical, v.detail


# The stages more_stages_unet holds, by operator: each one inside a StreamChain.
MORE_STAGES = {
    "SUB": 4,
    "DEQUANTIZE": 2,
    "TANH": 1,
    "HARD_SWISH": 1,
    "LEAKY_RELU": 1,
    "PADV2": 2,
    "ELU": 1,
}


def test_more_stages_are_streamed_bit_exact():
    """SUB (two activations of different quantization, a one-channel activation broadcast across
    channels, a per-channel constant as either operand, a fused RELU), requantizing LEAKY_RELU, ELU
    and HARD_SWISH, TANH, PADV2 and DEQUANTIZE to float32 outputs: the kernel computes every one, the
    search puts each inside a StreamChain (a DEQUANTIZE's float rows always one of the chain's
    outputs), and the lowered chains match the unfused graph."""
    from tinyseg_plugin.checks.verify import verify

    g = build_graph(synth.more_stages_unet())
    ops = [op for op in g.operators if op.opcode in MORE_STAGES]
    assert len(ops) == sum(MORE_STAGES.values()) and all(
        stream.kernel_computes(g, op) for op in ops
    )
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    assert all(op.opcode == customops.STREAM_CHAIN for op in streamed.operators)
    stages = [st.op for op in streamed.operators for st in customops.decode(op).stages]
    assert {k: stages.count(k) for k in MORE_STAGES} == MORE_STAGES
    for (
        op
    ) in streamed.operators:  # float32 rows: only ever one of a chain's outputs (written whole)
        for st in customops.decode(op).stages:
            if st.op == "DEQUANTIZE":
                assert len(op.inputs) <= st.outputs[0] < len(op.inputs) + len(op.outputs)
    v = verify(g, streamed, runs=2)
    assert v.identical, v.detail


def test_kernel_refuses_padv2s_it_cannot_stream():
    """A PADV2 of the batch, or whose pad value has another quantization than its output (TFLM's
    Prepare refuses that too) or is no constant, is no stage; the row-local estimate still plans
    one of the batch (a PADV2 of channels is a stage)."""
    b = synth.ModelBuilder(dtype="INT8")
    x = b.input([1, 8, 8, 3])
    ok = b.padv2(x, [[0, 0], [1, 1], [1, 1], [0, 0]], 5)
    channels = b.padv2(x, [[0, 0], [1, 1], [1, 1], [0, 1]], 5)
    batch = b.padv2(x, [[1, 0], [1, 1], [1, 1], [0, 0]], 5)
    g = build_graph(
        b.build(
            [
                b.conv(ok, 4, padding=synth.VALID),
                b.conv(channels, 4, padding=synth.VALID),
                b.conv(batch, 4, padding=synth.VALID),
            ]
        )
    )
    good, chan, bad = [op for op in g.operators if op.opcode == "PADV2"]
    assert stream.kernel_computes(g, good) and stream.row_map(g, good, x) is not None
    assert stream.kernel_computes(g, chan) and stream.row_map(g, chan, x) is not None
    assert not stream.kernel_computes(g, bad)
    value = g.tensors[good.inputs[2]]
    for other in (
        dataclasses.replace(value, zero_points=(value.zero_points[0] + 1,)),
        dataclasses.replace(value, scales=(value.scales[0] * 2,)),
        dataclasses.replace(value, is_constant=False),
    ):
        g.tensors[value.index] = other
        assert not stream.kernel_computes(g, good)
    g.tensors[value.index] = value
    assert stream.kernel_computes(g, good)


def test_kernel_refuses_subs_it_cannot_stream():
    """A SUB broadcasting along rows, with per-channel quantization or of int16 is no stage."""
    g = build_graph(synth.more_stages_unet())
    op = next(o for o in g.operators if o.opcode == "SUB")
    assert stream.kernel_computes(g, op)
    x = g.tensors[op.inputs[1]]
    y = g.tensors[op.outputs[0]]
    for bad_x, bad_y in (
        (dataclasses.replace(x, scales=x.scales * 2, zero_points=x.zero_points * 2), y),
        (dataclasses.replace(x, dtype="INT16"), dataclasses.replace(y, dtype="INT16")),
        (dataclasses.replace(x, shape=(1, 1) + x.shape[2:]), y),
    ):
        g.tensors[x.index], g.tensors[y.index] = bad_x, bad_y
        assert not stream.kernel_computes(g, op)
    g.tensors[x.index], g.tensors[y.index] = x, y
    assert stream.kernel_computes(g, op)


def test_kernel_refuses_activations_it_cannot_stream():
    """A RELU or RELU6 with per-channel quantization, another dtype or another output shape is no stage."""
    g = build_graph(synth.activations_unet())
    for kind in ("RELU", "RELU6"):
        op = next(o for o in g.operators if o.opcode == kind)
        assert stream.kernel_computes(g, op)
        x = g.tensors[op.inputs[0]]
        y = g.tensors[op.outputs[0]]
        for bad_x, bad_y in (
            (dataclasses.replace(x, scales=x.scales * 2, zero_points=x.zero_points * 2), y),
            (dataclasses.replace(x, dtype="INT16"), dataclasses.replace(y, dtype="INT16")),
            (x, dataclasses.replace(y, shape=(y.shape[0], y.shape[1] + 1) + y.shape[2:])),
        ):
            g.tensors[x.index], g.tensors[y.index] = bad_x, bad_y
            assert not stream.kernel_computes(g, op)
        g.tensors[x.index], g.tensors[y.index] = x, y
        assert stream.kernel_computes(g, op)


@pytest.mark.parametrize("name", ["attention_unet", "resunet_a", "vnet2d"])
def test_kernel_computes_every_row_local_operator_of_the_example_models(example_models, name):
    """Broadcast MUL (the attention gates' one-channel sigmoid), per-channel constant ADD/MUL
    (ResUNet-a's batch norms), PRELU, LOGISTIC, RESIZE_NEAREST_NEIGHBOR: the search for `optimize`
    may put every row-local operator of these models in a chain."""
    if name not in example_models:
        pytest.skip("the example models need TensorFlow")
    g = build_graph(load_model(example_models[name]))
    local = [op for op in g.operators if stream.is_row_local(g, op)]
    assert local and all(stream.kernel_computes(g, op) for op in local)
    assert stream.find_chains(g, kernel_only=True) == stream.find_chains(g)


def test_analyze_lists_the_chains_of_a_streamed_model(tmp_path, capsys):
    """`tinyseg analyze` of a model `optimize` streamed names each StreamChain's stages, rings and
    row streams, within the 100-column table width."""
    from tinyseg_plugin.ir.modelio import save_model

    choice = stream_search.choose_streaming(build_graph(load_model(TINY)), kernel_only=True)
    m = tmp_path / "s.tflite"
    save_model(choice.streamed.graph.model, m)
    assert main(["analyze", str(m)]) == 0
    out = capsys.readouterr().out
    section = out[out.index("StreamChain operators") :]
    rows = [ln for ln in section.splitlines()[1:] if ln.startswith("  op ")]
    assert len(rows) == len(choice.streamed.chains) and all(len(ln) <= 100 for ln in rows)
    assert "row spills to slots 0" in rows[0] and "QUANTIZE > CONV_2D" in rows[0]


def test_int16_stages_are_streamed_bit_exact():
    """An int16 (16x8) chain with every int16 stage, QUANTIZE int8 <-> int16 and DEQUANTIZE int16:
    the search puts every operator inside StreamChains and the lowered chains match the unfused
    graph in the tflite-micro wheel (test_real_kernels.py runs the kernel itself)."""
    from tinyseg_plugin.checks.verify import verify

    g = build_graph(synth.int16_stages_chain())
    assert stream.stage_gaps(g) == []
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    assert all(op.opcode == customops.STREAM_CHAIN for op in streamed.operators)
    stages = sorted(st.op for op in streamed.operators for st in customops.decode(op).stages)
    assert stages == sorted(op.opcode for op in g.operators)
    v = verify(g, streamed, runs=2)
    assert v.identical, v.detail


def test_int16_stage_refusals_follow_tflm():
    """int16 stages the kernel does not compute stay out of chains, for TFLM's reasons: a
    DEPTHWISE_CONV_2D with an int32 bias (TFLM reads it as int64), a CONV_2D without bias (its
    accumulator comes from an option a stage does not carry), a TRANSPOSE_CONV with an int32 bias
    (TFLM's 16x8 kernel reads it as int64; int64, int16 and none are stages), a PRELU whose alpha
    is not int8 (TFLM's int16 PRELU needs int8). The int16 MUL's zero points and the int16
    LOGISTIC's output scale: the tests below."""
    assert customops.stream_stage_problem("CONV_2D", ["INT16"], "INT16", ["INT8", "INT64"]) is None
    assert customops.stream_stage_problem("CONV_2D", ["INT16"], "INT16", ["INT8", "INT32"]) is None
    assert customops.stream_stage_problem("CONV_2D", ["INT16"], "INT16", ["INT8", None])
    assert customops.stream_stage_problem(
        "DEPTHWISE_CONV_2D", ["INT16"], "INT16", ["INT8", "INT32"]
    )
    assert customops.stream_stage_problem("PADV2", ["INT16"], "INT16", ["INT32", "INT16"]) is None
    assert customops.stream_stage_problem("PADV2", ["INT16"], "INT16", ["INT32", "INT8"])
    tconv = customops.stream_stage_problem
    for ok in (
        ["INT32", "INT8", "INT64"],
        ["INT32", "INT8", "INT16"],
        ["INT32", "INT8", None],
        ["INT32", "INT8"],
    ):
        assert tconv("TRANSPOSE_CONV", ["INT16"], "INT16", ok) is None
    assert "int32 bias" in tconv("TRANSPOSE_CONV", ["INT16"], "INT16", ["INT32", "INT8", "INT32"])
    assert customops.stream_stage_problem("PRELU", ["INT16"], "INT16", ["INT8"]) is None
    assert customops.stream_stage_problem("PRELU", ["INT16"], "INT16", ["INT16"])
    assert customops.stream_stage_problem("LEAKY_RELU", ["INT16"], "INT16", []) is None
    assert customops.stream_stage_problem("RELU6", ["INT16"], "INT16", []) is None
    assert customops.stream_stage_problem("LOGISTIC", ["INT16"], "INT16", []) is None
    assert customops.stream_stage_problem("SUB", ["INT16", "INT16"], "INT16", []) is None
    assert customops.stream_stage_problem("ADD", ["INT16", "INT16"], "INT16", []) is None
    assert customops.stream_stage_problem("CONV_2D", ["INT8"], "INT16", ["INT8", "INT64"])
    assert customops.stream_stage_problem("QUANTIZE", ["INT8"], "INT16", []) is None
    assert customops.stream_stage_problem("DEQUANTIZE", ["INT16"], "FLOAT32", []) is None


def test_an_int16_mul_with_a_zero_point_stays_out_of_chains():
    """TFLM's int16 MUL refuses zero points other than 0 in Prepare: the chain's int16 MUL with
    its output's zero point set to 5 is a gap (and so is the RELU6 reading it), with the reason."""
    model = synth.int16_stages_chain()
    sub = model.subgraphs[0]
    code = synth.BUILTIN_CODES["MUL"]
    mul = next(
        op for op in sub.operators if model.operatorCodes[op.opcodeIndex].builtinCode == code
    )
    sub.tensors[mul.outputs[0]].quantization.zeroPoint = [5]
    gaps = stream.stage_gaps(build_graph(model))
    assert [g.opcode for g in gaps] == ["MUL", "RELU6"]
    assert all("zero point other than 0" in g.reason for g in gaps)


def test_an_int16_logistic_of_another_output_scale_stays_out_of_chains():
    """TFLM's int16 LOGISTIC and TANH refuse an output scale other than 2^-15 in Prepare: the
    chain's int16 LOGISTIC writing scale 0.001 is a gap, with the reason (its TANH, which only
    reads it, is not)."""
    model = synth.int16_stages_chain()
    sub = model.subgraphs[0]
    code = synth.BUILTIN_CODES["LOGISTIC"]
    lg = next(op for op in sub.operators if model.operatorCodes[op.opcodeIndex].builtinCode == code)
    sub.tensors[lg.outputs[0]].quantization.scale = [0.001]
    gaps = stream.stage_gaps(build_graph(model))
    assert [g.opcode for g in gaps] == ["LOGISTIC"]
    assert "output scale is not 2^-15" in gaps[0].reason


def test_float32_stages_are_streamed_bit_exact():
    """A float32 U-Net with every float32 stage, QUANTIZE float32 -> int8 and DEQUANTIZE into a
    float32 RELU: the search puts every operator inside StreamChains and the lowered chains match
    the unfused graph in the tflite-micro wheel (test_real_kernels.py runs the kernel itself)."""
    from tinyseg_plugin.checks.verify import verify

    g = build_graph(synth.float_stages_unet())
    assert stream.stage_gaps(g) == []
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    assert all(op.opcode == customops.STREAM_CHAIN for op in streamed.operators)
    stages = sorted(st.op for op in streamed.operators for st in customops.decode(op).stages)
    assert stages == sorted(op.opcode for op in g.operators)
    v = verify(g, streamed, runs=2)
    assert v.identical, v.detail


@pytest.mark.parametrize(
    "out,align,half",
    [(None, False, True), (None, False, False), ((25, 21), False, True), ((17, 13), True, False)],
)
def test_float32_more_stages_stream_bit_exact(out, align: bool, half: bool) -> None:
    """SUB, TANH, HARD_SWISH, LEAKY_RELU, PRELU, ELU, PADV2 and RESIZE_BILINEAR (integer and
    non-integer factors, both flags) as float32 stages: the search emits every operator into
    StreamChains, and the result is bit-identical to the unfused graph in the wheel."""
    from tinyseg_plugin.checks.verify import verify

    g = build_graph(synth.float_more_stages(out=out, align_corners=align, half_pixel_centers=half))
    assert stream.stage_gaps(g) == []
    choice = stream_search.choose_streaming(g, kernel_only=True)
    assert choice.streamed is not None
    streamed = choice.streamed.graph
    assert all(op.opcode == customops.STREAM_CHAIN for op in streamed.operators)
    stages = sorted(st.op for op in streamed.operators for st in customops.decode(op).stages)
    assert stages == sorted(op.opcode for op in g.operators)
    v = verify(g, streamed, runs=2)
    assert v.identical, v.detail


def test_a_constant_of_every_row_is_read_row_by_row():
    """An ADD, MUL or SUB operand that is a constant of the output's rows (a detection head's
    grid) is a stage's operand read row by row; a constant of another height is a broadcast over
    rows the kernel does not make, and says so."""
    g = build_graph(synth.grid_head(h=32))
    arith = [op for op in g.operators if op.opcode in ("ADD", "MUL", "SUB")]
    assert len(arith) == 3 and all(stream.stage_problem(g, op) is None for op in arith)
    b = synth.ModelBuilder(dtype="INT8", seed=0)
    x = b.conv(b.input([1, 32, 3, 4]), 2, k=1)
    g = build_graph(b.build([b.add(x, b.constant([1, 16, 1, 2]))]))
    assert "a broadcast over rows ([1, 16, 1, 2])" in stream.stage_problem(g, g.operators[1])


def test_a_stage_type_switched_off_is_in_no_chain(tiny_unet: Path) -> None:
    """Options.stages_off keeps a stage type (operator, row type) out of every chain: the chains
    found, and the StreamChains of the plan `optimize --target min` writes, hold none of it; the
    other stage types still stream (benchmarks/monotone.py compares such plans)."""
    from tinyseg_plugin.transforms.optimizer import Options, search_plans

    g = build_graph(load_model(str(tiny_unet)))
    off = ("MAX_POOL_2D", "quantized")

    def opcodes(chains: list[list[int]]) -> set[str]:
        return {g.operators[i].opcode for c in chains for i in c}

    assert "MAX_POOL_2D" in opcodes(stream.find_chains(g, True))
    assert stream.stage_key(g, next(o for o in g.operators if o.opcode == off[0])) == off
    chains = stream.find_chains(g, True, frozenset({off}))
    assert "MAX_POOL_2D" not in opcodes(chains) and "CONCATENATION" in opcodes(chains)
    r = search_plans(g, Options(smallest=True, stages_off=frozenset({off})))
    written = {op for c in r.chains for op in c["opcodes"]}
    assert "MAX_POOL_2D" not in written and "CONCATENATION" in written
