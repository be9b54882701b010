"""The paper's Tables 3 and 4 on our models: original and optimized arena (TFLM-exact head,
estimated tail), reduction, bytes spilled per inference, optimizer wall time. The optimized model is
`tinyseg optimize --target min`'s (the smallest head); --no-stream: spilling and fusion alone, the
paper's passes.

Run: python benchmarks/optimize_table.py [MODEL_DIR] [--kernel-set NAME] [--no-stream] [--verify]
MODEL_DIR holds vnet2d.tflite, attention_unet.tflite, resunet_a.tflite
(build them with: python examples/models/build.py --all --out MODEL_DIR; needs the [models] extra).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tinyseg_plugin.checks.verify import verify  # noqa: E402
from tinyseg_plugin.ir.graph import build_graph  # noqa: E402
from tinyseg_plugin.ir.modelio import load_model  # noqa: E402
from tinyseg_plugin.transforms.optimizer import Options, search_plans  # noqa: E402

# The paper's peak memory (original -> optimized) for each model, Tables 3 and 4.
PAPER = {
    "tiny_unet": ("318.4 KB", "193.4 KB", 39.3),
    "vnet2d": ("1.35 MB", "1.09 MB", 19.3),
    "attention_unet": ("7.38 MB", "3.19 MB", 56.8),
    "resunet_a": ("21.16 MB", "12.78 MB", 39.6),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir", nargs="?", default=None)
    ap.add_argument("--kernel-set", default="reference", help="kernel set planned for")
    ap.add_argument("--no-stream", action="store_true", help="spilling and fusion alone")
    ap.add_argument(
        "--verify",
        action="store_true",
        help="also check each result bit-exact in TFLM (slow for big models)",
    )
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    paths = [root / "examples" / "models" / "tiny_unet.tflite"]
    if args.model_dir:
        paths += [
            Path(args.model_dir) / f"{n}.tflite" for n in ("vnet2d", "attention_unet", "resunet_a")
        ]
    print(
        f"{'model':<16} {'orig head':>11} {'orig total':>11} {'opt head':>11} {'opt total':>11} {'cut %':>6} "
        f"{'paper cut %':>11} {'spilled B/inf':>13} {'opt s':>6} {'verified':>8}"
    )
    for p in paths:
        if not p.exists():
            print(f"{p.stem:<16} (missing: {p})")
            continue
        g = build_graph(load_model(p))
        t = time.perf_counter()
        r = search_plans(
            g, Options(kernel_set=args.kernel_set, smallest=True, stream=not args.no_stream)
        )
        secs = time.perf_counter() - t
        cut = 100.0 * (r.original.head - r.plan.head) / r.original.head
        ok = "-"
        if args.verify:
            ok = "yes" if verify(g, r.graph, runs=1).identical else "NO"
        paper = PAPER.get(p.stem, ("", "", float("nan")))
        print(
            f"{p.stem:<16} {r.original.head:>11,} {r.original.total:>11,} {r.plan.head:>11,} {r.plan.total:>11,} "
            f"{cut:>6.1f} {paper[2]:>11.1f} {sum(s.bytes_moved for s in r.spills):>13,} {secs:>6.2f} {ok:>8}"
        )


if __name__ == "__main__":
    main()
