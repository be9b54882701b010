"""A graph tools can follow: every slot of the streamed, the spilled and the fused Tiny U-Net is an
edge (a zero-element token) from the operator that writes it to each that reads it, so a walk over
the flatbuffer by tensor ids, as Netron and tflite-tools draw it, finds one connected graph from
the input to every output; StreamChains carry the names of the layers they hold; the tokens cost
TFLM no arena head (measured with the real kernels when TFLM_DIR is set)."""

from __future__ import annotations

from collections import defaultdict
from unittest import mock

import pytest
from conftest import TINY_UNET

from tinyseg_plugin.contract import bodies, customops
from tinyseg_plugin.ir.graph import Graph, build_graph
from tinyseg_plugin.ir.modelio import load_model, model_to_bytes, parse_model
from tinyseg_plugin.transforms import optimizer
from tinyseg_plugin.transforms.optimizer import Options, search_plans
from tinyseg_plugin.transforms.passes import Rewrite
from tinyseg_plugin.transforms.passes.link import layer_name, link_slots

# The plans: tinyseg optimize's default (streamed), with row spills between chains
# (--target 153119), spilled (--no-stream --no-fuse --no-scratch16 --target min) and fused
# (--no-stream --target min).
PLANS = {
    "streamed": Options(),
    "row spills": Options(target_bytes=153_119),
    "spilled": Options(stream=False, fuse=False, scratch=False, smallest=True),
    "fused": Options(stream=False, smallest=True),
}


@pytest.fixture(scope="module")
def plans() -> dict[str, tuple[Graph, Graph]]:
    """Each plan without its slot edges (the search's graph) and with them (what optimize writes)."""
    graph = build_graph(load_model(TINY_UNET))
    out = {}
    with mock.patch.object(optimizer, "_link", lambda res, o: None):
        for name, o in PLANS.items():
            bare = search_plans(graph, o).graph
            linked = link_slots(bare)
            assert isinstance(linked, Rewrite), name
            out[name] = (bare, linked.graph)
    return out


def walk_problems(data: bytes) -> list[str]:
    """What keeps a viewer from drawing subgraph 0 as one graph from its inputs to its outputs:
    nodes are the operators, an edge joins the writer of a tensor to each reader (constants, which
    viewers draw inside the node, are no edges). Problems: a read of a tensor nothing writes, an
    operator whose outputs nothing reads (a sink that is no graph output), an operator or output
    the inputs do not reach, or more than one connected component."""
    m = parse_model(data)
    sg = m.subgraphs[0]
    ops = sg.operators or []

    def constant(t: int) -> bool:
        b = sg.tensors[t].buffer
        return bool(b) and m.buffers[b].data is not None and len(m.buffers[b].data) > 0

    inputs, outputs = _ids(sg.inputs), _ids(sg.outputs)
    writer = {t: f"op{k}" for k, op in enumerate(ops) for t in _ids(op.outputs)}
    writer.update({t: f"in{t}" for t in inputs})
    edges: dict[str, set[str]] = defaultdict(set)
    read: set[int] = set()
    problems = []
    for k, op in enumerate(ops):
        for t in (t for t in _ids(op.inputs) if t >= 0 and not constant(t)):
            if t not in writer:
                problems.append(f"op{k} reads tensor {t}, which nothing writes")
                continue
            edges[writer[t]].add(f"op{k}")
            read.add(t)
    for t in outputs:
        edges[writer[t]].add(f"out{t}")
    for k, op in enumerate(ops):
        if not any(t in read or t in outputs for t in _ids(op.outputs)):
            problems.append(f"op{k} is a sink: nothing reads what it writes")
    nodes = {f"op{k}" for k in range(len(ops))} | {f"in{t}" for t in inputs}
    nodes |= {f"out{t}" for t in outputs}
    reached = _reach(edges, [f"in{t}" for t in inputs])
    problems += [f"{n} is not reached from the inputs" for n in sorted(nodes - reached)]
    both: dict[str, set[str]] = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            both[a].add(b)
            both[b].add(a)
    first = _reach(both, [next(iter(sorted(nodes)))])
    if first != nodes:
        problems.append(f"{len(nodes - first)} nodes are in another component")
    return problems


