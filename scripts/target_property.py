"""The looser-target property on real models: for each model, targets from its TFLM head down to the
smallest head the optimizer reaches; the bytes moved, the modelled latency and the flash bytes
written per inference must never fall as the target tightens, and every written plan is checked
bit-exact in the wheel (1 random input + 3 edge cases). Prints one line per model and target, and
`VIOLATION` lines where the property fails (exit 1).

    python scripts/target_property.py [--steps N] [--board NAME] MODEL.tflite...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tinyseg_plugin import pipeline
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.memory.boards import load_board
from tinyseg_plugin.transforms.optimizer import Options


def _moved(out: pipeline.Outcome) -> int:
    r = out.result
    return sum(s.bytes_moved for s in r.spills) + r.stream_bytes


def sweep(data: bytes, name: str, steps: int, board: str) -> list[tuple[int, tuple]] | str:
    def run(target: int | None, runs: int | None) -> pipeline.Outcome:
        o = Options(target_bytes=target, smallest=target is None)  # None: --target min
        run = pipeline.Run(o, runs=runs, board=load_board(board))
        run.nearby = False
        return pipeline.optimize(data, run, name)

    free = run(None, None)
    original, floor = free.result.original.head, free.result.plan.head
    if floor >= original:
        return "no pass lowers its head"
    targets = sorted({floor + (original - floor) * k // steps for k in range(steps)}, reverse=True)
    rows = []
    for t in targets:
        out = run(t, 1)
        if out.verification is not None and not out.verification.identical:
            return f"target {t:,}: the written plan is not bit-exact"
        rows.append((t, (_moved(out), out.cost.latency_s, out.cost.flash_bytes_written)))
    return rows


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--board", default="generic")
    args = p.parse_args(argv)
    bad = 0
    for path in args.models:
        name = Path(path).name
        try:
            rows = sweep(Path(path).read_bytes(), name, args.steps, args.board)
        except TinySegError as exc:
            print(f"{name}: refused: {exc}", flush=True)
            continue
        if isinstance(rows, str):
            print(f"{name}: {rows}", flush=True)
            bad += rows.endswith("bit-exact")
            continue
        for t, (moved, latency, written) in rows:
            print(
                f"{name}: target {t:>10,}  moved {moved:>10,}  latency {latency * 1e3:>9.1f} ms  "
                f"flash written {written:>10,}",
                flush=True,
            )
        for k, what in enumerate(("moved", "latency", "flash written")):
            column = [f[k] for _, f in rows]
            if column != sorted(column):
                print(
                    f"{name}: VIOLATION: {what} falls as the target tightens: {column}", flush=True
                )
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
