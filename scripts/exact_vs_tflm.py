"""Does `tinyseg analyze` claim "exact" only for models the real TFLM interpreter loads?

For every .tflite given (files or folders), run `tinyseg analyze --json -` and load the model in
the tflite-micro wheel (load + AllocateTensors, i.e. every kernel's Prepare, in a child process
with a CPU time limit; with --invoke also one invoke on zeros, since a few kernels refuse a type
only in Eval), and print one row per model: analyze's verdict, TFLM's, and whether they
agree. A false "exact" (analyze says exact, TFLM refuses) and a false refusal (analyze says TFLM
refuses, TFLM loads it) are disagreements; exit status 1 if any.

    PYTHONPATH=$PWD python scripts/exact_vs_tflm.py [--invoke] MODEL_OR_DIR...  (docs/corpus.md)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tinyseg_plugin.checks import interpreter  # noqa: E402
from tinyseg_plugin.errors import TinySegError  # noqa: E402


def analyze_verdict(path: Path) -> tuple[str, str]:
    """("exact" | "refuses" | "not exact" | "error"), detail, from the CLI's JSON."""
    proc = subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", "analyze", "--json", "-", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if proc.returncode != 0:
        return "error", proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    d = json.loads(proc.stdout)
    if d["exact"]:
        return "exact", ""
    certain = [r for r in d["not_exact_because"] if r.startswith("TFLM refuses")]
    if certain:  # the refusal without its remedy
        return "refuses", certain[0].removeprefix("TFLM refuses the model: ").split("; ")[0]
    return "not exact", "; ".join(d["not_exact_because"])


def tflm_verdict(path: Path, invoke: bool) -> tuple[str, str]:
    """("loads" | "refuses"), TFLM's reason. With ``invoke``, "loads" also means one invoke on
    zeros succeeds (some kernels refuse a type only in Eval)."""
    data = path.read_bytes()
    arena = interpreter.DEFAULT_ARENA
    try:
        from tinyseg_plugin.checks.verify import arena_for
        from tinyseg_plugin.pipeline import load

        arena = arena_for(load(data, path.name))
    except TinySegError:
        pass
    try:
        interpreter.check_loads(data, arena)
        if invoke:
            interpreter.arena_usage(data, arena)
    except TinySegError as exc:
        return "refuses", str(exc)
    return "loads", ""


def agree(a: str, t: str) -> str:
    if a == "exact":
        return "yes" if t == "loads" else "NO (false exact)"
    if a == "refuses":
        return "yes" if t == "refuses" else "NO (false refusal)"
    if a == "error":
        return "yes" if t == "refuses" else "NO (analyze refuses a model TFLM loads)"
    return "yes (not exact: " + ("TFLM loads)" if t == "loads" else "TFLM refuses)")


def models(args: list[str]) -> list[Path]:
    out: list[Path] = []
    for a in args:
        p = Path(a)
        out += sorted(p.rglob("*.tflite")) if p.is_dir() else [p]
    return out


def main(argv: list[str]) -> int:
    invoke = "--invoke" in argv
    argv = [a for a in argv if a != "--invoke"]
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    rows = []
    for path in models(argv):
        a, a_why = analyze_verdict(path)
        t, t_why = tflm_verdict(path, invoke)
        rows.append((path, a, a_why, t, t_why, agree(a, t)))
        print(f"{path}: analyze {a}, TFLM {t}", file=sys.stderr)
    what = "load + AllocateTensors" + (" + one invoke on zeros" if invoke else "")
    print(f"| model | analyze | TFLM ({what}) | agree? |")
    print("|---|---|---|---|")
    for path, a, a_why, t, t_why, ok in rows:
        av = a + (f": {a_why}" if a_why and a != "not exact" else "")
        tv = t + (f": {t_why}" if t_why else "")
        print(f"| {path.name} | {av[:130]} | {tv.removeprefix('refuses: TFLM ')[:130]} | {ok} |")
    bad = sum(1 for r in rows if r[5].startswith("NO"))
    false_exact = sum(1 for r in rows if "false exact" in r[5])
    print(f"\n{len(rows)} models, {bad} disagreements, {false_exact} false exact")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
