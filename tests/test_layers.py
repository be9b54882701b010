"""The package's stages import one way (docs/design/code_layout.md): every import of a module,
at its top or inside a function, goes to its own stage or to a lower one, and no modules import
each other in a circle. Read from the source with ast; nothing of the package is imported."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "tinyseg_plugin"

# Lower number = lower floor. A stage may import its own modules and those of lower floors; two
# stages on one floor import neither each other.
FLOORS = {
    "errors": 0,
    "sizes": 0,
    "deadline": 0,
    "contract": 1,
    "deploy": 2,
    "ir": 2,
    "memory": 3,
    "transforms": 4,
    "checks": 5,
    "report": 6,
    "pipeline": 7,
    "deprecation": 7,
    "options": 8,
    "cli": 9,
    "plugin": 9,
}


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (``_runtime`` holds no Python)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports, wherever the import stands."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:
                    found.add(sub)
                elif target in modules:
                    found.add(target)
    found.discard(name)
    return found


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "package"


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_module_is_on_a_floor() -> None:
    stages = {_stage(m) for m in _graph()} - {"package"}
    assert stages <= set(FLOORS), f"stages without a floor: {sorted(stages - set(FLOORS))}"


def test_no_import_runs_up_or_sideways() -> None:
    wrong = []
    for module, targets in sorted(_graph().items()):
        stage = _stage(module)
        for target in sorted(targets):
            other = _stage(target)
            if other in (stage, "package"):
                continue
            if FLOORS[other] >= FLOORS[stage]:
                wrong.append(
                    f"{module} -> {target} ({stage} on floor {FLOORS[stage]}, {other} on {FLOORS[other]})"
                )
    assert not wrong, "imports against the floors:\n" + "\n".join(wrong)


def test_no_import_circle() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                return path[path.index(t) :] + [t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state:
            circle = visit(m)
            assert circle is None, "modules that import each other: " + " -> ".join(circle)
