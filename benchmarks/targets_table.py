"""What `tinyseg optimize --target` writes, beside what the smallest head and the spill strategy
alone would write: head, bytes moved through storage per inference and modelled latency on a
board (memory/cost.py; default: generic, a Cortex-M7 with QSPI flash for spills), for each model at two
targets scaled to its size (160 KB and 100 KB on the Tiny U-Net, whose TFLM head is 307,200 B)
and with no target (the default plan: no flash written, at most 1% more modelled latency). "Smallest
head" is --target min. Planner figures; `tinyseg optimize` verifies every plan it writes.

Run: python benchmarks/targets_table.py [MODEL.tflite...] [--kernel-set NAME] [--board NAME] [--unverified]
(default: the four example models of examples/models/)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

TARGETS = (160_000, 100_000)  # on the Tiny U-Net; other models: scaled by their head
TINY_UNET_HEAD = 307_200


def moved(out) -> int:
    r = out.result
    return sum(s.bytes_moved for s in r.spills) + r.stream_bytes


def main() -> int:
    from tinyseg_plugin import pipeline
    from tinyseg_plugin.errors import TinySegError
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.transforms.optimizer import Options

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--kernel-set", default="reference")
    ap.add_argument("--board", default="generic")
    ap.add_argument("--unverified", action="store_true", help="planner figures only (faster)")
    args = ap.parse_args()
    models = args.models or sorted((ROOT / "examples" / "models").glob("*.tflite"))
    runs = None if args.unverified else 3

    board = load_board(args.board)

    def opt(
        data: bytes, name: str, target: int | None, smallest: bool = False, **switches
    ) -> pipeline.Outcome:
        o = Options(kernel_set=args.kernel_set, target_bytes=target, smallest=smallest, **switches)
        run = pipeline.Run(o, runs=runs if not switches else None, board=board)
        return pipeline.optimize(data, run, name)

    def ms(out: pipeline.Outcome) -> str:
        return "-" if out.cost is None else f"{out.cost.latency_s * 1e3:,.0f}"

    print(
        f"{'model':<22} {'target B':>9} | {'spill only: head':>16} {'moved B':>10} {'ms':>6} | "
        f"{'smallest head':>13} {'moved B':>10} {'ms':>6} | {'written: head':>13} {'moved B':>10} "
        f"{'ms':>6} {'verified':>8} {'CPU s':>6}"
    )
    for path in models:
        data = path.read_bytes()
        free = opt(data, path.name, None, smallest=True)
        original = free.result.original.head
        for target in [original * t // TINY_UNET_HEAD for t in TARGETS] + [None]:
            c0 = time.process_time()
            try:
                out = opt(data, path.name, target)
            except TinySegError as exc:
                print(f"{path.stem:<22} {target or '-':>9} | refused: {exc}")
                continue
            cpu = time.process_time() - c0
            spill = opt(data, path.name, target, stream=False)
            v = out.verification
            verified = "-" if v is None else ("yes" if v.identical else "NO")
            print(
                f"{path.stem:<22} {target if target else '-':>9} | {spill.result.plan.head:>16,} "
                f"{moved(spill):>10,} {ms(spill):>6} | {free.result.plan.head:>13,} "
                f"{moved(free):>10,} {ms(free):>6} | {out.result.plan.head:>13,} {moved(out):>10,} "
                f"{ms(out):>6} {verified:>8} {cpu:>6.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
