"""The optimization report: the Figure-11-style step table and the JSON the tools consume."""

from __future__ import annotations

from ..errors import shown
from ..memory.cost import inferences_text
from ..transforms.optimizer import Result

SCHEMA = "tinyseg.optimization/6"  # 6: "memory", "operators"; 5: "not_streamed", "board", "cost"; 4: "kernel_set", "build_profile" (old "runtime", "arch" kept for one release); 3: "strategy" and "considered"; 2: "arch", "target_bytes", "target_met", "unchanged"


def steps_table(r: Result) -> str:
    """The written model's steps, then one line per strategy considered and not kept."""
    base_head = r.steps[0].head
    lines = [f"{'step':<32} {'head (B)':>10} {'total (B)':>10} {'head cut':>9}  detail"]
    for s in r.steps:
        cut = 100.0 * (base_head - s.head) / base_head if base_head else 0.0
        lines.append(
            f"{s.technique:<32} {s.head:>10,} {s.total:>10,} {cut:>8.1f}%  {shown(s.detail, 0)}"
        )  # details quote tensor names
    for c in r.considered:
        cut = 100.0 * (base_head - c.plan.head) / base_head if base_head else 0.0
        lines.append(
            f"{'considered: ' + c.strategy:<32} {c.plan.head:>10,} {c.plan.total:>10,} {cut:>8.1f}%  "
            f"not written; {c.bytes_moved:,} B through storage per inference"
        )
    lines += not_streamed_lines(r.not_streamed)
    lines += [f"not streamed: {why}" for why in r.io_not_streamed if why]
    return "\n".join(lines) + "\n"


def not_streamed_lines(gaps: list, shown_reasons: int = 4) -> list[str]:
    """One line per reason the StreamChain kernel left row-local operators out of chains (the
    most frequent first), with their operators: what the estimate streams and optimize does not."""
    if not gaps:
        return []
    by_reason: dict[str, list[int]] = {}
    for g in gaps:
        why = g.reason if g.reason.startswith(g.opcode) else f"{g.opcode}: {g.reason}"
        by_reason.setdefault(why, []).append(g.operator)
    ranked = sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    lines = [
        f"not streamed: {len(gaps)} row-local operators are not StreamChain stages, so chains stop "
        "there (`analyze --stream` streams them):"
    ]
    for why, ops in ranked[:shown_reasons]:
        at = ", ".join(str(i) for i in ops[:6]) + (", ..." if len(ops) > 6 else "")
        lines.append(f"  {len(ops)} x {shown(why, 0)} (operators {at})")
    if len(ranked) > shown_reasons:
        rest = sum(len(ops) for _, ops in ranked[shown_reasons:])
        lines.append(
            f"  {rest} more for {len(ranked) - shown_reasons} other reasons (see --report)"
        )
    return lines


def report_dict(
    r: Result,
    model: str,
    output: str,
    verification,
    target_bytes: int | None = None,
    unchanged: bool = False,
    cost=None,
    considered_costs=(),
    board=None,
) -> dict:
    """The JSON report; target_bytes is the --target asked for (None without one); cost and
    considered_costs: memory/cost.py's figures for the written model and each strategy considered."""
    base = r.original
    costs = list(considered_costs) or [None] * len(r.considered)
    return {
        "schema": SCHEMA,
        "model": model,
        "output": output,
        "kernel_set": r.plan.kernel_set,
        "runtime": r.plan.kernel_set,  # deprecated spelling of "kernel_set", kept for one release
        "build_profile": r.plan.build_profile,
        "arch": r.plan.build_profile,  # deprecated spelling of "build_profile", kept for one release
        "target_bytes": target_bytes,
        "target_met": None if target_bytes is None else r.plan.head <= target_bytes,
        "unchanged": unchanged,
        "original": {"head": base.head, "tail_estimate": base.tail.total, "total": base.total},
        "optimized": {
            "head": r.plan.head,
            "tail_estimate": r.plan.tail.total,
            "total": r.plan.total,
        },
        "reduction_percent": round(100.0 * (base.head - r.plan.head) / base.head, 2)
        if base.head
        else 0.0,
        "steps": [
            {"technique": s.technique, "detail": s.detail, "head": s.head, "total": s.total}
            for s in r.steps
        ],
        "spilled": [
            {
                "tensor": s.tensor,
                "name": s.name,
                "bytes": s.bytes,
                "cold_range": [s.cold_start, s.cold_end],
                "partial": s.partial,
                "slot": s.slot,
                "bytes_moved_per_inference": s.bytes_moved,
            }
            for s in r.spills
        ],
        "streamed_chains": r.chains,  # StreamChain operators: members, rings, row spills and fetches
        "bytes_moved_per_inference": sum(s.bytes_moved for s in r.spills) + r.stream_bytes,
        "strategy": r.strategy or None,
        "considered": [
            {
                "strategy": c.strategy,
                "head": c.plan.head,
                "total": c.plan.total,
                "bytes_moved_per_inference": c.bytes_moved,
                "cost": None if k is None else k.as_dict(),
                "steps": [
                    {"technique": s.technique, "detail": s.detail, "head": s.head, "total": s.total}
                    for s in c.steps
                ],
            }
            for c, k in zip(r.considered, costs)
        ],
        "not_streamed": [
            {"operator": g.operator, "opcode": g.opcode, "reason": g.reason} for g in r.not_streamed
        ],
        "board": None if board is None else board.as_dict(),
        "cost": None if cost is None else cost.as_dict(),
        "verified": None
        if verification is None
        else {
            "runs": verification.runs,
            "identical": verification.identical,
            "edge_cases": verification.edge_cases,
            "check": verification.check,  # "real-kernels" or "lowered"
            "original_cached": verification.cached,  # inputs whose original outputs were cached
        },
    }


