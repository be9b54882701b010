"""Wall time of `analyze` (plan + cold ranges + schedule) on the Tiny U-Net and on long synthetic models.

Targets: Tiny U-Net under 1 s, a 1,000-operator model under 5 s.
Run: python benchmarks/analyze_speed.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tinyseg_plugin import synth  # noqa: E402
from tinyseg_plugin.analysis import analyze_graph  # noqa: E402
from tinyseg_plugin.graph import build_graph  # noqa: E402
from tinyseg_plugin.modelio import load_model  # noqa: E402


def best_of(fn, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    rows = []
    tiny = root / "examples" / "models" / "tiny_unet.tflite"
    rows.append(("tiny_unet.tflite (load+analyze)", 1.0, best_of(lambda: analyze_graph(build_graph(load_model(tiny))))))
    for n in (250, 500, 1000):
        g = build_graph(synth.chain(n))
        rows.append((f"synthetic chain, {len(g.operators)} ops", 5.0 if n == 1000 else None, best_of(lambda: analyze_graph(g), 1)))
    print(f"{'model':<40} {'target s':>9} {'wall s':>8}  ok")
    for name, target, secs in rows:
        ok = "" if target is None else ("yes" if secs < target else "NO")
        print(f"{name:<40} {target if target else '':>9} {secs:>8.3f}  {ok}")


if __name__ == "__main__":
    main()
