"""Compare two scripts/analyze_dump.py outputs with the renamed JSON keys mapped back: the new
`kernel_set`, `build_profile` and `buffers[].owner` must equal the deprecated `runtime`, `arch` and
`buffers[].index` beside them and are dropped, the schema `tinyseg.analysis/3` is read as `/2`; the
rest must then be byte-identical, as the command line prints it. Exit 1 on any difference."""

from __future__ import annotations

import json
import sys


def _as_before(text: str) -> str:
    m = json.loads(text)
    if m.get("schema") != "tinyseg.analysis/3":
        return text
    assert m.pop("kernel_set") == m["runtime"] and m.pop("build_profile") == m["arch"]
    m["schema"] = "tinyseg.analysis/2"
    for b in m["buffers"]:
        assert b.pop("owner") == b["index"]
    return json.dumps(m, indent=1) + "\n"


def main(old_path: str, new_path: str) -> int:
    old = [json.loads(line) for line in open(old_path, encoding="utf-8")]
    new = [json.loads(line) for line in open(new_path, encoding="utf-8")]
    same = 0
    for o, n in zip(old, new, strict=True):
        key = (o["model"], o["extra"])
        out = _as_before(n["out"]) if n["rc"] == 0 else n["out"]
        if key == (n["model"], n["extra"]) and (o["rc"], o["out"], o["err"]) == (
            n["rc"],
            out,
            n["err"],
        ):
            same += 1
        else:
            print(f"differs: {o['model']} {' '.join(o['extra'])}")
    print(f"{same} of {len(old)} outputs identical")
    return 0 if same == len(old) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
