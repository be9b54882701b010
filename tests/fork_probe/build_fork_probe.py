"""Build the Arduino_TensorFlowLite library's TFLM (2023-02) on the host with
arena_probe_2023.cc, to check the `arduino` runtime profile against the tree itself.

Why a build of our own: that library has no make or CMake build (arduino-cli compiles
every .cpp/.c under src/ for a board). Here the same files are compiled with the host's
g++/gcc, with the defines the library relies on (ARDUINO: its kernels' registration
headers and kernel_util; CMSIS_NN: the optimized kernels under kernels/cmsis_nn replace the
reference ones, as on the board) and src/ as the include root. CMSIS-NN's C sources build
for x86 without ARM_MATH_DSP, so scratch that depends on DSP is the plain-C figure
(the profile is compared with dsp=False). src/peripherals (Nano 33 BLE drivers) is left out.
-O0: the probe only allocates (AllocateTensors, no Invoke). Each C++ source is compiled with a
precompiled header of the flatbuffers schema (`-include`), which is most of what the compiler reads
for each: a third of the time per source, and the same code (the probe's figures do not depend on
how its objects were compiled).

    python tests/fork_probe/build_fork_probe.py LIBRARY_SRC BUILD_DIR   # prints the probe's path
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().with_name("arena_probe_2023.cc")
DEFINES = ["-DTF_LITE_STATIC_MEMORY", "-DTF_LITE_DISABLE_X86_NEON", "-DARDUINO", "-DCMSIS_NN"]
CXX_ONLY = [
    "-fno-exceptions",
    "-fno-rtti",
    "-fno-threadsafe-statics",
]  # as TFLM builds (placement new needs it)
SKIP = ("/peripherals/", "/test_over_serial/", "/kissfft/tools/", "/examples/")


class ProbeError(RuntimeError):
    """The build failed; the message has the reason."""


def sources(src: Path) -> list[Path]:
    return sorted(
        p
        for p in src.rglob("*")
        if p.suffix in (".cpp", ".c") and not any(s in str(p) for s in SKIP)
    )


def build_arduino_probe(src: Path, build: Path, jobs: int = 2) -> Path:
    for tool in ("g++", "gcc", "make", "ar"):
        if shutil.which(tool) is None:
            raise ProbeError(f"{tool} not on PATH")
    if not (src / "tensorflow" / "lite" / "micro" / "all_ops_resolver.h").is_file():
        raise ProbeError(
            f"{src} is not the Arduino library's src/ (no tensorflow/lite/micro/all_ops_resolver.h)"
        )
    build.mkdir(parents=True, exist_ok=True)
    cxx = f"g++ -std=gnu++14 -O0 -w {' '.join(DEFINES + CXX_ONLY)} -I{src}"
    header = build / "pch" / "schema.h"
    header.parent.mkdir(exist_ok=True)
    text = '#include "tensorflow/lite/schema/schema_generated.h"\n'
    if not header.is_file() or header.read_text() != text:  # its time decides what make redoes
        header.write_text(text)
    objs = []
    rules = [f"{header}.gch: {header}\n\t@{cxx} -x c++-header {header} -o $@\n"]
    for s in sources(src):
        o = build / "obj" / (re.sub(r"[^A-Za-z0-9_.]", "_", str(s.relative_to(src))) + ".o")
        objs.append(o)
        if s.suffix == ".cpp":
            cmd, deps = f"{cxx} -include {header} -c {s} -o {o}", f"{s} {header}.gch"
        else:
            cmd = f"gcc -std=gnu11 -O0 -w {' '.join(DEFINES)} -I{src} -I{src}/third_party/cmsis_nn/Include -c {s} -o {o}"
            deps = str(s)
        rules.append(f"{o}: {deps}\n\t@mkdir -p {o.parent}\n\t@{cmd}\n")
    exe = build / "arena_probe_2023"
    lib = build / "libtflm_arduino.a"
    mk = (
        f"all: {exe}\n{lib}: {' '.join(map(str, objs))}\n\t@rm -f $@\n\t@ar rcs $@ $^\n"
        f"{exe}: {PROBE} {lib}\n\t@{cxx} {PROBE} {lib} -lm -o $@\n" + "".join(rules)
    )
    # scripts/test.sh starts this build in the background when the suite starts; the test that
    # needs it waits here for that build (make then finds everything done) rather than racing it.
    with open(build / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (build / "Makefile").write_text(mk)
        proc = subprocess.run(
            ["make", "-f", str(build / "Makefile"), f"-j{jobs}"],
            cwd=build,
            capture_output=True,
            text=True,
            timeout=7200,
        )
    if proc.returncode != 0:
        raise ProbeError(
            "host build of the Arduino library failed:\n" + (proc.stdout + proc.stderr)[-4000:]
        )
    return exe


def run_probe(exe: Path, model: Path) -> dict[str, int]:
    proc = subprocess.run([str(exe), str(model)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise ProbeError(f"{exe.name} {model.name}: {proc.stderr.strip()}")
    out = {}
    for line in proc.stdout.splitlines():
        k, _, v = line.partition(" ")
        if v.strip().isdigit():
            out[k] = int(v)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        sys.exit(2)
    try:
        print(build_arduino_probe(Path(sys.argv[1]), Path(sys.argv[2])))
    except ProbeError as exc:
        print(f"build_fork_probe: {exc}", file=sys.stderr)
        sys.exit(1)
