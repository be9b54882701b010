"""Pictures of a plan: the arena over time (like the paper's Figure 3b) and per-operator memory.

The top panel draws every buffer as a box (arena offset against allocation scope); the bottom panel
stacks what is live at each operator and draws the arena top above it, so the gap between the two
(fragmentation) shows. The optimized plan's picture adds two lanes under them: each operator's
modelled compute and storage time, and the bytes it writes to and reads from each board region. All
share an x axis labelled with the operator types. What a person must see
at a glance is marked: the head, every scope that reaches it, scratch (hatched) and TinySeg's own
operators. Boxes too small for their label stay unlabelled and are listed beside the plot, so labels
never run over other boxes.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Sequence

from ..contract.customops import FETCHING, FETCHING_CONV_2D, SPILL, STREAM_CHAIN
from ..memory.analysis import Analysis, head_scopes
from ..memory.cost import RegionCost
from ..memory.planner import Buffer
from ..memory.usage import OpTime, OpTraffic

HEAD_COLOR = "#d62728"
SCRATCH_COLOR = "#bbbbbb"
TINYSEG_COLORS = {
    SPILL: "#9467bd",
    FETCHING: "#17becf",
    FETCHING_CONV_2D: "#2ca02c",
    STREAM_CHAIN: "#ff7f0e",
}
LIST_LIMIT = 26  # unlabelled boxes listed beside the plot; the rest are counted
LABEL_PT = 6.5  # label font size, points
CHAR_W = 0.62  # average character width, in font sizes (DejaVu Sans)


@dataclass(frozen=True)
class FigureGeometry:
    """Figure geometry, in inches and data units, to decide which labels fit inside their boxes."""

    width_in: float
    plot_w_in: float  # width of the arena axes
    plot_h_in: float  # height of the arena axes
    x_span: float  # scopes shown on the x axis
    y_span: float  # KiB shown on the y axis


SIDE_IN = 3.3  # the column beside the plot: legends and the list of unlabelled boxes
LEFT_IN = 0.9


def _geometry(scopes: int, head: int) -> FigureGeometry:
    width = min(max(12.0, 0.15 * scopes + LEFT_IN + SIDE_IN), 60.0)
    plot_w = width - LEFT_IN - SIDE_IN - 0.1
    return FigureGeometry(width, plot_w, 4.2, scopes + 2.0, max(head, 1) / 1024 * 1.08)


def fits(b: Buffer, geo: FigureGeometry) -> int | None:
    """The rotation (0 or 90 degrees) at which the box's label fits inside the box, or None."""
    w_in = (b.last - b.first + 0.9) / geo.x_span * geo.plot_w_in
    h_in = (b.size / 1024) / geo.y_span * geo.plot_h_in
    text_w = len(b.label) * CHAR_W * LABEL_PT / 72 + 0.04
    text_h = LABEL_PT * 1.25 / 72
    if w_in >= text_w and h_in >= text_h:
        return 0
    if h_in >= text_w and w_in >= text_h:
        return 90
    return None


def _short(opcode: str) -> str:
    return {
        "CONCATENATION": "CONCAT",
        "TRANSPOSE_CONV": "TCONV",
        "DEPTHWISE_CONV_2D": "DWCONV",
        "MAX_POOL_2D": "MAXPOOL",
        "AVERAGE_POOL_2D": "AVGPOOL",
        "FULLY_CONNECTED": "FC",
        FETCHING_CONV_2D: "FetchConv",
        "RESIZE_NEAREST_NEIGHBOR": "RESIZE_NN",
        "RESIZE_BILINEAR": "RESIZE_BL",
    }.get(opcode, opcode)


@dataclass(frozen=True)
class CostLanes:
    """What the optimized plan's picture draws under the arena, on the same operator axis: each
    operator's modelled compute and storage time (memory/usage.py ``op_times``, the rows of
    ``--report``'s ``operators``), its storage bytes by region (``op_traffic``), and each region's
    bytes per inference (the cost's ``regions``)."""

    times: Sequence[OpTime]
    traffic: Sequence[OpTraffic]
    regions: Sequence[RegionCost]


