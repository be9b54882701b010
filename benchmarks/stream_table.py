"""Streaming on the models given: the input's head; the estimate over every row-local operator
(`tinyseg analyze --stream` as a child process, with its CPU seconds: the whole command); and the
head of the chains of stages the StreamChain kernel computes (the chain search alone,
stream_search.choose_streaming(kernel_only=True), planner figures; `tinyseg optimize --target min`
also offers shared row spills), with its storage traffic; then how far that head is from the estimate and, where it is more than 10%
above it, the reasons `optimize` reports for row-local operators it does not stream (its
`not_streamed` list, `stream.stage_gaps`) or "none named" when it reports none.

Run: python benchmarks/stream_table.py MODEL.tflite... [--kernel-set NAME] [--build-profile host64|cortex-m]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path


def run(model: Path, kernel_set: str, build_profile: str | None) -> tuple[dict | None, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [
        sys.executable,
        "-m",
        "tinyseg_plugin.cli",
        "analyze",
        str(model),
        "--stream",
        "--json",
        "--kernel-set",
        kernel_set,
    ] + (["--build-profile", build_profile] if build_profile else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        return None, cpu, (p.stderr.strip().splitlines() or ["?"])[-1]
    return json.loads(p.stdout), cpu, ""


def runnable(model: Path, kernel_set: str, build_profile: str):
    """The chains the StreamChain kernel runs (what `tinyseg optimize` streams)."""
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.transforms.stream import stage_gaps
    from tinyseg_plugin.transforms.stream_search import choose_streaming

    g = build_graph(load_model(model))
    return choose_streaming(g, kernel_set, build_profile, kernel_only=True), stage_gaps(g)


def why(gaps: list) -> str:
    """The reasons optimize names, most frequent first, each with its count."""
    counts: dict[str, int] = {}
    for gap in gaps:
        key = gap.reason if gap.reason.startswith(gap.opcode) else f"{gap.opcode}: {gap.reason}"
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return "; ".join(f"{n} x {r[:70]}" for r, n in ranked[:3]) or "none named"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--kernel-set", default="reference")
    ap.add_argument("--build-profile", default=None)
    args = ap.parse_args()
    print(
        f"{'model':<44} {'ops':>4} {'head':>11} {'estimate':>11} {'cut':>5} {'storage B':>11} {'chains':>6} "
        f"{'CPU s':>6} {'runs now':>11} {'storage B':>11} {'chains':>6} {'/est':>6}  why not within 10%"
    )
    for m in args.models:
        d, cpu, err = run(m, args.kernel_set, args.build_profile)
        if d is None:
            print(f"{m.name[:44]:<44} {'':>4} {'refused: ' + err[:60]}")
            continue
        s = d["stream"]
        cut = (
            100 * (1 - s["head"] / s["head_without_streaming"])
            if s["head_without_streaming"]
            else 0.0
        )
        k, gaps = runnable(m, args.kernel_set, args.build_profile or "host64")
        ratio = k.head / s["head"] if s["head"] else 1.0
        note = why(gaps) if ratio > 1.10 else ""
        print(
            f"{m.name[:44]:<44} {len(d['operators']):>4} {s['head_without_streaming']:>11,} {s['head']:>11,} "
            f"{cut:>4.0f}% {s['storage_bytes_per_inference']:>11,} {len(s['chains']):>6} {cpu:>6.2f} "
            f"{k.head:>11,} {k.storage_bytes:>11,} {len(k.streamed.chains) if k.streamed else 0:>6} "
            f"{ratio:>6.2f}  {note}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
