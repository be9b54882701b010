"""One row per .tflite: what TFLM says of it, what tinyseg says of it, what the optimizer makes of it.

Run: python benchmarks/corpus.py DIR_OR_FILE... [--timeout SECONDS] [--kernel-set reference|cmsis-nn] [--markdown]

Columns: operators; the real TFLM head (tflite-micro wheel, reference kernels; or why TFLM refuses the
model, in the notes under the table); tinyseg's analyze head; exact (analyze head == TFLM head; "-"
where TFLM refuses); optimized head and cut (`tinyseg optimize --target min`: the smallest head); verified (optimized model bit-identical to the original
in TFLM on one random input); optimizer CPU seconds (the search_plans() call, no verification); peak RSS of
the child that did all of it. Each model runs in a child process with a time limit, so a crash or a hang
in one (inside TFLM, or ours) becomes a row saying so and the table goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:160]


def measure(path: str, kernel_set: str) -> dict:
    """Everything for one model (runs in the child)."""
    import resource
    import time

    sys.path.insert(0, str(ROOT))
    from tinyseg_plugin.checks import interpreter
    from tinyseg_plugin.checks.verify import verify
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model, model_to_bytes
    from tinyseg_plugin.memory.planner import plan_graph
    from tinyseg_plugin.transforms.optimizer import Options, search_plans

    row: dict = {"model": path}
    try:
        model = load_model(path)
        g = build_graph(model, name=path)
    except Exception as exc:  # noqa: BLE001 - a row, not a crash
        row["error"] = f"cannot read: {_one_line(exc)}"
        return row
    row["ops"] = len(g.operators)
    try:
        row["tflm_head"] = interpreter.arena_usage(model_to_bytes(model)).head
    except Exception as exc:  # noqa: BLE001
        row["tflm_refuses"] = _one_line(exc)
    try:
        plan = plan_graph(g, kernel_set)
        row["analyze_head"] = plan.head
        row["claims_exact"] = plan.exact
    except Exception as exc:  # noqa: BLE001
        row["error"] = f"analyze: {type(exc).__name__}: {_one_line(exc)}"
        return row
    t = time.process_time()
    try:
        r = search_plans(g, Options(kernel_set=kernel_set, smallest=True))
        row["opt_cpu_s"] = time.process_time() - t
        row["opt_head"] = r.plan.head
        row["spills"] = len(r.spills)
    except Exception as exc:  # noqa: BLE001
        row["opt_cpu_s"] = time.process_time() - t
        row["error"] = f"optimize: {type(exc).__name__}: {_one_line(exc)}"
        r = None
    if r is not None:
        if r.graph is g:
            row["verified"] = "unchanged"
        else:
            try:
                v = verify(g, r.graph, runs=1)
                row["verified"] = "yes" if v.identical else f"NO: {v.detail}"
            except Exception as exc:  # noqa: BLE001
                row["verified"] = f"cannot: {_one_line(exc)}"
    row["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def run_child(path: Path, kernel_set: str, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--child", str(path), "--kernel-set", kernel_set]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"model": str(path), "error": f"no answer within {timeout:.0f} s (killed)"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode < 0:
        name = signal.Signals(-p.returncode).name
        row = json.loads(lines[-1]) if lines else {"model": str(path)}
        row["error"] = f"child killed by {name}"
        return row
    if not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return {"model": str(path), "error": f"child exited {p.returncode}: {tail}"}
    row = json.loads(lines[-1])
    if "tflm_refuses" in row:  # the wrapper says "failed to allocate tensors"; TFLM's log says why
        why = [
            ln.strip()
            for ln in p.stderr.splitlines()
            if ln.strip()
            and not ln.startswith(("Node ", "  ..", "Traceback", "WARNING"))
            and "Warning" not in ln
        ]
        if why:
            row["tflm_refuses"] = why[0][:200]
    return row


def _fmt(v, spec: str = ",") -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[dict], markdown: bool) -> str:
    cols = [
        "model",
        "ops",
        "TFLM head",
        "analyze head",
        "exact",
        "optimized head",
        "cut %",
        "verified",
        "opt CPU s",
        "peak RSS MB",
    ]
    body = []
    notes: list[str] = []
    for r in rows:
        name = Path(r["model"]).name
        tflm_head = _fmt(r.get("tflm_head"))
        if "tflm_refuses" in r:
            notes.append(f"{name}: TFLM refuses it: {r['tflm_refuses']}")
            tflm_head = f"refused [{len(notes)}]"
        if "error" in r:
            notes.append(f"{name}: {r['error']}")
        exact = "-"
        if r.get("tflm_head") is not None and r.get("analyze_head") is not None:
            exact = "yes" if r["tflm_head"] == r["analyze_head"] else "NO"
        cut = "-"
        if r.get("opt_head") is not None and r.get("analyze_head"):
            cut = f"{100.0 * (r['analyze_head'] - r['opt_head']) / r['analyze_head']:.1f}"
        verified = r.get("verified", "-")
        if "tflm_refuses" in r and verified.startswith("cannot"):
            verified = "-"  # TFLM cannot run the original either: the note above says why
        if verified.startswith(("NO", "cannot")):
            notes.append(f"{name}: verification: {verified}")
            verified = f"{verified.split(':')[0]} [{len(notes)}]"
        if "error" in r:
            verified = f"error [{len([n for n in notes])}]" if verified == "-" else verified
        body.append(
            [
                name,
                _fmt(r.get("ops"), ""),
                tflm_head,
                _fmt(r.get("analyze_head")),
                exact,
                _fmt(r.get("opt_head")),
                cut,
                verified,
                _fmt(r.get("opt_cpu_s"), ".2f"),
                _fmt(r.get("rss_mb"), ".0f"),
            ]
        )
    if markdown:
        out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        out += ["| " + " | ".join(row) + " |" for row in body]
    else:
        widths = [
            max(len(c), *(len(row[i]) for row in body)) if body else len(c)
            for i, c in enumerate(cols)
        ]
        out = [
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths))
            )
        ]
        out += [
            "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))
            )
            for row in body
        ]
    if notes:
        out.append("")
        out += [f"[{i}] {n}" for i, n in enumerate(notes, 1)]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--kernel-set", default="reference", choices=["reference", "cmsis-nn"])
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per model (default: 600)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        sys.stdout.flush()
        print(json.dumps(measure(args.child, args.kernel_set)), flush=True)
        return 0
    files: list[Path] = []
    for p in map(Path, args.paths):
        files += sorted(p.rglob("*.tflite")) if p.is_dir() else [p]
    if not files:
        print("corpus.py: no .tflite files given", file=sys.stderr)
        return 2
    rows = []
    for f in files:
        print(f"  .. {f}", file=sys.stderr, flush=True)
        rows.append(run_child(f, args.kernel_set, args.timeout))
    print(table(rows, args.markdown))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main(sys.argv[1:]))
