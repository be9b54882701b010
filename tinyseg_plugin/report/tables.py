"""Human-readable tables and CSV files of an analysis."""

from __future__ import annotations

import csv
import io

from ..errors import TinySegError, shown
from ..memory.analysis import Analysis, to_dict


def kb(n: int) -> str:
    return f"{n:,} B ({n / 1024:.1f} KiB)"


def _shape(s) -> str:
    return "x".join(str(d) for d in s) or "scalar"


def _clip(text: str, width: int) -> str:
    """``text`` escaped (names come from the model) and cut to ``width`` characters."""
    text = shown(text, 0)
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def table_width() -> int:
    """The terminal's width, at least 100 (100 when not a terminal and COLUMNS is unset)."""
    import shutil

    return max(100, shutil.get_terminal_size((100, 24)).columns)


def analysis_text(a: Analysis, model_name: str = "", width: int = 100) -> str:
    """The analysis as text tables no wider than ``width`` (at least 96) characters."""
    d = to_dict(a, model_name)
    out = io.StringIO()
    w = out.write
    w(
        f"model: {shown(model_name)}   kernel set: {d['kernel_set']}   build profile: {d['build_profile']}\n"
    )
    if not d["exact"]:
        w(f"exact: false ({shown('; '.join(d['not_exact_because']), 0)})\n")
    w("\nTensors in the arena (scopes: inputs at 0, operator i at i+1)\n")
    name_w = max(20, width - 71)
    w(
        f"{'idx':>5} {'name':<{name_w}} {'shape':<14} {'type':<7} {'bytes':>10} {'offset':>10} {'life':>7} {'cold range':>11}\n"
    )
    for t in d["tensors"]:
        life = f"{t['first_scope']}-{t['last_scope']}" if t["first_scope"] is not None else "-"
        cr = t["cold_range"]
        cold = f"{cr['start']}-{cr['end']} ({cr['length']})" if cr and cr["length"] > 0 else "-"
        off = "-" if t["offset"] is None else f"{t['offset']:,}"
        w(
            f"{t['index']:>5} {_clip(t['name'], name_w):<{name_w}} {_clip(_shape(t['shape']), 14):<14} {t['dtype'][:7]:<7} "
            f"{t['bytes']:>10,} {off:>10} {life:>7} {cold:>11}\n"
        )
    w("\nSchedule (live set while each operator runs; <== head: the arena reaches its head here)\n")
    w(
        f"{'op':>4} {'scope':>5} {'operator':<16} {'scratch':>9} {'live bytes':>11} {'arena top':>11}  live\n"
    )
    live_w = max(16, width - 63)
    at_head = set(d["head_scopes"])
    for r in d["operators"]:
        mark = " <== head" if r["scope"] in at_head else ""
        live = _clip(" ".join(r["live"]), live_w - len(mark))
        w(
            f"{r['index']:>4} {r['scope']:>5} {_clip(r['opcode'], 16):<16} {sum(r['scratch']):>9,} {r['live_bytes']:>11,} "
            f"{r['arena_top']:>11,}  {live}{mark}\n"
        )
    w(chains_text(a, width))
    w(
        f"\nhead without the graph's inputs and outputs held (as msf-CNN counts): {kb(d['head_without_io'])}\n"
    )
    w("\n")
    exactness = "TFLM-exact" if d["exact"] else "NOT exact, see above"
    w(f"head  (non-persistent, {exactness}): {kb(d['head'])}\n")
    w(f"tail  (persistent, estimate):       {kb(d['tail']['total'])}\n")
    w(f"total (head + tail estimate):       {kb(d['total'])}\n")
    return out.getvalue()


def chains_text(a: Analysis, width: int = 100) -> str:
    """The StreamChain operators of a streamed model: each one's stages, rings and row streams
    (a line per operator, clipped to ``width``)."""
    from ..contract import customops

    lines = []
    for op in a.graph.operators:
        if op.opcode != customops.STREAM_CHAIN:
            continue
        try:
            o = customops.decode(op, a.graph.memo.decoded)
        except TinySegError:
            continue  # validate reports a malformed operator
        stages = " > ".join(st.op for st in o.stages) or "(planning figures only)"
        streams = (
            f"; row spills to slots {', '.join(str(s) for _, s in o.spill)}" if o.spill else ""
        ) + (f"; row fetches from slots {', '.join(str(s) for _, s in o.fetch)}" if o.fetch else "")
        lines.append(
            _clip(f"  op {op.index}: rings {o.ring_bytes:,} B{streams}; {stages}", width) + "\n"
        )
    if not lines:
        return ""
    return "\nStreamChain operators (each computes its stages row by row)\n" + "".join(lines)


