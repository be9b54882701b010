"""The ``tinyseg`` command line. Each subcommand reads, computes everything, and only then writes,
so a failure leaves no output file behind. Exit codes are listed in docs/cli.md."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .errors import TinySegError

EXIT_OK = 0
EXIT_ERROR = 2  # bad input or a model we cannot handle
EXIT_TARGET_NOT_REACHED = 3  # optimize: best model written, target not met
EXIT_VERIFY_FAILED = 4  # verify/optimize: outputs differ; nothing written
EXIT_INTERNAL = 1  # a bug in tinyseg (never expected; the fuzz tests assert it does not happen)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2, and takes no abbreviated option."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)  # "--targ" must not silently stand for "--target"
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        # main() prints "tinyseg: error: "; name the subcommand only ("analyze: ..."), not the program again.
        sub = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        raise TinySegError(f"{sub}: {message}" if sub else message, EXIT_ERROR)


def _kernels(p: argparse.ArgumentParser) -> None:
    from .runtimes import RUNTIMES

    p.add_argument("--runtime", choices=RUNTIMES, default="reference",
                   help="TFLM build whose kernels are planned: which implementation each operator gets "
                        "(reference, cmsis-nn, arduino, esp-idf, zephyr, edge-impulse; default: reference)")
    p.add_argument("--kernels", dest="runtime", choices=RUNTIMES, help=argparse.SUPPRESS)  # deprecated alias
    p.add_argument("--arch", choices=["host64", "cortex-m"], default=None,
                   help="pointer width the tail estimate assumes: 64-bit host or 32-bit Cortex-M "
                        "(default: host64; cortex-m for the arduino, esp-idf, zephyr and edge-impulse runtimes)")


def _resolve_arch(args: argparse.Namespace) -> None:
    from .kernels import default_arch

    if args.arch is None:
        args.arch = default_arch(args.runtime)


def cmd_analyze(args: argparse.Namespace) -> int:
    from .analysis import analyze_graph, to_dict
    from .customops import validate_graph
    from .graph import build_graph
    from .modelio import check_writable, load_model, write_all
    from .report import analysis_text, csv_files, table_width

    model = load_model(args.model)
    graph = build_graph(model, name=args.model)
    validate_graph(graph)  # a TinySeg operator its kernel would refuse: one line, exit 2
    _resolve_arch(args)
    json_file = args.json if args.json and args.json != "-" else None
    for path in (json_file, args.plot):
        if path:
            check_writable(path)
    if args.csv:
        check_writable(args.csv, directory=True)
    a = analyze_graph(graph, args.runtime, args.arch)
    stream = None
    if args.stream:
        from .stream_search import choice_dict, choose_streaming

        stream = choice_dict(choose_streaming(graph, args.runtime, args.arch), graph)
    files: list[tuple[str, bytes]] = []
    if args.csv:
        from pathlib import Path

        files += [(str(Path(args.csv) / name), data) for name, data in csv_files(a, args.model).items()]
    if args.plot:
        from .plots import plan_png

        files.append((args.plot, plan_png(a, f"{args.model}: head {a.head:,} B ({args.runtime})")))
    d = to_dict(a, args.model)
    if stream is not None:
        d["stream"] = stream
    text = json.dumps(d, indent=1) if args.json else ""
    if json_file:
        files.append((json_file, (text + "\n").encode()))
    write_all(files, make_dirs=(args.csv,) if args.csv else ())
    if args.json == "-":
        print(text)
    else:
        sys.stdout.write(analysis_text(a, args.model, table_width()))
        if stream is not None:
            from .report import stream_text

            sys.stdout.write(stream_text(stream))
    return EXIT_OK


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}': must be at least 1")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"'{text}': must be a positive number of seconds")
    return value


def parse_size(text: str) -> int:
    """argparse type for byte sizes (tinyseg_plugin/sizes.py)."""
    from .sizes import parse_size as parse

    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _refuse_unrunnable(graph, name: str, unverified: bool) -> None:
    """Refuse, before any search, a model TFLM cannot run (exit 2, with the reason and what to do)."""
    from .validate import tflm_refusals, tinyseg_operators

    ts = tinyseg_operators(graph)
    if ts:
        raise TinySegError(f"{name} already holds TinySeg operators ({graph.operators[ts[0]].opcode} at operator "
                           f"{ts[0]}): give the original model")
    refusals = [r for r in tflm_refusals(graph) if r.certain]  # the real load below settles the rest
    fatal = [r for r in refusals if not r.missing]
    if fatal:
        raise TinySegError(f"{name}: TFLM refuses the model in Prepare: {fatal[0]}")
    if refusals and not unverified:
        r = refusals[0]
        raise TinySegError(
            f"{name}: operator {r.operator} '{r.opcode}' is {r.reason}, so the result cannot be verified in TFLM; "
            "rerun with --unverified to write it unchecked (marked UNVERIFIED in the table and the report) once "
            "your firmware registers that kernel, or replace the operator with builtins")


def cmd_optimize(args: argparse.Namespace) -> int:
    from .customops import validate_graph
    from .graph import build_graph
    from .modelio import check_writable, load_model, model_to_bytes, write_all
    from .optimize_report import report_dict, steps_table
    from . import tflm
    from .optimizer import Options, optimize
    from .verify import arena_for, verify

    from pathlib import Path

    if not args.force and Path(args.output).resolve() == Path(args.model).resolve():
        raise TinySegError(f"-o {args.output} is the input model; choose another file (or --force to replace it)")
    model = load_model(args.model)
    graph = build_graph(model, name=args.model)
    validate_graph(graph)  # a TinySeg operator its kernel would refuse: one line, exit 2
    _resolve_arch(args)
    for path in (args.output, args.report, args.plot):
        if path:
            check_writable(path)
    _refuse_unrunnable(graph, args.model, args.unverified)
    if args.target is not None:
        from .optimizer import Result
        from .planner import plan_graph

        plan = plan_graph(graph, args.runtime, args.arch)
        if plan.head <= args.target:
            # Nothing to do: the output is the input, byte for byte; the report says so (no steps).
            return _write_unchanged(args, Result(graph=graph, plan=plan, original=plan),
                                    f"the model already meets --target {args.target:,} B (head {plan.head:,} B)")
    if not args.unverified:
        original = model_to_bytes(model)
        try:
            tflm.check_loads(original, arena_for(graph), seconds=min(args.time_limit, tflm.LOAD_SECONDS))
        except TinySegError as exc:
            raise TinySegError(f"{args.model}: {exc}; nothing to optimize") from None
    opts = Options(runtime=args.runtime, arch=args.arch, target_bytes=args.target, partial=not args.no_partial,
                   fuse=not args.no_fuse, scratch=not args.no_scratch16,
                   split=not args.no_split, stream=not args.no_stream)
    # Progress only on a terminal: when stderr is captured, a failure must be its one line.
    progress = (lambda msg: print(f"  .. {msg}", file=sys.stderr)) if not args.quiet and sys.stderr.isatty() else None
    result = optimize(graph, opts, progress)
    if result.plan.head >= result.original.head and result.plan.total >= result.original.total:
        # No pass lowers the arena: the output is the input, byte for byte, and needs no verification.
        from .optimizer import Result

        kept = Result(graph=graph, plan=result.original, original=result.original)
        return _write_unchanged(args, kept, f"no pass lowers the arena of {args.model} "
                                            f"(head {result.original.head:,} B)")
    verification = None
    if not args.unverified:
        if progress:
            progress(f"verifying against the original in TFLM ({args.runs} random inputs + 3 edge cases)")
        from .devicecheck import resolve_tflm_dir

        verification = verify(graph, result.graph, runs=args.runs, seconds=args.time_limit,
                              tflm_dir=resolve_tflm_dir(args.tflm_dir), progress=progress)
        if not verification.identical:
            raise TinySegError(f"verification failed: {verification.detail}; no output written", EXIT_VERIFY_FAILED)
    data = model_to_bytes(result.graph.model)
    report = report_dict(result, args.model, args.output, verification, target_bytes=args.target)
    if verification is None:
        report["verification"] = "UNVERIFIED: not checked in TFLM (--unverified)"
    else:
        report["verification"] = (f"bit-identical to the original in TFLM ({verification.describe()}) on "
                                  f"{verification.runs} random and {verification.edge_cases} edge-case inputs")
    files: list[tuple[str, bytes]] = [(args.output, data)]
    if args.report:
        files.append((args.report, (json.dumps(report, indent=1) + "\n").encode()))
    if args.plot:
        from .analysis import analyze_graph
        from .plots import plan_png

        png = plan_png(analyze_graph(result.graph, args.runtime, args.arch, result.plan),
                       f"{args.output}: head {result.plan.head:,} B ({args.runtime})")
        files.append((args.plot, png))
    write_all(files)
    sys.stdout.write(steps_table(result))
    if verification is not None:
        print(f"verified ({verification.describe()}): outputs bit-identical to the original in TFLM "
              f"on {verification.runs} random inputs and {verification.edge_cases} edge cases")
    else:
        print("UNVERIFIED: the written model was not checked against the original in TFLM (--unverified)")
    print(f"wrote {args.output}")
    return _target_status(args, result.plan.head)


def _write_unchanged(args: argparse.Namespace, result, why: str) -> int:
    """Nothing to gain (--target already met, or no pass lowers the arena): write the input
    unchanged (and the report and plot of it), say why, exit 0."""
    from pathlib import Path

    from .modelio import write_all
    from .optimize_report import report_dict

    files: list[tuple[str, bytes]] = [(args.output, Path(args.model).read_bytes())]
    if args.report:
        report = report_dict(result, args.model, args.output, None, target_bytes=args.target, unchanged=True)
        files.append((args.report, (json.dumps(report, indent=1) + "\n").encode()))
    if args.plot:
        from .analysis import analyze_graph
        from .plots import plan_png

        png = plan_png(analyze_graph(result.graph, args.runtime, args.arch, result.plan),
                       f"{args.output}: head {result.plan.head:,} B ({args.runtime})")
        files.append((args.plot, png))
    write_all(files)
    print(f"{why}: wrote it unchanged to {args.output}")
    return _target_status(args, result.plan.head)


def _target_status(args: argparse.Namespace, head: int) -> int:
    """EXIT_TARGET_NOT_REACHED (with the reason on stderr) when a --target was given and missed."""
    if args.target is not None and head > args.target:
        print(f"tinyseg: target {args.target:,} B not reachable: best head {head:,} B (written)", file=sys.stderr)
        return EXIT_TARGET_NOT_REACHED
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from .graph import build_graph
    from .modelio import load_model
    from .validate import tflm_refusals, tinyseg_operators
    from .verify import verify

    a = build_graph(load_model(args.original), name=args.original)
    b = build_graph(load_model(args.optimized), name=args.optimized)
    ta, tb = tinyseg_operators(a), tinyseg_operators(b)
    if ta:
        swapped = " (the arguments look swapped)" if not tb else ""
        raise TinySegError(f"{args.original} holds TinySeg operators ({a.operators[ta[0]].opcode} at operator {ta[0]}), "
                           f"so it is not an original model{swapped}: give the original first, then the optimized one")
    for g, name in ((a, args.original), (b, args.optimized)):
        refusals = [r for r in tflm_refusals(g) if r.certain]
        if refusals:
            raise TinySegError(f"{name}: cannot be verified in TFLM: {refusals[0]}")
    from .devicecheck import resolve_tflm_dir

    progress = (lambda msg: print(f"  .. {msg}", file=sys.stderr)) if sys.stderr.isatty() else None
    v = verify(a, b, runs=args.runs, seconds=args.time_limit, tflm_dir=resolve_tflm_dir(args.tflm_dir),
               progress=progress)
    if not v.identical:
        raise TinySegError(f"outputs differ ({v.describe()}): {v.detail}", EXIT_VERIFY_FAILED)
    print(f"identical: {v.runs} random inputs and {v.edge_cases} edge cases, outputs bit-identical in TFLM "
          f"({v.describe()})")
    return EXIT_OK


def cmd_tflm_install(args: argparse.Namespace) -> int:
    from .tflm_install import install

    for line in install(args.tflm_dir, check_only=args.check):
        print(line)
    return EXIT_OK


def cmd_remote_host(args: argparse.Namespace) -> int:
    from .remote import serve

    return serve(port=args.port, baud=args.baud, storage=args.storage, timeout=args.timeout, once=args.once)


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("tinyseg-plugin")
    except PackageNotFoundError:  # run from a source tree that was never installed
        __version__ = "unknown (not installed)"
    p = _Parser(prog="tinyseg", description="TFLM-exact memory analysis and TinySeg optimization of .tflite models",
                epilog="Exit codes: 0 done, 2 bad input, 3 --target not reached (best model written), "
                       "4 verification failed (nothing written). Docs: docs/cli.md")
    p.add_argument("--version", action="version", version=f"tinyseg {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    a = sub.add_parser("analyze", help="show how TFLM lays the model out in its arena")
    a.add_argument("model", help=".tflite file")
    _kernels(a)
    a.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write the analysis as JSON (to stdout without FILE)")
    a.add_argument("--csv", metavar="DIR", help="write tensors.csv, operators.csv and buffers.csv into DIR")
    a.add_argument("--plot", metavar="FILE.png", help="draw the arena plan and per-operator memory")
    a.add_argument("--stream", action="store_true",
                   help="also estimate the head if chains of row-local operators ran row by row (issue 14; "
                        "planner figures over every row-local operator; `optimize` streams the chains the "
                        "StreamChain kernel computes)")
    a.set_defaults(func=cmd_analyze)

    o = sub.add_parser("optimize", help="spill, fuse and narrow until the arena head meets the target")
    o.add_argument("model", help=".tflite file")
    o.add_argument("-o", "--output", required=True, help="optimized .tflite to write")
    o.add_argument("--target", type=parse_size, help="arena head to reach, e.g. 160KB (default: as low as it goes)")
    o.add_argument("--no-partial", action="store_true", help="spill whole tensors only")
    o.add_argument("--no-fuse", action="store_true", help="no fused fetching")
    o.add_argument("--no-split", action="store_true",
                   help="never split an ADD/SUB/MUL over a concatenation into per-slice operators")
    o.add_argument("--no-scratch16", action="store_true", help="keep TRANSPOSE_CONV's full int32 scratch")
    o.add_argument("--no-stream", action="store_true",
                   help="no StreamChain operators (chains of row-local operators computed row by row)")
    _kernels(o)
    o.add_argument("--report", metavar="FILE.json", help="write the optimization report")
    o.add_argument("--plot", metavar="FILE.png", help="draw the optimized arena plan")
    o.add_argument("--runs", type=positive_int, default=3,
                   help="random inputs for verification, at least 1 (default: 3; 3 edge-case inputs are added)")
    o.add_argument("--unverified", "--no-verify", dest="unverified", action="store_true",
                   help="write the result without the bit-exact check in TFLM, marked UNVERIFIED (for models with "
                        "operators TFLM does not ship)")
    o.add_argument("--time-limit", type=positive_seconds, default=120.0, metavar="SECONDS",
                   help="bound on each TFLM run of the verification, in seconds of CPU time (default: 120)")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    o.add_argument("--tflm-dir", metavar="DIR", default=None,
                   help="TFLM tree: check with TinySeg's real kernels in a cached host build of it (default: "
                        "$TFLM_DIR; without either, TinySeg operators are lowered to builtins)")
    o.add_argument("--force", action="store_true", help="allow -o to be the input model (replaced only when done)")
    o.set_defaults(func=cmd_optimize)

    v = sub.add_parser("verify", help="check an optimized model computes exactly what the original does",
                       description="Run both models in TFLM on the same random and edge-case inputs; their outputs "
                                   "must be bit-identical (exit 0), else exit 4.")
    v.add_argument("original", help="the model before optimization (.tflite)")
    v.add_argument("optimized", help="the model tinyseg optimize wrote (.tflite)")
    v.add_argument("--runs", type=positive_int, default=3,
                   help="random inputs, at least 1 (default: 3; 3 edge-case inputs are added)")
    v.add_argument("--time-limit", type=positive_seconds, default=120.0, metavar="SECONDS",
                   help="bound on each TFLM run, in seconds of CPU time (default: 120)")
    v.add_argument("--tflm-dir", metavar="DIR", default=None,
                   help="TFLM tree: check with TinySeg's real kernels in a cached host build of it (default: "
                        "$TFLM_DIR; without either, TinySeg operators are lowered to builtins)")
    v.set_defaults(func=cmd_verify)

    t = sub.add_parser("tflm", help="add TinySeg's kernels to a TFLM checkout")
    tsub = t.add_subparsers(dest="tflm_command", metavar="ACTION", parser_class=_Parser)
    tsub.required = True
    ti = tsub.add_parser("install", help="copy tflm_ops into the checkout and apply patches/tflm (idempotent)")
    ti.add_argument("--tflm-dir", required=True, help="tflite-micro checkout")
    ti.add_argument("--check", action="store_true", help="only check whether it can be installed")
    ti.set_defaults(func=cmd_tflm_install)

    r = sub.add_parser("remote-host", help="serve a board's remote spilling over a serial line")
    r.add_argument("--port", required=True, help="serial device, e.g. /dev/ttyACM0")
    r.add_argument("--baud", type=int, default=921600)
    r.add_argument("--storage", default=None, help="directory for spilled slots (default: memory)")
    r.add_argument("--timeout", type=float, default=2.0, help="seconds before a silent peer is an error")
    r.add_argument("--once", action="store_true", help="exit when the board disconnects")
    r.set_defaults(func=cmd_remote_host)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except TinySegError as exc:
        print(f"tinyseg: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tinyseg: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug, not bad input: one line, no traceback (TINYSEG_DEBUG=1 shows it)
        import os

        if os.environ.get("TINYSEG_DEBUG"):
            raise
        print(f"tinyseg: internal error: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''} "
              "(please report it; TINYSEG_DEBUG=1 shows the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
