#!/usr/bin/env python3
"""Add TinySeg (runtime core, Nicla Vision storage back-ends, TFLM kernels) to an Arduino_TensorFlowLite
library, so the sketches in this directory compile with the Arduino IDE or arduino-cli.

The Arduino library's ``src/`` is the include root, so the files land where their #include lines
expect them:

    src/tinyseg/*.h                                   tflm_ops/core/include/tinyseg (portable core)
    src/tinyseg/core_src/*.cc                         tflm_ops/core/src (not src/host: threads, files)
    src/tinyseg_nicla/*                               tflm_ops/targets/nicla_vision (not host_stubs)
    src/tensorflow/lite/micro/kernels/tinyseg/*       tflm_ops/kernels (not tests, not make fragments)

Only this project's own files are copied; nothing is downloaded. Re-running replaces them.

    python examples/nicla_vision/install_arduino_library.py ~/Arduino/libraries/Arduino_TensorFlowLite
"""
from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPS = ROOT / "tflm_ops"


@dataclass(frozen=True)
class Copy:
    src: Path
    dst: str  # relative to the library's src/
    patterns: tuple[str, ...]


PLAN = (
    Copy(OPS / "core" / "include" / "tinyseg", "tinyseg", ("*.h",)),
    Copy(OPS / "core" / "src", "tinyseg/core_src", ("*.cc",)),
    Copy(OPS / "targets" / "nicla_vision", "tinyseg_nicla", ("*.h", "*.cc")),
    Copy(OPS / "kernels", "tensorflow/lite/micro/kernels/tinyseg", ("*.h", "*.cc")),
)


def plan_files(library_src: Path) -> list[tuple[Path, Path]]:
    """(source, destination) pairs; subdirectories (host/, host_stubs/, tests/) are never included."""
    pairs = []
    for c in PLAN:
        if not c.src.is_dir():
            continue  # e.g. kernels not written yet in this checkout
        for pattern in c.patterns:
            for f in sorted(c.src.glob(pattern)):
                if f.is_file():
                    pairs.append((f, library_src / c.dst / f.name))
    return pairs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("library", type=Path, help="the Arduino_TensorFlowLite library folder (has src/)")
    p.add_argument("--dry-run", action="store_true", help="list what would be copied")
    args = p.parse_args(argv)
    src = args.library / "src"
    if not (src / "tensorflow" / "lite" / "micro").is_dir():
        print(f"install_arduino_library: error: {args.library} is not a TFLM Arduino library "
              "(no src/tensorflow/lite/micro)", file=sys.stderr)
        return 2
    pairs = plan_files(src)
    if not any("kernels/tinyseg" in str(d) for _, d in pairs):
        print("install_arduino_library: warning: tflm_ops/kernels not found: only the core is installed",
              file=sys.stderr)
    for s, d in pairs:
        if args.dry_run:
            print(f"{s.relative_to(ROOT)} -> {d}")
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(s, d)
    if not args.dry_run:
        print(f"installed {len(pairs)} files into {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
