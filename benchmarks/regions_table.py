"""Where `tinyseg optimize --board` puts a plan's storage slots (memory/placement.py) and what
that costs (memory/cost.py), on two boards:

1. The Tiny U-Net on nicla-vision at --target 64KB: the head, the bytes each region holds, the
   bytes written to flash per inference, and the modelled latency beside the unspilled model's
   and beside the same plan with every slot in the spill region (the QSPI,
   the one region a board without free RAM has). The plan is verified bit-exact in TFLM (pipeline.optimize, 3 random inputs).
2. A YOLOv8n-class int8 model on esp32-s3-psram with the arena held to the internal SRAM's free
   bytes: the target is the SRAM's free bytes minus the plan's tail estimate (32-bit build),
   searched again while the tail grows. Printed: the plan (head, arena, PSRAM bytes) and its
   modelled latency beside "whole arena in PSRAM". That figure is an assumption, not a
   measurement: cost.py's compute (calibrated with tensors in on-chip SRAM) plus, for every
   operator, its activation inputs read once and its output written once at the PSRAM's
   bandwidth instead of the SRAM's. Kernels read some bytes more than once (convolution
   windows) and the cache catches some, so this is a rough lower bound of the slowdown.
   When no plan fits the SRAM, the smallest head found is printed instead.

Run: python benchmarks/regions_table.py [--unet FILE] [--yolo FILE...] [--unverified]
(defaults: examples/models/tiny_unet.tflite; /work/corpus/openmv_yolov8n_192.tflite)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

YOLO = Path("/work/corpus/openmv_yolov8n_192.tflite")
BUILD = "cortex-m"  # 32-bit firmware tail (ESP32-S3 and Cortex-M alike)


def _arena_in_psram_s(graph, board) -> float:
    """Extra seconds when every operator's activation inputs and output live in PSRAM (see the
    module docstring for what this leaves out)."""
    sram, psram = board.arena, board.region("psram")
    moved = 0
    for op in graph.operators:
        ids = [t for t in list(op.inputs) + list(op.outputs) if t >= 0]
        moved += sum(graph.tensors[t].nbytes for t in ids if not graph.tensors[t].is_constant)
    return moved / psram.read_bandwidth - moved / sram.read_bandwidth


def nicla(path: Path, runs: int | None) -> None:
    from tinyseg_plugin import pipeline
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.memory.cost import Traffic, estimate
    from tinyseg_plugin.transforms.optimizer import Options

    board = load_board("nicla-vision")
    data = path.read_bytes()
    graph = pipeline.load(data, path.name)
    run = pipeline.Run(Options(target_bytes=64 * 1024), runs=runs, board=board)
    out = pipeline.optimize(data, run, path.name, pipeline.load(data, path.name))
    c, r = out.cost, out.result
    bare = estimate(graph, Traffic(), board)
    one = estimate(graph, r.traffic, board)  # every slot in the spill region
    where = ", ".join(f"{x.region} {x.bytes_written:,} B" for x in c.regions) or "none"
    table = ", ".join(f"{i} = {n}" for i, n in enumerate(r.placement.names)) if r.placement else "-"
    print(f"{path.name} on nicla-vision, --target 64KB ({r.strategy or 'unchanged'}):")
    print(f"  head {r.plan.head:,} B; slots by region: {where}; regions: {table}")
    print(f"  flash bytes written per inference: {c.flash_bytes_written:,} B")
    print(
        f"  modelled latency {c.latency_s * 1e3:,.1f} ms vs unspilled {bare.latency_s * 1e3:,.1f} ms "
        f"(+{(c.latency_s / bare.latency_s - 1) * 100:.2f}%); every slot in {board.spill_region}: "
        f"{one.latency_s * 1e3:,.1f} ms, {one.flash_bytes_written:,} B written to flash"
    )
    v = out.verification
    print(
        f"  verified: {'bit-identical, ' + v.describe() if v and v.identical else 'no (--unverified)'}"
    )


def esp32(path: Path, runs: int | None) -> None:
    from tinyseg_plugin import pipeline
    from tinyseg_plugin.errors import TinySegError
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.memory.cost import Traffic, estimate
    from tinyseg_plugin.memory.planner import plan_graph
    from tinyseg_plugin.transforms.optimizer import Options

    board = load_board("esp32-s3-psram")
    free = board.arena.free
    data = path.read_bytes()
    graph = pipeline.load(data, path.name)
    first = plan_graph(graph, "reference", BUILD)
    print(
        f"{path.name} on esp32-s3-psram, arena in the {free:,} B of free internal SRAM "
        f"(input: head {first.head:,} B, arena {first.total:,} B):"
    )
    target, out, smallest = free - first.tail.total, None, None
    for _ in range(5):  # the tail grows with the chains a plan adds: search again below it
        o = Options(target_bytes=max(target, 1), build_profile=BUILD)
        try:
            out = pipeline.optimize(data, pipeline.Run(o, runs=runs, board=board), path.name)
        except TinySegError as exc:
            print(f"  refused: {exc}")
            return
        p = out.result.plan
        smallest = p.head if smallest is None else min(smallest, p.head)
        if p.total <= free or free - p.tail.total >= target:
            break
        target = free - p.tail.total
    bare = estimate(graph, Traffic(), board)
    in_psram = bare.latency_s + _arena_in_psram_s(graph, board)
    p, c = out.result.plan, out.cost
    if p.total > free:
        print(f"  no plan fits: smallest head found {smallest:,} B (arena {p.total:,} B)")
        print(f"  whole arena in PSRAM (assumption above): {in_psram * 1e3:,.1f} ms")
        return
    psram = sum(x.bytes_written for x in c.regions if x.region == "psram")
    print(
        f"  plan ({out.result.strategy}, --target {target:,} B): head {p.head:,} B, arena "
        f"{p.total:,} B; PSRAM holds {psram:,} B; {c.flash_bytes_written:,} B written to flash"
    )
    print(
        f"  modelled latency {c.latency_s * 1e3:,.1f} ms (compute {c.compute_s * 1e3:,.1f}, "
        f"storage {c.storage_s * 1e3:,.1f}) vs whole arena in PSRAM {in_psram * 1e3:,.1f} ms "
        f"(assumption above)"
    )
    v = out.verification
    print(
        f"  verified: {'bit-identical, ' + v.describe() if v and v.identical else 'no (--unverified)'}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unet", type=Path, default=ROOT / "examples" / "models" / "tiny_unet.tflite")
    ap.add_argument("--yolo", type=Path, nargs="*", default=[YOLO])
    ap.add_argument("--unverified", action="store_true", help="planner figures only (faster)")
    args = ap.parse_args()
    runs = None if args.unverified else 3
    nicla(args.unet, runs)
    for y in args.yolo:
        esp32(y, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
