"""TinySeg as a tflite-tools plugin (pluggy project "tflite_tools", entry-point group "tflite_tools").

The host (tflite-tools with patches/tflite-tools applied) declares these hook specifications:

- ``tflite_tools_add_options(parser, command)``: add the plugin's options (optimize-only ones unless
  ``command == "analyze"``);
- ``tflite_tools_check_options(options, command)``: refuse bad values before the model is read;
- ``tflite_tools_describe_operator(op_id, custom_code, inputs, outputs, custom_options)``: tell the host
  what a TinySeg operator (Spill, Fetching, FetchingConv2D, StreamChain) reads and writes, so that it
  can read a model TinySeg wrote;
- ``tflite_tools_optimize(model: bytes, options) -> bytes | None``: called with the model the host's
  reorder pass produced; return a rewritten model, or None to leave it as it is;
- ``tflite_tools_analysis(model: bytes, options) -> dict | None``: a section for the host's report.

TinySeg runs the pipeline of ``tinyseg optimize`` (pipeline.py) on the reordered model: the same
refusals of models TFLM cannot run, the same strategies (row streaming, spilling and fused fetching)
and default plan, the bit-exact check in TFLM bounded by ``--time-limit``, the same warnings on
stderr, and the same exit codes (docs/cli.md): 2 bad input, 3 target not reached (the best
model is still written), 4 verification failed (nothing written).
"""

from __future__ import annotations

import argparse
import sys

import pluggy

from . import deadline
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

    def __init__(
        self, message: str, exit_code: int = EXIT_ERROR, model: bytes | None = None
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        if model is not None:
            self.model = model


def _target(text: str | int | None) -> dict:
    """--target as Options fields: 'min', a size, or None (the default plan; pipeline.py)."""
    from .pipeline import target_fields

    try:
        return target_fields(text)
    except ValueError as exc:
        raise PluginError(f"tinyseg: --target: {exc}") from None


@hookimpl
def tflite_tools_add_options(parser: argparse.ArgumentParser, command: str | None) -> None:
    from .deprecation import deprecated
    from .memory.kernels import KERNEL_SETS

    if command == "analyze":
        about = (
            "TinySeg's report section: the arena head as TFLM plans it for a kernel set and build, "
            "the tail estimate and the tensors a TinySeg model spills"
        )
    else:
        about = (
            "TinySeg, after the reorder pass: shrinks the arena head by row streaming (StreamChain), "
            "spilling and fused fetching, to the smallest head that writes no flash and adds at "
            "most 1% modelled latency, or to --target; checked bit-exact in TFLM"
        )
    g = parser.add_argument_group("tinyseg", about)
    g.add_argument(
        "--kernel-set",
        dest="kernel_set",
        default="reference",
        metavar="NAME",
        help=f"kernel set the plan is for (which implementation each operator gets): "
        f"{', '.join(KERNEL_SETS)} (default: reference)",
    )
    deprecated(g, "--runtime", "--kernels", use="--kernel-set", dest="kernel_set")
    g.add_argument(
        "--build-profile",
        dest="build_profile",
        default=None,
        metavar="NAME",
        help="build the tail estimate assumes: host64 (64-bit host) or cortex-m (32-bit firmware) "
        "(default: host64; cortex-m for the arduino, esp-idf, zephyr and edge-impulse kernel sets)",
    )
    deprecated(g, "--arch", use="--build-profile", dest="build_profile")
    g.add_argument(
        "--board",
        dest="board",
        default=None,
        metavar="NAME|FILE",
        help="memory map the modelled cost is for: generic, nicla-vision, esp32-s3-psram, or a "
        ".toml/.json file (default: generic)",
    )
    if command == "analyze":
        return
    g.add_argument(
        "--rate",
        default=None,
        metavar="PER_SECOND",
        help="inferences per second the flash wear-out years assume (default: 1)",
    )
    g.add_argument(
        "--target",
        default=None,
        metavar="SIZE",
        help="arena head to reach, e.g. 160KB, or 'min' for the smallest head at any price "
        "(default: the smallest head that writes no flash and adds at most 1%% modelled "
        "latency); not reached: exit 3",
    )
    g.add_argument("--no-partial", action="store_true", help="spill whole tensors only")
    g.add_argument("--no-fuse", action="store_true", help="no fused fetching")
    g.add_argument(
        "--no-split", action="store_true", help="no splitting of ADD/SUB/MUL over a concatenation"
    )
    g.add_argument(
        "--no-scratch16", action="store_true", help="keep TRANSPOSE_CONV's int32 scratch"
    )
    g.add_argument(
        "--no-stream", action="store_true", help="no StreamChain operators (row-by-row chains)"
    )
    g.add_argument(
        "--verify-runs",
        type=str,
        default="3",
        metavar="N",
        help="random inputs for the bit-exact check in TFLM, at least 1 (default: 3; 3 edge-case inputs are added)",
    )
    g.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the bit-exact check in TFLM (not recommended)",
    )
    g.add_argument(
        "--time-limit",
        default=None,
        metavar="SECONDS",
        help="seconds the whole pass may take (wall clock), and each TFLM run of the verification "
        "(CPU time) (default: 600)",
    )
    g.add_argument(
        "--tflm-dir",
        default=None,
        metavar="DIR",
        help="TFLM tree: check with TinySeg's real kernels in a cached host build of it "
        "(default: $TFLM_DIR; without either, TinySeg operators are lowered to builtins)",
    )


