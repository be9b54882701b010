"""A pytest plugin: the CPU time of each test, its own and its subprocesses', and a table of the test
files that take the most. Wall time (--durations) says which test waited longest; on a 2-core
machine that runs two pytest-xdist workers the suite is bound by CPU, so this is what to cut.

    PYTHONPATH=scripts PYTEST_ARGS="-p pytest_cpu" PYTEST_CPU_OUT=/tmp/cpu.tsv bash .ci/run

Each worker appends a line per test to PYTEST_CPU_OUT (default: pytest-cpu.tsv in the folder pytest
runs in): node id, wall s, own CPU s, subprocess CPU s (user + sys of the children the test waited
for; a build left running in the background is not counted). The run ends with the 15 test files
of most CPU time.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

OUT_ENV = "PYTEST_CPU_OUT"


def _out() -> Path:
    return Path(os.environ.get(OUT_ENV, "pytest-cpu.tsv"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    t0, w0 = os.times(), time.monotonic()
    yield
    t1, w1 = os.times(), time.monotonic()
    own = (t1.user - t0.user) + (t1.system - t0.system)
    kids = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    with _out().open("a") as f:
        f.write(f"{item.nodeid}\t{w1 - w0:.2f}\t{own:.2f}\t{kids:.2f}\n")


def pytest_terminal_summary(terminalreporter) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") or not _out().is_file():
        return
    cpu: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for line in _out().read_text().splitlines():
        node, _wall, own, kids = line.split("\t")
        name = node.split("::")[0]
        cpu[name] += float(own) + float(kids)
        count[name] += 1
    tr = terminalreporter
    tr.write_sep("=", f"CPU time by test file ({sum(cpu.values()):,.0f} CPU-s in all, {_out()})")
    for name in sorted(cpu, key=cpu.get, reverse=True)[:15]:
        tr.write_line(f"{cpu[name]:8.1f} CPU-s  {count[name]:4d} tests  {name}")
