"""The arena-plan picture: what a person reads off it must be there and must be right."""

from __future__ import annotations

import pytest
import synth

from tinyseg_plugin.contract.customops import TINYSEG_OPS
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import model_to_bytes, parse_model
from tinyseg_plugin.memory.analysis import analyze_graph, head_scopes, to_dict
from tinyseg_plugin.report.plots import plan_figure, plan_png
from tinyseg_plugin.transforms.optimizer import Options, search_plans


@pytest.fixture(scope="module")
def before():
    return analyze_graph(build_graph(parse_model(model_to_bytes(synth.tiny_unet_like()))))


@pytest.fixture(scope="module")
def after(before):
    r = search_plans(before.graph, Options(smallest=True))
    return analyze_graph(r.graph, "reference", "host64", r.plan)


def _scopes_at_head(a) -> list[int]:
    """From the plan's buffers directly: scopes where some live buffer ends at the head."""
    p = a.plan
    return [
        s
        for s in range(p.scopes)
        if any(b.alive_at(s) and b.offset + b.size == p.head for b in p.buffers)
    ]


@pytest.mark.parametrize("which", ["before", "after"])
def test_every_scope_reaching_the_head_is_marked(which: str, request) -> None:
    a = request.getfixturevalue(which)
    expected = [
        s for s in _scopes_at_head(a) if s >= 1
    ]  # scope 0 holds only the inputs, no operator
    assert head_scopes(a) == expected and len(expected) >= 1
    assert to_dict(a)["head_scopes"] == expected  # the JSON and the table's "<== head" say the same
    fig = plan_figure(a)
    ax1 = fig.axes[0]
    marked = [line for line in ax1.get_lines() if line.get_marker() == "v"]
    assert sorted(marked[0].get_xdata()) == expected


def _extent(artist, renderer):
    return artist.get_window_extent(renderer)


@pytest.mark.parametrize("which", ["before", "after"])
def test_labels_stay_inside_their_boxes_and_never_overlap(which: str, request) -> None:
    a = request.getfixturevalue(which)
    fig = plan_figure(a)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax1 = fig.axes[0]
    by_label = {b.label: b for b in a.plan.buffers}
    texts = [t for t in ax1.texts if t.get_text() in by_label]
    assert texts
    boxes = []
    for t in texts:
        b = by_label[t.get_text()]
        x0, y0 = ax1.transData.transform((b.first - 0.45, b.offset / 1024))
        x1, y1 = ax1.transData.transform((b.last + 0.45, (b.offset + b.size) / 1024))
        e = _extent(t, renderer)
        assert x0 - 1 <= e.x0 and e.x1 <= x1 + 1 and y0 - 1 <= e.y0 and e.y1 <= y1 + 1, t.get_text()
        boxes.append(e)
    for i, e in enumerate(boxes):
        for f in boxes[i + 1 :]:
            assert not e.overlaps(f)
    listed = "\n".join(t.get_text() for t in fig.axes[2].texts)
    for b in a.plan.buffers:  # every box is either labelled or listed beside the plot
        assert b.label in {t.get_text() for t in texts} or b.label in listed


def test_tinyseg_operators_and_types_are_on_the_x_axis(after) -> None:
    fig = plan_figure(after)
    fig.canvas.draw()
    ax2 = fig.axes[1]
    labels = [t.get_text() for t in ax2.get_xticklabels()]
    assert labels[0] == "inputs"
    assert labels[1:] == [
        f"{r.index} {r.opcode if r.opcode != 'FetchingConv2D' else 'FetchConv'}".replace(
            "TRANSPOSE_CONV", "TCONV"
        )
        .replace("CONCATENATION", "CONCAT")
        .replace("MAX_POOL_2D", "MAXPOOL")
        for r in after.ops
    ]
    ours = [r for r in after.ops if r.opcode in TINYSEG_OPS]
    assert ours
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("kernel scratch" in t for t in legend) and any(t.startswith("head ") for t in legend)
    assert {f"{r.opcode} (TinySeg)" for r in ours} <= set(legend)
    frag = [t.get_text() for t in ax2.get_legend().get_texts()]
    assert any("fragmentation" in t for t in frag)


def test_png_is_written(before) -> None:
    assert plan_png(before).startswith(b"\x89PNG")