def _verify_runs(options: argparse.Namespace) -> int:
    text = str(getattr(options, "verify_runs", "3"))
    try:
        runs = int(text)
    except ValueError:
        runs = 0
    if runs < 1:
        raise PluginError(
            f"tinyseg: --verify-runs: '{text}' is not a number of runs, at least 1 "
            "(--no-verify skips the check)"
        )
    return runs


def _time_limit(options: argparse.Namespace) -> float:
    from .pipeline import DEFAULT_TIME_LIMIT

    text = str(getattr(options, "time_limit", None) or DEFAULT_TIME_LIMIT)
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise PluginError(f"tinyseg: --time-limit: '{text}' must be a positive number of seconds")
    return seconds


def _options(options: argparse.Namespace):
    from .memory.kernels import KERNEL_SETS
    from .transforms.optimizer import Options

    kernel_set = getattr(options, "kernel_set", None) or "reference"
    if kernel_set not in KERNEL_SETS:
        raise PluginError(
            f"tinyseg: --kernel-set: '{kernel_set}' is not a kernel set "
            f"(choose from: {', '.join(KERNEL_SETS)})"
        )
    from .memory.kernels import BUILD_PROFILES, default_build_profile

    build_profile = getattr(options, "build_profile", None) or default_build_profile(kernel_set)
    if build_profile not in BUILD_PROFILES:
        raise PluginError(
            f"tinyseg: --build-profile: '{build_profile}' is not a build profile (choose from: host64, cortex-m)"
        )
    target = getattr(options, "target", None)
    return Options(
        kernel_set=kernel_set,
        build_profile=build_profile,
        **_target(target),
        partial=not getattr(options, "no_partial", False),
        fuse=not getattr(options, "no_fuse", False),
        split=not getattr(options, "no_split", False),
        scratch=not getattr(options, "no_scratch16", False),
        stream=not getattr(options, "no_stream", False),
        reorder=False,  # the host's own reorder pass has run
    )


def _board(options: argparse.Namespace):
    from .memory.boards import DEFAULT_BOARD, load_board

    try:
        return load_board(getattr(options, "board", None) or DEFAULT_BOARD)
    except TinySegError as exc:
        raise PluginError(f"tinyseg: --board: {exc}", exc.exit_code) from None


def _rate(options: argparse.Namespace) -> float:
    from .sizes import parse_rate

    try:
        return parse_rate(str(getattr(options, "rate", None) or "1"))
    except ValueError as exc:
        raise PluginError(f"tinyseg: --rate: {exc}", 2) from None


@hookimpl
def tflite_tools_check_options(options: argparse.Namespace, command: str | None) -> None:
    _options(options)
    _board(options)
    if command != "analyze":
        _rate(options)
    if command != "analyze" and not getattr(options, "no_verify", False):
        _verify_runs(options)
        _time_limit(options)


@hookimpl
def tflite_tools_describe_operator(
    op_id: int, custom_code: str, inputs: list[int], outputs: list[int], custom_options: bytes
) -> dict | None:
    """Spill reads its victim and writes nothing in RAM; Fetching, FetchingConv2D and StreamChain
    read their in-RAM operands (and filter, bias) and write their outputs: exactly the tensor lists
    the operator has."""
    from .contract import customops

    if custom_code not in customops.TINYSEG_OPS:
        return None
    return {"type": custom_code, "inputs": [t for t in inputs], "outputs": list(outputs)}