def _csv(rows: list[dict], fields: list[str]) -> bytes:
    buf = io.StringIO()
    wr = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    wr.writeheader()
    for r in rows:
        wr.writerow(
            {k: (" ".join(map(str, v)) if isinstance(v, list) else v) for k, v in r.items()}
        )
    return buf.getvalue().encode()


CSV_NAMES = (
    "tensors.csv",
    "operators.csv",
    "buffers.csv",
)  # what --csv DIR writes (checked before any work)


def csv_files(a: Analysis, model_name: str = "") -> dict[str, bytes]:
    """tensors.csv, operators.csv and buffers.csv, as bytes, so the caller writes them all or none."""
    d = to_dict(a, model_name)
    tensors = []
    for t in d["tensors"]:
        row = dict(t)
        cr = t["cold_range"] or {}
        row.update(
            {"cold_start": cr.get("start"), "cold_end": cr.get("end"), "cold_last": cr.get("last")}
        )
        tensors.append(row)
    files = {
        "tensors.csv": _csv(
            tensors,
            [
                "index",
                "name",
                "shape",
                "dtype",
                "bytes",
                "arena_bytes",
                "offset",
                "first_scope",
                "last_scope",
                "producer",
                "consumers",
                "cold_start",
                "cold_end",
                "cold_last",
            ],
        ),
        "operators.csv": _csv(
            d["operators"],
            [
                "index",
                "scope",
                "opcode",
                "inputs",
                "outputs",
                "scratch",
                "live_bytes",
                "arena_top",
                "input_bytes",
                "output_bytes",
                "scratch_bytes",
                "other_bytes",
                "peak",
            ],
        ),
        "buffers.csv": _csv(
            d["buffers"],
            [
                "label",
                "kind",
                "subgraph",
                "index",
                "bytes",
                "size",
                "offset",
                "first_scope",
                "last_scope",
                "offline",
                "owner",  # "index" above is its deprecated spelling, kept for one release
            ],
        ),
    }
    assert tuple(files) == CSV_NAMES
    return files


def stream_text(d: dict) -> str:
    """The streaming estimate (``stream_search.choice_dict``) as text."""
    out = io.StringIO()
    w = out.write
    w(
        "\nStreaming (ESTIMATE over every row-local operator; `tinyseg optimize` streams the chains of stages the "
        "StreamChain kernel computes)\n"
    )
    if d.get("static_shapes"):
        w(f"  over the model with static shapes ({d['static_shapes']})\n")
    if not d["chains"]:
        w(f"no chain lowers the head ({d['head_without_streaming']:,} B)\n")
        return out.getvalue()
    for k, c in enumerate(d["chains"]):
        ops = c["operators"]
        w(
            f"  chain {k}: operators {ops[0]}-{ops[-1]} ({len(ops)}: {c['opcodes'][0]} .. {c['opcodes'][-1]}), "
            f"rings {c['ring_bytes']:,} B, operator scratch {c['op_scratch']:,} B\n"
        )
        for label, key in (
            ("reads whole", "reads"),
            ("fetches rows of", "fetches"),
            ("reads rows from a row source", "sources"),
            ("writes whole", "writes"),
            ("spills rows of", "spills"),
            ("hands rows to a row sink", "sinks"),
        ):
            if c.get(key):
                w(f"    {label}: {' '.join(f't{t}' for t in c[key])}\n")
    w(f"head without streaming: {kb(d['head_without_streaming'])}\n")
    w(f"head streamed (estimate, TFLM's planner over the chains): {kb(d['head'])}\n")
    w(
        f"storage traffic per inference (row spills and fetches): {d['storage_bytes_per_inference']:,} B\n"
    )
    return out.getvalue()
