"""Squeeze-and-excitation streams around its gate: a MUL reads the 1x1x1xC gate whole from the
arena and broadcasts it over every row of a chain (synth.se_seg: conv -> SE block -> conv, int8).
Checked bit-exact in the tflite-micro wheel here, and in the real kernels (a reference host
build) when TFLM_DIR is set."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import synth
from flatbuffers import flexbuffers
from test_real_kernels import tflm_dir  # noqa: F401 (fixture)

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.checks.verify import REAL_KERNELS, verify
from tinyseg_plugin.cli import main
from tinyseg_plugin.contract import bodies, customops
from tinyseg_plugin.ir import modelio
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.transforms import stream
from tinyseg_plugin.transforms.optimizer import Options, optimize


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
    opt = optimize(g, Options()).graph
    assert any(c[0] == "MUL" and len(c) > 1 for c in _chains(opt)), _chains(opt)
    assert not any(op.opcode == "MUL" for op in opt.operators)
    v = verify(g, opt, runs=2, seed=5)
    assert v.identical, v.detail


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


def test_se_block_passes_the_real_kernel_check(tflm_dir: str) -> None:  # noqa: F811
    """The C++ MUL stage reads the gate whole and matches TFLM's broadcasting MUL bit for bit."""
    g = build_graph(synth.se_seg())
    opt = optimize(g, Options()).graph
    assert any(c[0] == "MUL" for c in _chains(opt))
    v = verify(g, opt, runs=2, seed=3, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


def _both_operands_the_gate(tmp_path: Path) -> Path:
    """se_seg optimized, its MUL stage edited to multiply the gate by itself: neither operand is
    read whole (each is one pixel), so the one-row gate would have to stream 24 rows."""
    model = modelio.parse_model(
        modelio.model_to_bytes(optimize(build_graph(synth.se_seg()), Options()).graph.model)
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
        op.customOptions = np.frombuffer(bytes(flexbuffers.Dumps(m)), dtype=np.uint8).copy()
    assert edited == 1
    path = tmp_path / "bad.tflite"
    path.write_bytes(modelio.model_to_bytes(model))
    return path


def test_analyze_refuses_a_mul_of_the_gate_alone(tmp_path: Path, capsys) -> None:
    """A MUL stage of the gate by itself (its rows do not broadcast) is one line and exit 2."""
    assert main(["analyze", str(_both_operands_the_gate(tmp_path))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MUL" in err[0], err


def test_prepare_refuses_a_mul_of_the_gate_alone(tflm_dir: str, tmp_path: Path) -> None:  # noqa: F811
    """The C++ Prepare refuses the same body (the runner exits non-zero, before any row)."""
    exe = real_kernels.prepare(tflm_dir)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(bytes(24 * 20 * 3))
    p = subprocess.run(
        [str(exe), str(_both_operands_the_gate(tmp_path)), str(inputs), str(tmp_path / "o.bin")]
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


def test_se_block_passes_with_cmsis_nn_kernels(tflm_dir: str) -> None:  # noqa: F811
    """Optimized for CMSIS-NN and run in a CMSIS-NN host build (the MUL row with a broadcast
    operand takes TFLM's reference broadcast, as TFLM's CMSIS-NN MUL does): the outputs equal the
    original's in the same build, on random inputs."""
    g = build_graph(synth.se_seg())
    opt = optimize(g, Options(kernel_set="cmsis-nn")).graph
    assert any(c[0] == "MUL" for c in _chains(opt))
    exe = real_kernels.prepare(tflm_dir, "cmsis_nn")
    rng = np.random.default_rng(11)
    shape = g.tensors[g.inputs[0]].shape
    batches = [[rng.integers(-128, 128, size=shape, dtype=np.int8)] for _ in range(3)]
    arena = 1 << 20
    want = real_kernels.run(exe, modelio.model_to_bytes(g.model), batches, arena, 60, "original")
    got = real_kernels.run(exe, modelio.model_to_bytes(opt.model), batches, arena, 60, "optimized")
    assert got.outputs == want.outputs
