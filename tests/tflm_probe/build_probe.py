"""Build and run arena_probe against a local TFLM checkout.

Why: the arena figures of the real TFLM interpreter (reference or CMSIS-NN
kernels, on the host or on a Cortex-M7 under qemu-arm) are the ground truth our
own memory planner is checked against. The checkout lives outside this repo
(its path comes from the caller, usually $TFLM_DIR) and must already hold its
third-party downloads: nothing here downloads anything.

Command line:
    python tests/tflm_probe/build_probe.py --tflm "$TFLM_DIR" \
        --kernels cmsis_nn --target cortex_m7 MODEL.tflite [MODEL.tflite ...]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tinyseg_plugin.checks import real_kernels

KERNELS = ("reference", "cmsis_nn")
TARGETS = ("host", "cortex_m7")
PROBE_SOURCE = Path(__file__).resolve().with_name("arena_probe.cc")
MAKEFILE = "tensorflow/lite/micro/tools/make/Makefile"
DOWNLOADS = Path("tensorflow/lite/micro/tools/make/downloads")
QEMU = "qemu-arm"
QEMU_CPU = "cortex-m7"
# As the real-kernel check builds TFLM (release_with_logs: NDEBUG, the same arena figures), so
# that its build and the installed copies of the tests reuse these objects.
BUILD_TYPE = real_kernels.BUILD_TYPE


class ProbeError(RuntimeError):
    """A probe could not be built or run; the message says what to fix."""


class ProbeUnavailable(ProbeError):
    """What the build needs is not on this machine (checkout, downloads, tools): a reason to skip,
    where any other ProbeError (a failing compile or link) is a failure."""


@dataclass(frozen=True)
class BuildFlags:
    """The compiler and flags TFLM's Makefile uses for one configuration."""

    cxx: list[str]
    cxxflags: list[str]
    includes: list[str]
    ldflags: list[str]
    libs: list[str]
    library: Path


def required_downloads(kernels: str, target: str) -> list[str]:
    """Folders under downloads/ that the Makefile would otherwise fetch."""
    needed = ["flatbuffers", "gemmlowp", "ruy", "kissfft", "pigweed"]
    if kernels == "cmsis_nn":
        needed += ["cmsis", "cmsis_nn"]
    if target == "cortex_m7":
        # The cortex_m_qemu makefile downloads a toolchain unless this folder
        # exists; an empty one makes it use arm-none-eabi-* from PATH.
        needed.append("gcc_embedded")
    return needed


def make_command(kernels: str, target: str) -> list[str]:
    """The TFLM make invocation for one kernels/target pair."""
    if kernels not in KERNELS:
        raise ProbeError(f"kernels must be one of {KERNELS}, not {kernels!r}")
    if target not in TARGETS:
        raise ProbeError(f"target must be one of {TARGETS}, not {target!r}")
    cmd = [
        "make",
        "-f",
        MAKEFILE,
        f"BUILD_TYPE={BUILD_TYPE}",
        real_kernels.NO_SIGNAL,
    ]  # the build every test and the real-kernel check share
    if kernels == "cmsis_nn":
        cmd.append("OPTIMIZED_KERNEL_DIR=cmsis_nn")
    if target == "cortex_m7":
        cmd += ["TARGET=cortex_m_qemu", f"TARGET_ARCH={QEMU_CPU}"]
    return cmd


def _make_env() -> dict[str, str]:
    """PATH with this interpreter first: TFLM's Makefile runs python3 with numpy and PIL."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def check_checkout(tflm_dir: Path, kernels: str, target: str) -> None:
    """Raise ProbeError unless the checkout and tools for this build are present."""
    if not (tflm_dir / MAKEFILE).is_file():
        raise ProbeUnavailable(f"{tflm_dir} is not a TFLM checkout (no {MAKEFILE})")
    missing = [
        d for d in required_downloads(kernels, target) if not (tflm_dir / DOWNLOADS / d).is_dir()
    ]
    if missing:
        raise ProbeUnavailable(
            f"TFLM checkout {tflm_dir} lacks third-party downloads {missing} under {DOWNLOADS}; "
            "place them there by hand (this builder never downloads)"
        )
    tools = ["make", "g++"]
    if target == "cortex_m7":
        tools = ["make", "arm-none-eabi-g++", QEMU]
    absent = [t for t in tools if shutil.which(t) is None]
    if absent:
        raise ProbeUnavailable(f"tools not on PATH: {absent}")


def _run(cmd: list[str], cwd: Path, what: str) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=_make_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ProbeError(f"{what} failed ({shlex.join(cmd)}):\n{tail}")
    return proc.stdout


def query_flags(tflm_dir: Path, kernels: str, target: str) -> BuildFlags:
    """Ask TFLM's Makefile (its print-VAR rule) for the flags it builds tests with."""
    names = ["CXX", "CXXFLAGS", "INCLUDES", "LDFLAGS", "MICROLITE_LIBS", "MICROLITE_LIB_PATH"]
    out = _run(
        make_command(kernels, target) + [f"print-{n}" for n in names], tflm_dir, "make print"
    )
    values: dict[str, str] = {}
    for line in out.splitlines():
        name, sep, value = line.partition("=")
        if sep and name in names and name not in values:
            values[name] = value
    if set(values) != set(names):
        raise ProbeError(f"could not read {sorted(set(names) - set(values))} from TFLM's Makefile")
    return BuildFlags(
        cxx=shlex.split(values["CXX"]),
        cxxflags=shlex.split(values["CXXFLAGS"]),
        includes=shlex.split(values["INCLUDES"]),
        ldflags=shlex.split(values["LDFLAGS"]),
        libs=shlex.split(values["MICROLITE_LIBS"]),
        library=tflm_dir / values["MICROLITE_LIB_PATH"].strip(),
    )


