"""The ``tinyseg`` command line. Each subcommand reads, computes everything, and only then writes,
so a failure leaves no output file behind. Exit codes are listed in docs/cli.md."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from . import deadline
from .errors import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_TARGET_NOT_REACHED,
    EXIT_VERIFY_FAILED,
    MESSAGE_LIMIT,
    TinySegError,
    shown,
)
from .options import ANALYZE, OPTIMIZE, baud_rate, parse_size, positive_int, positive_seconds

if TYPE_CHECKING:
    from .pipeline import Run

HELP_COLUMNS = 80  # --help fits this many columns however wide the terminal is


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, at most HELP_COLUMNS wide (narrower terminals keep their width)."""

    def __init__(self, prog: str, **kwargs) -> None:
        columns = shutil.get_terminal_size().columns
        kwargs.setdefault("width", max(min(columns, HELP_COLUMNS) - 2, 40))
        super().__init__(prog, **kwargs)

    def _split_lines(self, text: str, width: int) -> list[str]:
        # "esp32-s3-psram" and "edge-impulse" stay whole: a name broken at a hyphen reads as two
        return textwrap.wrap(
            self._whitespace_matcher.sub(" ", text).strip(), width, break_on_hyphens=False
        )


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2, and takes no abbreviated option."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)  # "--targ" must not silently stand for "--target"
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        # main() prints "tinyseg: error: "; name the subcommand only ("analyze: ..."), not the program again.
        sub = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        raise TinySegError(f"{sub}: {message}" if sub else message, EXIT_ERROR)


def _run(args: argparse.Namespace, **options) -> "Run":
    """The pipeline's Run for the options a subcommand was given."""
    from .options import run_for

    return run_for(vars(args), **options)


def cmd_analyze(args: argparse.Namespace) -> int:

    from .ir.modelio import read_model_bytes, write_all
    from .memory.analysis import to_dict
    from .pipeline import analyze, board_fit, check_outputs, load
    from .report.tables import analysis_text, csv_files, stream_text, table_width

    json_file = args.json if args.json and args.json != "-" else None
    outputs = [("--json", json_file), ("--plot", args.plot)]
    if args.csv:
        from .report.tables import CSV_NAMES

        outputs += [("--csv", Path(args.csv) / name) for name in CSV_NAMES]
    run = _run(args, stream_io=args.stream_io)  # a bad --board is refused before the model is read
    graph = load(read_model_bytes(args.model), shown(args.model), run.memo)
    check_outputs([args.model], outputs, csv_dir=args.csv)
    a, stream = analyze(graph, run, stream=args.stream or args.stream_io)
    _warn_layout_dependent(graph)
    files: list[tuple[str, bytes]] = []
    if args.csv:
        files += [
            (str(Path(args.csv) / name), data) for name, data in csv_files(a, args.model).items()
        ]
    if args.plot:
        from .report.plots import plan_png

        files.append(
            (args.plot, plan_png(a, f"{shown(args.model)}: head {a.head:,} B ({args.kernel_set})"))
        )
    d = to_dict(a, args.model)
    if stream is not None:
        d["stream"] = stream
    fit = board_fit(graph, a, run)
    d["board"] = fit
    text = json.dumps(d, indent=1) if args.json else ""
    if json_file:
        files.append((json_file, (text + "\n").encode()))
    write_all(files, make_dirs=(args.csv,) if args.csv else ())
    if args.json == "-":
        print(text)
    else:
        sys.stdout.write(analysis_text(a, args.model, table_width()))
        if stream is not None:
            sys.stdout.write(stream_text(stream))
        if args.board is not None:  # the default prints what it always printed
            print(
                f"board {fit['name']}: arena region '{fit['arena_region']}' has {fit['arena_free']:,} B "
                f"free: the total {'fits' if fit['fits'] else 'does not fit'}; modelled compute "
                f"{fit['compute_ms']:,.1f} ms per inference ({args.kernel_set} kernels)"
            )
    return EXIT_OK


def _warn_layout_dependent(graph) -> None:
    """The plan of a model whose outputs follow the arena layout is TFLM's, but the model computes
    garbage on any device: say so (optimize refuses it)."""
    from .ir.validate import batch_space_mismatch

    why = batch_space_mismatch(graph)
    if why:
        print(f"tinyseg: warning: {why}", file=sys.stderr)


