"""The custom-operator contract is defined once (tinyseg_plugin/contract/customops.py): the C++ side reads it
from the generated tflm_ops/kernels/tinyseg_contract.h, the kernels spell no key or limit of their
own, the Python decoder refuses what the kernels refuse, and the fusion pass builds no operator the
kernel would refuse in Prepare."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import pytest
from conftest import ROOT, spilled_skip_graphs
from flatbuffers import flexbuffers

from tinyseg_plugin.contract import customops, flexread, header
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.graph import Memo, Operator, build_graph
from tinyseg_plugin.memory.kernels import tinyseg

KERNELS = ROOT / "tflm_ops" / "kernels"
HEADER = KERNELS / "tinyseg_contract.h"


def test_committed_header_is_what_the_contract_generates() -> None:
    assert HEADER.read_text() == header.header(), (
        "tflm_ops/kernels/tinyseg_contract.h is stale: run "
        "`python -m tinyseg_plugin.contract.header > tflm_ops/kernels/tinyseg_contract.h`"
    )


def test_kernels_spell_no_option_key_or_limit_themselves() -> None:
    """Every option read goes through contract::kKey... (and its limits through contract::kIntLimits)."""
    literal_key = re.compile(r'(?:\.Int|\.String|map\(\)|\bm)\s*[\[(]\s*"')
    for src in sorted(KERNELS.glob("*.cc")):
        text = src.read_text()
        assert not literal_key.search(text), f"{src.name} reads an option by a literal key"
        for call in re.findall(r"options\.Int\(([^;]*?)\)", text, re.S):
            assert call.count(",") == 1, f"{src.name}: options.Int({call}) gives limits of its own"
        # The operand expansion is tinyseg_common.h's OperandWalk, not a loop of each kernel's own.
        assert "next_input" not in text and "FetchedAt(" not in text, (
            f"{src.name} expands operands itself"
        )
    core = (ROOT / "tflm_ops" / "core" / "include" / "tinyseg" / "codec.h").read_text()
    assert f"kMaxBlockBytes = {customops.MAX_BLOCK_BYTES};" in core
    assert f"kBlockHeaderBytes = {customops.BLOCK_HEADER_BYTES};" in core


def _op(opcode: str, options: dict, inputs=(1,), outputs=(2,)) -> Operator:
    return Operator(
        index=0,
        opcode=opcode,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        intermediates=(),
        options=None,
        custom_options=bytes(flexbuffers.Dumps(options)),
    )


def _fetching_conv(**override) -> dict:
    m = {
        "version": 1,
        "axis": 3,
        "operands": 2,
        "block": 1024,
        "fetched": [{"position": 0, "slot": 0, "shape": [1, 8, 8, 4]}],
        "padding": "SAME",
        "stride_h": 1,
        "stride_w": 1,
        "dilation_h": 1,
        "dilation_w": 1,
        "activation": "NONE",
        "band_rows": 1,
    }
    m.update(override)
    return m


@pytest.mark.parametrize(
    "key", sorted(k for k in customops.INT_LIMITS if k not in ("position", "dim", "slot"))
)
@pytest.mark.parametrize("side", ["below", "above"])
def test_decode_refuses_every_integer_option_outside_the_kernels_limits(
    key: str, side: str
) -> None:
    lo, hi = customops.INT_LIMITS[key]
    bad = lo - 1 if side == "below" else hi + 1
    if key in customops.STREAM_CHAIN_KEYS:  # StreamChain's planning figures
        good = {
            "version": 1,
            "ring_bytes": 100,
            "op_scratch": 0,
            "spilled": 0,
            "fetched": 0,
            "block": 1024,
        }
        assert customops.decode(_op(customops.STREAM_CHAIN, good))
        op = _op(customops.STREAM_CHAIN, {**good, key: bad})
    elif key == "region":  # a fetched entry's storage region
        entry = {"position": 0, "slot": 0, "shape": [1, 8, 8, 4], "region": bad}
        op = _op(customops.FETCHING_CONV_2D, _fetching_conv(fetched=[entry]), inputs=(1, 3, 4))
    else:
        op = _op(customops.FETCHING_CONV_2D, _fetching_conv(**{key: bad}), inputs=(1, 3, 4))
        assert customops.decode(_op(customops.FETCHING_CONV_2D, _fetching_conv(), inputs=(1, 3, 4)))
    with pytest.raises(TinySegError, match="malformed options"):
        customops.decode(op)


@pytest.mark.parametrize(
    "fetched",
    [
        [{"position": 2, "slot": 0, "shape": [1, 8, 8, 4]}],  # position >= operands
        [
            {"position": 0, "slot": 0, "shape": [1, 8, 8, 4]},
            {"position": 0, "slot": 1, "shape": [1, 8, 8, 4]},
        ],
        [{"position": 0, "slot": -1, "shape": [1, 8, 8, 4]}],
        [{"position": 0, "slot": 0, "shape": [1, 8, 0, 4]}],
        [{"position": 0, "slot": 0, "shape": [1] * (customops.MAX_DIMS + 1)}],
        [{"position": 0, "slot": 0, "shape": [8, 8, 4]}],  # FetchingConv2D: rank 4 only
    ],
)
def test_decode_refuses_fetched_entries_the_kernels_refuse(fetched: list) -> None:
    with pytest.raises(TinySegError, match="malformed options"):
        customops.decode(
            _op(customops.FETCHING_CONV_2D, _fetching_conv(fetched=fetched), inputs=(1, 3, 4))
        )


def test_decode_refuses_an_axis_other_than_channels_for_fetching_conv() -> None:
    with pytest.raises(TinySegError, match="malformed options"):
        customops.decode(_op(customops.FETCHING_CONV_2D, _fetching_conv(axis=2), inputs=(1, 3, 4)))


def test_operand_expansion_fetched_by_position_else_the_next_input() -> None:
    fetched = [customops.Fetched(1, 7, (1, 2, 2, 3))]
    o = customops.FetchingOptions(axis=3, operands=3, fetched=tuple(fetched))
    op = Operator(
        index=5,
        opcode=customops.FETCHING,
        inputs=(10, 11),
        outputs=(12,),
        intermediates=(),
        options=None,
        custom_options=customops.encode(o),
    )
    assert customops.operand_sources(op, o) == [10, fetched[0], 11]
    short = Operator(
        index=5,
        opcode=customops.FETCHING,
        inputs=(10,),
        outputs=(12,),
        intermediates=(),
        options=None,
        custom_options=customops.encode(o),
    )
    with pytest.raises(TinySegError, match="operand 2 is neither fetched nor an input"):
        customops.operand_sources(short, o)


def test_persistent_bytes_follow_the_contract_sizes() -> None:
    o = customops.FetchingOptions(
        axis=3, operands=2, fetched=(customops.Fetched(0, 0, (1, 4, 4, 2)),)
    )
    op = Operator(
        index=0,
        opcode=customops.FETCHING,
        inputs=(1,),
        outputs=(2,),
        intermediates=(),
        options=None,
        custom_options=customops.encode(o),
    )
    graph = SimpleNamespace(memo=Memo())  # Fetching's figure needs no tensors, only the run's memo
    # 32-byte header + one fetched operand of 16 bytes and two 8-byte pointers = 64 on a 64-bit host
    assert tinyseg.persistent_bytes(graph, op, 8) == 64
    assert tinyseg.persistent_bytes(graph, op, 4) == 64  # 32 + 24 = 56, rounded to 16


@pytest.mark.parametrize("bias_type,fusable", [(None, True), ("INT64", False), ("INT32", False)])
def test_fusion_builds_no_fetching_conv_the_kernel_would_refuse(bias_type, fusable) -> None:
    """A float CONV_2D whose bias is int64 or int32: FetchingConv2D refuses it in Prepare (the
    contract's dtype rules), so fuse_conv leaves Fetching + CONV_2D as they are."""
    from tinyseg_plugin.ir.schema import fb
    from tinyseg_plugin.transforms.passes import graph_or_none
    from tinyseg_plugin.transforms.passes.fuse import fuse_conv

    _, g2 = spilled_skip_graphs("FLOAT32")
    fetch = next(op.index for op in g2.operators if op.opcode == customops.FETCHING)
    conv = g2.operators[g2.consumers[g2.operators[fetch].outputs[0]][0]]
    if bias_type is not None:
        g2.model.subgraphs[0].tensors[conv.inputs[2]].type = getattr(fb.TensorType, bias_type)
        g2 = build_graph(g2.model)
    assert (graph_or_none(fuse_conv(g2, fetch)) is not None) == fusable
    assert customops.conv_types_supported("FLOAT32", "FLOAT32", bias_type or "FLOAT32") == fusable


def test_a_slots_region_round_trips_and_region_0_encodes_as_before() -> None:
    spill = customops.SpillOptions(slot=3, region=2)
    assert (
        customops.decode(_op(customops.SPILL, flexbuffers.Loads(customops.encode(spill)))) == spill
    )
    plain = customops.SpillOptions(slot=3)
    assert b"region" not in customops.encode(plain)
    fetched = customops.Fetched(1, 3, (1, 8, 8, 4), region=5)
    options = customops.FetchingOptions(axis=3, operands=2, fetched=(fetched,))
    back = customops.decode(_op(customops.FETCHING, flexbuffers.Loads(customops.encode(options))))
    assert back == options


def test_stream_chain_slot_regions_name_only_its_own_slots() -> None:
    body = {
        "version": 1,
        "ring_bytes": 100,
        "op_scratch": 0,
        "spilled": 1,
        "fetched": 0,
        "block": 1024,
        "stages": [],
        "tensors": [],
        "spill": [[3, 7]],
        "fetch": [],
        "rings": [],
    }
    good = customops.decode(_op(customops.STREAM_CHAIN, {**body, "slot_regions": [[7, 1]]}))
    assert good.region_of(7) == 1 and good.region_of(8) == 0
    with pytest.raises(TinySegError, match="slot_regions"):
        customops.decode(_op(customops.STREAM_CHAIN, {**body, "slot_regions": [[8, 1]]}))


def test_row_sources_sinks_and_tokens_round_trip_and_are_absent_when_empty() -> None:
    stage = customops.StreamStage("RELU", (3,), (4,))
    t = customops.StreamTensor("x", "INT8", (1, 4, 4, 2), (0.5,), (0,))
    plain = customops.StreamChainOptions(
        ring_bytes=16, stages=(stage,), tensors=(t, t), rings=((3, 1), (4, 1))
    )
    rowio = replace(plain, source=((3, 0),), sink=((4, 2),), tokens=(0, 2))
    data = customops.encode(rowio)
    assert customops.decode(_op(customops.STREAM_CHAIN, flexbuffers.Loads(data))) == rowio
    m = flexbuffers.Loads(customops.encode(plain))
    assert not {"source", "sink", "tokens"} & set(m)  # chains without them encode as before
    # The schedule pulls each sunk tensor (one int32 of `order`) and no token output (one fewer),
    # and a token has no tensor record nor schedule entry (88 + 16 + 3 int32 = 116 B less):
    # node inputs [0, 1], node output [2].
    base = customops.stream_chain_body_bytes(plain, [2], 2, 1)
    record = customops.STREAM_TENSOR_BYTES + customops.STREAM_SCHEDULE_TENSOR_BYTES + 4 * 3
    assert record == 116
    assert customops.stream_chain_body_bytes(replace(plain, sink=((4, 2),)), [2], 2, 1) == base + 4
    tokens_out = replace(plain, tokens=(2,))
    assert customops.stream_chain_body_bytes(tokens_out, [2], 2, 1) == base - 4 - record
    assert (
        customops.stream_chain_body_bytes(replace(plain, tokens=(1,)), [2], 2, 1) == base - record
    )


def test_plain_constants_have_no_tensor_record() -> None:
    """A filter or bias (a constant no stage reads as an activation) keeps its schedule entry but
    no 88-B record; a constant an ADD reads where an activation could be (a per-channel vector
    broadcast over the rows) keeps its record, and so does an input that is not constant."""
    t = customops.StreamTensor("x", "INT8", (1, 4, 4, 2), (0.5,), (0,))
    conv = customops.StreamStage("CONV_2D", (0, 1, 2), (5,))
    add = customops.StreamStage("ADD", (5, 3), (4,))
    o = customops.StreamChainOptions(
        ring_bytes=16, stages=(conv, add), tensors=(t,), rings=((5, 2),)
    )
    # node inputs [0 activation, 1 filter, 2 bias, 3 broadcast vector], node output [4], body [5]
    assert customops.stream_plain_constants(o, frozenset({1, 2, 3})) == {1, 2}
    assert customops.stream_plain_constants(o, frozenset({1})) == {1}
    every = customops.stream_chain_body_bytes(o, [2, 2], 4, 1)
    assert every - customops.stream_chain_body_bytes(o, [2, 2], 4, 1, frozenset({1, 2, 3})) == (
        2 * customops.STREAM_TENSOR_BYTES + customops.STREAM_EDGE_BYTES  # the ADD reads 3 whole
    )
    tokens = replace(o, tokens=(3,))
    assert customops.stream_plain_constants(tokens, frozenset({1, 3})) == {1}


def test_quant_tables_are_typed_int32_and_leave_the_persistent_block() -> None:
    """A requantizing stage's "quant" table is written as a typed vector of int32 (the kernel reads
    it in place), read back only as one, and its stage's per-channel bytes leave the pool."""
    t = customops.StreamTensor("x", "INT8", (1, 4, 4, 2), (0.5,), (0,))
    conv = customops.StreamStage("CONV_2D", (0, 1, 2), (4,))
    plain = customops.StreamChainOptions(
        ring_bytes=8, stages=(conv,), tensors=(t,), rings=((4, 1),)
    )
    table = replace(plain, stages=(replace(conv, quant=(1 << 30, 1 << 30, 1, -2)),))
    data = customops.encode(table)
    assert isinstance(flexread.loads(data)["stages"][0]["quant"], flexread.Int32s)
    op = _op(customops.STREAM_CHAIN, {})
    assert customops.decode(replace(op, custom_options=data)) == table
    untyped = flexbuffers.Loads(data)
    untyped["stages"][0]["quant"] = list(untyped["stages"][0]["quant"])
    with pytest.raises(TinySegError, match="typed vector of int32"):
        customops.decode(_op(customops.STREAM_CHAIN, untyped))
    assert customops.stream_chain_body_parts(plain, [2], 3, 1)["per-channel"] == 4 * 2 * 2
    assert customops.stream_chain_body_parts(table, [2], 3, 1)["per-channel"] == 0


@pytest.mark.parametrize("bad", [-1, customops.STREAM_MAX_BODY_BYTES + 1, True, "12"])
def test_the_planning_form_carries_its_body_bytes_and_refuses_others(bad) -> None:
    """The chain search's StreamChain (no body) keeps the bytes its body takes through encoding;
    a value that is not a byte count is refused with the option's name."""
    planned = customops.StreamChainOptions(ring_bytes=100, body_bytes=1234)
    op = replace(_op(customops.STREAM_CHAIN, {}), custom_options=customops.encode(planned))
    assert customops.decode(op) == planned
    m = {
        "version": 1,
        "ring_bytes": 100,
        "op_scratch": 0,
        "spilled": 0,
        "fetched": 0,
        "block": 1024,
        customops.PLANNED_BODY_KEY: bad,
    }
    with pytest.raises(TinySegError, match=customops.PLANNED_BODY_KEY):
        customops.decode(_op(customops.STREAM_CHAIN, m))