def build_probe(tflm_dir: Path, kernels: str, target: str) -> Path:
    """Build TFLM's microlite library for kernels/target, then the probe; return the executable."""
    tflm_dir = Path(tflm_dir).resolve()
    make_command(kernels, target)  # validates the names
    check_checkout(tflm_dir, kernels, target)
    _run(make_command(kernels, target) + ["microlite", "-j2"], tflm_dir, "building TFLM microlite")
    flags = query_flags(tflm_dir, kernels, target)
    if not flags.library.is_file():
        raise ProbeError(f"TFLM build did not produce {flags.library}")
    out_dir = tflm_dir / "gen" / "arena_probe" / f"{target}_{kernels}"
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / "arena_probe"
    newest_input = max(PROBE_SOURCE.stat().st_mtime, flags.library.stat().st_mtime)
    if exe.is_file() and exe.stat().st_mtime >= newest_input:
        return exe
    cmd = (
        flags.cxx
        + flags.cxxflags
        + [f'-DARENA_PROBE_KERNELS="{kernels}"']
        + flags.includes
        + ["-o", str(exe), str(PROBE_SOURCE), str(flags.library)]
        + flags.ldflags
        + flags.libs
    )
    _run(cmd, tflm_dir, "compiling arena_probe")
    return exe


def probe_command(exe: Path, model_path: Path, target: str) -> list[str]:
    """How to start the probe: directly on the host, under qemu-arm for Cortex-M7."""
    cmd = [str(exe), str(Path(model_path).resolve())]
    if target == "cortex_m7":
        return [QEMU, "-cpu", QEMU_CPU] + cmd
    if target != "host":
        raise ProbeError(f"target must be one of {TARGETS}, not {target!r}")
    return cmd


def parse_probe_output(text: str) -> dict:
    """Turn the probe's lines into a dict: ints for head/tail/total and the rest in lists."""
    result: dict = {"alloc": {}, "buffers": [], "scratch": [], "nodes": [], "warnings": []}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        key = parts[0]
        if key in ("model", "kernels"):
            result[key] = parts[1] if len(parts) > 1 else ""
        elif key == "alloc" and len(parts) == 5:
            result["alloc"][parts[1]] = {
                "requested": int(parts[2]),
                "used": int(parts[3]),
                "count": int(parts[4]),
            }
        elif key == "buffer" and len(parts) == 9:
            result["buffers"].append(
                {
                    "index": int(parts[1]),
                    "kind": parts[2],
                    "owner": (parts[3], parts[4]),
                    "size": int(parts[5]),
                    "first": int(parts[6]),
                    "last": int(parts[7]),
                    "offset": int(parts[8]),
                }
            )
        elif key == "scratch" and len(parts) == 4:
            result["scratch"].append(
                {"node": int(parts[1]), "op": parts[2], "bytes": int(parts[3])}
            )
        elif key == "node" and len(parts) == 3:
            result["nodes"].append(parts[2])
        elif key == "warning":
            result["warnings"].append(line)
        elif len(parts) == 2 and parts[1].isdigit():
            result[key] = int(parts[1])
    for needed in ("head", "tail", "total"):
        if needed not in result:
            raise ProbeError(f"probe output has no '{needed}' line:\n{text[-2000:]}")
    return result


def run_probe(exe: Path, model_path: Path, target: str, timeout: float = 600.0) -> dict:
    """Run a built probe on one model and return its figures (head, tail, total, ...)."""
    cmd = probe_command(exe, model_path, target)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ProbeError(f"probe timed out after {timeout} s: {shlex.join(cmd)}") from exc
    if proc.returncode != 0:
        raise ProbeError(
            f"probe failed ({proc.returncode}): {shlex.join(cmd)}\n{proc.stderr.strip()[-2000:]}"
        )
    return parse_probe_output(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    """Build the probe for one configuration and print each model's raw probe output."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tflm",
        type=Path,
        default=os.environ.get("TFLM_DIR"),
        help="TFLM checkout (default $TFLM_DIR)",
    )
    parser.add_argument("--kernels", choices=KERNELS, default="reference")
    parser.add_argument("--target", choices=TARGETS, default="host")
    parser.add_argument("models", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.tflm is None:
        print("build_probe: give --tflm or set TFLM_DIR", file=sys.stderr)
        return 2
    try:
        exe = build_probe(args.tflm, args.kernels, args.target)
        for model in args.models:
            res = run_probe(exe, model, args.target)
            print(
                f"{model.name} {args.target} {args.kernels}: head {res['head']} tail {res['tail']} total {res['total']}"
            )
    except ProbeError as exc:
        print(f"build_probe: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
