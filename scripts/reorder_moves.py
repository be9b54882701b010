"""How much work the exact reorder search does on each model: operators, whether it finishes within
its budgets (else the greedy order is used), the moves it tried and the CPU they took, with the move
budget lifted so the figures show where each model would stop.

    python scripts/reorder_moves.py MODEL.tflite...
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.pipeline import load
from tinyseg_plugin.transforms.passes import reorder


def main(paths: list[str]) -> None:
    tried = [0]
    run = reorder._run

    def counted(*args):
        tried[0] += 1
        return run(*args)

    reorder._run = counted
    print(f"{'model':<44} {'ops':>5} {'finishes':>8} {'moves':>8} {'cpu s':>6} {'moves/s':>8}")
    for path in paths:
        try:
            graph = load(Path(path).read_bytes(), path)
        except TinySegError as exc:
            print(f"{Path(path).name:<44} refused: {exc}")
            continue
        tried[0] = 0
        t = time.process_time()
        order = reorder.min_peak_order(graph, lambda i: 0, move_budget=10**9)
        cpu = time.process_time() - t
        finishes = order is not None and tried[0] <= reorder.MOVE_BUDGET
        print(
            f"{Path(path).name[:44]:<44} {len(graph.operators):>5} {'yes' if finishes else 'no':>8} "
            f"{tried[0]:>8,} {cpu:>6.2f} {tried[0] / max(cpu, 1e-3):>8,.0f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
