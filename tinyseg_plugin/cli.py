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
    p.add_argument("--kernels", choices=["reference", "cmsis-nn"], default="reference",
                   help="TFLM kernel set whose scratch buffers are planned (default: reference)")
    p.add_argument("--arch", choices=["host64", "cortex-m"], default="host64",
                   help="pointer width the tail estimate assumes: 64-bit host or 32-bit Cortex-M (default: host64)")


def cmd_analyze(args: argparse.Namespace) -> int:
    from .analysis import analyze_graph, to_dict
    from .graph import build_graph
    from .modelio import load_model, write_atomic
    from .report import analysis_text, csv_files, write_csv_dir

    model = load_model(args.model)
    graph = build_graph(model, name=args.model)
    a = analyze_graph(graph, args.kernels, args.arch)
    outputs: list[Callable[[], None]] = []
    if args.csv:
        files = csv_files(a, args.model)
        outputs.append(lambda: write_csv_dir(files, args.csv))
    if args.plot:
        from .plots import plan_png

        png = plan_png(a, f"{args.model}: head {a.head:,} B ({args.kernels})")
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
