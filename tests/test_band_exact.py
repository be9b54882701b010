"""Fused fetching's band logic is bit-exact with TFLM's CONCATENATION + CONV_2D.

tests/band_harness/band_conv.cc (built here with cmake) computes an int8 per-channel convolution
over the concatenation of a resident and a spilled tensor band by band with tflm_ops/core's band.h
and SpillManager.FetchRange, never materialising the concatenation; the real TFLM interpreter
(tflite_micro) runs the same data through a CONCATENATION + CONV_2D model built with
synth.ModelBuilder (tests/synth.py). Padding SAME and VALID, strides 1 and 2, even/odd kernels,
dilation, fetched operand first or second, band heights from one row to the whole output and
from a byte budget (MaxBandRows).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from synth import SAME, VALID, ModelBuilder

from tinyseg_plugin.ir.modelio import model_to_bytes

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def band_conv(tmp_path_factory) -> Path:
    if not shutil.which("cmake") or not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("cmake / a C++ compiler are not installed")
    build = tmp_path_factory.mktemp("band_harness")
    for cmd in (
        ["cmake", "-S", str(ROOT / "tests" / "band_harness"), "-B", str(build)],
        ["cmake", "--build", str(build), "-j2"],
    ):
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    return build / "band_conv"


@dataclass(frozen=True)
class Case:
    h: int
    w: int
    c_res: int
    c_fetch: int
    c_out: int
    k: int
    stride: int
    padding: int  # SAME / VALID (schema values)
    fetched_first: bool
    dilation: int = 1
    relu: bool = True
    zero_point: int = -3
    seed: int = 0

    def __str__(self) -> str:
        pad = "same" if self.padding == SAME else "valid"
        pos = "fetched-first" if self.fetched_first else "fetched-second"
        return (
            f"{self.h}x{self.w}x({self.c_res}+{self.c_fetch})-k{self.k}s{self.stride}d{self.dilation}-{pad}-{pos}"
            f"-zp{self.zero_point}"
        )


CASES = [
    Case(13, 11, 3, 5, 4, 3, 1, SAME, False),
    Case(13, 11, 3, 5, 4, 3, 2, SAME, True, seed=1),
    Case(12, 9, 4, 4, 3, 3, 1, VALID, True, relu=False, seed=2),
    Case(17, 10, 2, 6, 5, 5, 2, VALID, False, zero_point=7, seed=3),
    Case(14, 10, 3, 3, 4, 4, 2, SAME, False, seed=4),  # even kernel: odd total padding goes below
    Case(15, 12, 2, 4, 3, 3, 1, SAME, True, dilation=2, seed=5),
    Case(9, 7, 5, 3, 6, 1, 1, VALID, False, relu=False, zero_point=-128, seed=6),
    Case(10, 8, 3, 2, 4, 2, 2, VALID, True, seed=7),
    Case(40, 60, 16, 16, 16, 3, 1, SAME, True, seed=8),  # a Tiny U-Net decoder stage
]


def _model(c: Case):
    b = ModelBuilder(dtype="INT8", seed=c.seed, act_zero_point=c.zero_point)
    res = b.input([1, c.h, c.w, c.c_res])
    fet = b.input([1, c.h, c.w, c.c_fetch])
    cat = b.concat([fet, res] if c.fetched_first else [res, fet], axis=3)
    y = b.conv(
        cat, c.c_out, k=c.k, stride=c.stride, padding=c.padding, relu=c.relu, dilation=c.dilation
    )
    return b.build([y]), b


def _activations(rng: np.random.Generator, shape, zp: int, frac: float) -> np.ndarray:
    """Activation-like int8 data: a fraction at the zero point (what ReLU leaves), the rest spread."""
    x = rng.integers(-128, 128, size=shape, dtype=np.int8)
    x[rng.random(shape) < frac] = np.int8(zp)
    return x


def _tflm(model_bytes: bytes, inputs: list[np.ndarray]) -> np.ndarray:
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model_bytes, arena_size=8 << 20)
    for i, x in enumerate(inputs):
        it.set_input(x, i)
    it.invoke()
    return it.get_output(0)


def _spec(c: Case, model, res: np.ndarray, fet: np.ndarray, band_rows: int) -> bytes:
    sg = model.subgraphs[0]
    conv = sg.operators[-1]
    x_t, w_t, b_t = (sg.tensors[i] for i in conv.inputs)
    y_t = sg.tensors[conv.outputs[0]]
    filt = np.asarray(model.buffers[w_t.buffer].data, dtype=np.uint8).view(np.int8)
    bias = np.asarray(model.buffers[b_t.buffer].data, dtype=np.uint8).view("<i4")
    assert filt.size == c.c_out * c.k * c.k * (c.c_res + c.c_fetch) and bias.size == c.c_out
    hdr = struct.pack(
        "<16i",
        c.h,
        c.w,
        c.c_res,
        c.c_fetch,
        int(c.fetched_first),
        c.c_out,
        c.k,
        c.k,
        c.stride,
        c.stride,
        c.dilation,
        0 if c.padding == SAME else 1,
        int(c.relu),
        band_rows,
        int(x_t.quantization.zeroPoint[0]),
        int(y_t.quantization.zeroPoint[0]),
    )
    scales = struct.pack("<2f", x_t.quantization.scale[0], y_t.quantization.scale[0])
    scales += np.asarray(w_t.quantization.scale, dtype="<f4").tobytes()
    return hdr + scales + res.tobytes() + fet.tobytes() + filt.tobytes() + bias.tobytes()


def _out_h(c: Case) -> int:
    eff = (c.k - 1) * c.dilation + 1
    return -(-c.h // c.stride) if c.padding == SAME else (c.h - eff) // c.stride + 1


@pytest.mark.parametrize("case", CASES, ids=str)
def test_band_conv_matches_tflm(case: Case, band_conv: Path, tmp_path: Path) -> None:
    model, _ = _model(case)
    rng = np.random.default_rng(100 + case.seed)
    res = _activations(rng, (1, case.h, case.w, case.c_res), case.zero_point, 0.3)
    fet = _activations(rng, (1, case.h, case.w, case.c_fetch), case.zero_point, 0.6)
    want = _tflm(model_to_bytes(model), [res, fet])
    out_h = _out_h(case)
    assert want.shape[1] == out_h
    assert len(np.unique(want)) > 3, "degenerate output would hide arithmetic errors"
    row_bytes = case.w * (case.c_res + case.c_fetch)
    eff = (case.k - 1) * case.dilation + 1
    budget = (eff + case.stride) * row_bytes  # MaxBandRows gives 2 rows for this budget
    heights = sorted({1, 2, 3, max(1, out_h // 2), out_h, out_h + 5}) + [-budget]
    for rows in heights:
        spec = tmp_path / f"spec_{rows}.bin"
        out = tmp_path / f"out_{rows}.bin"
        spec.write_bytes(_spec(case, model, res, fet, rows))
        p = subprocess.run(
            [str(band_conv), str(spec), str(out)], capture_output=True, text=True, timeout=120
        )
        assert p.returncode == 0, p.stderr
        n_bands = int(p.stdout.split(" in ")[1].split()[0])
        expect_rows = min(2 if rows < 0 else rows, out_h)
        assert n_bands == -(-out_h // expect_rows), (rows, p.stdout)
        got = np.frombuffer(out.read_bytes(), dtype=np.int8).reshape(want.shape)
        mismatch = np.argwhere(got != want)
        assert mismatch.size == 0, (
            f"band rows {rows}: {len(mismatch)} values differ, first at {mismatch[0].tolist()}"
        )
