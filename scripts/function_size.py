"""Keeps the TinySeg kernels in small pieces: fails when a function in one of their C++ files is
longer than --max-function lines (signature to closing brace) or its dispatcher file is longer than
--max-dispatcher lines, so the table of stage families does not grow back into one switch.

Run: python scripts/function_size.py [FILE.cc ...]   (default: tflm_ops/kernels/tinyseg_*.cc)
Exit 0 when every file is within the limits, 1 when one is not (each listed), 2 for a missing file.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_GLOB = "tflm_ops/kernels/tinyseg_*.cc"
DISPATCHER = "tinyseg_stream.cc"
# Braces whose body holds definitions, not statements.
_CONTAINER = re.compile(r"^(namespace\b|extern\s*\"C\"|(struct|class|union)\b)")
_NOT_FUNCTION = re.compile(r"^(if|for|while|switch|do|else|return|enum|struct|class|union)\b")


@dataclass(frozen=True)
class Function:
    name: str
    first: int  # 1-based line of its signature
    last: int  # 1-based line of its closing brace

    @property
    def lines(self) -> int:
        return self.last - self.first + 1


def _blank_out(text: str) -> str:
    """The source with comments, string and character literals replaced by spaces (newlines kept),
    so that braces and parentheses inside them are not counted."""
    pattern = re.compile(
        r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL
    )
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def functions(text: str) -> list[Function]:
    """Function definitions at namespace or class level, with their line spans."""
    code = _blank_out(text)
    found: list[Function] = []
    stack: list[tuple[str, int, str]] = []  # (kind, header start offset, name)
    header_start = 0
    for i, ch in enumerate(code):
        if ch in ";":
            if all(k == "container" for k, _, _ in stack):
                header_start = i + 1
        elif ch == "{":
            if stack and stack[-1][0] != "container":
                stack.append(("block", i, ""))
                continue
            # The header: the text since the last statement or brace, without preprocessor lines.
            start, kept = i, []
            offset = header_start
            for line in code[header_start:i].split("\n"):
                if line.strip() and not line.lstrip().startswith("#"):
                    start = min(start, offset + len(line) - len(line.lstrip()))
                    kept.append(line)
                offset += len(line) + 1
            head = " ".join(" ".join(kept).split())
            if _CONTAINER.match(head) or not head:
                stack.append(("container", start, ""))
                header_start = i + 1
            elif "(" in head and "=" not in head.split("(")[0] and not _NOT_FUNCTION.match(head):
                name = head.split("(")[0].split()[-1] if head.split("(")[0].split() else "?"
                stack.append(("function", start, name))
            else:
                stack.append(("block", start, ""))
        elif ch == "}":
            if not stack:
                continue
            kind, start, name = stack.pop()
            if kind == "function":
                found.append(
                    Function(name, code.count("\n", 0, start) + 1, code.count("\n", 0, i) + 1)
                )
            if all(k == "container" for k, _, _ in stack):
                header_start = i + 1
    return found


def check(paths: list[Path], max_function: int, max_dispatcher: int) -> list[str]:
    """One line per function or dispatcher file over its limit."""
    problems = []
    for p in paths:
        text = p.read_text(encoding="utf-8")
        rel = p.relative_to(REPO) if p.is_relative_to(REPO) else p
        if p.name == DISPATCHER and text.count("\n") > max_dispatcher:
            problems.append(
                f"{rel}: the dispatcher is {text.count(chr(10))} lines (limit {max_dispatcher}): "
                "move code into a stage family's file"
            )
        for f in functions(text):
            if f.lines > max_function:
                problems.append(
                    f"{rel}:{f.first}: {f.name} is {f.lines} lines (limit {max_function}): "
                    "split it into smaller functions"
                )
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--max-dispatcher", type=int, default=300)
    args = ap.parse_args(argv)
    paths = [p.resolve() for p in args.files] or sorted(REPO.glob(DEFAULT_GLOB))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"function_size: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    problems = check(paths, args.max_function, args.max_dispatcher)
    for line in problems:
        print(f"function_size: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
