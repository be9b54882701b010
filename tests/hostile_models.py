"""Crafted hostile models: mutations of real optimized models' TinySeg operators, each one a body or
option the kernels must refuse in Prepare (docs/custom_ops.md, "Limits a hostile model meets").

The bases are what `tinyseg optimize` writes for the bundled Tiny U-Net: its streamed form (four
StreamChain operators) and its spilled form (Spill + FetchingConv2D, `--no-stream`). Each mutation
decodes one operator's custom options with the FlexBuffers codec, changes one thing and encodes them
again (or changes the operator's inputs), so no crafted binary is committed. tests/test_hostile_bodies.py
runs every one through the Python side (`tinyseg analyze`) and the C++ kernels (the real-kernel runner).

    python tests/hostile_models.py OUT_DIR     # writes OUT_DIR/<name>.tflite for every mutation
"""

from __future__ import annotations

import array
import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from flatbuffers import flexbuffers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tinyseg_plugin.ir import modelio
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.transforms.optimizer import Options, search_plans

TINY_UNET = ROOT / "examples" / "models" / "tiny_unet.tflite"
INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class Mutation:
    name: str
    base: str  # "stream" or "fetch"
    opcode: str  # the operator mutated (the first of its kind that has what the mutation needs)
    edit: Callable[[dict, object], None]  # (options map, the schema OperatorT): change in place
    which: int = 0  # the index among operators of that opcode


def base_models() -> dict[str, bytes]:
    """The Tiny U-Net streamed and spilled (no verification: the bases only). Streamed: the chain
    search's plan (four chains, every stage kind the edits aim at, as tests/test_tflm_runtime.py
    runs it), not an objective's, so the edits keep their targets whatever the optimizer prefers;
    spilled: the spill strategy's smallest head (--no-stream --target min)."""
    from tinyseg_plugin.transforms.stream_search import choose_streaming

    graph = build_graph(modelio.load_model(TINY_UNET))
    streamed = choose_streaming(graph, kernel_only=True).streamed
    assert streamed is not None
    fetched = search_plans(graph, Options(smallest=True, stream=False)).graph
    return {
        "stream": modelio.model_to_bytes(streamed.graph.model),
        "fetch": modelio.model_to_bytes(fetched.model),
    }


# ---------------------------------------------------------------- StreamChain edits


def _body_tensor_of_stage(m: dict, op_name: str) -> int:
    """Index in m["tensors"] of the body tensor the first `op_name` stage writes."""
    n_node = _node_count(m)
    for st in m["stages"]:
        if st["op"] == op_name and st["outputs"][0] >= n_node:
            return st["outputs"][0] - n_node
    raise LookupError(op_name)


_NODE_COUNT: dict[int, int] = {}


def _node_count(m: dict) -> int:
    return _NODE_COUNT[id(m)]


def _stage(m: dict, op_name: str) -> dict:
    return next(st for st in m["stages"] if st["op"] == op_name)


def _set(path: Callable[[dict], dict], key: str, value) -> Callable[[dict, object], None]:
    def edit(m: dict, op) -> None:
        path(m)[key] = value

    return edit


def _field(op_name: str, key: str, value) -> Callable[[dict, object], None]:
    return _set(lambda m: _stage(m, op_name)["fields"], key, value)


def _tensor(
    op_name: str, key: str, fn: Callable[[object], object]
) -> Callable[[dict, object], None]:
    def edit(m: dict, op) -> None:
        t = m["tensors"][_body_tensor_of_stage(m, op_name)]
        t[key] = fn(t[key])

    return edit


def _shape_at(k: int, value: int) -> Callable[[list], list]:
    return lambda shape: shape[:k] + [value] + shape[k + 1 :]


def _ring_of_conv(rows: Callable[[int], int]) -> Callable[[dict, object], None]:
    """The ring of the tensor the first CONV_2D writes (a 3x3 window reads 3 rows of it)."""

    def edit(m: dict, op) -> None:
        lid = _stage(m, "CONV_2D")["outputs"][0]
        for pair in m["rings"]:
            if pair[0] == lid:
                pair[1] = rows(pair[1])

    return edit


