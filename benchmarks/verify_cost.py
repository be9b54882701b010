"""CPU time of `tinyseg optimize` (the whole command: parent and children) and of the verification in
it, per model, for one or more checkouts of TinySeg.

    python benchmarks/verify_cost.py [--repo LABEL=DIR ...] [--warm] [--tflm-dir DIR] MODEL...
    python benchmarks/verify_cost.py --profile MODEL   # where the CPU goes, cold and warm

Each model is optimized once per --repo (default: this checkout) with an empty cache of the
original's outputs (checks/output_cache.py: a cold run); with --warm a second time on the filled
cache. The command runs in a child Python (PYTHONPATH=DIR, TFLM_DIR unset: the wheel check, or the
real-kernel check with --tflm-dir DIR, its build cached in $TINYSEG_CACHE_DIR) whose
CPU, and that of its TFLM children, is read with resource.getrusage(RUSAGE_CHILDREN); inside it the
verification's share is measured around checks.verify.verify the same way. Models with more than
--max-ops operators, and models `optimize` refuses (exit 2), are listed as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# Runs in the child: wraps verify() to time it, then runs the command line.
CHILD = r"""
import json, resource, sys, time
from tinyseg_plugin.checks import verify as V
from tinyseg_plugin import pipeline as P

spent = []
real = V.verify

def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

def timed(*a, **kw):
    t = cpu()
    try:
        return real(*a, **kw)
    finally:
        spent.append(cpu() - t)

V.verify = timed
P.check.verify = timed
from tinyseg_plugin import cli
try:
    rc = cli.main(sys.argv[2:])
except SystemExit as e:
    rc = e.code
with open(sys.argv[1], "w") as f:
    json.dump({"rc": rc, "verify": sum(spent), "verified": len(spent)}, f)
"""


def operators(model: Path) -> int:
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model

    return len(build_graph(load_model(str(model))).operators)


def one_run(
    repo: Path, model: Path, cache: Path, tflm_dir: str | None = None
) -> tuple[int, float, float, bool]:
    """(exit code, CPU s of the whole command, CPU s of its verification, whether it verified: a
    model no pass improves is written unchanged without running TFLM)."""
    env = {k: v for k, v in os.environ.items() if k != "TFLM_DIR"}
    env["PYTHONPATH"] = str(repo)
    env["TINYSEG_OUTPUT_CACHE_DIR"] = str(cache)
    with tempfile.TemporaryDirectory() as d:
        out, info = Path(d) / "out.tflite", Path(d) / "info.json"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, "-c", CHILD, str(info), "optimize", str(model), "-o", str(out), "-q"]
            + (["--tflm-dir", tflm_dir] if tflm_dir else []),
            env=env,
            capture_output=True,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        whole = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        try:
            r = json.loads(info.read_text())
        except (OSError, ValueError):
            return -1, whole, 0.0, False
    return int(r["rc"] or 0), whole, float(r["verify"]), bool(r["verified"])


def profile(model: Path, tflm_dir: str | None) -> None:
    """cProfile of one `tinyseg optimize` in this process (this checkout), and the CPU of its
    children (the TFLM processes), which cProfile does not see."""
    import cProfile
    import pstats

    from tinyseg_plugin import cli

    with tempfile.TemporaryDirectory() as d:
        os.environ["TINYSEG_OUTPUT_CACHE_DIR"] = str(Path(d) / "outputs")
        argv = ["optimize", str(model), "-o", str(Path(d) / "out.tflite"), "-q"]
        argv += ["--tflm-dir", tflm_dir] if tflm_dir else []
        for run in ("cold", "warm"):
            s0, c0 = (
                resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN),
            )
            pr = cProfile.Profile()
            pr.enable()
            rc = cli.main(argv)
            pr.disable()
            s1, c1 = (
                resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN),
            )
            own = s1.ru_utime + s1.ru_stime - s0.ru_utime - s0.ru_stime
            kids = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
            print(f"{run}: exit {rc}, CPU s: this process {own:.1f}, TFLM children {kids:.1f}")
            pstats.Stats(pr).sort_stats("cumulative").print_stats(20)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--repo", action="append", default=[], help="LABEL=DIR of a checkout")
    ap.add_argument("--warm", action="store_true", help="also run each once more on a filled cache")
    ap.add_argument("--max-ops", type=int, default=300)
    ap.add_argument(
        "--tflm-dir",
        help="a TFLM tree: the real-kernel check (default: the wheel's fallback check)",
    )
    ap.add_argument(
        "--profile", action="store_true", help="cProfile the first model (cold, then warm) instead"
    )
    args = ap.parse_args()
    if args.profile:
        if not args.tflm_dir:
            os.environ.pop("TFLM_DIR", None)
        profile(args.models[0], args.tflm_dir)
        return 0
    repos = [tuple(r.split("=", 1)) for r in args.repo] or [("this", str(HERE))]
    cols = []
    for label, _ in repos:
        cols += [f"{label} cold", f"{label} cold verify"]
        if args.warm:
            cols += [f"{label} warm", f"{label} warm verify"]
    print("| model | operators | result | " + " | ".join(f"{c} (CPU s)" for c in cols) + " |")
    print("|---|---:|---|" + "---:|" * len(cols))
    for model in args.models:
        try:
            n = operators(model)
        except Exception as exc:  # noqa: BLE001 - a model TinySeg cannot read is listed, not fatal
            print(f"| {model.name} | - | skipped: {str(exc)[:80]} |", flush=True)
            continue
        if n > args.max_ops:
            print(f"| {model.name} | {n} | skipped: over {args.max_ops} operators |", flush=True)
            continue
        cells: list[str] = []
        result = "verified"
        for _, repo in repos:
            with tempfile.TemporaryDirectory() as cache:
                for _ in range(2 if args.warm else 1):
                    rc, whole, ver, verified = one_run(
                        Path(repo), model, Path(cache), args.tflm_dir
                    )
                    if rc != 0:
                        result, cells = f"skipped: optimize exits {rc}", []
                        break
                    if not verified:
                        result = "unchanged (no TFLM run)"
                    cells += [f"{whole:.1f}", f"{ver:.1f}"]
            if not cells:
                break
        print(f"| {model.name} | {n} | {result} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