def cmd_optimize(args: argparse.Namespace) -> int:
    from .checks.real_kernels import resolve_tflm_dir
    from .ir.modelio import read_model_bytes, write_all
    from .options import strategy_fields
    from .pipeline import SideFiles, check_side_files, load, optimize, side_files

    run = _run(args, **strategy_fields(vars(args)))
    data = read_model_bytes(args.model)
    graph = load(data, shown(args.model), run.memo)
    side = SideFiles(args.report, args.plot, args.csv, args.storage_header, args.frontier_plot)
    check_side_files(args.model, args.output, side, run, force=args.force)
    run.tflm_dir = None if args.unverified else resolve_tflm_dir(args.tflm_dir)
    # Progress only on a terminal: when stderr is captured, a failure must be its one line.
    if not args.quiet and sys.stderr.isatty():
        run.progress = lambda msg: print(f"  .. {msg}", file=sys.stderr)
    out = optimize(data, run, shown(args.model), graph)
    files = [(args.output, out.data)] + side_files(out, run, side, args.model, args.output)
    write_all(files, make_dirs=(args.csv,) if args.csv else ())
    if out.unchanged is not None:
        print(f"{out.unchanged}: wrote it unchanged to {shown(args.output, 0)}")
    else:
        _print_outcome(out, run, args.board is not None)
        print(f"wrote {shown(args.output, 0)}")
    if args.storage_header:
        print(f"wrote {shown(args.storage_header, 0)}: the plan's storage regions for the sketch")
    if not out.target_met:
        print(
            f"tinyseg: target {out.target:,} B not reachable: best head {out.result.plan.head:,} B (written)",
            file=sys.stderr,
        )
        return EXIT_TARGET_NOT_REACHED
    return EXIT_OK


def _print_outcome(out, run: "Run", board_named: bool) -> None:
    """What optimize prints of a rewritten model: the steps, the modelled cost, the board's
    regions (the board the user named), the next plans, the frontier, the check; warnings on
    stderr."""
    from .memory.cost import summary_lines
    from .report.steps import frontier_lines, memory_lines, nearby_lines, steps_table

    sys.stdout.write(steps_table(out.result))
    if out.cost is not None:
        print("\n".join(summary_lines(out.cost)))
    if board_named:
        print("\n".join(memory_lines(out.regions, out.model_bytes, run.board.name)))
    if out.fits is not None:
        print(out.fits)
    if out.nearby:
        print("\n".join(nearby_lines(out.nearby, run.board.name)))
    if out.cost is not None:
        for w in out.cost.warnings():
            print(f"tinyseg: {w}", file=sys.stderr)
    if board_named and out.misfit is not None:
        print(f"tinyseg: {out.misfit}", file=sys.stderr)
    if out.frontier is not None:
        print("\n".join(frontier_lines(out.frontier, run.board.name) + out.frontier_notes))
    v = out.verification
    if v is not None:
        print(
            f"verified ({v.describe()}): outputs bit-identical to the original in TFLM "
            f"on {v.runs} random inputs and {v.edge_cases} edge cases"
        )
    else:
        print(
            "UNVERIFIED: the written model was not checked against the original in TFLM (--unverified)"
        )


