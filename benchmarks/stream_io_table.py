"""What streaming the graph's input and output through row sources and sinks (`--stream-io`) buys:
per model and option, the head and the total (head + tail estimate) without and with it, the
head of the plan without it when its graph input and output are not counted (msf-CNN's way),
the bytes through storage per inference, the modelled latency on the board, and whether the
written model is bit-identical to the original (the fallback check in the tflite-micro wheel:
the lowered model; --unverified: planner figures).

Run: python benchmarks/stream_io_table.py [MODEL.tflite...] [--board NAME] [--unverified]
     [--build-profile host64|cortex-m]
(default: the bundled Tiny U-Net on the generic board)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

OPTIONS = ("no --target", "--target min")


def main() -> int:
    from tinyseg_plugin import pipeline
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.memory.planner import head_without_io
    from tinyseg_plugin.transforms.optimizer import Options

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--board", default="generic", help="a preset or board file")
    ap.add_argument("--build-profile", default="host64", choices=("host64", "cortex-m"))
    ap.add_argument("--unverified", action="store_true", help="planner figures only (faster)")
    args = ap.parse_args()
    models = args.models or [ROOT / "examples" / "models" / "tiny_unet.tflite"]
    board = load_board(args.board)
    print(
        "| model | option | head | total | head, I/O not counted | with --stream-io: head | "
        "total | moved B | ms | original ms | verified |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for path in models:
        data = path.read_bytes()
        for option in OPTIONS:
            outs = []
            for stream_io in (False, True):
                o = Options(
                    smallest=option == "--target min",
                    stream_io=stream_io,
                    build_profile=args.build_profile,
                )
                run = pipeline.Run(o, runs=None if args.unverified else 3, board=board)
                run.nearby = False
                outs.append(pipeline.optimize(data, run, path.name))
            plain, io = outs
            c, v = io.cost, io.verification
            t = io.result.traffic
            print(
                f"| {path.stem} | {option} | {plain.result.plan.head:,} | "
                f"{plain.result.plan.total:,} | {head_without_io(plain.result.plan):,} | "
                f"{io.result.plan.head:,} | {io.result.plan.total:,} | {t.written + t.read:,} | "
                f"{'-' if c is None else f'{c.latency_s * 1e3:,.1f}'} | "
                f"{'-' if c is None else f'{c.compute_s * 1e3:,.1f}'} | "
                f"{'-' if v is None else ('yes' if v.identical else 'NO')} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
