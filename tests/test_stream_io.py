"""--stream-io: the graph's input comes in through a row source and its output goes out through a
row sink, so the arena holds neither whole. The search re-plans without the input floor; the
rewrite keeps a one-element token in the graph's place and writes the body's source, sink and
tokens keys (docs/custom_ops.md); the lowered model computes what the original does."""

from __future__ import annotations

import pytest
from conftest import TINY_UNET, shared_model

from tinyseg_plugin.checks.verify import verify
from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model
from tinyseg_plugin.memory.planner import head_without_io
from tinyseg_plugin.report.steps import steps_table
from tinyseg_plugin.transforms.optimizer import Options, search_plans
from tinyseg_plugin.transforms.passes.stream import ChainRequest, io_problem, stream_chains


@pytest.fixture(scope="module")
def streamed_io():
    original = build_graph(load_model(TINY_UNET))
    return original, search_plans(build_graph(load_model(TINY_UNET)), Options(stream_io=True, smallest=True))


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
    assert first.tensors[first.source[0][0] - ids].shape == original.tensors[original.inputs[0]].shape
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
    skip = stream_chains(
        g, ChainRequest([[first, first + 1]], sunk=frozenset({g.outputs[0]}))
    )
    assert "cannot stream out" in str(skip.reason)
