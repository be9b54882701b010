"""Print, as JSON lines, the whole output of `tinyseg analyze --json` (plain and `--stream`) for each
model, to compare two commits whose JSON keys differ by a rename (scripts/compare_dumps.py).

    PYTHONPATH=OLD_TREE python scripts/analyze_dump.py MODEL... > old.jsonl
    PYTHONPATH=NEW_TREE python scripts/analyze_dump.py MODEL... > new.jsonl
    python scripts/compare_dumps.py old.jsonl new.jsonl
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from tinyseg_plugin.cli import main as cli


def main(paths: list[str]) -> None:
    for path in paths:
        for extra in ([], ["--stream"]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = cli(["analyze", path, "--json", *extra])
            row = {"model": path, "extra": extra, "rc": rc, "out": out.getvalue()}
            print(json.dumps(row | {"err": err.getvalue()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