def _rings_consistent(edit: Callable[[dict, object], None]) -> Callable[[dict, object], None]:
    """The edit, then ring_bytes recomputed from the rings: the check that refuses is the one the
    mutation aims at, not the sum."""

    def wrapped(m: dict, op) -> None:
        edit(m, op)
        n = _node_count(m)
        total = 0
        for lid, rows in m["rings"]:
            t = m["tensors"][lid - n]
            total += (
                rows
                * t["shape"][2]
                * t["shape"][3]
                * (4 if t["type"] in ("INT32", "FLOAT32") else 1)
            )
        m["ring_bytes"] = total

    return wrapped


def _ring_id(lid: int) -> Callable[[dict, object], None]:
    def edit(m: dict, op) -> None:
        m["rings"][0][0] = lid

    return edit


def _ring_taller(m: dict, op) -> None:
    lid = _stage(m, "CONV_2D")["outputs"][0]
    height = m["tensors"][lid - _node_count(m)]["shape"][1]
    for pair in m["rings"]:
        if pair[0] == lid:
            m["ring_bytes"] += (
                (height + 1 - pair[1])
                * m["tensors"][lid - _node_count(m)]["shape"][2]
                * m["tensors"][lid - _node_count(m)]["shape"][3]
            )
            pair[1] = height + 1


def _reverse_stages(m: dict, op) -> None:
    m["stages"] = m["stages"][::-1]


def _two_writers(m: dict, op) -> None:
    convs = [st for st in m["stages"] if st["op"] == "CONV_2D"]
    convs[1]["outputs"] = list(convs[0]["outputs"])
    convs[1].pop("quant", None)  # its table is for its own output's scale: Prepare computes one


def _stage_index(key: str, value: int) -> Callable[[dict, object], None]:
    def edit(m: dict, op) -> None:
        st = _stage(m, "CONV_2D")
        st[key] = [value] + st[key][1:]

    return edit


def _fetched_taller(m: dict, op) -> None:
    """A fetched body tensor twice as tall as the tensor spilled to its slot."""
    lid = m["fetch"][0][0]
    t = m["tensors"][lid - _node_count(m)]
    t["shape"] = [t["shape"][0], 2 * t["shape"][1]] + t["shape"][2:]


# ---------------------------------------------------------------- FetchingConv2D edits


def _no_bias(m: dict, op) -> None:
    op.inputs = np.asarray(list(op.inputs[:-1]) + [-1], dtype=np.int32)


def _fetched_shape(k: int, value: int) -> Callable[[dict, object], None]:
    def edit(m: dict, op) -> None:
        f = m["fetched"][0]
        f["shape"] = f["shape"][:k] + [value] + f["shape"][k + 1 :]

    return edit


# ---------------------------------------------------------------- slot edits: a reader and its write
# Each keeps the operator's own options valid (its kernel's Init and, but for the shape edits, its
# Prepare accept it): the kernels refuse them when a fetch finds its slot's write elsewhere or other
# (CheckSlot at Invoke), and the fallback check, which lowers a fetch to the tensor spilled to its
# slot, would check another computation than the kernels run.


def _fetched_region(region: int) -> Callable[[dict, object], None]:
    def edit(m: dict, op) -> None:
        m["fetched"][0]["region"] = region

    return edit


def _spill_writes_the_input(m: dict, op) -> None:
    """The Spill writes tensor 0 (the Tiny U-Net's uint8 input: another type and size)."""
    op.inputs = np.asarray([0], dtype=np.int32)


def _chain_slot_region(region: int) -> Callable[[dict, object], None]:
    """Every slot the chain fetches read from ``region`` (the chains that spilled them wrote 0)."""

    def edit(m: dict, op) -> None:
        m["slot_regions"] = [[slot, region] for _, slot in m["fetch"]]

    return edit


