"""CPU seconds of `analyze` (plan + cold ranges + schedule) on the Tiny U-Net and on long or wide
synthetic models, and of the whole commands on the shapes that used to be quadratic.

Targets: Tiny U-Net under 1 s, a 1,000-operator model under 5 s. The large shapes (a 20,000-operator
chain, 5,000 unused graph inputs, 1,100 RELUs under --stream) run the real command line in a child
process (`tinyseg analyze`, `tinyseg optimize`), so that the figure is what a user waits for.
Run: python benchmarks/analyze_speed.py [--quick]   (--quick: smaller large shapes)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "tests"))  # the test-model builders (tests/synth.py)
import synth  # noqa: E402

from tinyseg_plugin.ir.graph import build_graph  # noqa: E402
from tinyseg_plugin.ir.modelio import load_model, save_model  # noqa: E402
from tinyseg_plugin.memory.analysis import analyze_graph  # noqa: E402


def best_of(fn, n: int = 3) -> float:
    """Least CPU seconds of this process over n runs."""
    times = []
    for _ in range(n):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def command_cpu(args: list[str]) -> tuple[float, int]:
    """CPU seconds (user + system, children included) and exit code of one `tinyseg` command."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = os.times()
    proc = subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    ), proc.returncode


def placement_rows(n: int = 4000) -> list[tuple[str, float | None, float, str]]:
    """TFLM's placement where it is quadratic: n buffers alive at once. The planner's indexed walk
    against the plain walk over every placed buffer (planner._walk_place, TFLM's loop)."""
    import random

    from tinyseg_plugin.memory.planner import ONLINE, _walk_place, greedy_place

    rng = random.Random(0)
    rows = []
    for name, sizes in (
        ("distinct sizes", [16 * rng.randint(1, 4000) for _ in range(n)]),
        ("equal sizes", [16] * n),
    ):
        firsts, lasts, offline = [0] * n, [0] * n, [ONLINE] * n
        order = sorted(range(n)[::-1], key=lambda i: -sizes[i])
        fast = best_of(lambda: greedy_place(sizes, firsts, lasts, offline), 1)
        plain = best_of(lambda: _walk_place(order, sizes, firsts, lasts, offline), 1)
        same = greedy_place(sizes, firsts, lasts, offline) == _walk_place(
            order, sizes, firsts, lasts, offline
        )
        rows.append(
            (
                f"placement, {n:,} alive at once, {name}",
                None,
                fast,
                f"plain walk {plain:.2f} s, same offsets: {'yes' if same else 'NO'}",
            )
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="a 5,000-operator chain and 1,000 unused inputs"
    )
    args = ap.parse_args()
    rows: list[tuple[str, float | None, float, str]] = []
    tiny = ROOT / "examples" / "models" / "tiny_unet.tflite"
    rows.append(
        (
            "tiny_unet.tflite (load+analyze)",
            1.0,
            best_of(lambda: analyze_graph(build_graph(load_model(tiny)))),
            "",
        )
    )
    for n in (250, 500, 1000):
        g = build_graph(synth.chain(n))
        rows.append(
            (
                f"synthetic chain, {len(g.operators)} ops",
                5.0 if n == 1000 else None,
                best_of(lambda: analyze_graph(g), 1),
                "",
            )
        )
    rows += placement_rows()
    chain_ops, inputs = (5000, 1000) if args.quick else (20000, 5000)
    with tempfile.TemporaryDirectory() as tmp:
        shapes = [
            (f"`analyze`, chain of {chain_ops:,} ops", synth.chain(chain_ops), ["analyze"]),
            (
                f"`analyze --json`, chain of {chain_ops:,} ops",
                synth.chain(chain_ops),
                ["analyze", "--json", f"{tmp}/a.json"],
            ),
            (
                f"`optimize`, {inputs:,} unused inputs",
                synth.unused_inputs(inputs),
                ["optimize", "-o", f"{tmp}/o.tflite", "-q"],
            ),
            ("`analyze --stream`, 1,100 RELUs", synth.relu_chain(1100), ["analyze", "--stream"]),
        ]
        for k, (name, model, cmd) in enumerate(shapes):
            path = f"{tmp}/m{k}.tflite"
            save_model(model, path)
            secs, rc = command_cpu([cmd[0], path, *cmd[1:]])
            rows.append((name, None, secs, f"exit {rc}"))
    print(f"{'model':<44} {'target s':>9} {'CPU s':>8}  ok")
    for name, target, secs, note in rows:
        ok = note or ("" if target is None else ("yes" if secs < target else "NO"))
        print(f"{name:<44} {target if target else '':>9} {secs:>8.2f}  {ok}")


if __name__ == "__main__":
    main()