def _graph(model: bytes):
    from .pipeline import load

    try:
        return load(model, "model")
    except TinySegError as exc:
        raise PluginError(f"tinyseg: {exc}", exc.exit_code) from None


@hookimpl
def tflite_tools_optimize(model: bytes, options: argparse.Namespace) -> bytes | None:
    """The pipeline of ``tinyseg optimize`` on the host's reordered model: the same refusals,
    the same check in TFLM, the same sentences and exit codes."""
    from .checks.real_kernels import resolve_tflm_dir
    from .ir.modelio import recover
    from .pipeline import Run, optimize

    for warning in recover():  # an interrupted `tinyseg` run's outputs, before anything else
        print(f"tinyseg: warning: {warning}", file=sys.stderr)
    opts = _options(options)
    runs = None if getattr(options, "no_verify", False) else _verify_runs(options)
    run = Run(
        opts,
        runs=runs,
        time_limit=_time_limit(options),
        tflm_dir=None if runs is None else resolve_tflm_dir(getattr(options, "tflm_dir", None)),
        keep_optimized=True,  # the host may chain its passes on a model TinySeg wrote
        board=_board(options),
        rate=_rate(options),
    )
    try:
        with deadline.within(run.time_limit):  # the whole pass, as `tinyseg optimize`'s run
            out = optimize(model, run, "model")
    except (TinySegError, deadline.TimeLimit) as exc:
        raise PluginError(f"tinyseg: {exc}", exc.exit_code) from None
    if out.unchanged is not None:
        print(f"tinyseg: {out.unchanged}; left unchanged")
        written = None
    else:
        v = out.verification
        if v is not None:
            print(
                f"tinyseg: verified: outputs bit-identical to the reordered model in TFLM on {v.runs} random inputs "
                f"and {v.edge_cases} edge cases ({opts.kernel_set} kernels; {v.describe()})"
            )
        else:
            print("tinyseg: not verified (--no-verify)")
        if out.cost is not None:
            from .memory.cost import summary_lines

            for line in summary_lines(out.cost):
                print(f"tinyseg: {line.strip()}")
        if getattr(options, "board", None) is not None:  # as `tinyseg optimize --board` prints it
            from .report.steps import memory_lines

            for line in memory_lines(out.regions, out.model_bytes, run.board.name):
                print(f"tinyseg: {line}")
        if out.fits is not None:
            print(f"tinyseg: {out.fits}")
        if out.nearby:
            from .report.steps import nearby_lines

            for line in nearby_lines(out.nearby, run.board.name):
                print(f"tinyseg: {line.strip()}")
        if out.cost is not None:
            for w in out.cost.warnings():  # on stderr, as `tinyseg optimize` prints them
                print(f"tinyseg: {w}", file=sys.stderr)
        written = out.data
    if not out.target_met:
        raise PluginError(
            f"tinyseg: target {opts.target_bytes:,} B not reachable: best head "
            f"{out.result.plan.head:,} B (written)",
            EXIT_TARGET_NOT_REACHED,
            model=written if written is not None else model,
        )
    return written


@hookimpl
def tflite_tools_analysis(model: bytes, options: argparse.Namespace) -> dict:
    from .contract import customops
    from .memory.analysis import to_dict
    from .pipeline import Run, analyze

    opts = _options(options)
    graph = _graph(model)
    d = to_dict(analyze(graph, Run(opts))[0])
    spilled = {}
    for op in graph.operators:
        if op.opcode == customops.SPILL:
            t = graph.tensors[op.inputs[0]]
            spilled[f"t{t.index}"] = {
                "name": t.name,
                "bytes": t.nbytes,
                "slot": customops.decode(op).slot,
                "after_operator": op.index,
            }
    peak = d["peak"]
    scratch_at_peak = (
        0
        if peak is None
        else next(o["scratch_bytes"] for o in d["operators"] if o["index"] == peak["operator"])
    )
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
        "kernel_set": d["kernel_set"],
        "runtime": d["kernel_set"],  # deprecated spelling of "kernel_set", kept for one release
        "build_profile": opts.build_profile,
        "arch": opts.build_profile,  # deprecated spelling of "build_profile", kept for one release
        "exact": d["exact"],
    }
