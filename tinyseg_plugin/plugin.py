"""TinySeg as a tflite-tools plugin (pluggy project "tflite_tools", entry-point group "tflite_tools").

The host (tflite-tools with patches/tflite-tools applied) declares these hook specifications:

- ``tflite_tools_add_options(parser, command)``: add the plugin's options (optimize-only ones unless
  ``command == "analyze"``);
- ``tflite_tools_check_options(options, command)``: refuse bad values before the model is read;
- ``tflite_tools_describe_operator(op_id, custom_code, inputs, outputs, custom_options)``: tell the host
  what a TinySeg operator (Spill, Fetching, FetchingConv2D) reads and writes, so that it can read a
  model TinySeg wrote;
- ``tflite_tools_optimize(model: bytes, options) -> bytes | None``: called with the model the host's
  reorder pass produced; return a rewritten model, or None to leave it as it is;
- ``tflite_tools_analysis(model: bytes, options) -> dict | None``: a section for the host's report.

TinySeg runs its scratch, spill and fusion passes on the reordered model, verifies the result
bit-exact in TFLM and fails with the exit codes of ``tinyseg optimize`` (docs/cli.md): 2 bad input,
3 target not reached (the best model is still written), 4 verification failed (nothing written).
"""
from __future__ import annotations

import argparse

import pluggy

from .errors import TinySegError

PROJECT = "tflite_tools"
hookimpl = pluggy.HookimplMarker(PROJECT)

EXIT_ERROR = 2  # the same codes as tinyseg_plugin.cli
EXIT_TARGET_NOT_REACHED = 3
EXIT_VERIFY_FAILED = 4
HEAD_LABEL = "TFLM arena head as TFLM plans it: live tensors + kernel scratch, 16-byte aligned"


