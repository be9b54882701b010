"""Human-readable tables and CSV files of an analysis."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from .analysis import Analysis, to_dict
from .errors import TinySegError
from .modelio import write_atomic


def kb(n: int) -> str:
    return f"{n:,} B ({n / 1024:.1f} KiB)"


def _shape(s) -> str:
    return "x".join(str(d) for d in s) or "scalar"


def analysis_text(a: Analysis, model_name: str = "") -> str:
    d = to_dict(a, model_name)
    out = io.StringIO()
    w = out.write
    w(f"model: {model_name}   kernels: {d['kernels']}   target: {d['target']}\n")
    if not d["exact"]:
        w(f"exact: false ({'; '.join(d['not_exact_because'])})\n")
    w("\nTensors in the arena (scopes: inputs at 0, operator i at i+1)\n")
    w(f"{'idx':>5} {'name':<32} {'shape':<16} {'type':<8} {'bytes':>9} {'offset':>9} {'life':>9} {'cold range':>12}\n")
    for t in d["tensors"]:
        life = f"{t['first_scope']}-{t['last_scope']}" if t["first_scope"] is not None else "-"
        cr = t["cold_range"]
        cold = f"{cr['start']}-{cr['end']} ({cr['length']})" if cr and cr["length"] > 0 else "-"
        off = "-" if t["offset"] is None else str(t["offset"])
        w(f"{t['index']:>5} {t['name'][:32]:<32} {_shape(t['shape']):<16} {t['dtype']:<8} {t['bytes']:>9,} {off:>9} {life:>9} {cold:>12}\n")
    w("\nSchedule (live set while each operator runs)\n")
    w(f"{'op':>4} {'scope':>5} {'operator':<24} {'scratch':>9} {'live bytes':>11} {'arena top':>10}  live\n")
    for r in d["operators"]:
        mark = " <== peak" if r["peak"] else ""
        live = " ".join(r["live"])
        if len(live) > 60:
            live = live[:57] + "..."
        w(f"{r['index']:>4} {r['scope']:>5} {r['opcode'][:24]:<24} {sum(r['scratch']):>9,} {r['live_bytes']:>11,} {r['arena_top']:>10,}  {live}{mark}\n")
    w("\n")
    exactness = "TFLM-exact" if d["exact"] else "NOT exact, see above"
    w(f"head  (non-persistent, {exactness}): {kb(d['head'])}\n")
    w(f"tail  (persistent, estimate):       {kb(d['tail']['total'])}\n")
    w(f"total (head + tail estimate):       {kb(d['total'])}\n")
    return out.getvalue()


def _csv(rows: list[dict], fields: list[str]) -> bytes:
    buf = io.StringIO()
    wr = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    wr.writeheader()
    for r in rows:
        wr.writerow({k: (" ".join(map(str, v)) if isinstance(v, list) else v) for k, v in r.items()})
    return buf.getvalue().encode()


def csv_files(a: Analysis, model_name: str = "") -> dict[str, bytes]:
    """tensors.csv, operators.csv and buffers.csv, as bytes, so the caller writes them all or none."""
    d = to_dict(a, model_name)
    tensors = []
    for t in d["tensors"]:
        row = dict(t)
        cr = t["cold_range"] or {}
        row.update({"cold_start": cr.get("start"), "cold_end": cr.get("end"), "cold_last": cr.get("last")})
        tensors.append(row)
    return {
        "tensors.csv": _csv(tensors, ["index", "name", "shape", "dtype", "bytes", "arena_bytes", "offset", "first_scope",
                                      "last_scope", "producer", "consumers", "cold_start", "cold_end", "cold_last"]),
        "operators.csv": _csv(d["operators"], ["index", "scope", "opcode", "inputs", "outputs", "scratch", "live_bytes",
                                               "arena_top", "input_bytes", "output_bytes", "scratch_bytes", "other_bytes", "peak"]),
        "buffers.csv": _csv(d["buffers"], ["label", "kind", "subgraph", "index", "bytes", "size", "offset", "first_scope", "last_scope", "offline"]),
    }


def write_csv_dir(files: dict[str, bytes], directory: str) -> None:
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise TinySegError(f"{d}: exists and is not a directory")
    d.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        write_atomic(d / name, data)
