"""Compare `tinyseg analyze --json` (and `--stream --json`) byte for byte between two checkouts.

Run: python benchmarks/compare_analyze.py OLD_ROOT NEW_ROOT MODEL... [--stream]
Each checkout's code runs in its own process (PYTHONPATH=ROOT); prints one line per model and
exits 1 when any output differs. Used to show that speed work changed no result.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def run(root: str, model: str, stream: bool) -> tuple[bytes, float]:
    """The JSON bytes that `tinyseg analyze` of ``root`` writes for ``model``, and its CPU seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "a.json"
        cmd = [sys.executable, "-m", "tinyseg_plugin.cli", "analyze", model, "--json", str(out)]
        if stream:
            cmd.append("--stream")
        env = {**os.environ, "PYTHONPATH": root}
        before = os.times()
        proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True)
        after = os.times()
        cpu = (after.children_user - before.children_user) + (
            after.children_system - before.children_system
        )
        if proc.returncode != 0:
            return (
                f"exit {proc.returncode}: {proc.stderr.decode(errors='replace').strip()[-200:]}".encode(),
                cpu,
            )
        return out.read_bytes(), cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--stream", action="store_true", help="compare `analyze --stream --json`")
    args = ap.parse_args()
    differ = 0
    print(f"{'model':<44} {'old s':>8} {'new s':>8}  {'json bytes':>11}  same  sha256")
    for m in args.models:
        a, ta = run(args.old, m, args.stream)
        b, tb = run(args.new, m, args.stream)
        same = a == b
        differ += not same
        print(
            f"{Path(m).name:<44} {ta:>8.2f} {tb:>8.2f}  {len(b):>11,}  {'yes' if same else 'NO':<4}  "
            f"{hashlib.sha256(b).hexdigest()[:16]}"
        )
        if not same:
            print(f"  old: {a[:200]!r}\n  new: {b[:200]!r}")
    print(f"{len(args.models) - differ} identical, {differ} different")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