class PluginError(ValueError):
    """A one-line message for the host to print, with the exit code ``tinyseg optimize`` would give.

    ``model`` (bytes) is set when the result is still written (a target not reached).
    """

    def __init__(self, message: str, exit_code: int = EXIT_ERROR, model: bytes | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        if model is not None:
            self.model = model


def _size(text: str) -> int:
    from .sizes import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise PluginError(f"tinyseg: --target: {exc}") from None


@hookimpl
def tflite_tools_add_options(parser: argparse.ArgumentParser, command: str | None) -> None:
    from .kernels import KERNEL_SETS

    g = parser.add_argument_group("tinyseg", "TinySeg spilling and fused fetching (after the reorder pass)")
    g.add_argument("--runtime", dest="runtime", default="reference", metavar="NAME",
                   help=f"TFLM kernel implementation whose scratch is planned: {', '.join(KERNEL_SETS)} "
                        "(default: reference)")
    g.add_argument("--kernels", dest="runtime", help=argparse.SUPPRESS)  # deprecated alias of --runtime
    g.add_argument("--arch", default="host64", metavar="ARCH",
                   help="pointer width of the tail estimate: host64 or cortex-m (default: host64)")
    if command == "analyze":
        return
    g.add_argument("--target", default=None, metavar="SIZE",
                   help="arena head to reach, e.g. 160KB (default: as low as it goes); not reached: exit 3")
    g.add_argument("--no-partial", action="store_true", help="spill whole tensors only")
    g.add_argument("--no-fuse", action="store_true", help="no fused fetching")
    g.add_argument("--no-split", action="store_true", help="no splitting of ADD/SUB/MUL over a concatenation")
    g.add_argument("--no-scratch16", action="store_true", help="keep TRANSPOSE_CONV's int32 scratch")
    g.add_argument("--no-stream", action="store_true", help="no StreamChain operators (row-by-row chains)")
    g.add_argument("--verify-runs", type=str, default="3", metavar="N",
                   help="random inputs for the bit-exact check in TFLM, at least 1 (default: 3; 3 edge-case inputs are added)")
    g.add_argument("--no-verify", action="store_true", help="skip the bit-exact check in TFLM (not recommended)")


def _verify_runs(options: argparse.Namespace) -> int:
    text = str(getattr(options, "verify_runs", "3"))
    try:
        runs = int(text)
    except ValueError:
        runs = 0
    if runs < 1:
        raise PluginError(f"tinyseg: --verify-runs: '{text}' is not a number of runs, at least 1 "
                          "(--no-verify skips the check)")
    return runs


def _options(options: argparse.Namespace):
    from .kernels import KERNEL_SETS
    from .optimizer import Options

    runtime = getattr(options, "runtime", None) or "reference"
    if runtime not in KERNEL_SETS:
        raise PluginError(f"tinyseg: --runtime: '{runtime}' is not a kernel implementation "
                          f"(choose from: {', '.join(KERNEL_SETS)})")
    arch = getattr(options, "arch", "host64")
    if arch not in ("host64", "cortex-m"):
        raise PluginError(f"tinyseg: --arch: '{arch}' is not a build profile (choose from: host64, cortex-m)")
    target = getattr(options, "target", None)
    return Options(
        runtime=runtime,
        arch=arch,
        target_bytes=_size(target) if isinstance(target, str) else target,
        partial=not getattr(options, "no_partial", False),
        fuse=not getattr(options, "no_fuse", False),
        split=not getattr(options, "no_split", False),
        scratch=not getattr(options, "no_scratch16", False),
        stream=not getattr(options, "no_stream", False),
        reorder=False,  # the host's own reorder pass has run
    )


@hookimpl
def tflite_tools_check_options(options: argparse.Namespace, command: str | None) -> None:
    _options(options)
    if command != "analyze" and not getattr(options, "no_verify", False):
        _verify_runs(options)


@hookimpl
def tflite_tools_describe_operator(op_id: int, custom_code: str, inputs: list[int], outputs: list[int],
                                   custom_options: bytes) -> dict | None:
    """Spill reads its victim and writes nothing in RAM; Fetching and FetchingConv2D read their in-RAM
    operands (and filter, bias) and write one output: exactly the tensor lists the operator has."""
    from . import customops

    if custom_code not in customops.TINYSEG_OPS:
        return None
    return {"type": custom_code, "inputs": [t for t in inputs], "outputs": list(outputs)}


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
    from .planner import plan_graph
    from .verify import verify

    opts = _options(options)
    runs = None if getattr(options, "no_verify", False) else _verify_runs(options)
    graph = _graph(model)
    from .validate import unsupported

    why = unsupported(graph)
    if why:
        raise PluginError(f"tinyseg: cannot optimize the model: {why}")
    if opts.target_bytes is not None:
        head = plan_graph(graph, opts.runtime, opts.arch).head
        if head <= opts.target_bytes:
            print(f"tinyseg: the model already meets --target {opts.target_bytes:,} B (head {head:,} B); left unchanged")
            return None
    result = optimize(graph, opts)
    out = model if result.graph is graph else None
    if out is None:
        if runs is not None:
            from .devicecheck import resolve_tflm_dir

            v = verify(graph, result.graph, runs=runs, tflm_dir=resolve_tflm_dir(None))  # TFLM_DIR: real kernels
            if not v.identical:
                raise PluginError(f"tinyseg: verification failed: {v.detail}; no output written", EXIT_VERIFY_FAILED)
            print(f"tinyseg: verified: outputs bit-identical to the reordered model in TFLM on {v.runs} random inputs "
                  f"({opts.runtime} kernels; {v.describe()})")
        else:
            print("tinyseg: not verified (--no-verify)")
        out = model_to_bytes(result.graph.model)
    if opts.target_bytes is not None and result.plan.head > opts.target_bytes:
        raise PluginError(f"tinyseg: target {opts.target_bytes:,} B not reachable: best head {result.plan.head:,} B (written)",
                          EXIT_TARGET_NOT_REACHED, model=out)
    return None if out is model else out


@hookimpl
def tflite_tools_analysis(model: bytes, options: argparse.Namespace) -> dict:
    from .analysis import analyze_graph, to_dict

    from . import customops

    opts = _options(options)
    graph = _graph(model)
    d = to_dict(analyze_graph(graph, opts.runtime, opts.arch))
    spilled = {}
    for op in graph.operators:
        if op.opcode == customops.SPILL:
            t = graph.tensors[op.inputs[0]]
            spilled[f"t{t.index}"] = {"name": t.name, "bytes": t.nbytes, "slot": customops.decode(op).slot,
                                      "after_operator": op.index}
    peak = d["peak"]
    scratch_at_peak = 0 if peak is None else next(o["scratch_bytes"] for o in d["operators"]
                                                  if o["index"] == peak["operator"])
    return {
        "name": "tinyseg",
        "head": d["head"],
        "head_is": HEAD_LABEL,
        "scratch_at_peak": scratch_at_peak,
        "tail_estimate": d["tail"]["total"],
        "total": d["total"],
        "peak": peak,
        "tinyseg_ops": [o["index"] for o in d["operators"] if o["opcode"] in customops.TINYSEG_OPS],
        "spilled": spilled or "none",
        "runtime": d["runtime"],
        "arch": opts.arch,
        "exact": d["exact"],
    }
