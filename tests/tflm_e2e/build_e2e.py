"""Build the shipped runner (tflm_ops/tools/tinyseg_run.cc, the real-kernel check's program) against
a TFLM checkout patched by ``tinyseg tflm install``, with the compiler and flags TFLM's own Makefile
uses, for the tests that run models end to end (with CMSIS-NN kernels too, which the check does not).

A thin wrapper over the shipped builder (tinyseg_plugin/checks/real_kernels.py): microlite, then the runner
linked against it. Nothing is downloaded; the checkout must hold its third-party
downloads already (as for TFLM's own tests).

    python tests/tflm_e2e/build_e2e.py --tflm "$TFLM_DIR" [--kernels cmsis_nn]   # prints the executable's path
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.errors import TinySegError

SOURCE = Path(__file__).resolve().parents[2] / "tflm_ops" / "tools" / "tinyseg_run.cc"
MAKEFILE = "tensorflow/lite/micro/tools/make/Makefile"
KERNELS = ("reference", "cmsis_nn")


class BuildError(RuntimeError):
    """The build failed; the message carries the command and the end of its output."""


def make_env() -> dict[str, str]:
    """TFLM's Makefile runs python3 (numpy, PIL) while it parses: put this interpreter first."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def run(cmd: list[str], cwd: Path, what: str, timeout: float = 3600) -> str:
    proc = subprocess.run(
        cmd, cwd=cwd, env=make_env(), capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise BuildError(f"{what} failed ({shlex.join(cmd)}):\n{tail}")
    return proc.stdout + proc.stderr


def make_args(kernels: str) -> list[str]:
    if kernels not in KERNELS:
        raise BuildError(f"kernels must be one of {KERNELS}, not {kernels!r}")
    return [f"BUILD_TYPE={real_kernels.BUILD_TYPE}", real_kernels.NO_SIGNAL] + (
        ["OPTIMIZED_KERNEL_DIR=cmsis_nn"] if kernels == "cmsis_nn" else []
    )


# make takes variable assignments among its goals: make(tflm, *CORTEX_M7, target). The runner built
# for it runs under qemu-arm (QEMU_M7 + [exe, args...]); its files go through semihosting.
CORTEX_M7 = ("TARGET=cortex_m_qemu", "TARGET_ARCH=cortex-m7")
QEMU_M7 = ("qemu-arm", "-cpu", "cortex-m7")


def make(
    tflm: Path, *targets: str, kernels: str = "reference", jobs: int = 2, timeout: float = 3600
) -> str:
    cmd = ["make", "-f", MAKEFILE, *make_args(kernels), *targets, f"-j{jobs}"]
    return run(cmd, tflm, f"make {' '.join(targets)}", timeout)


def flags(tflm: Path, kernels: str = "reference") -> dict[str, str]:
    make_args(kernels)
    try:
        return real_kernels.make_flags(Path(tflm), kernels)
    except TinySegError as exc:
        raise BuildError(str(exc)) from None


_BUILT: dict[tuple[Path, str, tuple[str, ...]], Path] = {}


def build(
    tflm: Path, kernels: str = "reference", jobs: int = 2, target: tuple[str, ...] = ()
) -> Path:
    """microlite (with the TinySeg kernels), then the runner; returns the executable.
    ``target``: TFLM make variables of another target, e.g. CORTEX_M7. Once per tree, kernel set
    and target in a process: the tests install into a tree once, then only run models, and each
    build costs about 18 CPU-s of make and compiling even when nothing changed."""
    tflm = Path(tflm).resolve()
    make_args(kernels)
    key = (tflm, kernels, tuple(target))
    if key in _BUILT and _BUILT[key].is_file():
        return _BUILT[key]
    make(
        tflm, *target, "microlite", kernels=kernels, jobs=jobs
    )  # here, for the full tail of a failing build
    name = "-".join(a.partition("=")[2] for a in target) or "host"
    exe = tflm / "gen" / "tinyseg_run" / name / kernels / "tinyseg_run"
    try:
        _BUILT[key] = real_kernels.build_runner(tflm, exe, SOURCE, kernels, jobs, target)
    except TinySegError as exc:
        raise BuildError(str(exc)) from None
    return _BUILT[key]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tflm", type=Path, default=os.environ.get("TFLM_DIR"), help="patched TFLM checkout"
    )
    parser.add_argument("--kernels", choices=KERNELS, default="reference")
    args = parser.parse_args(argv)
    if args.tflm is None:
        print("build_e2e: give --tflm or set TFLM_DIR", file=sys.stderr)
        return 2
    try:
        print(build(args.tflm, args.kernels))
    except (BuildError, OSError, subprocess.SubprocessError) as exc:
        print(f"build_e2e: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
