"""TinySeg as a tflite-tools plugin (pluggy project "tflite_tools", entry-point group "tflite_tools").

The host (tflite-tools with patches/tflite-tools applied) declares these hook specifications:

- ``tflite_tools_add_options(parser)``: add the plugin's command-line options;
- ``tflite_tools_optimize(model: bytes, options) -> bytes | None``: called with the model the
  host's reorder pass produced; return a rewritten model, or None to leave it as it is;
- ``tflite_tools_analysis(model: bytes, options) -> dict | None``: a section for the host's report.

TinySeg runs its scratch, spill and fusion passes on the reordered model, verifies the result
bit-exact in TFLM exactly like ``tinyseg optimize``, and reports TFLM-exact figures.
"""
from __future__ import annotations

import argparse

import pluggy

from .errors import TinySegError

PROJECT = "tflite_tools"
hookimpl = pluggy.HookimplMarker(PROJECT)


class PluginError(ValueError):
    """A one-line message for the host to print (bad option value, failed verification)."""


def _size(text: str) -> int:
    from .cli import parse_size

    try:
        return parse_size(text)
    except argparse.ArgumentTypeError as exc:
        raise PluginError(f"tinyseg: --target: {exc}") from None


@hookimpl
def tflite_tools_add_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("tinyseg", "TinySeg spilling and fused fetching (after the reorder pass)")
    g.add_argument("--target", default=None, help="arena head to reach, e.g. 160KB (default: as low as it goes)")
    g.add_argument("--kernels", default="reference", help="TFLM kernel set: reference or cmsis-nn")
    g.add_argument("--no-partial", action="store_true", help="spill whole tensors only")
    g.add_argument("--no-fuse", action="store_true", help="no fused fetching")
    g.add_argument("--no-split", action="store_true", help="no splitting of ADD/SUB/MUL over a concatenation")
    g.add_argument("--no-scratch16", action="store_true", help="keep TRANSPOSE_CONV's int32 scratch")
    g.add_argument("--verify-runs", type=int, default=3, help="random inputs for the bit-exact check")


def _options(options: argparse.Namespace):
    from .kernels import KERNEL_SETS
    from .optimizer import Options

    kernels = getattr(options, "kernels", "reference")
    if kernels not in KERNEL_SETS:
        raise PluginError(f"tinyseg: --kernels: '{kernels}' is not a kernel set (choose from: {', '.join(KERNEL_SETS)})")
    target = getattr(options, "target", None)
    return Options(
        kernels=kernels,
        target_bytes=_size(target) if isinstance(target, str) else target,
        partial=not getattr(options, "no_partial", False),
        fuse=not getattr(options, "no_fuse", False),
        split=not getattr(options, "no_split", False),
        scratch=not getattr(options, "no_scratch16", False),
        reorder=False,  # the host's own reorder pass has run
    )


def _graph(model: bytes):
    from .graph import build_graph
    from .modelio import parse_model

    try:
        return build_graph(parse_model(model, "model"))
    except TinySegError as exc:
        raise PluginError(f"tinyseg: {exc}") from None


@hookimpl
def tflite_tools_optimize(model: bytes, options: argparse.Namespace) -> bytes | None:
    from .modelio import model_to_bytes
    from .optimizer import optimize
    from .verify import verify

    opts = _options(options)
    graph = _graph(model)
    result = optimize(graph, opts)
    if result.graph is graph:
        return None
    v = verify(graph, result.graph, runs=getattr(options, "verify_runs", 3))
    if not v.identical:
        raise PluginError(f"tinyseg: verification failed: {v.detail}")
    return model_to_bytes(result.graph.model)


@hookimpl
def tflite_tools_analysis(model: bytes, options: argparse.Namespace) -> dict:
    from .analysis import analyze_graph, to_dict

    from . import customops

    opts = _options(options)
    graph = _graph(model)
    d = to_dict(analyze_graph(graph, opts.kernels))
    spilled = []
    for op in graph.operators:
        if op.opcode == customops.SPILL:
            t = graph.tensors[op.inputs[0]]
            spilled.append({"tensor": t.index, "name": t.name, "bytes": t.nbytes, "slot": customops.decode(op).slot,
                            "spilled_after_operator": op.index})
    return {
        "name": "tinyseg",
        "head": d["head"],
        "tail_estimate": d["tail"]["total"],
        "total": d["total"],
        "peak": d["peak"],
        "spill_ops": [o["index"] for o in d["operators"] if o["opcode"] in customops.TINYSEG_OPS],
        "spilled": spilled,
        "kernels": d["kernels"],
        "exact": d["exact"],
    }
