"""TinySeg as a tflite-tools plugin (pluggy project "tflite_tools", entry-point group "tflite_tools").

The host (tflite-tools with patches/tflite-tools applied) declares these hook specifications:

- ``tflite_tools_add_options(parser, command)``: add the plugin's options (optimize-only ones unless
  ``command == "analyze"``);
- ``tflite_tools_check_options(options, command)``: refuse bad values before the model is read;
- ``tflite_tools_describe_operator(op_id, custom_code, inputs, outputs, custom_options, shapes)``:
  tell the host what a TinySeg operator (Spill, Fetching, FetchingConv2D, StreamChain) reads and
  writes, and the MACs of the operators it holds, so that it can read a model TinySeg wrote;
- ``tflite_tools_optimize(model: bytes, options) -> bytes | None``: called with the model the host's
  reorder pass produced; return a rewritten model, or None to leave it as it is;
- ``tflite_tools_analysis(model: bytes, options) -> dict | None``: a section for the host's report.

The options are those of ``tinyseg optimize`` and ``tinyseg analyze``, from the one table
(options.py); where the host owns a name, the table gives the plugin's (``--tinyseg-csv``,
``--tinyseg-plot``), and the host's ``-o`` writes the model. TinySeg runs the pipeline of
``tinyseg optimize`` (pipeline.py) on the reordered model: the same refusals of models TFLM cannot
run, the same strategies and default plan, the bit-exact check in TFLM bounded by
``--time-limit``, the same side files, the same warnings on stderr, and the same exit codes
(errors.py; docs/cli.md).
"""

from __future__ import annotations

import argparse
import math
import sys
from types import SimpleNamespace

import pluggy

from . import deadline
from .errors import EXIT_ERROR, EXIT_TARGET_NOT_REACHED, TinySegError, shown
from .options import ANALYZE, OPTIMIZE, values

PROJECT = "tflite_tools"
hookimpl = pluggy.HookimplMarker(PROJECT)

HEAD_LABEL = "TFLM arena head as TFLM plans it: live tensors + kernel scratch, 16-byte aligned"
ABOUT_ANALYZE = (
    "TinySeg's report section: the arena head as TFLM plans it for a kernel set and build, "
    "the tail estimate and the tensors a TinySeg model spills"
)
ABOUT_OPTIMIZE = (
    "TinySeg, after the reorder pass: shrinks the arena by row streaming (StreamChain), "
    "spilling and fused fetching, to the smallest total (head + tail) that writes no flash and "
    "adds at most 1% modelled latency, or to a --target head; checked bit-exact in TFLM"
)


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


def _table(command: str | None) -> tuple:
    return ANALYZE if command == "analyze" else OPTIMIZE


@hookimpl
def tflite_tools_add_options(parser: argparse.ArgumentParser, command: str | None) -> None:
    about = ABOUT_ANALYZE if command == "analyze" else ABOUT_OPTIMIZE
    g = parser.add_argument_group("tinyseg", about)
    for option in _table(command):
        option.add_to(g, plugin=True)


def _values(options: argparse.Namespace, command: str | None = "optimize") -> dict:
    """The plugin's options parsed by the table; a bad value: one line, exit 2."""
    try:
        return values(options, _table(command))
    except ValueError as exc:
        raise PluginError(f"tinyseg: {exc}") from None


def _run(v: dict, **fields):
    """The pipeline's Run; a bad --board: one line with its exit code."""
    from .options import run_for

    try:
        return run_for(v, **fields)
    except TinySegError as exc:
        raise PluginError(f"tinyseg: --board: {exc}", exc.exit_code) from None


@hookimpl
def tflite_tools_check_options(options: argparse.Namespace, command: str | None) -> None:
    _run(_values(options, command))


