"""Our reorder pass against tflite-tools' (Pex) reorder, both judged by the TFLM-exact planner.

Run: python benchmarks/reorder_vs_tflite_tools.py MODEL TFLITE_TOOLS_OUTPUT [MODEL OUTPUT ...]
where each OUTPUT is `python tflite_tools.py -i MODEL --optimize -o OUTPUT` (tflite-tools 08709f1,
with patches/tflite-tools applied for NumPy 2).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tinyseg_plugin.graph import build_graph  # noqa: E402
from tinyseg_plugin.kernels import KernelRules  # noqa: E402
from tinyseg_plugin.modelio import load_model  # noqa: E402
from tinyseg_plugin.passes.reorder import reorder  # noqa: E402
from tinyseg_plugin.planner import plan_graph  # noqa: E402


def main(argv: list[str]) -> None:
    print(f"{'model':<22} {'original':>11} {'tflite-tools':>13} {'tinyseg':>11}")
    for model, theirs in zip(argv[::2], argv[1::2]):
        g = build_graph(load_model(model))
        rules = KernelRules()
        ours = reorder(g, lambda x: plan_graph(x).head,
                       lambda i: sum((s + 15) // 16 * 16 for s in rules.scratch_requests(g, g.operators[i])))
        print(f"{Path(model).stem:<22} {plan_graph(g).head:>11,} {plan_graph(build_graph(load_model(theirs))).head:>13,} "
              f"{plan_graph(ours).head:>11,}")


if __name__ == "__main__":
    main(sys.argv[1:])
