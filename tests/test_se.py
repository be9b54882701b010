"""Squeeze-and-excitation streams around its gate: a MUL reads the 1x1x1xC gate whole from the
arena and broadcasts it over every row of a chain (synth.se_seg: conv -> SE block -> conv, int8,
float32 and int16).
Checked bit-exact in the tflite-micro wheel here, and in the real kernels (a reference host
build) when TFLM_DIR is set."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import synth
from conftest import dumps_options
from flatbuffers import flexbuffers
from test_real_kernels import tflm_dir  # noqa: F401 (fixture)

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.checks.verify import REAL_KERNELS, verify
from tinyseg_plugin.cli import main
from tinyseg_plugin.contract import bodies, customops
from tinyseg_plugin.ir import modelio
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.memory.planner import plan_graph
from tinyseg_plugin.transforms import stream
from tinyseg_plugin.transforms.optimizer import Options, search_plans


def _chains(graph) -> list[list[str]]:
    return [
        [st.op for st in customops.decode(op).stages]
        for op in graph.operators
        if op.opcode == customops.STREAM_CHAIN
    ]


def test_the_gate_is_read_whole_and_its_producer_stays_out_of_chains() -> None:
    """The MUL's gate operand has a one-row window (row 0 for every row) and is a stage operand;
    the LOGISTIC that makes it is no chain member."""
    g = build_graph(synth.se_seg())
    mul = next(op for op in g.operators if op.opcode == "MUL")
    gate = mul.inputs[1]
    assert stream.whole_operand(g, mul, gate) and not stream.whole_operand(g, mul, mul.inputs[0])
    assert stream.row_map(g, mul, gate).window(5) == (0, 0)
    assert stream.kernel_computes(g, mul)
    logistic = g.producers[gate]
    assert not any(logistic in c for c in stream.find_chains(g, kernel_only=True))


def test_optimize_streams_through_the_se_block_bit_exact(monkeypatch) -> None:
    """The chain after the gate starts at the MUL; the result is bit-identical in the wheel."""
    monkeypatch.delenv("TFLM_DIR", raising=False)
    g = build_graph(synth.se_seg())
    opt = search_plans(g, Options(smallest=True)).graph
    assert any(c[0] == "MUL" and len(c) > 1 for c in _chains(opt)), _chains(opt)
    assert not any(op.opcode == "MUL" for op in opt.operators)
    v = verify(g, opt, runs=2, seed=5)
    assert v.identical, v.detail


def test_an_int16_se_block_streams_to_the_estimate_bit_exact(monkeypatch, capsys, tmp_path) -> None:
    """The int16 (16x8) MUL of the one-pixel gate is a stage: the chain after the gate starts at
    the MUL, `optimize`'s head equals `analyze --stream`'s estimate, below the original's, and the
    result is bit-identical in the wheel."""
    monkeypatch.delenv("TFLM_DIR", raising=False)
    g = build_graph(synth.se_seg(dtype="INT16"))
    mul = next(op for op in g.operators if op.opcode == "MUL")
    assert stream.whole_operand(g, mul, mul.inputs[1]) and stream.kernel_computes(g, mul)
    opt = search_plans(g, Options(smallest=True)).graph
    assert any(c[0] == "MUL" and len(c) > 1 for c in _chains(opt)), _chains(opt)
    assert not any(op.opcode == "MUL" for op in opt.operators)
    v = verify(g, opt, runs=2, seed=5)
    assert v.identical, v.detail
    path = tmp_path / "se16.tflite"
    path.write_bytes(modelio.model_to_bytes(g.model))
    assert main(["analyze", "--stream", str(path)]) == 0
    estimate = next(
        ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("head streamed")
    )
    assert f"{plan_graph(opt).head:,} B" in estimate, estimate
    assert plan_graph(opt).head < plan_graph(g).head


def test_an_int16_gate_with_a_zero_point_is_no_stage_operand() -> None:
    """TFLM's int16 MUL needs zero points 0: a gate with another is refused with that reason."""
    model = synth.se_seg(dtype="INT16")
    mul = next(op for op in build_graph(model).operators if op.opcode == "MUL")
    model.subgraphs[0].tensors[mul.inputs[1]].quantization.zeroPoint[0] = 3
    g = build_graph(model)
    assert "zero point" in stream.stage_problem(g, g.operators[mul.index])
    assert not stream.kernel_computes(g, g.operators[mul.index])