def cmd_boards(args: argparse.Namespace) -> int:
    from .memory.boards import PRESETS, presets_table

    if args.json:
        print(json.dumps([make().as_dict() for make in PRESETS.values()], indent=1))
    else:
        sys.stdout.write(presets_table())
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from .checks.verify import verify
    from .ir.graph import build_graph
    from .ir.modelio import load_model
    from .ir.validate import tflm_refusals, tinyseg_operators, unsupported
    from .memory.planner import offline_conflict

    a = build_graph(load_model(args.original), name=shown(args.original))
    b = build_graph(load_model(args.optimized), name=shown(args.optimized))
    ta, tb = tinyseg_operators(a), tinyseg_operators(b)
    if ta:
        swapped = " (the arguments look swapped)" if not tb else ""
        raise TinySegError(
            f"{shown(args.original)} holds TinySeg operators ({shown(a.operators[ta[0]].opcode)} at operator {ta[0]}), "
            f"so it is not an original model{swapped}: give the original first, then the optimized one"
        )
    for g, name in ((a, shown(args.original)), (b, shown(args.optimized))):
        # a broken layout in the optimized model is what the check finds (exit 4)
        why = unsupported(g) or (offline_conflict(g) if g is a else None)
        if why:
            raise TinySegError(f"{name}: cannot be verified: {why}")
        refusals = [r for r in tflm_refusals(g) if r.certain]
        if refusals:
            raise TinySegError(f"{name}: cannot be verified in TFLM: {refusals[0]}")
    from .checks.real_kernels import resolve_tflm_dir
    from .checks.verify import check_io_bytes

    for g, name in ((a, args.original), (b, args.optimized)):
        check_io_bytes(g, name, args.max_io_bytes)
    progress = (lambda msg: print(f"  .. {msg}", file=sys.stderr)) if sys.stderr.isatty() else None
    v = verify(
        a,
        b,
        runs=args.runs,
        seconds=args.time_limit,
        tflm_dir=resolve_tflm_dir(args.tflm_dir),
        progress=progress,
        max_io_bytes=args.max_io_bytes,
    )
    if not v.identical:
        raise TinySegError(f"outputs differ ({v.describe()}): {v.detail}", EXIT_VERIFY_FAILED)
    print(
        f"identical: {v.runs} random inputs and {v.edge_cases} edge cases, outputs bit-identical in TFLM "
        f"({v.describe()})"
    )
    return EXIT_OK


def cmd_tflm_install(args: argparse.Namespace) -> int:
    from .deploy.tflm_install import install

    for line in install(args.tflm_dir, check_only=args.check):
        print(line)
    return EXIT_OK


def cmd_tflm_package(args: argparse.Namespace) -> int:
    from .deploy.package import package

    for line in package(args.format, args.dir, force=args.force):
        print(line)
    return EXIT_OK


