"""msf-CNN's three evaluation networks through `tinyseg optimize --stream-io`, beside msf-CNN's
published peaks: per network, the MACs (memory/cost.py's count), the original's head and its head
without the graph's input and output (msf-CNN's way of counting), and for the plan without a
target and with --target min its head, total (head + tail estimate), the bytes it moves through
storage per inference and writes to flash, the written model's MACs (a StreamChain computes each
row once: no recomputation) and whether the written model is bit-identical to the original (the
check in the tflite-micro wheel, 3 runs; --unverified: planner figures only).

The networks are built by examples/models/build.py (int8, batch unset) into --build-dir when
their files are missing.

Run: python benchmarks/msf_cnn_table.py [--build-dir DIR] [--unverified]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


@dataclass(frozen=True)
class Network:
    """One of msf-CNN's evaluation networks, its build.py name and msf-CNN's published figures:
    the smallest peak at a MAC overhead of at most 1.04x, and the smallest peak at any overhead
    with the overhead it costs (peaks without the network's input, in bytes)."""

    label: str
    model: str
    peak_104: int
    min_peak: int
    min_peak_macs: float


NETWORKS = (
    Network("MobileNetV2-w0.35-r144", "mbv2_w035_r144", 83_133, 8_560, 1.68),
    Network("MCUNetV2-vww-5fps-r80", "mcunetv2_vww_r80", 45_283, 15_368, 1.96),
    Network("MCUNet-320KB-ImageNet-r176", "mcunet_320kb_r176", 217_891, 51_164, 2.69),
)
OPTIONS = ("no --target", "--target min")


def graph_macs(graph) -> int:
    """memory/cost.py's MAC count over every operator, a StreamChain's over its stages."""
    from tinyseg_plugin.contract import customops
    from tinyseg_plugin.memory.cost import macs

    total = 0
    for op in graph.operators:
        outer = [graph.tensors[t].shape if t >= 0 else None for t in (*op.inputs, *op.outputs)]
        if op.opcode != customops.STREAM_CHAIN:
            total += macs(op.opcode, outer[: len(op.inputs)], outer[len(op.inputs) :])
            continue
        body = customops.decode(op)
        shapes = outer + [t.shape for t in body.tensors]
        for st in body.stages:
            pick = lambda ids: [shapes[i] if i >= 0 else None for i in ids]  # noqa: E731
            total += macs(st.op, pick(st.inputs), pick(st.outputs))
    return total


def model_file(build_dir: Path, name: str) -> Path:
    """The network's .tflite in ``build_dir``, built by build.py when missing."""
    path = build_dir / f"{name}_batch_unset.tflite"
    if not path.exists():
        cmd = [sys.executable, str(ROOT / "examples" / "models" / "build.py"), "--models", name]
        subprocess.run([*cmd, "--batch-unset", "--out", str(build_dir)], check=True)
    return path


def rows(net: Network, path: Path, runs: int | None) -> list[str]:
    """The network's two table rows (no target, --target min)."""
    from tinyseg_plugin import pipeline
    from tinyseg_plugin.memory.cost import op_macs
    from tinyseg_plugin.memory.planner import head_without_io
    from tinyseg_plugin.transforms.optimizer import Options

    data = path.read_bytes()
    graph = pipeline.load(data, path.name)
    original_macs = sum(op_macs(graph))
    lines = []
    for option in OPTIONS:
        run = pipeline.Run(Options(smallest=option == "--target min", stream_io=True), runs=runs)
        run.nearby = False
        out = pipeline.optimize(data, run, path.name, graph)
        r, v, t = out.result, out.verification, out.result.traffic
        written_macs = graph_macs(pipeline.load(out.data, path.name))
        lines.append(
            f"| {net.label} | {original_macs:,} | {r.original.head:,} | "
            f"{head_without_io(r.original):,} | {option} | {r.plan.head:,} | {r.plan.total:,} | "
            f"{t.written + t.read:,} | {t.written:,} | {written_macs:,} | "
            f"{'-' if v is None else ('yes' if v.identical else 'NO')} | {net.peak_104:,} | "
            f"{net.min_peak:,} @{net.min_peak_macs:.2f}x |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--build-dir",
        type=Path,
        default=Path("/tmp/tinyseg-msf-cnn"),
        help="where the networks' .tflite files are, or are built (default: %(default)s)",
    )
    ap.add_argument("--unverified", action="store_true", help="planner figures only (faster)")
    args = ap.parse_args()
    args.build_dir.mkdir(parents=True, exist_ok=True)
    print(
        "| network | MACs | head | head, I/O not counted | --stream-io | head | total | "
        "storage B | written B | MACs written | verified | msf-CNN peak at <=1.04x MACs | "
        "msf-CNN min peak |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|")
    from tinyseg_plugin.errors import TinySegError

    for net in NETWORKS:
        path = model_file(args.build_dir, net.model)
        try:
            for line in rows(net, path, None if args.unverified else 3):
                print(line, flush=True)
        except TinySegError as e:
            print(f"msf_cnn_table.py: {net.label}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
