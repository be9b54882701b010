#!/usr/bin/env python3
"""What the stored-block check costs: CRC-32 alone, and the codec's Encode / DecodeAll of a 16 KB
activation-like int8 tensor (60 % one value, 1 KB blocks) with block checks on and off
(tflm_ops/tools/bench_crc.cc over tflm_ops/core).

Host: wall-clock ns per tensor byte (best effort on a shared machine) and x86-64 instructions per
byte counted by valgrind (callgrind, --toggle-collect on the case's function, as
benchmarks/stream_overhead.py and runtime_table.py count). Cortex-M7: Thumb-2 instructions per
byte, counted in qemu-system-arm (mps2-an500) run with -icount shift=0 (one instruction per
virtual ns) through SysTick calibrated on a loop of known length. Instructions, not cycles: the
M7 dual-issues and its flash has wait states, so on the board time per byte differs.

    python benchmarks/storage_crc.py [--build-dir DIR] [--no-m7] [--no-callgrind]

Needs cmake and a C++ compiler; valgrind for the instruction column, arm-none-eabi-g++ and
qemu-system-arm for the Cortex-M7 column (each column is left out, with a note, when its tool is
missing).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ("crc32", "encode_checked", "encode_unchecked", "decode_checked", "decode_unchecked")
CALLGRIND_REPS = 10


def build(src: Path, out: Path, *cmake_args: str) -> Path | None:
    """Configures and builds bench_crc; returns the binary, or None with the log's tail printed."""
    cfg = subprocess.run(
        [
            "cmake",
            "-S",
            str(src),
            "-B",
            str(out),
            "-DTINYSEG_FUZZ=OFF",
            "-DCMAKE_BUILD_TYPE=Release",
            *cmake_args,
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    if cfg.returncode == 0:
        cfg = subprocess.run(
            ["cmake", "--build", str(out), "-j2", "--target", "bench_crc"],
            check=False,
            capture_output=True,
            text=True,
        )
    if cfg.returncode != 0:
        print(
            f"storage_crc.py: building bench_crc in {out} failed:\n{cfg.stdout[-2000:]}{cfg.stderr[-2000:]}",
            file=sys.stderr,
        )
        return None
    for name in ("bench_crc", "bench_crc.elf"):
        if (out / name).exists():
            return out / name
    return None


def parse(text: str) -> dict[str, tuple[int, float]]:
    """'case bytes value' lines -> {case: (bytes, value)}."""
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in CASES:
            rows[parts[0]] = (int(parts[1]), float(parts[2]))
    return rows


def host_ns(exe: Path) -> dict[str, float]:
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600, check=True)
    return {k: v for k, (_, v) in parse(p.stdout).items()}


def host_instructions(exe: Path, nbytes: int) -> dict[str, float]:
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for case in CASES:
            p = subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    f"--toggle-collect=bench_{case}",
                    f"--callgrind-out-file={d}/cg.out",
                    str(exe),
                    case,
                    str(CALLGRIND_REPS),
                ],
                check=False,
                capture_output=True,
                text=True,
                timeout=600,
            )
            m = re.search(r"Collected\s*:\s*(\d+)", p.stderr)
            if p.returncode != 0 or m is None:
                raise SystemExit(
                    f"storage_crc.py: valgrind failed on {case}: {p.stderr.strip()[-300:]}"
                )
            out[case] = int(m.group(1)) / (CALLGRIND_REPS * nbytes)
    return out


def m7_instructions(elf: Path) -> dict[str, float]:
    p = subprocess.run(
        [
            "qemu-system-arm",
            "-M",
            "mps2-an500",
            "-display",
            "none",
            "-monitor",
            "none",
            "-serial",
            "none",
            "-semihosting-config",
            "enable=on,target=native",
            "-icount",
            "shift=0",
            "-kernel",
            str(elf),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    rows = parse(p.stdout)
    if p.returncode != 0 or set(rows) != set(CASES):
        raise SystemExit(
            f"storage_crc.py: bench_crc.elf in qemu failed: {p.stdout[-300:]}{p.stderr[-300:]}"
        )
    return {k: insns / nbytes for k, (nbytes, insns) in rows.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--build-dir",
        type=Path,
        default=ROOT / "build" / "storage_crc",
        help="where the host and Cortex-M7 builds go (default: build/storage_crc)",
    )
    ap.add_argument("--no-m7", action="store_true", help="skip the Cortex-M7 (QEMU) column")
    ap.add_argument("--no-callgrind", action="store_true", help="skip the host instruction column")
    args = ap.parse_args()
    if shutil.which("cmake") is None:
        print(
            "storage_crc.py: cmake not found; install cmake (scripts/install-native-deps.sh)",
            file=sys.stderr,
        )
        return 2
    src = ROOT / "tflm_ops"
    exe = build(src, args.build_dir / "host")
    if exe is None:
        return 1
    ns = host_ns(exe)
    nbytes = 16384
    notes = []
    x86: dict[str, float] = {}
    if args.no_callgrind:
        notes.append("host instructions: skipped (--no-callgrind)")
    elif shutil.which("valgrind") is None:
        notes.append("host instructions: valgrind not found")
    else:
        x86 = host_instructions(exe, nbytes)
    m7: dict[str, float] = {}
    if args.no_m7:
        notes.append("Cortex-M7: skipped (--no-m7)")
    elif shutil.which("arm-none-eabi-g++") is None or shutil.which("qemu-system-arm") is None:
        notes.append("Cortex-M7: arm-none-eabi-g++ or qemu-system-arm not found")
    else:
        elf = build(
            src,
            args.build_dir / "m7",
            f"-DCMAKE_TOOLCHAIN_FILE={src / 'cmake' / 'arm-none-eabi-cortex-m7.cmake'}",
        )
        if elf is None:
            return 1
        m7 = m7_instructions(elf)

    def cell(table: dict[str, float], key: str, fmt: str) -> str:
        return format(table[key], fmt) if key in table else "-"

    print(f"block check cost, per byte of a {nbytes:,} B int8 tensor (60 % one value, 1 KB blocks)")
    print(f"{'case':<34} {'host ns/B':>10} {'x86-64 instr/B':>15} {'Cortex-M7 instr/B':>18}")
    for case in CASES:
        print(
            f"{case:<34} {cell(ns, case, '.2f'):>10} {cell(x86, case, '.2f'):>15} {cell(m7, case, '.2f'):>18}"
        )
    for op in ("encode", "decode"):
        diff = {
            k: t[f"{op}_checked"] - t[f"{op}_unchecked"]
            for k, t in (("ns", ns), ("x86", x86), ("m7", m7))
            if f"{op}_checked" in t
        }
        print(
            f"{op + ': checks add':<34} {cell(diff, 'ns', '.2f'):>10} {cell(diff, 'x86', '.2f'):>15} "
            f"{cell(diff, 'm7', '.2f'):>18}"
        )
    if "crc32" in m7:
        print(
            f"(Cortex-M7 at 480 MHz and one instruction per cycle: CRC-32 ~{m7['crc32'] * 1024 / 480:.1f} us per KB,"
            " an estimate; STM32's CRC unit computes the same CRC in hardware)"
        )
    for n in notes:
        print(f"({n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
