"""What streaming costs in compute: host instructions of one inference of the original and
of the streamed model, counted by valgrind (callgrind) in the real-kernel runner (tflm_ops/tools/
tinyseg_run.cc built against a TFLM tree patched by `tinyseg tflm install`), and the multiply-
accumulates of both (the same by construction: a StreamChain computes every output row once;
the table shows the count from each graph).

Instruction counts include the runner's start-up (reading the model, AllocateTensors), the same
for both; the streamed model's extra work is the band bookkeeping, the ring moves and the row
streams' codec.

Run: python benchmarks/stream_overhead.py MODEL.tflite... --tflm-dir DIR   (or TFLM_DIR set)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.checks.verify import arena_for, random_inputs
from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir import modelio
from tinyseg_plugin.ir.graph import Graph, build_graph
from tinyseg_plugin.transforms.stream_search import choose_streaming

MAC_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED")


def macs(graph: Graph) -> int:
    """Multiply-accumulates of the convolutions, from each operator's shapes (a StreamChain's from
    its stages: the same formula over the body's tensors)."""
    total = 0
    for op in graph.operators:
        if op.opcode == customops.STREAM_CHAIN:
            o = customops.decode(op)
            shapes = [
                graph.tensors[t].shape if t >= 0 else () for t in list(op.inputs) + list(op.outputs)
            ]
            shapes += [t.shape for t in o.tensors]
            for st in o.stages:
                total += _op_macs(
                    st.op, [shapes[i] if i >= 0 else () for i in st.inputs], shapes[st.outputs[0]]
                )
        else:
            total += _op_macs(
                op.opcode,
                [graph.tensors[t].shape if t >= 0 else () for t in op.inputs],
                graph.tensors[op.outputs[0]].shape if op.outputs else (),
            )
    return total


def _op_macs(name: str, inputs: list, out) -> int:
    if name not in MAC_OPS or not out:
        return 0
    if name == "TRANSPOSE_CONV":
        filt, x = inputs[1], inputs[2]
        return (
            int(np.prod(x)) * filt[0] * filt[1] * filt[2]
        )  # every input element meets kh x kw x C_out
    filt = inputs[1]
    if name == "DEPTHWISE_CONV_2D":
        return int(np.prod(out)) * filt[1] * filt[2]
    return int(np.prod(out)) * int(np.prod(filt[1:]))


def instructions(exe: Path, model: Path, inputs: Path, arena: int) -> int:
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={d}/cg.out",
                str(exe),
                str(model),
                str(inputs),
                f"{d}/out.bin",
                "--arena",
                str(arena),
            ],
            capture_output=True,
            text=True,
            timeout=3600,
        )
    if p.returncode != 0:
        raise SystemExit(f"valgrind failed on {model.name}: {p.stderr.strip().splitlines()[-1:]}")
    m = re.search(r"Collected\s*:\s*(\d+)", p.stderr)
    if m is None:
        raise SystemExit(f"no instruction count from valgrind on {model.name}")
    return int(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--tflm-dir", default=None)
    args = ap.parse_args()
    tflm = real_kernels.resolve_tflm_dir(args.tflm_dir)
    if tflm is None:
        print(
            "stream_overhead.py: give --tflm-dir or set TFLM_DIR (a TFLM checkout with its downloads)",
            file=sys.stderr,
        )
        return 2
    exe = real_kernels.prepare(tflm)
    print(
        f"{'model':<28} {'MACs':>13} {'streamed MACs':>13} {'instructions':>15} {'streamed':>15} {'overhead':>9}"
    )
    with tempfile.TemporaryDirectory() as d:
        for m in args.models:
            g = build_graph(modelio.load_model(m))
            choice = choose_streaming(g, kernel_only=True)
            if choice.streamed is None:
                print(f"{m.name[:28]:<28} (no chain lowers the head)")
                continue
            streamed = Path(d) / f"{m.stem}.streamed.tflite"
            modelio.save_model(choice.streamed.graph.model, streamed)
            inputs = Path(d) / f"{m.stem}.in"
            inputs.write_bytes(
                b"".join(a.tobytes() for a in random_inputs(modelio.read_model_bytes(m), 0))
            )
            arena = arena_for(g)
            a = instructions(exe, m, inputs, arena)
            b = instructions(exe, streamed, inputs, arena)
            print(
                f"{m.name[:28]:<28} {macs(g):>13,} {macs(choice.streamed.graph):>13,} {a:>15,} {b:>15,} "
                f"{100.0 * (b - a) / a:>8.1f}%"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
