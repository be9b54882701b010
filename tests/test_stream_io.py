"""--stream-io: the graph's input comes in through a row source and its output goes out through a
row sink, so the arena holds neither whole. The search re-plans without the input floor; the
rewrite keeps a one-element token in the graph's place and writes the body's source, sink and
tokens keys (docs/custom_ops.md); the lowered model computes what the original does, and so does
the model as written in the real-kernel runner, which hands the frame over through its row source
and takes the mask from its row sink (needs TFLM_DIR, as the other real-kernel tests)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import TINY_UNET, shared_model

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.checks.verify import _rows_missing, random_inputs, verify
from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, read_model_bytes, save_model
from tinyseg_plugin.memory.analysis import analyze_graph
from tinyseg_plugin.memory.kernels import BuildProfile
from tinyseg_plugin.memory.planner import head_without_io
from tinyseg_plugin.report.steps import steps_table
from tinyseg_plugin.transforms.optimizer import Options, search_plans
from tinyseg_plugin.transforms.passes.stream import ChainRequest, io_problem, stream_chains


@pytest.fixture(scope="module")
def streamed_io():
    original = build_graph(load_model(TINY_UNET))
    return original, search_plans(
        build_graph(load_model(TINY_UNET)), Options(stream_io=True, smallest=True)
    )


def test_the_graph_keeps_one_token_each_and_the_bodies_name_the_rows(streamed_io) -> None:
    original, r = streamed_io
    g = r.graph
    for t in list(g.inputs) + list(g.outputs):
        assert g.tensors[t].shape == (1,) and g.tensors[t].dtype == "INT8"
    chains = [op for op in g.operators if op.opcode == customops.STREAM_CHAIN]
    bodies = [customops.decode(op, g.memo.decoded) for op in chains]
    sources = [pair for b in bodies for pair in b.source]
    sinks = [pair for b in bodies for pair in b.sink]
    assert [k for _, k in sources] == [0] and [k for _, k in sinks] == [0]
    first, last = bodies[0], bodies[-1]
    assert first.source and last.sink
    # the sourced and sunk tensors are body tensors with the original's shapes
    ids = len(chains[0].inputs) + len(chains[0].outputs)
    assert (
        first.tensors[first.source[0][0] - ids].shape == original.tensors[original.inputs[0]].shape
    )
    ids = len(chains[-1].inputs) + len(chains[-1].outputs)
    assert last.tensors[last.sink[0][0] - ids].shape == original.tensors[original.outputs[0]].shape
    # the tokens are the node tensors that carry no data
    assert len(first.tokens) >= 1 and len(last.tokens) >= 1


def test_the_search_plans_without_the_input_floor(streamed_io, tiny_unet) -> None:
    """Without --stream-io the head of --target min holds the whole 28,800 B input in its first
    chain; with it the same search reaches below the head that plan has with its input and output
    not counted."""
    original, r = streamed_io
    plain = search_plans(build_graph(load_model(tiny_unet)), Options(smallest=True))
    frame = original.tensors[original.inputs[0]].nbytes
    assert r.plan.head < frame < plain.plan.head
    assert r.plan.head < head_without_io(plain.plan)


def test_the_lowered_model_is_bit_exact(streamed_io) -> None:
    original, r = streamed_io
    v = verify(original, r.graph, runs=3)
    assert v.identical and v.check == "lowered", v.detail


def test_an_input_no_chain_can_read_is_named_in_one_sentence() -> None:
    """micro_speech's input feeds a RESHAPE and its output comes from a SOFTMAX: neither streams,
    and the table says why for each."""
    path = shared_model("micro_speech_quantized.tflite")
    r = search_plans(build_graph(load_model(path)), Options(stream_io=True))
    text = steps_table(r)
    assert "not streamed: graph input Reshape_1 feeds RESHAPE (operator 0)" in text
    assert "graph output labels_softmax comes from SOFTMAX (operator 3)" in text
    assert len(r.io_not_streamed) == 2


def test_a_request_the_rows_cannot_serve_is_skipped(tiny_unet) -> None:
    """A graph input read by two chains (its rows would be asked twice) and a graph output that is
    not produced by a chain are refused by the pass with the reason."""
    g = build_graph(load_model(tiny_unet))
    readers = g.consumers[g.inputs[0]]
    first = readers[0]
    position = {first: 0}
    assert io_problem(g, g.inputs[0], position) is None
    assert "which no chain holds" in io_problem(g, g.outputs[0], position)
    skip = stream_chains(g, ChainRequest([[first, first + 1]], sunk=frozenset({g.outputs[0]})))
    assert "cannot stream out" in str(skip.reason)


# The real-kernel runner's build and the Cortex-M7 one (tests/test_tflm_runtime.py's E2E_BUILD, M7_BUILD).
HOST_BUILD = BuildProfile("host64-make-recording-tinyseg", 8)
M7_BUILD = BuildProfile("cortex-m-recording-tinyseg", 4)


def _tflm_dir() -> str:
    d = os.environ.get(real_kernels.ENV_TFLM)
    if not d:
        pytest.skip("set TFLM_DIR to a TFLM 90b983c tree with its third-party downloads")
    if not (Path(d) / "tensorflow/lite/micro/tools/make/downloads/flatbuffers").is_dir():
        pytest.skip(f"TFLM_DIR={d} lacks its third-party downloads")
    return d


def test_the_row_streams_are_the_originals_input_and_output(streamed_io) -> None:
    """row_streams reads the body tensors: H rows of W*C bytes of the original's frame and mask."""
    original, r = streamed_io
    sources, sinks = real_kernels.row_streams(r.graph)
    for found, t in ((sources, original.inputs[0]), (sinks, original.outputs[0])):
        tensor = original.tensors[t]
        n, h, w, c = tensor.shape
        assert found == {
            0: real_kernels.RowStream(w * c * tensor.itemsize, h, tensor.shape, tensor.dtype)
        }
    assert real_kernels.row_streams(original) == ({}, {})