@hookimpl
def tflite_tools_describe_operator(
    op_id: int,
    custom_code: str,
    inputs: list[int],
    outputs: list[int],
    custom_options: bytes,
    shapes: list[list[int]],
) -> dict | None:
    """Spill reads its victim and writes its token; Fetching, FetchingConv2D and StreamChain read
    their in-RAM operands, tokens (and filter, bias) and write their outputs: exactly the tensor
    lists the operator has. A StreamChain lists its own token (if it writes slots) first, so the
    host labels it with the name link.py gave it, the layers it holds (else its first output
    carries that name). ``macs``: what the host's --calc-macs counts for the
    operators it replaces (``shapes``: every tensor's shape, by id)."""
    from .contract import customops

    if custom_code not in customops.TINYSEG_OPS:
        return None
    try:
        o = customops.decode(SimpleNamespace(opcode=custom_code, custom_options=custom_options))
    except TinySegError as exc:
        raise PluginError(f"tinyseg: operator {op_id} ({custom_code}): {exc}") from None
    try:
        outs, macs = _described(o, inputs, outputs, shapes)
    except (ValueError, IndexError, TypeError):
        raise PluginError(
            f"tinyseg: operator {op_id} ({custom_code}): the shapes of the operators it holds "
            "do not fit them; the file is damaged: optimize the original model again"
        ) from None
    return {"type": custom_code, "inputs": list(inputs), "outputs": outs, "macs": macs}


def _described(o, inputs: list[int], outputs: list[int], shapes: list[list[int]]):
    """The outputs in the order the host labels them by, and the MACs."""
    from .contract import customops

    outs = list(outputs)
    macs = 0
    if isinstance(o, customops.StreamChainOptions):
        n_in = len(inputs)
        mine = [
            k
            for k, t in enumerate(outs)
            if n_in + k in o.tokens and 0 in shapes[t]  # its slot token (the --stream-io ones: 1)
        ]
        if mine:
            outs.insert(0, outs.pop(mine[-1]))
        macs = _chain_macs(o, list(inputs) + list(outputs), shapes)
    elif isinstance(o, customops.FetchingConv2DOptions):
        filt, out = shapes[inputs[-2]], shapes[outputs[0]]
        macs = host_macs("CONV_2D", [[], filt], out, {})
    return outs, macs


def host_macs(opcode: str, ins: list[list[int]], out: list[int], fields: dict) -> int:
    """The multiply-accumulates tflite-tools' --calc-macs counts for one builtin operator
    (``TFLiteModel._macs_for_op`` with its default weights: compute only; ``ins``: the inputs'
    shapes, ``out``: the output's, ``fields``: its options). Operators it does not count: 0."""
    if opcode == "CONV_2D":
        o_c, k_h, k_w, i_c = ins[1]
        n, o_h, o_w, _ = out
        return n * o_h * o_w * o_c * k_h * k_w * i_c
    if opcode == "DEPTHWISE_CONV_2D":
        _, k_h, k_w, c = ins[1]
        n, o_h, o_w, _ = out
        return n * c * o_h * o_w * k_h * k_w
    if opcode == "MEAN":
        n, i_h, i_w, c = ins[0]
        return n * i_h * i_w * c
    if opcode in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        n, o_h, o_w, c = out
        return (
            n
            * o_h
            * o_w
            * c
            * int(fields.get("filterHeight", 0))
            * int(fields.get("filterWidth", 0))
        )
    if opcode == "FULLY_CONNECTED":
        n, out_dim = out
        return n * ins[0][-1] * out_dim
    if opcode == "ADD":
        return (len(ins) - 1) * math.prod(out)
    return 0


def _chain_macs(o, node: list[int], shapes: list[list[int]]) -> int:
    """The sum of ``host_macs`` over a StreamChain's stages, on whole tensors."""

    def shape(lid: int) -> list[int]:
        if lid < 0:
            return []
        if lid < len(node):
            return list(shapes[node[lid]])
        return list(o.tensors[lid - len(node)].shape)

    return sum(
        host_macs(st.op, [shape(t) for t in st.inputs], shape(st.outputs[0]), dict(st.fields))
        for st in o.stages
    )


def _graph(model: bytes):
    from .pipeline import load

    try:
        return load(model, "model")
    except TinySegError as exc:
        raise PluginError(f"tinyseg: {exc}", exc.exit_code) from None


