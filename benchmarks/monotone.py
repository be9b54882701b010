"""Whether a stage type more can make the written plan worse: for each model and objective, the
plan `tinyseg optimize` writes with every stage type the StreamChain kernel computes, against the
plans written with each stage type its chains hold left out (optimizer.Options.stages_off).

    python benchmarks/monotone.py MODEL.tflite... [--random-unets N]

Objectives: the default (free plans, then the smaller total) and --target min (the smaller head,
then the fewer bytes moved); reference kernels, host64. ``--random-unets N``: also the random
U-Nets 0..N-1 of tests/synth.py (3x3/4x4 up-samplings drawn too). A row's "worse" column counts
the stage types whose removal gave a plan the objective ranks better (the chain search's climbs are
bounded, and a longer chain can lead them elsewhere); "without one" is the best of those plans.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from tinyseg_plugin.ir.graph import Graph, build_graph  # noqa: E402
from tinyseg_plugin.ir.modelio import load_model  # noqa: E402
from tinyseg_plugin.transforms.optimizer import Options, Result, search_plans  # noqa: E402
from tinyseg_plugin.transforms.stream import find_chains, stage_key  # noqa: E402


def figures(r: Result) -> tuple[int, int, int]:
    """Head, bytes moved through storage per inference, total (head + tail)."""
    return r.plan.head, sum(s.bytes_moved for s in r.spills) + r.stream_bytes, r.plan.total


def rank(f: tuple[int, int, int], smallest: bool) -> tuple[int, int]:
    """What the objective ranks by first: --target min the head, then the bytes moved; the
    default, free plans (nothing moved), then the total."""
    head, moved, total = f
    return (head, moved) if smallest else (moved, total)


def compare(
    graph: Graph, smallest: bool
) -> tuple[tuple[int, int, int], list[tuple[tuple[str, str], tuple[int, int, int]]]]:
    """The figures of the plan written with every stage type, and of each plan written with one
    stage type its chains hold left out (that type, its figures)."""
    o = Options(smallest=smallest)
    every = figures(search_plans(graph, o))
    types = sorted(
        {stage_key(graph, graph.operators[i]) for c in find_chains(graph, True) for i in c}
    )
    return every, [
        (t, figures(search_plans(graph, replace(o, stages_off=frozenset({t}))))) for t in types
    ]


def row(name: str, graph: Graph, smallest: bool) -> str:
    every, fewer = compare(graph, smallest)
    worse = sum(rank(f, smallest) < rank(every, smallest) for _, f in fewer)
    best = min((f for _, f in fewer), key=lambda f: rank(f, smallest), default=every)
    shown = "min" if smallest else "-"
    cells = " | ".join(f"{x:,}" for x in every + best)
    return f"| {name} | {shown} | {len(fewer)} | {cells} | {worse} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--random-unets", type=int, default=0)
    args = ap.parse_args()
    models: list[tuple[str, Graph]] = [
        (p.stem, build_graph(load_model(str(p)))) for p in args.models
    ]
    if args.random_unets:
        import synth

        for seed in range(args.random_unets):
            model = synth.random_unet(seed, up_kernels=(2, 3, 4))
            models.append((f"random U-Net {seed}", build_graph(model)))
    print(
        "| model | target | stage types | head | moved B | total | without one: head | moved B "
        "| total | worse |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, graph in models:
        for smallest in (False, True):
            print(row(name, graph, smallest), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