def test_the_real_kernel_check_feeds_rows_and_collects_them(streamed_io) -> None:
    """verify with a TFLM tree: the 3 random frames and the 3 edge cases go in through the runner's
    row source and the masks come out of its row sink, every row once; bit-exact with the
    original."""
    original, r = streamed_io
    v = verify(original, r.graph, runs=3, tflm_dir=_tflm_dir())
    assert v.identical and v.check == "real-kernels" and v.edge_cases == 3, v.detail


def test_a_row_count_other_than_the_models_fails_the_check(streamed_io) -> None:
    _, r = streamed_io
    streams = real_kernels.row_streams(r.graph)
    assert _rows_missing({"source_rows": 160, "sink_rows": 160}, streams, 2) == ""
    assert _rows_missing({"source_rows": 159, "sink_rows": 160}, streams, 2) == (
        "the row sources delivered 159 rows on 2 input(s), the model has 160"
    )
    assert "row sinks received None rows" in _rows_missing({"source_rows": 80}, streams, 1)


@pytest.fixture(scope="module")
def runner_files(streamed_io, tmp_path_factory) -> tuple[Path, Path, Path]:
    """The reference runner, the streamed model and one random frame."""
    exe = real_kernels.prepare(_tflm_dir())
    d = tmp_path_factory.mktemp("rows")
    save_model(streamed_io[1].graph.model, d / "model.tflite")
    (d / "in.bin").write_bytes(random_inputs(read_model_bytes(TINY_UNET), 0)[0].tobytes())
    return exe, d / "model.tflite", d / "in.bin"


def _runner(files, options: list[str], model: Path | None = None) -> subprocess.CompletedProcess:
    exe, default, frame = files
    out = frame.with_name("out.bin")
    out.unlink(missing_ok=True)
    return subprocess.run(
        [str(exe), str(model or default), str(frame), str(out), *options],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    "options, message",
    [
        (["--source", "8:360:80"], "K below 8, ROW_BYTES and ROWS above 0"),
        (["--source", "0:0:80"], "K below 8, ROW_BYTES and ROWS above 0"),
        (["--source", "0:360"], "K below 8, ROW_BYTES and ROWS above 0"),
        (["--source", "0:-1:80"], "K below 8, ROW_BYTES and ROWS above 0"),
        (["--sink", "0:65536:65536"], "must stay below 2^31 bytes"),
        (["--source", "0:360:80", "--source", "0:360:80"], "name the same K"),
        (
            ["--source", "0:360:80", "--sink", "0:120:80", "--source", "1:360:80"],
            "a --source names no graph input of the model",
        ),
        (["--hostile-sink", "short"], "--hostile-sink takes fail"),
        (["--source", "0:360:80", "--fault-sweep", "read-fail"], "runs without --source"),
        (["--source", "0:360:79", "--sink", "0:120:80"], "input file size differs"),
    ],
)
def test_the_runner_refuses_bad_row_options_in_one_line(runner_files, options, message) -> None:
    p = _runner(runner_files, options)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1 and message in lines[0], p.stderr
    assert not runner_files[2].with_name("out.bin").exists()


