"""The ``tinyseg`` command line. Each subcommand reads, computes everything, and only then writes,
so a failure leaves no output file behind. Exit codes are listed in docs/cli.md."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Sequence

from .errors import TinySegError

EXIT_OK = 0
EXIT_ERROR = 2  # bad input or a model we cannot handle
EXIT_TARGET_NOT_REACHED = 3  # optimize: best model written, target not met
EXIT_VERIFY_FAILED = 4  # verify/optimize: outputs differ; nothing written


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise TinySegError(f"{self.prog}: {message}", EXIT_ERROR)


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
    from .graph import build_graph
    from .modelio import load_model, write_atomic
    from .report import analysis_text, csv_files, write_csv_dir

    model = load_model(args.model)
    graph = build_graph(model, name=args.model)
    _resolve_arch(args)
    a = analyze_graph(graph, args.runtime, args.arch)
    outputs: list[Callable[[], None]] = []
    if args.csv:
        files = csv_files(a, args.model)
        outputs.append(lambda: write_csv_dir(files, args.csv))
    if args.plot:
        from .plots import plan_png

        png = plan_png(a, f"{args.model}: head {a.head:,} B ({args.runtime})")
        outputs.append(lambda: write_atomic(args.plot, png))
    for write in outputs:
        write()
    if args.json:
        text = json.dumps(to_dict(a, args.model), indent=1)
        if args.json == "-":
            print(text)
        else:
            write_atomic(args.json, (text + "\n").encode())
    if not args.json or args.json != "-":
        sys.stdout.write(analysis_text(a, args.model))
    return EXIT_OK


_UNITS = {"": 1, "B": 1, "K": 1024, "KIB": 1024, "KB": 1000, "M": 1 << 20, "MIB": 1 << 20, "MB": 1_000_000}


def parse_size(text: str) -> int:
    """'153600', '150KiB', '150K' (KiB), '153.6KB', '1.2MB', '1MiB' -> bytes."""
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (examples: 153600, 150KiB, 153.6KB, 1MB)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}': the target must be positive")
    return value


def cmd_optimize(args: argparse.Namespace) -> int:
    from .graph import build_graph
    from .modelio import load_model, model_to_bytes, write_atomic
    from .optimizer import Options, optimize
    from .optimize_report import report_dict, steps_table
    from .verify import verify

    from pathlib import Path

    out_dir = Path(args.output).resolve().parent
    if not out_dir.is_dir():
        raise TinySegError(f"{args.output}: directory {out_dir} does not exist")
    model = load_model(args.model)
    graph = build_graph(model, name=args.model)
    _resolve_arch(args)
    opts = Options(kernels=args.runtime, arch=args.arch, target=args.target, partial=not args.no_partial,
                   fuse=not args.no_fuse, scratch=not args.no_scratch16,
                   split=not args.no_split)
    progress = (lambda msg: print(f"  .. {msg}", file=sys.stderr)) if not args.quiet else None
    result = optimize(graph, opts, progress)
    verification = None
    if not args.no_verify:
        if progress:
            progress(f"verifying against the original in TFLM ({args.runs} random inputs)")
        verification = verify(graph, result.graph, runs=args.runs)
        if not verification.identical:
            raise TinySegError(f"verification failed: {verification.detail}; no output written", EXIT_VERIFY_FAILED)
    data = model_to_bytes(result.graph.model)
    report = report_dict(result, args.model, args.output, verification)
    writes = [lambda: write_atomic(args.output, data)]
    if args.report:
        text = json.dumps(report, indent=1) + "\n"
        writes.append(lambda: write_atomic(args.report, text.encode()))
    if args.plot:
        from .analysis import analyze_graph
        from .plots import plan_png

        png = plan_png(analyze_graph(result.graph, args.runtime, args.arch, result.plan),
                       f"{args.output}: head {result.plan.head:,} B ({args.runtime})")
        writes.append(lambda: write_atomic(args.plot, png))
    for w in writes:
        w()
    sys.stdout.write(steps_table(result))
    if verification is not None:
        print(f"verified: outputs bit-identical to the original in TFLM on {verification.runs} random inputs")
    print(f"wrote {args.output}")
    if args.target is not None and result.plan.head > args.target:
        print(f"tinyseg: target {args.target:,} B not reachable: best head {result.plan.head:,} B (written)", file=sys.stderr)
        return EXIT_TARGET_NOT_REACHED
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from .graph import build_graph
    from .modelio import load_model
    from .verify import verify

    a = build_graph(load_model(args.original), name=args.original)
    b = build_graph(load_model(args.optimized), name=args.optimized)
    v = verify(a, b, runs=args.runs)
    if not v.identical:
        raise TinySegError(f"outputs differ: {v.detail}", EXIT_VERIFY_FAILED)
    print(f"identical: {v.runs} random inputs, outputs bit-identical in TFLM")
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
    p = _Parser(prog="tinyseg", description="TFLM-exact memory analysis and TinySeg optimization of .tflite models")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    a = sub.add_parser("analyze", help="show how TFLM lays the model out in its arena")
    a.add_argument("model", help=".tflite file")
    _kernels(a)
    a.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write the analysis as JSON (to stdout without FILE)")
    a.add_argument("--csv", metavar="DIR", help="write tensors.csv, operators.csv and buffers.csv into DIR")
    a.add_argument("--plot", metavar="FILE.png", help="draw the arena plan and per-operator memory")
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
    _kernels(o)
    o.add_argument("--report", metavar="FILE.json", help="write the optimization report")
    o.add_argument("--plot", metavar="FILE.png", help="draw the optimized arena plan")
    o.add_argument("--runs", type=int, default=3, help="random inputs for verification (default: 3)")
    o.add_argument("--no-verify", action="store_true", help="skip the bit-exact check in TFLM (not recommended)")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    o.set_defaults(func=cmd_optimize)

    v = sub.add_parser("verify", help="check an optimized model computes exactly what the original does")
    v.add_argument("original")
    v.add_argument("optimized")
    v.add_argument("--runs", type=int, default=3)
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


if __name__ == "__main__":
    sys.exit(main())
