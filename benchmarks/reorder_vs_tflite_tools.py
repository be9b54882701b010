"""Our reorder pass against tflite-tools' (Pex) reorder, both judged by the TFLM-exact planner, with the
CPU time of our pass and whether its exact search finished within its budget (else: the greedy order).

Run: python benchmarks/reorder_vs_tflite_tools.py [--wide] MODEL TFLITE_TOOLS_OUTPUT [MODEL OUTPUT ...]
where each OUTPUT is `python tflite_tools.py -i MODEL --optimize -o OUTPUT` (tflite-tools 08709f1,
with patches/tflite-tools applied for NumPy 2); OUTPUT "-" leaves the tflite-tools column empty.
--wide adds synthetic wide graphs (synth.wide_branches: 125 parallel branches, 250 operators), the
shape that made the unbounded exact search spend up to a minute.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent / "tests")
)  # the test-model builders (tests/synth.py)
import synth  # noqa: E402

from tinyseg_plugin.ir.graph import Graph, build_graph  # noqa: E402
from tinyseg_plugin.ir.modelio import load_model  # noqa: E402
from tinyseg_plugin.memory.kernels import KernelRules  # noqa: E402
from tinyseg_plugin.memory.planner import align_up, plan_graph  # noqa: E402
from tinyseg_plugin.transforms.passes import Rewrite  # noqa: E402
from tinyseg_plugin.transforms.passes.reorder import OrderRequest, min_peak_order, reorder  # noqa: E402


def row(name: str, g: Graph, theirs: Graph | None) -> None:
    rules = KernelRules()

    def scratch(i: int) -> int:
        return sum(align_up(s) for s in rules.scratch_requests(g, g.operators[i]))

    t = time.process_time()
    ordered = reorder(g, OrderRequest(lambda x: plan_graph(x).head, scratch))
    ours = ordered.graph if isinstance(ordered, Rewrite) else g
    cpu = time.process_time() - t
    exact = "yes" if min_peak_order(g, scratch) is not None else "greedy"
    their_head = f"{plan_graph(theirs).head:,}" if theirs is not None else "-"
    print(
        f"{name:<22} {len(g.operators):>5} {plan_graph(g).head:>11,} {their_head:>13} {plan_graph(ours).head:>11,} "
        f"{exact:>7} {cpu:>8.2f}"
    )


def main(argv: list[str]) -> None:
    wide = "--wide" in argv
    argv = [a for a in argv if a != "--wide"]
    print(
        f"{'model':<22} {'ops':>5} {'original':>11} {'tflite-tools':>13} {'tinyseg':>11} {'exact':>7} {'reorder s':>8}"
    )
    for model, theirs in zip(argv[::2], argv[1::2]):
        row(
            Path(model).stem,
            build_graph(load_model(model)),
            None if theirs == "-" else build_graph(load_model(theirs)),
        )
    if wide:
        for kind in ("conv", "dequantize-int8"):
            row(f"wide_{kind}_125", build_graph(synth.wide_branches(0, 125, kind)), None)


if __name__ == "__main__":
    main(sys.argv[1:])