def test_a_source_the_model_asks_more_rows_of_fails_at_that_row(runner_files) -> None:
    """A source of 40 rows of 720 bytes (the frame's bytes, the wrong rows): the kernel asks for
    360 bytes, the source refuses, Invoke fails with the kernel's sentence, no output is left."""
    p = _runner(runner_files, ["--source", "0:720:40", "--sink", "0:120:80"])
    assert p.returncode == 1, p.stderr
    reason = real_kernels.failure_reason(p.stderr)
    assert (
        reason
        == "Invoke failed: StreamChain: the row source of graph input 0 failed at row 0: out_of_range"
    )
    assert not runner_files[2].with_name("out.bin").exists()


def test_the_cortex_m_plan_runs_whole_with_the_head_and_tail_as_analyzed(
    runner_files, tmp_path
) -> None:
    """--build-profile cortex-m: the host runner's head is the planned head and its tail the one
    analyzed for that (64-bit) build; both, and the Cortex-M7 tail analyze gives, are printed, and
    the Cortex-M7's head plus tail is below the input frame's bytes (the Cortex-M7 run itself:
    tests/test_tflm_runtime.py test_cortex_m7_end_to_end)."""
    g = build_graph(load_model(TINY_UNET))
    r = search_plans(g, Options(stream_io=True, smallest=True, build_profile="cortex-m"))
    save_model(r.graph.model, tmp_path / "m.tflite")
    streams = real_kernels.row_streams(r.graph)
    p = _runner(runner_files, real_kernels.stream_options(*streams), tmp_path / "m.tflite")
    assert p.returncode == 0, p.stderr
    got = {k: int(v) for k, v in (ln.split() for ln in p.stdout.splitlines() if ln)}
    assert got["source_rows"] == got["sink_rows"] == 80, got
    host = analyze_graph(
        build_graph(load_model(tmp_path / "m.tflite")), "reference", HOST_BUILD
    ).plan
    assert (
        (got["head"], got["tail"]) == (r.plan.head, host.tail.total) == (host.head, host.tail.total)
    )
    m7 = analyze_graph(build_graph(load_model(tmp_path / "m.tflite")), "reference", M7_BUILD).plan
    frame = g.tensors[g.inputs[0]].nbytes
    print(
        f"\nstream-io Tiny U-Net, --target min --build-profile cortex-m: head {got['head']}, "
        f"tail {got['tail']} in the host runner, {m7.tail.total} analyzed for the Cortex-M7: "
        f"{m7.head + m7.tail.total} B against the {frame} B frame"
    )
    # The whole inference, head and tail, below the frame it segments: the convolutions'
    # per-channel tables live in the model (flash), not in the arena.
    assert m7.head + m7.tail.total < frame


RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results.md"


def stale_stream_io_figures(text: str, head: int, tail: int) -> list[str]:
    """The docs' figures of the Tiny U-Net's whole inference with --stream-io that differ from
    the planner's (head, tail, their sum); empty when they agree."""
    m = re.search(r"head ([\d,]+) B, tail ([\d,]+) B, ([\d,]+) B in all", text)
    if m is None:
        return ["docs/results.md lost the line with the head and tail of --stream-io"]
    shown = [int(g.replace(",", "")) for g in m.groups()]
    want = [head, tail, head + tail]
    return [
        f"{n}: docs {s:,}, planner {w:,}"
        for n, s, w in zip(("head", "tail", "sum"), shown, want)
        if s != w
    ]


def test_results_quote_the_planned_head_and_tail() -> None:
    r = search_plans(
        build_graph(load_model(TINY_UNET)),
        Options(stream_io=True, smallest=True, build_profile="cortex-m"),
    )
    assert stale_stream_io_figures(RESULTS.read_text(), r.plan.head, r.plan.tail.total) == []


def test_the_results_check_can_fail() -> None:
    text = "head 13,024 B, tail 15,648 B, 28,672 B in all"
    assert stale_stream_io_figures(text, 13_024, 15_648) == []
    assert stale_stream_io_figures(text, 13_024, 15_600) == [
        "tail: docs 15,648, planner 15,600",
        "sum: docs 28,672, planner 28,624",
    ]
    assert stale_stream_io_figures("nothing here", 1, 2)
