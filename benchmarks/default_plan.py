"""What a user gets without options and with `--target min`, on each board given: the written
plan's head, bytes through storage and flash bytes written per inference, modelled latency beside
the original's, the erases the board's erase worker hides, and whether the written model is
bit-identical to the original in TFLM (the tflite-micro wheel; --unverified: planner figures).

Run: python benchmarks/default_plan.py [MODEL.tflite...] [--board NAME]... [--unverified]
(default: the bundled Tiny U-Net on the generic and nicla-vision boards)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

OPTIONS = ("no --target", "--target min")


def main() -> int:
    from tinyseg_plugin import pipeline
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.transforms.optimizer import Options

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--board", action="append", help="a preset or board file (repeatable)")
    ap.add_argument("--unverified", action="store_true", help="planner figures only (faster)")
    args = ap.parse_args()
    models = args.models or [ROOT / "examples" / "models" / "tiny_unet.tflite"]
    boards = [load_board(b) for b in (args.board or ["generic", "nicla-vision"])]
    print(
        f"{'model':<16} {'board':<14} {'option':<13} {'head B':>10} {'moved B':>10} "
        f"{'flash B':>9} {'ms':>9} {'original ms':>11} {'hidden ms':>9} {'verified':>8} {'CPU s':>6}"
    )
    for path in models:
        data = path.read_bytes()
        for board in boards:
            for option in OPTIONS:
                o = Options(smallest=option == "--target min")
                run = pipeline.Run(o, runs=None if args.unverified else 3, board=board)
                run.nearby = False
                c0 = time.process_time()
                out = pipeline.optimize(data, run, path.name)
                cpu = time.process_time() - c0
                r, c = out.result, out.cost
                t = r.traffic
                hidden = c.worker.hidden_s * 1e3 if c is not None and c.worker else 0.0
                v = out.verification
                ok = "-" if v is None else ("yes" if v.identical else "NO")
                ms = "-" if c is None else f"{c.latency_s * 1e3:,.1f}"
                orig = "-" if c is None else f"{c.compute_s * 1e3:,.1f}"  # the input's compute
                flash = 0 if c is None else c.flash_bytes_written
                print(
                    f"{path.stem:<16} {board.name:<14} {option:<13} {r.plan.head:>10,} "
                    f"{t.written + t.read:>10,} {flash:>9,} {ms:>9} {orig:>11} "
                    f"{hidden:>9,.1f} {ok:>8} {cpu:>6.1f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