@hookimpl
def tflite_tools_optimize(model: bytes, options: argparse.Namespace) -> bytes | None:
    """The pipeline of ``tinyseg optimize`` on the host's reordered model: the same refusals,
    the same check in TFLM, the same side files, sentences and exit codes."""
    from .checks.real_kernels import resolve_tflm_dir
    from .ir.modelio import recover, write_all
    from .options import strategy_fields
    from .pipeline import SideFiles, check_side_files, optimize, side_files

    for warning in recover():  # an interrupted `tinyseg` run's outputs, before anything else
        print(f"tinyseg: warning: {warning}", file=sys.stderr)
    v = _values(options)
    # reorder=False: the host's own reorder pass has run; keep_optimized: the host may chain
    # its passes on a model TinySeg wrote.
    run = _run(v, **strategy_fields(v), reorder=False)
    run.keep_optimized = True
    name = getattr(options, "input_path", None) or "model"
    output = getattr(options, "output_path", None) or name
    side = SideFiles(v["report"], v["plot"], v["csv"], v["storage_header"], v["frontier_plot"])
    if not v["quiet"] and sys.stderr.isatty():
        run.progress = lambda msg: print(f"  .. {msg}", file=sys.stderr)
    try:
        check_side_files(name, None, side, run)
        run.tflm_dir = None if run.runs is None else resolve_tflm_dir(v["tflm_dir"])
        with deadline.within(run.time_limit):  # the whole pass, as `tinyseg optimize`'s run
            out = optimize(model, run, shown(name))
            files = side_files(out, run, side, name, output)
        write_all(files, make_dirs=(side.csv,) if side.csv else ())
    except (TinySegError, deadline.TimeLimit) as exc:
        raise PluginError(f"tinyseg: {exc}", exc.exit_code) from None
    if out.unchanged is not None:
        print(f"tinyseg: {out.unchanged}; left unchanged")
        written = None
    else:
        _print_outcome(out, run, v["board"] is not None)
        written = out.data
    if side.storage_header:
        print(
            f"tinyseg: wrote {shown(side.storage_header, 0)}: the plan's storage regions for the sketch"
        )
    if not out.target_met:
        raise PluginError(
            f"tinyseg: target {out.target:,} B not reachable: best head "
            f"{out.result.plan.head:,} B (written)",
            EXIT_TARGET_NOT_REACHED,
            model=written if written is not None else model,
        )
    return written


def _print_outcome(out, run, board_named: bool) -> None:
    """What ``tinyseg optimize`` prints of a rewritten model, each line after "tinyseg: "; the
    warnings on stderr."""
    from .memory.cost import summary_lines
    from .report.steps import frontier_lines, memory_lines, nearby_lines

    v = out.verification
    if v is not None:
        print(
            f"tinyseg: verified: outputs bit-identical to the reordered model in TFLM on {v.runs} "
            f"random inputs and {v.edge_cases} edge cases ({run.options.kernel_set} kernels; "
            f"{v.describe()})"
        )
    else:
        print("tinyseg: not verified (--no-verify)")
    # The summary and the next plans stripped of their indent, the tables (memory, frontier) not.
    lines = [x.strip() for x in summary_lines(out.cost)] if out.cost is not None else []
    if board_named:  # as `tinyseg optimize --board` prints it
        lines += memory_lines(out.regions, out.model_bytes, run.board.name)
    lines += [out.fits] if out.fits is not None else []
    lines += [x.strip() for x in nearby_lines(out.nearby, run.board.name)] if out.nearby else []
    if out.frontier is not None:
        lines += frontier_lines(out.frontier, run.board.name) + out.frontier_notes
    for line in lines:
        print(f"tinyseg: {line}")
    warnings = out.cost.warnings() if out.cost is not None else []
    warnings += [out.misfit] if board_named and out.misfit is not None else []
    for w in warnings:  # on stderr, as `tinyseg optimize` prints them
        print(f"tinyseg: {w}", file=sys.stderr)


@hookimpl
def tflite_tools_analysis(model: bytes, options: argparse.Namespace) -> dict:
    from .contract import customops
    from .memory.analysis import to_dict
    from .pipeline import Run, analyze

    opts = _run(_values(options, "analyze")).options
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