def _ids(values) -> list[int]:
    return [] if values is None else [int(t) for t in values]


def _reach(edges: dict[str, set[str]], start: list[str]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for b in edges.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


@pytest.mark.parametrize("name", list(PLANS))
def test_every_plan_is_one_graph_from_the_input_to_the_outputs(plans, name: str) -> None:
    bare, linked = plans[name]
    tinyseg = [op.opcode for op in linked.operators if op.opcode in customops.TINYSEG_OPS]
    assert tinyseg, name
    assert walk_problems(model_to_bytes(linked.model)) == []
    bodies.validate_graph(linked)  # the kernels' Prepare rules, tokens included


def test_the_walk_finds_a_slot_without_its_edge(plans) -> None:
    """Without the tokens the spilled plan's Spill is a sink (what Netron drew); with one token
    input taken off its Fetching, the Spill is a sink again."""
    bare, linked = plans["spilled"]
    assert any("is a sink" in p for p in walk_problems(model_to_bytes(bare.model)))
    m = parse_model(model_to_bytes(linked.model))
    ops = m.subgraphs[0].operators
    fetching = next(
        op
        for op, g in zip(ops, linked.operators)
        if g.opcode == customops.FETCHING and customops.token_inputs(g, customops.decode(g))
    )
    fetching.inputs = _ids(fetching.inputs)[:-1]
    problems = walk_problems(model_to_bytes(m))
    assert any("is a sink" in p for p in problems), problems


def test_row_spills_between_chains_are_edges(plans) -> None:
    """Each chain that fetches a slot takes the token of the chain that spilled it."""
    _, g = plans["row spills"]
    spiller = {}
    for op in g.operators:
        if op.opcode != customops.STREAM_CHAIN:
            continue
        o = customops.decode(op)
        for _, slot in o.fetch:
            assert g.tensors[spiller[slot]].name.startswith("StreamChain[")
            assert spiller[slot] in op.inputs
        for _, slot in o.spill:
            spiller[slot] = op.outputs[-1]
    assert spiller


def chain_labels(g: Graph) -> list[str]:
    """Each StreamChain's name: its slot token's (zero elements), else its first output's."""
    out = []
    for op in g.operators:
        if op.opcode == customops.STREAM_CHAIN:
            own = [t for t in op.outputs if 0 in g.tensors[t].shape]
            out.append(g.tensors[(own or list(op.outputs))[-1 if own else 0]].name)
    return out


def test_streamchains_are_named_after_the_layers_they_hold(plans) -> None:
    """The streamed plan's chains write no slot: their first outputs carry the names (no token,
    no tail); the row-spill plan's writer carries its name on its token."""
    _, g = plans["streamed"]
    names = chain_labels(g)
    assert all(
        not any(0 in g.tensors[t].shape for t in op.outputs)
        for op in g.operators
        if op.opcode == customops.STREAM_CHAIN
    )
    rows = plans["row spills"][1]
    named = [  # a chain whose outputs are all graph outputs keeps their names
        n
        for n, op in zip(
            chain_labels(rows), (o for o in rows.operators if o.opcode == "StreamChain")
        )
        if not set(op.outputs) <= set(rows.outputs)
    ]
    assert len(named) == 3 and all(n.startswith("StreamChain[") for n in named), named
    original = build_graph(load_model(TINY_UNET))
    layers = {
        layer_name(original.tensors[t].name, op.opcode)
        for op in original.operators
        for t in op.outputs
    }
    assert names, "the default plan streams"
    for name in names:  # StreamChain[first..last] or StreamChain[only], each a layer of the model
        assert name.startswith("StreamChain[") and name.endswith("]"), name
        assert set(name[len("StreamChain[") : -1].split("..")) <= layers, (name, sorted(layers))


def test_layer_names_from_converter_names() -> None:
    fused = "m/re_lu_1/Relu;m/batch_normalization_1/add_1;m/conv2d_1/convolution;m/bn/sub"
    assert layer_name(fused, "CONV_2D") == "conv2d_1"
    assert layer_name(fused, "ADD") == "re_lu_1"
    assert layer_name("m/max_pooling2d_1/MaxPool2d") == "max_pooling2d_1"
    assert layer_name("StatefulPartitionedCall_1:0") == "StatefulPartitionedCall_1:0"


@pytest.mark.parametrize("name", list(PLANS))
def test_tokens_take_no_arena_head(plans, name: str) -> None:
    """The planner (TFLM's GreedyMemoryPlanner, exactly) gives the same head with and without the
    tokens: a tensor of zero bytes is not planned."""
    from tinyseg_plugin.memory.planner import plan_graph

    bare, linked = plans[name]
    for profile in ("host64", "cortex-m"):
        assert (
            plan_graph(linked, "reference", profile).head
            == plan_graph(bare, "reference", profile).head
        )


@pytest.mark.parametrize("name", list(PLANS))
def test_tflm_runs_the_tokens_bit_exact_at_the_same_head(plans, name: str) -> None:
    """With TinySeg's kernels in a host build of TFLM (the runner's RecordingMicroAllocator): the
    linked plan's outputs are the original's, its head is the unlinked plan's, and head and tail
    of both are the planner's figures (so the tail the tokens add is the estimate's)."""
    import os

    import numpy as np

    from tinyseg_plugin.checks import real_kernels
    from tinyseg_plugin.checks.verify import REAL_KERNELS, arena_for, verify
    from tinyseg_plugin.memory.kernels import BuildProfile
    from tinyseg_plugin.memory.planner import plan_graph

    tflm_dir = os.environ.get(real_kernels.ENV_TFLM)
    if not tflm_dir:
        pytest.skip("set TFLM_DIR to a TFLM 90b983c tree with its third-party downloads")
    bare, linked = plans[name]
    original = build_graph(load_model(TINY_UNET))
    v = verify(original, linked, runs=1, seed=3, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail
    exe = real_kernels.prepare(tflm_dir)
    x = original.tensors[original.inputs[0]]
    batch = [np.zeros(x.shape, dtype=x.numpy_dtype)]
    build = BuildProfile("host64-make-recording-tinyseg", 8)  # the runner's TFLM, as installed
    measured = []
    for g in (bare, linked):
        ran = real_kernels.run(exe, model_to_bytes(g.model), [batch], arena_for(g), 60, name)
        plan = plan_graph(g, "reference", build)
        assert (ran.stats["head"], ran.stats["tail"]) == (plan.head, plan.tail.total)
        measured.append((ran.stats["head"], ran.stats["tail"]))
    print(f"{name}: head, tail without tokens {measured[0]}, with {measured[1]}")
    assert measured[1][0] == measured[0][0]


def test_describe_refuses_shapes_its_operators_do_not_fit(plans) -> None:
    """The host hands every tensor's shape; a StreamChain whose held convolution gets a filter of
    rank 1 is one error line for the host (a ValueError), not a traceback."""
    from tinyseg_plugin import plugin

    _, g = plans["streamed"]
    op = next(op for op in g.operators if op.opcode == customops.STREAM_CHAIN)
    args = dict(
        op_id=op.index,
        custom_code=op.opcode,
        inputs=list(op.inputs),
        outputs=list(op.outputs),
        custom_options=bytes(op.custom_options),
    )
    good = plugin.tflite_tools_describe_operator(**args, shapes=[list(t.shape) for t in g.tensors])
    assert good["macs"] > 0
    with pytest.raises(plugin.PluginError, match="do not fit them"):
        plugin.tflite_tools_describe_operator(**args, shapes=[[1] for _ in g.tensors])