def test_the_frontier_plot_lists_each_point_and_marks_the_written_plan_and_the_input() -> None:
    """Beside the axes, each numbered point's head, latency (two decimals), flash written and
    option; the written plan and the input marked, the default plan as 'no --target'."""
    from tinyseg_plugin.report.plots import frontier_png, frontier_rows
    from tinyseg_plugin.transforms.frontier import FrontierPoint

    points = [
        FrontierPoint(307_200, 307_200, 1.199, 0, None, "input", "--target 307200", original=True),
        FrontierPoint(None, 153_120, 1.199, 0, None, "streaming", "", written=True),
        FrontierPoint(50_047, 42_016, 3.67105, 134_400, 780_190.0, "streaming", "--target 50047"),
    ]
    rows = frontier_rows(points)
    assert len(rows) == 4
    assert rows[1].split() == ["1", "307,200", "1,199.00", "0", "--target", "307200", "(input)"]
    assert rows[2].split() == ["2", "153,120", "1,199.00", "0", "no", "--target", "(written)"]
    assert rows[3].split() == ["3", "42,016", "3,671.05", "134,400", "--target", "50047"]
    assert frontier_png(points, "t").startswith(b"\x89PNG")


@pytest.fixture(scope="module")
def streamed():
    """The bundled Tiny U-Net streamed on the Nicla Vision with --target min: its outcome, its
    report and the figure of its picture."""
    from pathlib import Path

    from tinyseg_plugin import pipeline
    from tinyseg_plugin.memory.boards import load_board

    data = (
        Path(__file__).resolve().parent.parent / "examples/models/tiny_unet.tflite"
    ).read_bytes()
    run = pipeline.Run(
        Options(smallest=True), runs=None, nearby=False, board=load_board("nicla-vision")
    )
    out = pipeline.optimize(data, run, "tiny_unet")
    a, lanes = pipeline.picture_parts(out)
    return out, out.report("tiny_unet", "out"), plan_figure(a, "t", lanes)


def test_the_optimized_picture_has_a_time_lane_with_the_reports_operators(streamed) -> None:
    """One compute and one storage bar per operator of the written model, summing to the
    report's modelled compute and storage (its rows are rounded to the microsecond)."""
    out, report, fig = streamed
    assert any(o.opcode == "StreamChain" for o in out.result.graph.operators)
    lane = fig.axes[3]
    assert lane.get_title(loc="left") == "modelled time per operator: compute and storage"
    assert lane.get_ylabel() == "ms per inference"
    bars = {c.get_label(): [b.get_height() for b in c] for c in lane.containers}
    n = len(out.result.graph.operators)
    assert len(bars["compute"]) == len(bars["storage"]) == len(report["operators"]) == n
    slack = n * 0.0005 + 1e-9
    for key in ("compute", "storage"):
        assert sum(bars[key]) == pytest.approx(report["cost"][f"{key}_ms"], abs=slack + 0.0005)
        rows = sum(o[f"{key}_ms"] for o in report["operators"])
        assert sum(bars[key]) == pytest.approx(rows, abs=slack)
    assert sum(bars["storage"]) > 0
    # Each bar stands over its operator's scope: operator i runs in scope i + 1.
    assert [b.get_x() + b.get_width() / 2 for b in lane.containers[0]] == pytest.approx(
        [i + 1 for i in range(n)]
    )


def test_the_optimized_picture_has_a_traffic_lane_by_region(streamed) -> None:
    """Written and read bars per region summing to the region's bytes per inference, and a
    legend naming each region the placement uses with its bytes."""
    out, report, fig = streamed
    lane = fig.axes[4]
    assert lane.get_title(loc="left") == "storage traffic per operator, by board region"
    assert lane.get_ylabel() == "KiB per inference"
    regions = {r["region"]: r for r in report["cost"]["regions"]}
    assert {"dtcm", "qspi"} <= set(regions)
    bars = {c.get_label(): sum(b.get_height() for b in c) for c in lane.containers}
    for name, r in regions.items():
        assert bars[f"{name} written"] * 1024 == pytest.approx(r["bytes_written"])
        assert bars[f"{name} read"] * 1024 == pytest.approx(r["bytes_read"])
    legend = [t.get_text() for t in lane.get_legend().get_texts()]
    for name, r in regions.items():
        assert any(
            t.startswith(f"{name} (") and f"{r['bytes_written']:,} B written" in t for t in legend
        )
    # The operator names are on the lowest lane only.
    assert [t.get_text() for t in lane.get_xticklabels()][0] == "inputs"
    for ax in (fig.axes[1], fig.axes[3]):
        assert not any(t.label1.get_visible() for t in ax.xaxis.get_major_ticks())


def test_the_analysis_picture_has_no_lanes(before) -> None:
    assert len(plan_figure(before).axes) == 3
