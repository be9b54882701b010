"""A PAD or PADV2 of channels is a StreamChain stage (MediaPipe/BlazeFace residual blocks pad the
skip's channels up to the branch's before the ADD): rows map 1:1 plus the height padding, so the
chains run through it and optimize's head equals the estimate (`analyze --stream`). Checked
bit-exact in the tflite-micro wheel here, and in the real kernels (a reference host build) when
TFLM_DIR is set; malformed paddings are refused by `analyze` and by the kernel's Prepare."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import synth
from conftest import stage_ops
from test_real_kernels import tflm_dir  # noqa: F401 (fixture)

from tinyseg_plugin import pipeline
from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.checks.verify import REAL_KERNELS, verify
from tinyseg_plugin.cli import main
from tinyseg_plugin.ir import modelio
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.transforms import stream_search
from tinyseg_plugin.transforms.optimizer import Options, search_plans

DTYPES = ("INT8", "FLOAT32")


@pytest.mark.parametrize("dtype", DTYPES)
def test_optimize_reaches_the_estimate_through_a_channel_pad(dtype: str, monkeypatch) -> None:
    """Every PAD and PADV2 goes inside a chain, the written model's head is at most `analyze
    --stream`'s estimate, and the check (the wheel) finds it bit-identical. Before channel padding was a stage
    the chains stopped at both pads (int8: 5,952 B against 3,584 B)."""
    monkeypatch.delenv("TFLM_DIR", raising=False)
    data = modelio.model_to_bytes(synth.channel_pad_chain(dtype=dtype))
    g = pipeline.load(data, "m")
    estimate = stream_search.choose_streaming(g).head
    out = pipeline.optimize(data, pipeline.Run(Options(smallest=True), runs=1), "m")
    assert out.verification is not None and out.verification.identical, out.verification
    written = pipeline.load(out.data, "written")
    stages = stage_ops(written)
    assert stages.count("PAD") == 1 and stages.count("PADV2") == 1, stages
    assert not any(op.opcode in ("PAD", "PADV2") for op in written.operators)
    # --target min's search also offers shared row spills: at most the estimate
    assert out.result.plan.head <= estimate


@pytest.mark.parametrize("dtype", DTYPES)
def test_channel_pads_pass_the_real_kernel_check(tflm_dir: str, dtype: str) -> None:  # noqa: F811
    """The C++ PAD and PADV2 stages pad channels as TFLM's PAD does, bit for bit."""
    g = build_graph(synth.channel_pad_chain(dtype=dtype))
    opt = search_plans(g, Options(smallest=True)).graph
    assert {"PAD", "PADV2"} <= set(stage_ops(opt))
    v = verify(g, opt, runs=2, seed=3, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


def test_an_int16_channel_pad_streams_and_passes_the_real_kernel_check(
    tflm_dir: str,  # noqa: F811
) -> None:
    """The int16 PAD stage pads channels with 0, as TFLM's int16 PAD: in a StreamChain, the
    optimized model's outputs equal the original's in a real TFLM build."""
    g = build_graph(synth.int16_channel_pad_chain())
    opt = search_plans(g, Options(smallest=True)).graph
    assert "PAD" in stage_ops(opt), stage_ops(opt)
    v = verify(g, opt, runs=2, seed=3, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


def test_channel_pads_pass_with_cmsis_nn_kernels(tflm_dir: str) -> None:  # noqa: F811
    """Optimized for CMSIS-NN and run in a CMSIS-NN host build, where the int8 PAD stages pad
    through arm_pad_s8: the outputs equal the original's in the same build, on random inputs."""
    g = build_graph(synth.channel_pad_chain())
    opt = search_plans(g, Options(smallest=True, kernel_set="cmsis-nn")).graph
    assert {"PAD", "PADV2"} <= set(stage_ops(opt))
    exe = real_kernels.prepare(tflm_dir, "cmsis_nn")
    rng = np.random.default_rng(5)
    shape = g.tensors[g.inputs[0]].shape
    batches = [[rng.integers(-128, 128, size=shape, dtype=np.int8)] for _ in range(3)]
    arena = 1 << 20
    want = real_kernels.run(exe, modelio.model_to_bytes(g.model), batches, arena, 60, "original")
    got = real_kernels.run(exe, modelio.model_to_bytes(opt.model), batches, arena, 60, "optimized")
    assert got.outputs == want.outputs


def _malformed(tmp_path: Path, how: str) -> Path:
    """channel_pad_chain optimized, the channel PAD's paddings edited: a negative count, a padding
    of the batch, or the eight numbers as a [2, 4] tensor."""
    model = modelio.parse_model(
        modelio.model_to_bytes(
            search_plans(build_graph(synth.channel_pad_chain()), Options(smallest=True)).graph.model
        )
    )
    sub = model.subgraphs[0]
    hits = [
        t
        for t in sub.tensors
        if t.name.decode().endswith("/paddings")
        and np.frombuffer(bytes(model.buffers[t.buffer].data), np.int32).tolist()
        == [0, 0, 0, 0, 0, 0, 0, 8]
    ]
    assert len(hits) == 1
    t = hits[0]
    pads = np.array([[0, 0], [0, 0], [0, 0], [0, 8]], dtype=np.int32)
    if how == "negative":
        pads[3] = [8, -8]
    elif how == "batch":
        pads[0] = [1, 0]
        pads[3] = [0, 7]
    else:
        t.shape = [2, 4]
    model.buffers[t.buffer].data = np.frombuffer(pads.tobytes(), np.uint8).copy()
    path = tmp_path / f"{how}.tflite"
    path.write_bytes(modelio.model_to_bytes(model))
    return path


MALFORMED = ("negative", "batch", "shape")


@pytest.mark.parametrize("how", MALFORMED)
def test_analyze_refuses_malformed_paddings(tmp_path: Path, capsys, how: str) -> None:
    """One line on stderr naming the PAD, exit 2, no traceback."""
    assert main(["analyze", str(_malformed(tmp_path, how))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "PAD" in err[0] and "Traceback" not in err[0], err


@pytest.mark.parametrize("how", MALFORMED)
def test_prepare_refuses_malformed_paddings(
    tflm_dir: str,  # noqa: F811
    tmp_path: Path,
    how: str,
) -> None:
    """The C++ Prepare refuses the same bodies (the runner exits non-zero, before any row)."""
    exe = real_kernels.prepare(tflm_dir)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(bytes(24 * 20 * 3))
    p = subprocess.run(
        [str(exe), str(_malformed(tmp_path, how)), str(inputs), str(tmp_path / "o.bin")]
        + ["--batches", "1", "--arena", str(64 << 20)]
        + ["--storage", str(real_kernels.STORAGE_BYTES)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode > 0, p.stderr[-1500:]
    assert "StreamChain: PAD" in p.stderr, p.stderr[-1500:]
    assert not (tmp_path / "o.bin").exists() or (tmp_path / "o.bin").stat().st_size == 0