COMPUTE_COLOR = "#4c72b0"
STORAGE_COLOR = "#c44e52"
REGION_COLORS = ("#1f77b4", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#17becf")
ARENA_IN, LIVE_IN, LANE_IN = 4.05, 2.7, 1.9  # panel heights, inches
TOP_IN, BOTTOM_IN = 0.54, 1.44  # above the title; below the axes, the operator names
SIDE_H_IN = 9.0 * (0.94 - 0.16) * 3 / 5  # the side column's text is placed against this height


def plan_png(a: Analysis, title: str = "", lanes: CostLanes | None = None) -> bytes:
    """The plan as a PNG: buffers as boxes (offset against scope) and live bytes per operator;
    with ``lanes``, each operator's modelled time and storage traffic under them."""
    import matplotlib.pyplot as plt

    fig = plan_figure(a, title, lanes)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def plan_figure(a: Analysis, title: str = "", lanes: CostLanes | None = None):
    """The matplotlib Figure plan_png renders (tests look at what is drawn where). Axes: the
    arena, the live bytes, the side column, then with ``lanes`` the time and the traffic lane."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = a.plan
    geo = _geometry(p.scopes, p.head)
    fig, ax1, ax2, side, extra = _layout(plt, geo, lanes is not None)
    lower = [ax2, *extra]
    small = _arena_panel(plt, ax1, a, geo, title)
    seen = _tinyseg_bands(a, [ax1, *lower])
    legend_rows = _arena_legend(ax1, a, seen)
    _live_panel(ax2, a, geo)
    if lanes is not None:
        _time_lane(extra[0], a, lanes)
        _traffic_lane(extra[1], a, lanes)
    _operator_axis(lower[-1], a)
    for ax in (ax1, *lower):
        ax.set_xlim(-1, p.scopes + 1)
    for ax in (ax1, *lower[:-1]):
        ax.set_xticks(range(0, p.scopes + 1, 5))
        ax.tick_params(labelbottom=False)
    _unlabelled(side, small, legend_rows)
    return fig


def _layout(plt, geo: FigureGeometry, lanes: bool):
    """The figure and its axes: the arena over the live bytes beside the side column, and with
    ``lanes`` two lanes under them (the arena keeps its height, so its labels fit as computed)."""
    if lanes:
        rows = [ARENA_IN, LIVE_IN, LANE_IN, LANE_IN]
        gap = 0.45
        height = TOP_IN + BOTTOM_IN + sum(rows) + gap * (len(rows) - 1)
        spacing = dict(
            hspace=gap / (sum(rows) / len(rows)), top=1 - TOP_IN / height, bottom=BOTTOM_IN / height
        )
    else:
        rows, height, spacing = [3, 2], 9.0, dict(hspace=0.08, top=0.94, bottom=0.16)
    fig = plt.figure(figsize=(geo.width_in, height))
    grid = fig.add_gridspec(
        len(rows),
        2,
        width_ratios=[geo.plot_w_in, SIDE_IN],
        height_ratios=rows,
        wspace=0.0,
        left=LEFT_IN / geo.width_in,
        right=1 - 0.1 / geo.width_in,
        **spacing,
    )
    ax1 = fig.add_subplot(grid[0, 0])
    # not sharex: a second set of ~scopes tick objects costs as much as the boxes
    ax2 = fig.add_subplot(grid[1, 0])
    side = fig.add_subplot(grid[0, 1])
    side.axis("off")
    extra = [fig.add_subplot(grid[k, 0]) for k in range(2, len(rows))]
    return fig, ax1, ax2, side, extra


def _arena_panel(plt, ax1, a: Analysis, geo: FigureGeometry, title: str) -> list[Buffer]:
    """The buffers as boxes, labelled where the label fits, the head and every scope that
    reaches it; returns the boxes left unlabelled."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    p = a.plan
    # Boxes: one collection for tensors, one (hatched) for scratch: fast even with thousands of buffers.
    cmap = plt.get_cmap("tab20")
    tensors, scratch, colors, labelled, small = [], [], [], [], []
    for k, b in enumerate(p.buffers):
        r = Rectangle((b.first - 0.45, b.offset / 1024), b.last - b.first + 0.9, b.size / 1024)
        if b.kind == "scratch":
            scratch.append(r)
        else:
            tensors.append(r)
            colors.append(cmap(k % 20))
        angle = fits(b, geo)
        if angle is None:
            small.append(b)
        else:
            labelled.append((b, angle))
    ax1.add_collection(
        PatchCollection(tensors, facecolors=colors, edgecolors="black", linewidths=0.4)
    )
    ax1.add_collection(
        PatchCollection(
            scratch, facecolors=SCRATCH_COLOR, edgecolors="black", linewidths=0.4, hatch="///"
        )
    )
    for b, angle in labelled:
        ax1.text(
            (b.first + b.last) / 2,
            (b.offset + b.size / 2) / 1024,
            b.label,
            ha="center",
            va="center",
            fontsize=LABEL_PT,
            rotation=angle,
            clip_on=True,
            bbox=dict(facecolor="white", alpha=0.8, pad=0.3, linewidth=0)
            if b.kind == "scratch"
            else None,
        )
    _head_marks(ax1, a, zorder=4)
    ax1.axhline(p.head / 1024, color=HEAD_COLOR, linestyle="--", linewidth=1, zorder=3)
    ax1.set_ylim(0, geo.y_span)
    ax1.set_ylabel("arena offset (KiB)")
    ax1.set_title(title or f"arena plan: head {p.head:,} B ({p.kernel_set} kernels)", fontsize=10)
    return small


def _head_marks(ax, a: Analysis, **kw) -> None:
    """A red triangle at the head over every scope that reaches it."""
    reach = head_scopes(a)
    ax.plot(
        reach,
        [a.plan.head / 1024] * len(reach),
        linestyle="none",
        marker="v",
        markersize=7 if len(reach) <= 40 else 4,
        color=HEAD_COLOR,
        clip_on=False,
        **kw,
    )


def _tinyseg_bands(a: Analysis, axes: list) -> set[str]:
    """TinySeg's operators on the timeline: a thin band at their scope, in every panel; returns
    the opcodes drawn."""
    seen = set()
    for r in a.ops:
        color = TINYSEG_COLORS.get(r.opcode)
        if color is None:
            continue
        seen.add(r.opcode)
        for ax in axes:
            ax.axvspan(r.scope - 0.5, r.scope + 0.5, color=color, alpha=0.18, linewidth=0, zorder=0)
    return seen


def _arena_legend(ax1, a: Analysis, seen: set[str]) -> int:
    """The arena panel's legend beside it; returns its number of rows."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    n = len(head_scopes(a))
    legend = [
        Line2D([], [], color=HEAD_COLOR, linestyle="--", label=f"head {a.plan.head:,} B"),
        Line2D(
            [],
            [],
            color=HEAD_COLOR,
            marker="v",
            linestyle="none",
            label=f"reaches the head ({n} scope{'s' if n != 1 else ''})",
        ),
        Patch(facecolor=SCRATCH_COLOR, edgecolor="black", hatch="///", label="kernel scratch"),
    ]
    legend += [
        Patch(facecolor=TINYSEG_COLORS[o], alpha=0.35, label=f"{o} (TinySeg)")
        for o in TINYSEG_COLORS
        if o in seen
    ]
    ax1.legend(
        handles=legend, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0
    )
    return len(legend)


def _live_panel(ax2, a: Analysis, geo: FigureGeometry) -> None:
    """Live bytes stacked per operator, the arena top above them (the gap is fragmentation), the
    head."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, Rectangle

    xs = [r.scope for r in a.ops]
    bottoms = [0.0] * len(xs)
    stack = []
    for field, label, color in (
        ("input_bytes", "inputs", "#4c72b0"),
        ("output_bytes", "outputs", "#dd8452"),
        ("scratch_bytes", "scratch", "#999999"),
        ("other_bytes", "other live", "#55a868"),
    ):
        vals = [getattr(r, field) / 1024 for r in a.ops]
        bars = [Rectangle((x - 0.4, b), 0.8, v) for x, b, v in zip(xs, bottoms, vals) if v > 0]
        # one artist, not one per bar
        ax2.add_collection(PatchCollection(bars, facecolors=color, linewidths=0))
        stack.append(Patch(facecolor=color, label=label))
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    tops = [r.arena_top / 1024 for r in a.ops]
    (top_line,) = ax2.step(
        xs,
        tops,
        where="mid",
        color="black",
        linewidth=1,
        label="arena top\n(gap above the bars:\nfragmentation)",
    )
    ax2.axhline(a.plan.head / 1024, color=HEAD_COLOR, linestyle="--", linewidth=1, zorder=3)
    _head_marks(ax2, a)
    ax2.set_ylim(0, geo.y_span)
    ax2.set_ylabel("KiB live / arena top")
    ax2.legend(
        handles=[top_line] + stack[::-1],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        borderaxespad=0,
    )


def _time_lane(ax, a: Analysis, lanes: CostLanes) -> None:
    """Each operator's modelled compute and storage time, stacked (ms)."""
    scope = {r.index: r.scope for r in a.ops}
    xs = [scope[t.index] for t in lanes.times]
    compute = [t.compute_s * 1e3 for t in lanes.times]
    storage = [t.storage_s * 1e3 for t in lanes.times]
    ax.bar(xs, compute, 0.8, color=COMPUTE_COLOR, linewidth=0, label="compute")
    ax.bar(xs, storage, 0.8, bottom=compute, color=STORAGE_COLOR, linewidth=0, label="storage")
    ax.set_title("modelled time per operator: compute and storage", fontsize=8, loc="left")
    ax.set_ylabel("ms per inference")
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(
        handles=handles[::-1],
        labels=[f"storage {sum(storage):,.1f} ms", f"compute {sum(compute):,.1f} ms"],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        borderaxespad=0,
    )


def _traffic_lane(ax, a: Analysis, lanes: CostLanes) -> None:
    """Each operator's storage bytes per region: written (left bar) and read (right bar,
    hatched), stacked by region, each region named with its bytes per inference."""
    from matplotlib.patches import Patch

    scope = {r.index: r.scope for r in a.ops}
    handles = []
    low = {"written": {}, "read": {}}  # scope -> KiB already stacked
    for k, rc in enumerate(lanes.regions):
        color = REGION_COLORS[k % len(REGION_COLORS)]
        mine = [t for t in lanes.traffic if t.region == rc.region]
        for side, shift, hatch in (("written", -0.2, None), ("read", 0.2, "////")):
            rows = [(scope[t.index], getattr(t, side) / 1024) for t in mine if getattr(t, side)]
            xs = [x for x, _ in rows]
            base = [low[side].get(x, 0.0) for x in xs]
            ax.bar(
                [x + shift for x in xs],
                [v for _, v in rows],
                0.4,
                bottom=base,
                color=color,
                hatch=hatch,
                edgecolor="white" if hatch else color,
                linewidth=0,
                label=f"{rc.region} {side}",
            )
            for x, b, (_, v) in zip(xs, base, rows):
                low[side][x] = b + v
        handles.append(
            Patch(
                facecolor=color,
                label=f"{rc.region} ({rc.kind}): {rc.bytes_written:,} B written,\n"
                f"{rc.bytes_read:,} B read per inference",
            )
        )
    if lanes.regions:
        handles += [
            Patch(facecolor="#dddddd", label="written (left bar)"),
            Patch(facecolor="#dddddd", hatch="////", edgecolor="#666666", label="read (right bar)"),
        ]
    else:
        ax.text(0.5, 0.5, "no bytes through storage", transform=ax.transAxes, ha="center")
    ax.set_title("storage traffic per operator, by board region", fontsize=8, loc="left")
    ax.set_ylabel("KiB per inference")
    ax.legend(
        handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0
    )


def _operator_axis(ax, a: Analysis) -> None:
    """The x axis of the lowest panel: scope numbers with the operator type, TinySeg's coloured."""
    ticks = [0] + [r.scope for r in a.ops]
    names = ["inputs"] + [f"{r.index} {_short(r.opcode)}" for r in a.ops]
    ax.set_xticks(ticks)
    ax.set_xticklabels(names, rotation=90, fontsize=6 if len(ticks) < 120 else 4.5)
    for lab, r in zip(ax.get_xticklabels()[1:], a.ops):
        if r.opcode in TINYSEG_COLORS:
            lab.set_color(TINYSEG_COLORS[r.opcode])
            lab.set_fontweight("bold")
    ax.set_xlabel(
        "operator (index and type); scope 0 holds the inputs, operator i runs in scope i+1",
        fontsize=8,
    )


def _unlabelled(side, small: list[Buffer], legend_rows: int) -> None:
    """The boxes without a label, listed beside the plot under the arena's legend."""
    small.sort(key=lambda b: (-b.size, b.first))
    lines = [f"unlabelled boxes ({len(small)}):"] if small else []
    for b in small[:LIST_LIMIT]:
        lines.append(f"{b.label}  {b.size:,} B  @{b.offset:,}  scopes {b.first}-{b.last}")
    if len(small) > LIST_LIMIT:
        lines.append(f"... and {len(small) - LIST_LIMIT} smaller (see --csv)")
    if lines:
        top = 1.0 - (legend_rows + 1.2) * 0.165 / SIDE_H_IN  # under the legend
        side.text(
            0.02,
            top,
            "\n".join(lines),
            fontsize=6,
            family="monospace",
            va="top",
            ha="left",
            transform=side.transAxes,
        )


def frontier_rows(points: list) -> list[str]:
    """The numbered points as the plot lists them beside the axes: head, latency, flash written
    per inference (the wear) and the option that writes each, the written plan and input marked."""
    rows = [f"{'':>2} {'head (B)':>9} {'ms':>9} {'flash B':>8}  option"]
    for n, p in enumerate(points, 1):
        mark = " (written)" if p.written else " (input)" if p.original else ""
        rows.append(
            f"{n:>2} {p.head:>9,} {p.latency_s * 1e3:>9,.2f} {p.flash_bytes_written:>8,}  "
            f"{p.option or 'no --target'}{mark}"
        )
    return rows


def frontier_png(points: list, title: str) -> bytes:
    """Head against modelled latency, one numbered marker per frontier point; beside it each
    number's head, latency, flash written per inference (wear) and option. The written plan and
    the input are marked apart, so a user sees where the run stands among the choices."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, side) = plt.subplots(
        1, 2, figsize=(11, 5), dpi=100, gridspec_kw={"width_ratios": [3, 2]}
    )
    plans = sorted((p for p in points if not p.original), key=lambda p: p.head)
    ax.plot([p.head / 1024 for p in plans], [p.latency_s * 1e3 for p in plans], "o-", zorder=1)
    for n, p in enumerate(points, 1):
        xy = (p.head / 1024, p.latency_s * 1e3)
        if p.written or p.original:
            marker, color, name = (
                ("*", "tab:red", "written") if p.written else ("s", "tab:gray", "input")
            )
            ax.scatter(*xy, marker=marker, s=160, color=color, zorder=2, label=name)
        ax.annotate(
            str(n), xy, fontsize=7, xytext=(5, 5 if n % 2 else -11), textcoords="offset points"
        )
    ax.set_xlabel("arena head (KiB)")
    ax.set_ylabel("modelled latency (ms)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    side.axis("off")
    side.text(
        0, 1, "\n".join(frontier_rows(points)), family="monospace", fontsize=7, va="top", ha="left"
    )
    side.set_title("flash B: written per inference (wear)", fontsize=8)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
