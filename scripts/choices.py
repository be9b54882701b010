"""Print, as JSON lines, every figure a refactoring must not change: for each model, the SHA-256 of
`tinyseg analyze --json`'s output and of `--stream`'s, and the optimizer's choices (head, total, spills,
chains, storage bytes, the written model's hash) for the reference and CMSIS-NN kernel sets.

Run it on two commits and compare the outputs byte for byte:

    PYTHONPATH=OLD_TREE python scripts/choices.py MODEL... > old.jsonl
    PYTHONPATH=NEW_TREE python scripts/choices.py MODEL... > new.jsonl
    cmp old.jsonl new.jsonl
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys

from tinyseg_plugin.cli import main as cli
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, model_to_bytes
from tinyseg_plugin.transforms.optimizer import Options, search_plans


def _digest_of_cli(args: list[str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli(args)
    return f"{rc}:" + hashlib.sha256((out.getvalue() + err.getvalue()).encode()).hexdigest()[:16]


def _choices(path: str, kernel_set: str) -> dict:
    try:
        graph = build_graph(load_model(path), name=path)
        r = search_plans(graph, Options(kernel_set=kernel_set, build_profile="host64"))
    except TinySegError as exc:
        return {"refused": str(exc)}
    return {
        "head": r.plan.head,
        "total": r.plan.total,
        "original": r.original.head,
        "spills": [
            [s.tensor, s.bytes, s.cold_start, s.cold_end, s.partial, s.slot] for s in r.spills
        ],
        "chains": r.chains,
        "stream_bytes": r.stream_bytes,
        "model": hashlib.sha256(model_to_bytes(r.graph.model)).hexdigest()[:16],
    }


def main(paths: list[str]) -> None:
    for path in paths:
        row = {
            "model": path.rsplit("/", 1)[-1],
            "analyze": _digest_of_cli(["analyze", path, "--json"]),
            "stream": _digest_of_cli(["analyze", path, "--json", "--stream"]),
        }
        for kernel_set in ("reference", "cmsis-nn"):
            row[kernel_set] = _choices(path, kernel_set)
        print(json.dumps(row, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