def _fetched_shorter(m: dict, op) -> None:
    """A fetched body tensor half as tall as the tensor spilled to its slot (fewer bytes)."""
    lid = m["fetch"][0][0]
    t = m["tensors"][lid - _node_count(m)]
    t["shape"] = [t["shape"][0], t["shape"][1] // 2] + t["shape"][2:]


def _ram_operand(tensor: int) -> Callable[[dict, object], None]:
    """The FetchingConv2D's in-RAM operand replaced by ``tensor`` (the base's 40x60x8 pooled map)."""

    def edit(m: dict, op) -> None:
        op.inputs = np.asarray([tensor, *list(op.inputs[1:])], dtype=np.int32)

    return edit


def _fetched_slot(slot: int) -> Callable[[dict, object], None]:
    def edit(m: dict, op) -> None:
        m["fetched"][0]["slot"] = slot

    return edit


def _token_with_elements(m: dict, op) -> None:
    """The FetchingConv2D's token (the input between its in-RAM operand and its filter) replaced
    by that operand: a token with elements."""
    ins = [int(t) for t in op.inputs]
    ins[-3] = ins[0]
    op.inputs = ins


def _spill_two_tokens(m: dict, op) -> None:
    """The Spill writes its token twice: two outputs."""
    op.outputs = [int(t) for t in op.outputs] * 2


def _row_io(key: str, pairs: Callable[[dict], list]) -> Callable[[dict, object], None]:
    """A "source" or "sink" entry list (the Runtime's row sources and sinks) set from the body."""

    def edit(m: dict, op) -> None:
        m[key] = pairs(m)

    return edit


def _first_body_tensor(m: dict) -> int:
    return _node_count(m)


def _made_by_a_stage(m: dict, k: int = 0) -> int:
    """The local id of the k-th body tensor a stage writes."""
    return [st["outputs"][0] for st in m["stages"] if st["outputs"][0] >= _node_count(m)][k]


def _filter(m: dict) -> int:
    """The local id of the first CONV_2D stage's filter: a plain constant, which has no tensor
    record of its own in the kernel (tinyseg_stream_body.cc PlainConstant)."""
    return _stage(m, "CONV_2D")["inputs"][1]


def _ring_on_the_filter(m: dict, op) -> None:
    m["rings"][0][0] = _filter(m)


def _stage_writes_the_filter(m: dict, op) -> None:
    _stage(m, "CONV_2D")["outputs"] = [_filter(m)]


def _quant(op_name: str, change: Callable[[list], object]) -> Callable[[dict, object], None]:
    """The first `op_name` stage's "quant" table changed (typed int32 unless `change` says)."""

    def edit(m: dict, op) -> None:
        st = _stage(m, op_name)
        st["quant"] = change(list(st["quant"]))

    return edit


def _at(k: int, fn: Callable[[int], int]) -> Callable[[list], array.array]:
    return lambda q: array.array("i", q[:k] + [fn(q[k])] + q[k + 1 :])


def _tokens_of_a_body_tensor(m: dict, op) -> None:
    """A token (a tensor that carries no data) that is a body tensor, not a node input or output."""
    m["tokens"] = [_node_count(m)]


def _first_input_a_token(m: dict, op) -> None:
    """The chain's first input (its activation, before its filters) listed as a token: a token
    is one of the node's last inputs or outputs (the kernel keeps no record of it)."""
    m["tokens"] = [0]


MUTATIONS: tuple[Mutation, ...] = (
    # sizes past 32 bits (the memory corruption: a per-channel pool counted in int32)
    Mutation(
        "conv_out_channels_2^31-1",
        "stream",
        "StreamChain",
        _tensor("CONV_2D", "shape", _shape_at(3, INT32_MAX)),
    ),
    Mutation(
        "conv_out_channels_2^32",
        "stream",
        "StreamChain",
        _tensor("CONV_2D", "shape", _shape_at(3, 1 << 32)),
    ),
    Mutation(
        "body_height_2^31-1",
        "stream",
        "StreamChain",
        _tensor("CONV_2D", "shape", _shape_at(1, INT32_MAX)),
    ),
    Mutation(
        "body_width_2^32",
        "stream",
        "StreamChain",
        _tensor("CONV_2D", "shape", _shape_at(2, 1 << 32)),
    ),
    Mutation("fetched_dim_2^31-1", "fetch", "FetchingConv2D", _fetched_shape(3, INT32_MAX)),
    Mutation("fetched_dim_2^32", "fetch", "FetchingConv2D", _fetched_shape(3, 1 << 32)),
    # enums read from options
    Mutation(
        "activation_9", "stream", "StreamChain", _field("CONV_2D", "fusedActivationFunction", 9)
    ),
    Mutation(
        "activation_-1", "stream", "StreamChain", _field("CONV_2D", "fusedActivationFunction", -1)
    ),
    Mutation("padding_7", "stream", "StreamChain", _field("CONV_2D", "padding", 7)),
    Mutation(
        "stage_op_unknown", "stream", "StreamChain", _set(lambda m: m["stages"][0], "op", "SOFTMAX")
    ),
    Mutation(
        "fetching_conv_padding_unknown",
        "fetch",
        "FetchingConv2D",
        _set(lambda m: m, "padding", "FULL"),
    ),
    # quantization of body tensors
    Mutation(
        "scale_inf", "stream", "StreamChain", _tensor("CONV_2D", "scale", lambda s: [float("inf")])
    ),
    Mutation("scale_-1", "stream", "StreamChain", _tensor("CONV_2D", "scale", lambda s: [-1.0])),
    Mutation(
        "scale_1e-30", "stream", "StreamChain", _tensor("CONV_2D", "scale", lambda s: [1e-30])
    ),
    Mutation(
        "scale_nan", "stream", "StreamChain", _tensor("CONV_2D", "scale", lambda s: [float("nan")])
    ),
    Mutation(
        "zero_point_1000",
        "stream",
        "StreamChain",
        _tensor("CONV_2D", "zero_point", lambda z: [1000]),
    ),
    # rings
    Mutation(
        "ring_zero_rows", "stream", "StreamChain", _rings_consistent(_ring_of_conv(lambda r: 0))
    ),
    Mutation(
        "ring_shorter_than_window",
        "stream",
        "StreamChain",
        _rings_consistent(_ring_of_conv(lambda r: 1)),
    ),
    Mutation("ring_taller_than_tensor", "stream", "StreamChain", _ring_taller),
    Mutation("ring_names_tensor_999", "stream", "StreamChain", _ring_id(999)),
    Mutation("ring_bytes_short", "stream", "StreamChain", _set(lambda m: m, "ring_bytes", 100)),
    Mutation(
        "ring_bytes_int32_max", "stream", "StreamChain", _set(lambda m: m, "ring_bytes", INT32_MAX)
    ),
    # strides, dilations, filters
    Mutation("stride_0", "stream", "StreamChain", _field("CONV_2D", "strideH", 0)),
    Mutation("stride_-2", "stream", "StreamChain", _field("CONV_2D", "strideW", -2)),
    Mutation("stride_2^32+1", "stream", "StreamChain", _field("CONV_2D", "strideH", (1 << 32) + 1)),
    Mutation("dilation_0", "stream", "StreamChain", _field("CONV_2D", "dilationHFactor", 0)),
    Mutation(
        "dilation_40000", "stream", "StreamChain", _field("CONV_2D", "dilationWFactor", 40000)
    ),
    Mutation(
        "dilation_inf", "stream", "StreamChain", _field("CONV_2D", "dilationHFactor", float("inf"))
    ),
    Mutation(
        "pool_filter_10^6",
        "stream",
        "StreamChain",
        _field("MAX_POOL_2D", "filterHeight", 10**6),
        which=1,
    ),
    Mutation(
        "fetching_conv_dilation_32767",
        "fetch",
        "FetchingConv2D",
        _set(lambda m: m, "dilation_h", 32767),
    ),
    Mutation("fetching_conv_stride_0", "fetch", "FetchingConv2D", _set(lambda m: m, "stride_w", 0)),
    Mutation(
        "fetching_conv_band_rows_2^31-1",
        "fetch",
        "FetchingConv2D",
        _set(lambda m: m, "band_rows", INT32_MAX),
    ),
    # structure
    Mutation("concat_axis_1", "stream", "StreamChain", _field("CONCATENATION", "axis", 1), which=2),
    Mutation("stages_reversed", "stream", "StreamChain", _reverse_stages),
    Mutation("two_stages_write_one_tensor", "stream", "StreamChain", _two_writers),
    Mutation(
        "body_shape_disagrees",
        "stream",
        "StreamChain",
        _rings_consistent(_tensor("CONV_2D", "shape", _shape_at(2, 119))),
    ),
    Mutation(
        "op_scratch_0_transpose_conv",
        "stream",
        "StreamChain",
        _set(lambda m: m, "op_scratch", 0),
        which=2,
    ),
    Mutation("stage_input_999", "stream", "StreamChain", _stage_index("inputs", 999)),
    Mutation("stage_output_-5", "stream", "StreamChain", _stage_index("outputs", -5)),
    Mutation("spilled_count_wrong", "stream", "StreamChain", _set(lambda m: m, "spilled", 3)),
    Mutation(
        "stream_fetched_bigger_than_spilled", "stream", "StreamChain", _fetched_taller, which=1
    ),
    Mutation("fetching_conv_bias_omitted", "fetch", "FetchingConv2D", _no_bias),
    Mutation(
        "fetching_conv_operands_3", "fetch", "FetchingConv2D", _set(lambda m: m, "operands", 3)
    ),
    Mutation("fetching_conv_fetched_taller", "fetch", "FetchingConv2D", _fetched_shape(1, 160)),
    Mutation("spill_block_3", "fetch", "Spill", _set(lambda m: m, "block", 3)),
    # a fetch and its slot's write disagree
    Mutation("fetch_region_1_spill_region_0", "fetch", "FetchingConv2D", _fetched_region(1)),
    Mutation("spill_region_1_fetch_region_0", "fetch", "Spill", _set(lambda m: m, "region", 1)),
    Mutation("stream_fetch_region_1", "stream", "StreamChain", _chain_slot_region(1), which=1),
    Mutation(
        "fetching_conv_fetched_fewer_channels", "fetch", "FetchingConv2D", _fetched_shape(3, 4)
    ),
    Mutation("fetching_conv_fetched_half_height", "fetch", "FetchingConv2D", _fetched_shape(1, 40)),
    Mutation("spill_writes_the_model_input", "fetch", "Spill", _spill_writes_the_input),
    Mutation(
        "stream_fetched_shorter_than_spilled", "stream", "StreamChain", _fetched_shorter, which=1
    ),
    Mutation("fetching_conv_ram_operand_40x60", "fetch", "FetchingConv2D", _ram_operand(40)),
    Mutation("fetching_conv_slot_never_spilled", "fetch", "FetchingConv2D", _fetched_slot(5)),
    # tokens (the slot edges: zero elements, never read or written)
    Mutation("fetching_conv_token_with_elements", "fetch", "FetchingConv2D", _token_with_elements),
    Mutation("spill_two_tokens", "fetch", "Spill", _spill_two_tokens),
    # row sources and sinks (the Runtime's; the runner attaches none, the entries are refused first)
    Mutation(
        "stream_source_index_8",
        "stream",
        "StreamChain",
        _row_io("source", lambda m: [[_first_body_tensor(m), 8]]),
    ),
    Mutation(
        "stream_spilled_and_sunk",
        "stream",
        "StreamChain",
        _row_io("sink", lambda m: [[m["spill"][0][0], 0]]),
    ),
    Mutation(
        "stream_source_made_by_a_stage",
        "stream",
        "StreamChain",
        _row_io("source", lambda m: [[_made_by_a_stage(m), 0]]),
    ),
    Mutation(
        "stream_sink_index_twice",
        "stream",
        "StreamChain",
        _row_io("sink", lambda m: [[_made_by_a_stage(m, 0), 3], [_made_by_a_stage(m, 1), 3]]),
    ),
    # a plain constant's record is shared and read-only: nothing may name it to write it
    Mutation("stream_ring_on_a_filter", "stream", "StreamChain", _ring_on_the_filter),
    Mutation("stream_stage_writes_a_filter", "stream", "StreamChain", _stage_writes_the_filter),
    Mutation(
        "stream_source_is_a_filter",
        "stream",
        "StreamChain",
        _row_io("source", lambda m: [[_filter(m), 0]]),
    ),
    Mutation("stream_token_is_a_body_tensor", "stream", "StreamChain", _tokens_of_a_body_tensor),
    Mutation("stream_token_before_other_inputs", "stream", "StreamChain", _first_input_a_token),
    # the per-channel requantization the model carries (read in place from flash)
    Mutation(
        "conv_quant_one_entry_short",
        "stream",
        "StreamChain",
        _quant("CONV_2D", lambda q: array.array("i", q[:-1])),
    ),
    Mutation(
        "conv_quant_shift_40",
        "stream",
        "StreamChain",
        _quant("CONV_2D", lambda q: _at(len(q) // 2, lambda s: 40)(q)),
    ),
    Mutation(
        "conv_quant_multiplier_off_by_one",
        "stream",
        "StreamChain",
        _quant("CONV_2D", _at(0, lambda v: v + 1)),
    ),
    Mutation("conv_quant_untyped", "stream", "StreamChain", _quant("CONV_2D", list)),
    Mutation(
        "transpose_conv_quant_empty",
        "stream",
        "StreamChain",
        _quant("TRANSPOSE_CONV", lambda q: array.array("i", [])),
        which=2,  # the chain with a TRANSPOSE_CONV
    ),
)

# The mutations of a fetch against its slot's write (tests/test_hostile_slots.py runs them through
# analyze, the fallback verify and the real kernels with every region attached).
SLOT_MUTATIONS = (
    "fetch_region_1_spill_region_0",
    "spill_region_1_fetch_region_0",
    "stream_fetch_region_1",
    "fetching_conv_fetched_fewer_channels",
    "fetching_conv_fetched_half_height",
    "spill_writes_the_model_input",
    "fetching_conv_slot_never_spilled",
)


def mutate(base: bytes, mutation: Mutation) -> bytes:
    """The base model with one TinySeg operator's options (or inputs) changed."""
    model = modelio.parse_model(base)
    codes = [
        c.customCode.decode() if isinstance(c.customCode, bytes) else c.customCode
        for c in model.operatorCodes
    ]
    ops = [op for op in model.subgraphs[0].operators if codes[op.opcodeIndex] == mutation.opcode]
    op = ops[mutation.which]
    m = flexbuffers.Loads(bytearray(np.asarray(op.customOptions, dtype=np.uint8).tobytes()))
    m = copy.deepcopy(m)
    _NODE_COUNT[id(m)] = len(op.inputs) + len(op.outputs)
    for st in m.get("stages", []) if mutation.opcode == "StreamChain" else []:
        if "quant" in st:  # the library reads it as a list; written back, it stays typed int32
            st["quant"] = array.array("i", st["quant"])
    mutation.edit(m, op)
    op.customOptions = np.frombuffer(bytes(flexbuffers.Dumps(m)), dtype=np.uint8).copy()
    return modelio.model_to_bytes(model)


def long_stream_chain(n_body: int, fan_out: bool = False) -> bytes:
    """One StreamChain with ``n_body`` body tensors of 2x2x1 int8, each with a one-row ring: a chain
    of ``n_body`` + 1 RELU stages (input -> body 0 -> ... -> output) or, with ``fan_out``, ``n_body``
    RELUs of the input and one from body 0 to the output. Valid (analyze accepts it): the shape
    whose body checks and FlexBuffers decoding must take time linear in ``n_body``."""
    from synth import relu_chain

    from tinyseg_plugin.contract import customops as co
    from tinyseg_plugin.ir.schema import BUILTIN_CODES, fb

    model = relu_chain(1, size=2, channels=1)
    sg = model.subgraphs[0]
    q = sg.tensors[sg.inputs[0]].quantization
    body = tuple(
        co.StreamTensor(f"b{j}", "INT8", (1, 2, 2, 1), (q.scale[0],), (q.zeroPoint[0],))
        for j in range(n_body)
    )
    if fan_out:
        stages = [co.StreamStage("RELU", (0,), (2 + j,)) for j in range(n_body)]
        stages.append(co.StreamStage("RELU", (2,), (1,)))
    else:
        ids = [0, *range(2, 2 + n_body), 1]
        stages = [co.StreamStage("RELU", (a,), (b,)) for a, b in zip(ids, ids[1:])]
    options = co.StreamChainOptions(
        ring_bytes=2 * n_body,  # one row of 2x1 int8 each
        stages=tuple(stages),
        tensors=body,
        rings=tuple((2 + j, 1) for j in range(n_body)),
    )
    code = fb.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = BUILTIN_CODES["CUSTOM"]
    code.customCode, code.version = co.STREAM_CHAIN.encode(), 1
    op = fb.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [sg.inputs[0]], [sg.outputs[0]]
    op.customOptions = np.frombuffer(co.encode(options), dtype=np.uint8).copy()
    op.customOptionsFormat = fb.CustomOptionsFormat.FLEXBUFFERS
    model.operatorCodes, sg.operators = [code], [op]
    return modelio.model_to_bytes(model)


def generate(out_dir: Path) -> dict[str, Path]:
    """Every mutation (and the two unmutated bases, as base_stream and base_fetch) as a .tflite file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    bases = base_models()
    paths = {}
    for name, data in bases.items():
        paths[f"base_{name}"] = out_dir / f"base_{name}.tflite"
        paths[f"base_{name}"].write_bytes(data)
    for mu in MUTATIONS:
        paths[mu.name] = out_dir / f"{mu.name}.tflite"
        paths[mu.name].write_bytes(mutate(bases[mu.base], mu))
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python tests/hostile_models.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    for name, path in generate(Path(sys.argv[1])).items():
        print(f"{name}\t{path}")
