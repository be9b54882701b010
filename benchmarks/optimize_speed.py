"""CPU seconds of the whole `tinyseg optimize` command (a child process: parse, plan, reorder, spill, fuse,
lay out, verify in TFLM, write) on synthetic models of up to 300 operators and on any models given.
The target: under 10 s of CPU for any model of up to 300 operators.

Run: python benchmarks/optimize_speed.py [MODEL.tflite ...] [--runs N]

Columns: operators; exit code; CPU seconds of the command with verification (--runs N random inputs,
default 3) and without it (--no-verify, the search alone); CPU seconds of one TFLM inference of the
model and the floor verification cannot go below (the original and the optimized model on N random
inputs and 3 edge cases: 2 x (N + 3) inferences; 0 when the model is written unchanged); whether the
whole command met 10 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "tests"))  # the test-model builders (tests/synth.py)
import synth  # noqa: E402

from tinyseg_plugin.ir.modelio import load_model, save_model  # noqa: E402

LIMIT_S = 10.0


def synthetic(d: Path) -> list[Path]:
    models = {
        "wide_conv_150": synth.wide_branches(0, 150, "conv"),
        "wide_dequantize_int8_150": synth.wide_branches(0, 150, "dequantize-int8"),
        "chain_300": synth.chain(300, size=16, channels=8),
        "tiny_unet_like": synth.tiny_unet_like(),
        "vnet_like": synth.vnet_like(),
        "random_unet_depth4": synth.random_unet(41, max_depth=4),
        "random_real_7": synth.random_real(7),
    }
    paths = []
    for name, m in models.items():
        p = d / f"{name}.tflite"
        save_model(m, p)
        paths.append(p)
    return paths


def cpu_of(cmd: list[str]) -> tuple[int, float]:
    """(exit code, user + system CPU seconds) of a child process."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    tool = [
        sys.executable,
        "-c",
        "import sys; from tinyseg_plugin.cli import main; sys.exit(main(sys.argv[1:]))",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        paths = synthetic(d) + [Path(m) for m in args.models]
        print(
            f"{'model':<34} {'ops':>5} {'exit':>4} {'CPU s':>7} {'no-verify s':>11} {'inference s':>11} "
            f"{'floor s':>8} {'< 10 s':>6}"
        )
        for p in paths:
            ops = len(load_model(p).subgraphs[0].operators or [])
            out = str(d / f"{p.stem}.opt.tflite")
            rc, cpu = cpu_of(tool + ["optimize", str(p), "-o", out, "-q", "--runs", str(args.runs)])
            _, cpu_nv = cpu_of(tool + ["optimize", str(p), "-o", out, "-q", "--no-verify"])
            unchanged = Path(out).exists() and Path(out).read_bytes() == p.read_bytes()
            inf = 0.0 if unchanged else inference_cpu(p)
            # What verification cannot go below: the original and the optimized model, each run on
            # `runs` random inputs and the three edge cases (none when the model is written unchanged).
            floor = 0.0 if unchanged else 2 * (args.runs + 3) * inf
            print(
                f"{p.stem:<34} {ops:>5} {rc:>4} {cpu:>7.2f} {cpu_nv:>11.2f} {inf:>11.2f} {floor:>8.2f} "
                f"{'yes' if cpu < LIMIT_S else 'NO':>6}"
            )
    return 0


def inference_cpu(model: Path, repeats: int = 3) -> float:
    """CPU seconds of one TFLM invoke of the model (the tflite-micro wheel, as verification runs it):
    a child that loads it and invokes `repeats` times, minus a child that only loads it."""
    code = (
        "import sys, numpy as np; from tinyseg_plugin.checks import interpreter; from tinyseg_plugin.checks.verify import "
        "random_inputs; m = open(sys.argv[1], 'rb').read(); n = int(sys.argv[2]); "
        "x = random_inputs(m, 0); interpreter.run_many(m, [x] * n, seconds=3600) if n else interpreter.input_details(m)"
    )
    _, base = cpu_of([sys.executable, "-c", code, str(model), "0"])
    _, runs = cpu_of([sys.executable, "-c", code, str(model), str(repeats)])
    return max(runs - base, 0.0) / repeats


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
