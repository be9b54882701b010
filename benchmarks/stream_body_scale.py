"""Seconds of `tinyseg analyze` on one StreamChain with 1,000 to 20,000 body tensors, in a chain
and fanned out from the input (tests/hostile_models.py long_stream_chain): the body checks and
the custom options' decoding take time linear in the body (target: 20,000 in under 10 s).

Run: python benchmarks/stream_body_scale.py [SIZES...]   (default 1000 5000 20000)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the model builders (tests/hostile_models.py, synth.py)
import hostile_models  # noqa: E402


def analyze_seconds(path: str) -> tuple[float, float, int]:
    """CPU seconds (user + system of the child), wall seconds and exit code of `tinyseg analyze`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before, start = os.times(), time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", "analyze", path],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall, after = time.monotonic() - start, os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return cpu, wall, proc.returncode


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 5000, 20000]
    print(
        f"{'body tensors':>12} {'shape':<8} {'CPU s':>7} {'wall s':>7} {'CPU µs/tensor':>14}  exit"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            for shape in ("chain", "fan-out"):
                path = f"{tmp}/{shape}_{n}.tflite"
                Path(path).write_bytes(hostile_models.long_stream_chain(n, shape == "fan-out"))
                cpu, wall, rc = analyze_seconds(path)
                print(f"{n:>12,} {shape:<8} {cpu:>7.2f} {wall:>7.2f} {cpu / n * 1e6:>14.0f}  {rc}")


if __name__ == "__main__":
    main()
