"""The offline per-channel requantization (contract/requant.py) is TFLM's own: a small program built
with g++ against the TFLM tree's quantization_util.cc computes each case as
PopulateConvolutionQuantizationParams does, and the Python port must agree on every one (the
kernel refuses a "quant" table that differs, so a disagreement would refuse the tool's own models)."""

from __future__ import annotations

import math
import os
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tinyseg_plugin.contract.requant import quantize_multiplier, requantization

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include "tensorflow/lite/kernels/internal/quantization_util.h"
// Each line: input scale, filter scale, output scale (float32, hex) -> multiplier shift.
int main() {
  char a[64], b[64], c[64];
  while (std::scanf("%63s %63s %63s", a, b, c) == 3) {
    const float in = std::strtof(a, nullptr), f = std::strtof(b, nullptr);
    const float out = std::strtof(c, nullptr);
    int32_t m = 0;
    int s = 0;
    tflite::QuantizeMultiplier(
        static_cast<double>(in) * static_cast<double>(f) / static_cast<double>(out), &m, &s);
    std::printf("%d %d\n", static_cast<int>(m), s);
  }
  return 0;
}
"""


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


@pytest.fixture(scope="module")
def tflm_quantize(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tflm = os.environ.get("TFLM_DIR")
    if not tflm or not Path(tflm, "tensorflow/lite/kernels/internal/quantization_util.cc").exists():
        pytest.skip("TFLM_DIR is not set (scripts/third-party-env.sh)")
    if shutil.which("g++") is None:
        pytest.skip("no g++")
    work = tmp_path_factory.mktemp("requant")
    (work / "main.cc").write_text(PROGRAM)
    exe = work / "quantize"
    subprocess.run(
        ["g++", "-std=c++17", "-O1", f"-I{tflm}", str(work / "main.cc"),
         f"{tflm}/tensorflow/lite/kernels/internal/quantization_util.cc", "-o", str(exe)],
        check=True,
    )  # fmt: skip
    return exe


def _cases(n: int) -> list[tuple[float, float, float]]:
    """Random float32 scales over the range models use and beyond, and the corners: products
    that flush to zero, round up to 2^31 (folded into the shift), or sit on a rounding half."""
    rng = random.Random(20240611)
    cases = [
        (_f32(rng.uniform(0.5, 1.0) * 2.0 ** rng.randint(-40, 12)),
         _f32(rng.uniform(0.5, 1.0) * 2.0 ** rng.randint(-40, 12)),
         _f32(rng.uniform(0.5, 1.0) * 2.0 ** rng.randint(-20, 12)))
        for _ in range(n)
    ]  # fmt: skip
    cases += [(2.0**-20, 2.0**-20, 1.0), (1.0, 1.0, 1.0), (0.0, 0.5, 1.0), (0.5, 2.0**-31, 1.0)]
    cases += [(1.0, _f32(1.0 - 2.0**-24), 1.0), (1.0, _f32(0.5 + 2.0**-24), 1.0)]
    # (1 + j 2^-23)(1 + 2^-8), j odd: the fraction times 2^31 ends in exactly one half
    cases += [
        (_f32(1 + j * 2.0**-23), _f32(1 + 2.0**-8), 2.0**e)
        for j in range(1, 400, 2)
        for e in (0, 9)
    ]
    return cases


def test_quantize_multiplier_matches_tflm_on_random_scales(tflm_quantize: Path) -> None:
    cases = _cases(5000)
    text = "".join(f"{a.hex()} {b.hex()} {c.hex()}\n" for a, b, c in cases)
    out = subprocess.run(
        [str(tflm_quantize)], input=text, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    flushed = folded = halves = 0
    for (a, b, c), line in zip(cases, out):
        expected = tuple(int(v) for v in line.split())
        got = quantize_multiplier(a * b / c)
        assert got == expected, f"scales {a!r} {b!r} {c!r}: Python {got}, TFLM {expected}"
        flushed += got == (0, 0) and a * b != 0
        folded += got[0] == 1 << 30
        halves += (math.frexp(a * b / c)[0] * 2.0**31) % 1 == 0.5
    assert flushed > 0 and folded > 0 and halves > 0  # the corners were reached


def test_requantization_broadcasts_one_filter_scale_and_refuses_others() -> None:
    table = requantization(0.5, (0.25,), 0.125, 3)
    assert table == (1 << 30,) * 3 + (1,) * 3
    assert requantization(0.5, (0.25, 0.5), 0.125, 3) is None  # neither 1 nor 3 scales
    assert requantization(1.0, (2.0**40,), 1.0, 1) is None  # shift 41: above the contract's 30
    assert requantization(1.0, (float("inf"),), 1.0, 1) is None
