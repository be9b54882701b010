"""How long `--plot` takes next to the analysis it draws (issue target: under 2 s on ResUNet-a).

    python benchmarks/plot_speed.py MODEL.tflite [MODEL.tflite ...]
    python benchmarks/plot_speed.py --synth        # synthetic U-Nets when the big models are not built

Prints one row per model: operators, buffers, seconds to read and analyse the model (one run) and
for the PNG (best of --repeat runs), both as CPU time of this process so that other load on the machine
counts less, and the PNG's size. The first PNG also pays for importing matplotlib (printed apart).
The models come from `python examples/models/build.py --all --out DIR` (needs TensorFlow).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import synth

    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.memory.analysis import analyze_graph
    from tinyseg_plugin.report.plots import plan_png

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("models", nargs="*", type=Path)
    p.add_argument(
        "--synth", action="store_true", help="also time synthetic large U-Nets (tests/synth.py)"
    )
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)
    cases = [
        (m.name, lambda m=m: build_graph(load_model(str(m)), name=str(m))) for m in args.models
    ]
    if args.synth or not cases:
        for depth in (3, 4):
            cases.append(
                (
                    f"synth random_unet(seed=7, depth {depth})",
                    lambda d=depth: build_graph(synth.random_unet(7, max_depth=d)),
                )
            )
        cases.append(("synth vnet_like(size=128)", lambda: build_graph(synth.vnet_like(size=128))))
    t0 = time.process_time()
    import matplotlib.pyplot  # noqa: F401  (once per process, like the CLI)

    print(f"importing matplotlib: {time.process_time() - t0:.2f} s CPU")
    print(
        f"{'model':<40} {'ops':>5} {'buffers':>8} {'analysis s':>11} {'plot s':>8} {'png KiB':>8}"
    )
    for name, make in cases:
        ta, a = _best(
            lambda: analyze_graph(make()), 1
        )  # read, graph, plan, analysis: what --plot adds to
        graph = a.graph
        tp, png = _best(lambda: plan_png(a, name), args.repeat)
        print(
            f"{name[:40]:<40} {len(graph.operators):>5} {len(a.plan.buffers):>8} {ta:>11.2f} {tp:>8.2f} "
            f"{len(png) / 1024:>8.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