def test_the_body_check_reads_only_a_one_pixel_gate_whole() -> None:
    """A one-row but wider gate (1 x 1 x W x C) is no operand read whole (rows do not broadcast),
    nor is a one-pixel operand whose other operand is one pixel too or a constant."""
    x = bodies._Local("input", "INT8", height=1, width=4, channels=8, row_bytes=32)
    rows = bodies._Local("body", "INT8", height=6, width=4, channels=8, row_bytes=32)
    const = bodies._Local("input", "INT8", constant=True)
    assert bodies.whole_index("MUL", [rows, x], (0, 1)) == -1
    x.width = 1
    assert bodies.whole_index("MUL", [rows, x], (0, 1)) == 1
    assert bodies.whole_index("MUL", [x, rows], (0, 1)) == 0
    assert bodies.whole_index("ADD", [rows, x], (0, 1)) == -1
    assert bodies.whole_index("MUL", [x, x], (0, 1)) == -1
    assert bodies.whole_index("MUL", [const, x], (0, 1)) == -1
    x16 = bodies._Local("input", "INT16", height=1, width=1, channels=8, row_bytes=16)
    rows16 = bodies._Local("body", "INT16", height=6, width=4, channels=8, row_bytes=64)
    assert bodies.whole_index("MUL", [rows16, x16], (0, 1)) == 1


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_se_block_passes_the_real_kernel_check(dtype: str, tflm_dir: str) -> None:  # noqa: F811
    """The C++ MUL stage reads the gate whole and matches TFLM's broadcasting MUL bit for bit
    (int8, and int16 with TFLM's int16 BroadcastMul4DSlow)."""
    g = build_graph(synth.se_seg(dtype=dtype))
    opt = search_plans(g, Options(smallest=True)).graph
    assert any(c[0] == "MUL" for c in _chains(opt))
    v = verify(g, opt, runs=2, seed=3, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


def _both_operands_the_gate(tmp_path: Path, dtype: str = "INT8") -> Path:
    """se_seg optimized, its MUL stage edited to multiply the gate by itself: neither operand is
    read whole (each is one pixel), so the one-row gate would have to stream 24 rows."""
    model = modelio.parse_model(
        modelio.model_to_bytes(
            search_plans(build_graph(synth.se_seg(dtype=dtype)), Options(smallest=True)).graph.model
        )
    )
    edited = 0
    for op in model.subgraphs[0].operators:
        if op.customOptions is None:
            continue
        m = flexbuffers.Loads(bytearray(np.asarray(op.customOptions, dtype=np.uint8).tobytes()))
        for st in m.get("stages", []):
            if st.get("op") == "MUL":
                st["inputs"] = [st["inputs"][1], st["inputs"][1]]
                edited += 1
        op.customOptions = np.frombuffer(dumps_options(m), dtype=np.uint8).copy()
    assert edited == 1
    path = tmp_path / "bad.tflite"
    path.write_bytes(modelio.model_to_bytes(model))
    return path


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_analyze_refuses_a_mul_of_the_gate_alone(dtype: str, tmp_path: Path, capsys) -> None:
    """A MUL stage of the gate by itself (its rows do not broadcast) is one line and exit 2."""
    assert main(["analyze", str(_both_operands_the_gate(tmp_path, dtype))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MUL" in err[0], err


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_prepare_refuses_a_mul_of_the_gate_alone(dtype: str, tflm_dir: str, tmp_path: Path) -> None:  # noqa: F811
    """The C++ Prepare refuses the same body (the runner exits non-zero, before any row)."""
    exe = real_kernels.prepare(tflm_dir)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(bytes(24 * 20 * 3 * (2 if dtype == "INT16" else 1)))
    p = subprocess.run(
        [str(exe), str(_both_operands_the_gate(tmp_path, dtype)), str(inputs)]
        + [str(tmp_path / "o.bin")]
        + [
            "--batches",
            "1",
            "--arena",
            str(64 << 20),
            "--storage",
            str(real_kernels.STORAGE_BYTES),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode > 0, p.stderr[-1500:]
    assert "Prepare" in p.stderr or "StreamChain" in p.stderr, p.stderr[-1500:]


def _gate_of_other_channels(tmp_path: Path, dtype: str) -> Path:
    """se_seg optimized, the gate (a StreamChain input read whole) made 1 x 1 x 1 x C/2: its
    channels neither match the rows it scales nor are 1."""
    g = build_graph(synth.se_seg(dtype=dtype))
    mul = next(op for op in g.operators if op.opcode == "MUL")
    name = g.tensors[mul.inputs[1]].name
    model = modelio.parse_model(
        modelio.model_to_bytes(search_plans(g, Options(smallest=True)).graph.model)
    )
    gates = [t for t in model.subgraphs[0].tensors if t.name.decode() == name]
    assert len(gates) == 1 and list(gates[0].shape) == [1, 1, 1, 8], name
    gates[0].shape = np.array([1, 1, 1, 4], np.int32)
    path = tmp_path / "gate4.tflite"
    path.write_bytes(modelio.model_to_bytes(model))
    return path


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_prepare_refuses_a_narrower_gate(dtype: str, tflm_dir: str, tmp_path: Path) -> None:  # noqa: F811
    """A gate read whole whose channels do not broadcast to the rows it scales: Prepare refuses the
    StreamChain (the runner exits non-zero naming the broadcast), before any row is read."""
    exe = real_kernels.prepare(tflm_dir)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(bytes(24 * 20 * 3 * (2 if dtype == "INT16" else 1)))
    p = subprocess.run(
        [str(exe), str(_gate_of_other_channels(tmp_path, dtype)), str(inputs)]
        + [str(tmp_path / "o.bin"), "--batches", "1", "--arena", str(64 << 20)]
        + ["--storage", str(real_kernels.STORAGE_BYTES)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode > 0, p.stderr[-1500:]
    assert "broadcast to the output" in p.stderr, p.stderr[-1500:]


def test_se_block_passes_with_cmsis_nn_kernels(tflm_dir: str) -> None:  # noqa: F811
    """Optimized for CMSIS-NN and run in a CMSIS-NN host build (the MUL row with a broadcast
    operand takes TFLM's reference broadcast, as TFLM's CMSIS-NN MUL does): the outputs equal the
    original's in the same build, on random inputs."""
    g = build_graph(synth.se_seg())
    opt = search_plans(g, Options(smallest=True, kernel_set="cmsis-nn")).graph
    assert any(c[0] == "MUL" for c in _chains(opt))
    exe = real_kernels.prepare(tflm_dir, "cmsis_nn")
    rng = np.random.default_rng(11)
    shape = g.tensors[g.inputs[0]].shape
    batches = [[rng.integers(-128, 128, size=shape, dtype=np.int8)] for _ in range(3)]
    arena = 1 << 20
    want = real_kernels.run(exe, modelio.model_to_bytes(g.model), batches, arena, 60, "original")
    got = real_kernels.run(exe, modelio.model_to_bytes(opt.model), batches, arena, 60, "optimized")
    assert got.outputs == want.outputs


# ---------------------------------------------------------------- the squeeze: a MEAN ends a chain

# MEAN stages of synth models: se_seg's MEAN int8 with its input's quantization, int8 requantized to
# another scale and zero point, and float32, each with keep_dims (1 x 1 x 1 x C) and the int8 and
# float32 ones without (1 x C, then a RESHAPE, as Keras' GlobalAveragePooling2D() writes it);
# gap_head's (a classifier head) int16 (16x8) with its input's scale, requantized, and without
# keep_dims; se_seg's int16 one (its MUL of the gate a stage too). Each: (model factory, its keyword
# arguments).
INT16_SCALE = 0.05 / 256  # synth's int16 activation scale
MEAN_CASES = {
    "int8-same-scale": (synth.se_seg, {}),
    "int8-other-scale": (synth.se_seg, {"mean_quantization": (0.013, 5)}),
    "float32": (synth.se_seg, {"dtype": "FLOAT32"}),
    "int8-no-keep-dims": (synth.se_seg, {"keep_dims": False}),
    "int8-other-scale-no-keep-dims": (
        synth.se_seg,
        {"keep_dims": False, "mean_quantization": (0.013, 5)},
    ),
    "float32-no-keep-dims": (synth.se_seg, {"dtype": "FLOAT32", "keep_dims": False}),
    "int16-same-scale": (synth.gap_head, {"dtype": "INT16"}),
    "int16-other-scale": (
        synth.gap_head,
        {"dtype": "INT16", "mean_quantization": (INT16_SCALE * 0.3, 0)},
    ),
    "int16-no-keep-dims": (synth.gap_head, {"dtype": "INT16", "keep_dims": False}),
    "int16-se": (synth.se_seg, {"dtype": "INT16"}),
}
# The cases the stage did not compute before it took keep_dims false and int16 rows.
NEW_MEAN_CASES = sorted(k for k in MEAN_CASES if "no-keep-dims" in k or k.startswith("int16"))


def _mean_model(case: str):
    factory, kwargs = MEAN_CASES[case]
    return factory(**kwargs)


def _mean_chain(graph) -> tuple[int, customops.StreamChainOptions]:
    """The StreamChain whose last stage is the MEAN, and its options."""
    for op in graph.operators:
        if op.opcode == customops.STREAM_CHAIN:
            o = customops.decode(op)
            if o.stages[-1].op == "MEAN":
                return op.index, o
    raise AssertionError(f"no chain ends at a MEAN: {_chains(graph)}")


def test_a_mean_over_height_and_width_accumulates_and_ends_its_chain() -> None:
    """The MEAN's steps are its input's rows (one input row each), its input is no ring of the
    whole height, and find_chains ends the chain there; other axes are no stage."""
    g = build_graph(synth.se_seg())
    mean = next(op for op in g.operators if op.opcode == "MEAN")
    x = mean.inputs[0]
    h = g.tensors[x].shape[1]
    assert stream.row_map(g, mean, x).window(5) == (5, 5)
    assert stream.steps(g, mean.index) == h and stream.kernel_computes(g, mean)
    chains = stream.find_chains(g, kernel_only=True)
    assert any(c[-1] == mean.index for c in chains), chains
    chain = next(c for c in chains if c[-1] == mean.index)
    cost = stream.simulate(g, chain, spilled=frozenset({x}))
    assert cost.ring_rows[x] < h and g.tensors[mean.outputs[0]].shape[1] == 1
    model = synth.se_seg()
    axis = model.subgraphs[0].tensors[mean.inputs[1]]
    model.buffers[axis.buffer].data = np.array([1, 3], np.int32).view(np.uint8).copy()
    other = build_graph(model)
    assert not stream.mean_hw(other, other.operators[mean.index])
    assert not stream.is_row_local(other, other.operators[mean.index])


def test_a_mean_the_stage_does_not_compute_says_why() -> None:
    """Other axes, keep_dims false (a 1 x C output) and int16 rows are refused with the reason."""
    model = synth.se_seg()
    ops, tensors = model.subgraphs[0].operators, model.subgraphs[0].tensors
    k = next(j for j, op in enumerate(ops) if build_graph(model).operators[j].opcode == "MEAN")
    axis = tensors[ops[k].inputs[1]]
    model.buffers[axis.buffer].data = np.array([2, 3], np.int32).view(np.uint8).copy()
    g = build_graph(model)
    assert "axes [2, 3]" in stream.mean_problem(g, g.operators[k])
    for keep, shape in ((False, [1, 1, 1, 8]), (True, [1, 8])):  # an output keep_dims contradicts
        model = synth.se_seg()
        model.subgraphs[0].operators[k].builtinOptions.keepDims = keep
        model.subgraphs[0].tensors[model.subgraphs[0].operators[k].outputs[0]].shape = shape
        g = build_graph(model)
        assert "keep_dims" in stream.mean_problem(g, g.operators[k])
    problem = customops.stream_stage_problem("MEAN", ["INT16"], "INT8", ["INT32"])
    assert problem is not None and "int8" in problem
    assert customops.stream_stage_problem("MEAN", ["INT16"], "INT16", ["INT32"]) is None


def test_the_chain_search_spills_the_averaged_tensor(monkeypatch) -> None:
    """optimize ends a chain at the MEAN and spills the tensor it averages row by row (the later
    MUL fetches it), so it is never whole in the arena; the head is below the one with the MEAN
    out of chains (measured: 3,152 B against 6,416 B, docs/results.md)."""
    monkeypatch.delenv("TFLM_DIR", raising=False)
    g = build_graph(synth.se_seg())
    opt = search_plans(g, Options(smallest=True)).graph
    k, o = _mean_chain(opt)
    mean = next(op for op in g.operators if op.opcode == "MEAN")
    averaged = g.tensors[mean.inputs[0]].name
    node = len(opt.operators[k].inputs) + len(opt.operators[k].outputs)
    assert [o.tensors[lid - node].name for lid, _ in o.spill] == [averaged]
    assert o.op_scratch >= 4 * g.tensors[mean.inputs[0]].shape[3]
    monkeypatch.setattr(stream, "ACCUMULATING", frozenset())
    monkeypatch.setattr(stream, "ROW_LOCAL", stream.ROW_LOCAL - {"MEAN"})
    without = search_plans(g, Options(smallest=True)).graph
    assert plan_graph(opt).head < plan_graph(without).head


def _edit_mean_chain(tmp_path: Path, name: str, edit) -> Path:
    """se_seg optimized, its MEAN-ended StreamChain edited by ``edit(model, op, options map)``."""
    g = search_plans(build_graph(synth.se_seg()), Options(smallest=True)).graph
    k, _ = _mean_chain(g)
    model = modelio.parse_model(modelio.model_to_bytes(g.model))
    op = model.subgraphs[0].operators[k]
    m = flexbuffers.Loads(bytearray(np.asarray(op.customOptions, dtype=np.uint8).tobytes()))
    edit(model, op, m)
    op.customOptions = np.frombuffer(dumps_options(m), dtype=np.uint8).copy()
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(modelio.model_to_bytes(model))
    return path


def _other_axes(model, op, m) -> None:
    """The MEAN stage's axis constant (a StreamChain input) made [1, 3]."""
    stage = m["stages"][-1]
    axis = model.subgraphs[0].tensors[op.inputs[stage["inputs"][1]]]
    model.buffers[axis.buffer].data = np.array([1, 3], np.int32).view(np.uint8).copy()


def _no_accumulator(model, op, m) -> None:
    """op_scratch 0: no room for the MEAN's per-channel sums."""
    m["op_scratch"] = 0


def _keep_dims_off(model, op, m) -> None:
    """keepDims 0 on a MEAN stage whose output is 1 x 1 x 1 x C (keep_dims false writes 1 x C)."""
    m["stages"][-1]["fields"]["keepDims"] = False


BAD_MEANS = {
    "other-axes": _other_axes,
    "no-accumulator": _no_accumulator,
    "keep-dims-off": _keep_dims_off,
}


@pytest.mark.parametrize("bad", sorted(BAD_MEANS))
def test_analyze_refuses_a_malformed_mean_stage(bad: str, tmp_path: Path, capsys) -> None:
    """A MEAN stage over other axes, or without its accumulator in op_scratch: one line, exit 2."""
    assert main(["analyze", str(_edit_mean_chain(tmp_path, bad, BAD_MEANS[bad]))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MEAN" in err[0], err


@pytest.mark.parametrize("bad", sorted(BAD_MEANS))
def test_prepare_refuses_a_malformed_mean_stage(bad: str, tflm_dir: str, tmp_path: Path) -> None:  # noqa: F811
    """The C++ Prepare refuses the same bodies (the runner exits non-zero, naming the MEAN)."""
    exe = real_kernels.prepare(tflm_dir)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(bytes(24 * 20 * 3))
    p = subprocess.run(
        [str(exe), str(_edit_mean_chain(tmp_path, bad, BAD_MEANS[bad])), str(inputs)]
        + [str(tmp_path / "o.bin"), "--batches", "1", "--arena", str(64 << 20)]
        + ["--storage", str(real_kernels.STORAGE_BYTES)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode > 0, p.stderr[-1500:]
    assert "MEAN" in p.stderr, p.stderr[-1500:]


@pytest.mark.parametrize("case", NEW_MEAN_CASES)
def test_a_mean_without_keep_dims_or_on_int16_ends_its_chain_bit_exact(
    case: str, monkeypatch, capsys, tmp_path: Path
) -> None:
    """keep_dims false (a 1 x C output) and int16 MEANs end their chain as the stage: `optimize`'s
    head equals `analyze --stream`'s estimate (the MEAN no longer cuts the chain), below the head
    with the MEAN out of chains, and the result is bit-identical in the wheel."""
    monkeypatch.delenv("TFLM_DIR", raising=False)
    g = build_graph(_mean_model(case))
    mean = next(op for op in g.operators if op.opcode == "MEAN")
    assert stream.mean_problem(g, mean) is None and stream.kernel_computes(g, mean)
    opt = search_plans(g, Options(smallest=True)).graph
    _, o = _mean_chain(opt)
    assert o.op_scratch >= customops.STREAM_ACCUMULATOR_BYTES * g.tensors[mean.inputs[0]].shape[3]
    v = verify(g, opt, runs=2, seed=11)
    assert v.identical, v.detail
    path = tmp_path / f"{case}.tflite"
    path.write_bytes(modelio.model_to_bytes(g.model))
    assert main(["analyze", "--stream", str(path)]) == 0
    estimate = next(
        ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("head streamed")
    )
    assert f"{plan_graph(opt).head:,} B" in estimate, estimate
    monkeypatch.setattr(stream, "ACCUMULATING", frozenset())
    monkeypatch.setattr(stream, "ROW_LOCAL", stream.ROW_LOCAL - {"MEAN"})
    without = search_plans(g, Options(smallest=True)).graph
    assert plan_graph(opt).head < plan_graph(without).head


@pytest.mark.parametrize("case", sorted(MEAN_CASES))
def test_mean_stage_matches_tflm_bit_for_bit(case: str, tflm_dir: str) -> None:  # noqa: F811
    """The C++ MEAN stage (tinyseg_stream_reduce.cc) against TFLM's MEAN in the same reference
    build: int8 with the same and with another output quantization, float32, keep_dims false
    (int8, float32) and int16; TFLM's head of the optimized model is `analyze`'s (the planner
    counts the sums in op_scratch as the kernel requests them)."""
    g = build_graph(_mean_model(case))
    opt = search_plans(g, Options(smallest=True)).graph
    _mean_chain(opt)
    v = verify(g, opt, runs=3, seed=7, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail
    x = g.tensors[g.inputs[0]]
    data = np.random.default_rng(3).integers(-100, 100, size=x.shape)
    data = data.astype(np.float32 if x.dtype == "FLOAT32" else x.dtype.lower())
    exe = real_kernels.prepare(tflm_dir)
    got = real_kernels.run(exe, modelio.model_to_bytes(opt.model), [[data]], 1 << 20, 60, "opt")
    assert got.stats["head"] == plan_graph(opt).head, (got.stats, plan_graph(opt).head)
