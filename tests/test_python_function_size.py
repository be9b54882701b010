"""Functions of tinyseg_plugin/contract/ and tinyseg_plugin/transforms/ within lizard's limits as
docs/design asks them (at most 80 lines, cyclomatic complexity at most 25), measured with the
standard library's ast so no new dependency is needed; the count follows lizard's for Python
(1, plus one per if, elif, for, while, except, conditional expression, comprehension clause and
boolean operator), nested functions counted on their own. The functions still over a limit are
listed with their figures and may only shrink; the checker is shown to fail on a function over
each limit."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("tinyseg_plugin/contract", "tinyseg_plugin/transforms")
MAX_LINES = 80
MAX_COMPLEXITY = 25
# Still over a limit: (file, function) -> (lines, complexity) today; neither may grow.
KNOWN: dict[tuple[str, str], tuple[int, int]] = {}

_BRANCHES = (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler)


def complexity(fn: ast.AST) -> int:
    """1 + the decisions in ``fn``'s own body (not in the functions it defines)."""
    n = 1
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, _BRANCHES):
            n += 1
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            n += 1 + len(node.ifs)
        elif isinstance(node, ast.match_case):
            n += 1
        todo.extend(ast.iter_child_nodes(node))
    return n


def measure(source: str) -> dict[str, tuple[int, int]]:
    """Every function of ``source`` (qualified by its class or enclosing function): (lines from
    its def to its last line, complexity)."""
    out: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out[name] = (child.end_lineno - child.lineno + 1, complexity(child))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def over_limits(root: Path = ROOT) -> dict[tuple[str, str], tuple[int, int]]:
    found = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for name, (lines, ccn) in measure(path.read_text()).items():
                if lines > MAX_LINES or ccn > MAX_COMPLEXITY:
                    found[(rel, name)] = (lines, ccn)
    return found


def test_functions_within_the_limits() -> None:
    found = over_limits()
    new = {k: v for k, v in found.items() if k not in KNOWN}
    assert not new, f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY}: {new}"
    grown = {
        k: (v, KNOWN[k])
        for k, v in found.items()
        if k in KNOWN and (v[0] > KNOWN[k][0] or v[1] > KNOWN[k][1])
    }
    assert not grown, f"grew past their listed figures: {grown}"


def test_the_checker_fails_on_a_long_or_branchy_function() -> None:
    long_body = "".join(f"    x += {i}\n" for i in range(80))
    branchy = "".join(f"    if x == {i} or x < -{i}:\n        x += 1\n" for i in range(13))
    src = (
        f"def long(x):\n{long_body}    return x\n\n"
        f"def branchy(x):\n{branchy}    return x\n\n"
        "def small(x):\n    return [y for y in x if y] or x\n"
    )
    got = measure(src)
    assert got["long"] == (82, 1)
    assert got["branchy"] == (28, 27)
    assert got["small"] == (2, 4)
    assert got["long"][0] > MAX_LINES and got["branchy"][1] > MAX_COMPLEXITY