def option_text(p) -> str:
    """A point's option as printed: what a user types to write that plan again."""
    return p.option or "no --target"


def _wear_text(n: float | None) -> str:
    """A wear-out count in a column of 15: exact up to a billion, then in powers of ten."""
    if n is None:
        return "-"
    return inferences_text(n) if n < 1e9 else ("> 1e15" if n >= 1e15 else f"{n:.2e}")


def frontier_lines(points: list, board: str) -> list[str]:
    """The frontier as a table of at most 100 columns (docs/cli.md): each point with the option
    that writes it again, the written plan and the input marked."""
    lines = [
        f"frontier on {board} (planner figures per inference; only the written model is verified):",
        f"  {'':<8} {'head (B)':>9} {'latency (ms)':>13} {'flash B written':>16} {'B moved':>10} "
        f"{'wear-out (inf.)':>16}  option",
    ]
    for p in points:
        mark = "written" if p.written else "input" if p.original else ""
        lines.append(
            f"  {mark:<8} {p.head:>9,} {p.latency_s * 1e3:>13,.2f} {p.flash_bytes_written:>16,} "
            f"{p.bytes_moved:>10,} {_wear_text(p.wearout_inferences):>16}  {option_text(p)}"
        )
    return lines


def nearby_lines(points: list, board: str) -> list[str]:
    """The written plan and the next points of the trade-off, each with the option that writes
    it again (transforms/frontier.py nearby; docs/cli.md)."""
    lines = [f"plans on {board} (planner figures; only the written one is verified):"]
    for p in points:
        mark = "written" if p.written else "       "
        lines.append(
            f"  {mark} head {p.head:>9,} B  {p.latency_s * 1e3:>10,.2f} ms  "
            f"flash {p.flash_bytes_written:>9,} B written  {option_text(p)}"
        )
    return lines


def memory_lines(regions: list, model, board: str) -> list[str]:
    """The written plan on each region of the board (memory/usage.py ``region_usage``) and the
    model file's bytes, at most 100 columns for names up to 14 characters and sizes under
    1 GB (docs/cli.md): the figures of ``--report``'s ``memory`` key."""
    lines = [
        f"memory on {board}, bytes (free after: capacity less used, reserve, arena and slots):",
        f"  {'region':<14} {'kind':<5} {'capacity':>12} {'used':>12} {'reserve':>10} "
        f"{'arena':>10} {'slots':>10} {'free after':>11}  fits",
    ]
    for r in regions:
        lines.append(
            f"  {shown(r.region, 0):<14} {r.kind:<5} {r.capacity:>12,} {r.used:>12,} "
            f"{r.reserve:>10,} {r.arena:>10,} {r.slots:>10,} {r.free_after:>11,}  "
            + ("yes" if r.fits else "NO")
        )
    if model is not None:
        lines.append(
            f"  model file {model.before:,} B -> {model.after:,} B (weights "
            f"{model.weights_before:,} B -> {model.weights_after:,} B; kernel code not counted)"
        )
    return lines


REGION_FIELDS = [
    "region",
    "kind",
    "capacity",
    "used",
    "reserve",
    "arena",
    "slots",
    "free_after",
    "fits",
]
OPERATOR_FIELDS = ["index", "opcode", "name", "compute_ms", "storage_ms", "stages"]
OPTIMIZE_CSV_NAMES = ("regions.csv", "operators.csv")  # what optimize --csv DIR writes


def optimize_csv_files(regions: list, operators: list) -> dict[str, bytes]:
    """regions.csv (``memory_lines``' figures) and operators.csv (each operator's modelled
    compute and storage time; a StreamChain's stages as ``OP=ms`` words), as bytes, so the caller
    writes them all or none."""
    import csv
    import io

    def table(rows: list[dict], fields: list[str]) -> bytes:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        return buf.getvalue().encode()

    ops = []
    for t in operators:
        d = t.as_dict()
        d["stages"] = " ".join(f"{s['op']}={s['compute_ms']}" for s in d["stages"])
        ops.append(d)
    files = {
        "regions.csv": table([r.as_dict() for r in regions], REGION_FIELDS),
        "operators.csv": table(ops, OPERATOR_FIELDS),
    }
    assert tuple(files) == OPTIMIZE_CSV_NAMES
    return files
