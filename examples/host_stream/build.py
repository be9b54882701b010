"""Build host_stream.cc with the host TFLM build the real-kernel runner uses.

    python examples/host_stream/build.py OUT [--tflm-dir DIR]

The TFLM tree (--tflm-dir, else $TFLM_DIR) is copied into the cache, TinySeg installed into the
copy and microlite built there once (tinyseg_plugin/checks/real_kernels.py, the same cache as
``tinyseg verify --tflm-dir``); host_stream.cc is then compiled and linked against that microlite
with TFLM's own compiler flags, as the runner is.
"""

from __future__ import annotations

import argparse
import fcntl
import sys
from pathlib import Path

from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.errors import TinySegError

SOURCE = Path(__file__).resolve().with_name("host_stream.cc")


def build(tflm_dir: str, exe: Path) -> Path:
    """The example at ``exe``, linked against the cached TFLM build of ``tflm_dir``."""
    runner = real_kernels.prepare(tflm_dir)  # the installed tree and its microlite
    work = runner.parents[1]
    with open(work / "lock", "w") as lock:  # another tinyseg may be updating the tree
        fcntl.flock(lock, fcntl.LOCK_EX)
        return real_kernels.build_runner(work / "tree", exe.resolve(), SOURCE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the executable to write")
    parser.add_argument("--tflm-dir", help="a TFLM tree (default: $TFLM_DIR)")
    args = parser.parse_args(argv)
    tflm_dir = real_kernels.resolve_tflm_dir(args.tflm_dir)
    try:
        if tflm_dir is None:
            raise TinySegError("no TFLM tree: give --tflm-dir or set TFLM_DIR")
        print(f"wrote {build(tflm_dir, args.out)}")
    except TinySegError as exc:
        print(f"build.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
