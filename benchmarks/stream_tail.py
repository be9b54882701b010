"""What the tail of a streamed model holds: per StreamChain operator, the parts of its persistent
block (memory/kernels/tinyseg.py stream_chain_parts: tensor records, stage records, row-map
edges, SpillStreams, the schedule's int32 arrays, per-channel multipliers and shifts, lookup
tables), then the whole tail by TFLM's parts (the planner's estimate, checked against real builds
by tests/test_tflm_runtime.py).

Run: python benchmarks/stream_tail.py [MODEL.tflite] [--target min|SIZE] [--stream-io]
     [--build-profile host64|cortex-m]
(default: the bundled Tiny U-Net, --target min, cortex-m)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


def main() -> int:
    from tinyseg_plugin.contract import customops
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.memory.kernels.tinyseg import stream_chain_parts
    from tinyseg_plugin.pipeline import target_fields
    from tinyseg_plugin.transforms.optimizer import Options, search_plans

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "model", nargs="?", type=Path, default=ROOT / "examples" / "models" / "tiny_unet.tflite"
    )
    ap.add_argument("--target", default="min")
    ap.add_argument("--stream-io", action="store_true")
    ap.add_argument("--build-profile", default="cortex-m", choices=("host64", "cortex-m"))
    args = ap.parse_args()
    o = Options(
        build_profile=args.build_profile, stream_io=args.stream_io, **target_fields(args.target)
    )
    r = search_plans(build_graph(load_model(str(args.model))), o)
    chains = [op for op in r.graph.operators if op.opcode == customops.STREAM_CHAIN]
    parts = [stream_chain_parts(r.graph, op) for op in chains]
    names = list(parts[0]) if parts else []
    print(
        f"{args.model.name}, --target {args.target}{' --stream-io' if args.stream_io else ''}, "
        f"{args.build_profile}: head {r.plan.head:,} B, tail {r.plan.tail.total:,} B"
    )
    print("| chain | stages | " + " | ".join(names) + " | block |")
    print("|---|---:|" + "---:|" * (len(names) + 1))
    total = dict.fromkeys(names, 0)
    for k, (op, p) in enumerate(zip(chains, parts)):
        stages = len(customops.decode(op, r.graph.memo.decoded).stages)
        print(
            f"| {k} | {stages} | "
            + " | ".join(f"{p[n]:,}" for n in names)
            + f" | {sum(p.values()):,} |"
        )
        for n in names:
            total[n] += p[n]
    print(
        "| all | | " + " | ".join(f"{total[n]:,}" for n in names) + f" | {sum(total.values()):,} |"
    )
    t = r.plan.tail
    print(
        "tail: "
        + ", ".join(
            f"{n} {getattr(t, n):,}"
            for n in (
                "eval_tensors",
                "node_registrations",
                "io_tensors",
                "kernel_data",
                "scratch_handles",
                "fixed",
            )
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