def cmd_remote_host(args: argparse.Namespace) -> int:
    from .deploy.remote import serve

    return serve(
        port=args.port,
        baud=args.baud,
        storage=args.storage,
        timeout=args.timeout,
        once=args.once,
        capacity=args.capacity,
    )


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("tinyseg-plugin")
    except PackageNotFoundError:  # run from a source tree that was never installed
        __version__ = "unknown (not installed)"
    p = _Parser(
        prog="tinyseg",
        description="TFLM-exact memory analysis and TinySeg optimization of .tflite models",
        epilog="Exit codes: 0 done, 2 bad input, 3 --target not reached (best model written), "
        "4 verification failed (nothing written). Docs: docs/cli.md",
    )
    p.add_argument("--version", action="version", version=f"tinyseg {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    a = sub.add_parser("analyze", help="show how TFLM lays the model out in its arena")
    a.add_argument("model", help=".tflite file")
    for option in ANALYZE:
        option.add_to(a)
    a.set_defaults(func=cmd_analyze)

    o = sub.add_parser(
        "optimize",
        help="shrink the arena by row streaming, spilling and fused fetching: to the smallest "
        "total (head + tail) that writes no flash and adds at most 1%% modelled latency, or to a "
        "--target head",
    )
    o.add_argument("model", help=".tflite file")
    for option in OPTIMIZE:
        option.add_to(o)
    o.set_defaults(func=cmd_optimize)

    b = sub.add_parser("boards", help="list the built-in board memory maps (--board NAME)")
    b.add_argument("--json", action="store_true", help="print them as JSON")
    b.set_defaults(func=cmd_boards)

    v = sub.add_parser(
        "verify",
        help="check an optimized model computes exactly what the original does",
        description="Run both models in TFLM on the same random and edge-case inputs; their outputs "
        "must be bit-identical (exit 0), else exit 4.",
    )
    v.add_argument("original", help="the model before optimization (.tflite)")
    v.add_argument("optimized", help="the model tinyseg optimize wrote (.tflite)")
    v.add_argument(
        "--runs",
        type=positive_int,
        default=3,
        help="random inputs, at least 1 (default: 3; 3 edge-case inputs are added)",
    )
    v.add_argument(
        "--time-limit",
        type=positive_seconds,
        default=deadline.DEFAULT_TIME_LIMIT,
        metavar="SECONDS",
        help="seconds the whole run may take (wall clock), and each TFLM run (CPU time) "
        "(default: 600)",
    )
    v.add_argument(
        "--tflm-dir",
        metavar="DIR",
        default=None,
        help="TFLM tree: check with TinySeg's real kernels in a cached host build of it (default: "
        "$TFLM_DIR; without either, TinySeg operators are lowered to builtins)",
    )
    v.add_argument(
        "--max-io-bytes",
        type=parse_size,
        default="256MiB",
        metavar="SIZE",
        help="bytes one run's inputs and outputs may take, per model (default: 256MiB); a model "
        "over it is refused before any input is built (the check keeps several copies of them)",
    )
    v.set_defaults(func=cmd_verify)

    t = sub.add_parser("tflm", help="add TinySeg's kernels to a TFLM checkout, or package them")
    tsub = t.add_subparsers(dest="tflm_command", metavar="ACTION", parser_class=_Parser)
    tsub.required = True
    ti = tsub.add_parser(
        "install",
        help="copy TinySeg's kernels (tflm_ops) into a TFLM tree and edit its build "
        "and TRANSPOSE_CONV files by pattern, all or nothing (idempotent; docs/runtime.md)",
    )
    ti.add_argument(
        "--tflm-dir",
        required=True,
        help="the TFLM tree: a tflite-micro checkout, the Arduino library, an ESP-IDF component, "
        "Zephyr's module or the Edge Impulse SDK",
    )
    ti.add_argument(
        "--check", action="store_true", help="only say what would change; change nothing"
    )
    ti.set_defaults(func=cmd_tflm_install)
    tp = tsub.add_parser(
        "package",
        help="write TinySeg's kernels and runtime as a library in an ecosystem's own form, "
        "beside its TFLM package and registered through the op resolver; no TFLM file changes "
        "(docs/runtime.md)",
    )
    tp.add_argument(
        "--format",
        required=True,
        choices=["arduino", "esp-idf", "zephyr", "platformio"],
        help="arduino: a library depending on Arduino_TensorFlowLite, with the Nicla Vision "
        "sketches; esp-idf: a component depending on espressif/esp-tflite-micro; zephyr: a "
        "module; platformio: a library.json library",
    )
    tp.add_argument("dir", metavar="DIR", help="the package's directory: new or empty")
    tp.add_argument("--force", action="store_true", help="replace a non-empty DIR")
    tp.set_defaults(func=cmd_tflm_package)

    r = sub.add_parser("remote-host", help="serve a board's remote spilling over a serial line")
    r.add_argument("--port", required=True, help="serial device, e.g. /dev/ttyACM0")
    r.add_argument(
        "--baud",
        type=baud_rate,
        default=921600,
        help="bits per second on the serial line, as the board's TINYSEG_REMOTE_BAUD sets it "
        "(USB CDC ignores it) (default: 921600)",
    )
    r.add_argument("--storage", default=None, help="directory for spilled slots (default: memory)")
    r.add_argument(
        "--timeout",
        type=positive_seconds,
        default=2.0,
        help="seconds before a silent peer is an error",
    )
    r.add_argument("--once", action="store_true", help="exit when the board disconnects")
    r.add_argument(
        "--capacity",
        type=parse_size,
        default="16MiB",
        metavar="SIZE",
        help="bytes all slots together may hold, in memory or in DIR (default: 16MiB); a write or "
        "erase beyond it is answered with a no_space error",
    )
    r.set_defaults(func=cmd_remote_host)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from .ir.modelio import recover

        for warning in recover():  # an interrupted run's outputs, before anything else
            print(f"tinyseg: warning: {shown(warning, MESSAGE_LIMIT)}", file=sys.stderr)
        args = build_parser().parse_args(argv)
        with deadline.within(getattr(args, "time_limit", None)):  # optimize, verify
            return args.func(args)
    except (
        TinySegError
    ) as exc:  # one line, whatever a name in it held (shown escapes; this is the last guard)
        print(f"tinyseg: error: {shown(exc, MESSAGE_LIMIT)}", file=sys.stderr)
        return exc.exit_code
    except deadline.TimeLimit as exc:  # not an Exception: the timer raises it anywhere
        print(f"tinyseg: error: {shown(exc, MESSAGE_LIMIT)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tinyseg: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except (
        Exception
    ) as exc:  # a bug, not bad input: one line, no traceback (TINYSEG_DEBUG=1 shows it)
        import os

        if os.environ.get("TINYSEG_DEBUG"):
            raise
        print(
            f"tinyseg: internal error: {type(exc).__name__}: {shown(exc, 200)} "
            "(please report it; TINYSEG_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
