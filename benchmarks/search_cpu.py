"""CPU seconds of the optimizer's search alone (no verification, no writing) with and without a
target, on the models given; run it on two checkouts to compare what a change costs:

    python benchmarks/search_cpu.py --tree OLD_CHECKOUT MODEL...   # that checkout's package
    python benchmarks/search_cpu.py MODEL...                       # this one's

Targets: min (--target min; in a checkout without it, no target, which then meant the smallest
head), none (the default plan), and two scaled from 160 KB and 100 KB on the Tiny U-Net by the model's TFLM head
(as benchmarks/targets_table.py). Each figure is the best of ``--runs`` runs in this process.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

TARGETS = (160_000, 100_000)
TINY_UNET_HEAD = 307_200


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.memory.planner import plan_graph
    from tinyseg_plugin.transforms import optimizer
    from tinyseg_plugin.transforms.optimizer import Options

    # a checkout from before the search was named search_plans called it optimize
    search_plans = getattr(optimizer, "search_plans", None) or optimizer.optimize

    def options(target: int | str | None) -> Options:
        if target == "min":  # a checkout without --target min: its default was the smallest head
            return (
                Options(smallest=True) if "smallest" in Options.__dataclass_fields__ else Options()
            )
        return Options(target_bytes=target)

    print(f"{'model':<22} {'target B':>10} {'head':>11} {'CPU s':>7}")
    for path in args.models:
        original = plan_graph(build_graph(load_model(str(path)))).head
        for target in ["min", None] + [original * t // TINY_UNET_HEAD for t in TARGETS]:
            best = None
            for _ in range(args.runs):
                graph = build_graph(
                    load_model(str(path))
                )  # a fresh view: no memo from a run before
                c0 = time.process_time()
                r = search_plans(graph, options(target))
                cpu = time.process_time() - c0
                best = cpu if best is None else min(best, cpu)
            shown = "-" if target is None else target if target == "min" else f"{target:,}"
            print(f"{path.stem:<22} {shown:>10} {r.plan.head:>11,} {best:>7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
