"""Pictures of a plan: the arena over time (like the paper's Figure 3b) and per-operator memory."""
from __future__ import annotations

import io

from .analysis import Analysis


def plan_png(a: Analysis, title: str = "") -> bytes:
    """A two-panel PNG: buffers as boxes (offset against scope) and a stacked bar per operator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    p = a.plan
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 8), gridspec_kw={"height_ratios": [3, 2]})
    cmap = plt.get_cmap("tab20")
    for k, b in enumerate(p.buffers):
        color = "#bbbbbb" if b.kind == "scratch" else cmap(k % 20)
        ax1.add_patch(Rectangle((b.first - 0.45, b.offset / 1024), b.last - b.first + 0.9, b.size / 1024,
                                facecolor=color, edgecolor="black", linewidth=0.4, hatch="//" if b.kind == "scratch" else None))
        if b.size >= p.head * 0.06 and p.head:
            ax1.text((b.first + b.last) / 2, (b.offset + b.size / 2) / 1024, b.label, ha="center", va="center", fontsize=7)
    ax1.set_xlim(-1, p.scopes + 1)
    ax1.set_ylim(0, max(p.head, 1) / 1024 * 1.05)
    ax1.axhline(p.head / 1024, color="red", linestyle="--", linewidth=1)
    ax1.set_ylabel("arena offset (KiB)")
    ax1.set_title(title or f"arena plan: head {p.head:,} B ({p.kernels} kernels)")
    xs = [r.scope for r in a.ops]
    bottoms = [0.0] * len(xs)
    for field, label, color in (("input_bytes", "inputs", "#4c72b0"), ("output_bytes", "outputs", "#dd8452"),
                                ("scratch_bytes", "scratch", "#999999"), ("other_bytes", "other live", "#55a868")):
        vals = [getattr(r, field) / 1024 for r in a.ops]
        ax2.bar(xs, vals, bottom=bottoms, color=color, label=label, width=0.8)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    if a.peak_op is not None:
        ax2.annotate("peak", (a.peak_op + 1, bottoms[a.peak_op]), ha="center", va="bottom", fontsize=8, color="red")
    ax2.set_xlim(-1, p.scopes + 1)
    ax2.set_xlabel("allocation scope (operator index + 1)")
    ax2.set_ylabel("live KiB")
    ax2.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
