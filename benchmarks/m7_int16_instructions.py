"""Instructions one inference of the int16 (16x8) test models executes on a Cortex-M7 under
qemu-arm, original and streamed for CMSIS-NN on the Cortex-M, in TFLM built for the Cortex-M7
with the CMSIS-NN kernels (tinyseg_run, TFLM's cortex_m_qemu target).

QEMU runs one instruction per translated block (-one-insn-per-tb) and logs every block it executes
(-d nochain,exec), so the log's "Trace" lines count the instructions executed. One inference is the
difference between a run of two inferences and a run of one (model loading, semihosting file I/O
and the interpreter's setup cancel). Instructions, not cycles: QEMU models no pipeline or memory.

usage: python benchmarks/m7_int16_instructions.py --tflm-dir DIR
DIR: a TFLM 90b983c checkout with its downloads (gcc_embedded, cmsis, cmsis_nn) and TinySeg
installed (`tinyseg tflm install --tflm-dir DIR`); the runner is built in DIR/gen (reusing its objects).
Needs arm-none-eabi-g++ and qemu-arm on PATH (about 4 minutes on two cores with microlite built).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "tflm_e2e"))

import build_e2e  # noqa: E402
import synth  # noqa: E402

from tinyseg_plugin.checks.verify import random_inputs  # noqa: E402
from tinyseg_plugin.ir import modelio  # noqa: E402
from tinyseg_plugin.ir.graph import build_graph  # noqa: E402
from tinyseg_plugin.transforms import stream_search  # noqa: E402

MODELS = {
    "int16_stages_chain": synth.int16_stages_chain,
    "int16_unet_chain": synth.int16_unet_chain,
    "se_seg_int16": lambda: synth.se_seg(dtype="INT16"),
}


def instructions(exe: Path, model: Path, inputs: bytes, batches: int, work: Path) -> int:
    """Instructions of one tinyseg_run run of `batches` inferences under qemu-arm."""
    for src, name in ((exe, "tinyseg_run"), (model, "model.tflite")):
        (work / name).unlink(missing_ok=True)
        (work / name).symlink_to(src.resolve())
    (work / "in.bin").write_bytes(inputs * batches)
    qemu = [*build_e2e.QEMU_M7, "-one-insn-per-tb", "-d", "nochain,exec", "-D", "/dev/stderr"]
    run = [*qemu, "./tinyseg_run", "model.tflite", "in.bin", "out.bin", "--batches", str(batches)]
    with subprocess.Popen(run, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as p:
        count = subprocess.run(
            ["grep", "-c", "^Trace"], stdin=p.stderr, capture_output=True, text=True, check=False
        )
        p.wait()
    if p.returncode != 0:
        raise SystemExit(f"m7_int16_instructions: tinyseg_run failed on {model.name}")
    return int(count.stdout.strip() or 0)


def per_inference(exe: Path, model: Path, inputs: bytes, work: Path) -> int:
    return instructions(exe, model, inputs, 2, work) - instructions(exe, model, inputs, 1, work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tflm-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    absent = [t for t in ("arm-none-eabi-g++", "qemu-arm", "grep") if shutil.which(t) is None]
    if absent:
        print(f"m7_int16_instructions: install {', '.join(absent)} (not on PATH)", file=sys.stderr)
        return 2
    if not (args.tflm_dir / "tensorflow/lite/micro/kernels/tinyseg").is_dir():
        print(
            f"m7_int16_instructions: {args.tflm_dir} is not a TFLM tree with TinySeg installed "
            "(run `tinyseg tflm install --tflm-dir DIR` first)",
            file=sys.stderr,
        )
        return 2
    try:
        exe = build_e2e.build(args.tflm_dir, "cmsis_nn", target=build_e2e.CORTEX_M7)
    except build_e2e.BuildError as exc:
        print(f"m7_int16_instructions: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print("| model | original | streamed | streamed / original |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, make in MODELS.items():
            original = work / f"{name}.tflite"
            modelio.save_model(make(), original)
            g = build_graph(modelio.load_model(original))
            choice = stream_search.choose_streaming(g, "cmsis-nn", "cortex-m", kernel_only=True)
            streamed = work / f"{name}_streamed.tflite"
            modelio.save_model(choice.streamed.graph.model, streamed)
            data = b"".join(a.tobytes() for a in random_inputs(original.read_bytes(), 0))
            a = per_inference(exe, original, data, work)
            b = per_inference(exe, streamed, data, work)
            print(f"| {name} | {a:,} | {b:,} | {b / a:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
