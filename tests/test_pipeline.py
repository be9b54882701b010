"""The pipeline owns a run: what a search remembers lives in the run's object, not in globals."""

from __future__ import annotations

from pathlib import Path

from tinyseg_plugin import pipeline
from tinyseg_plugin.contract import customops
from tinyseg_plugin.transforms.optimizer import Options
from tinyseg_plugin.transforms.search import Limits


def test_the_codec_keeps_no_module_cache() -> None:
    """Encoded and decoded options are remembered per run (Run.memo), never by the module."""
    assert not hasattr(customops.encode, "cache_info")
    assert not hasattr(customops.decode, "cache_info")
    assert not any(hasattr(v, "cache_info") for v in vars(customops).values())


def test_each_run_remembers_its_own_search_and_shares_it_with_its_graphs(tiny_unet: Path) -> None:
    data = tiny_unet.read_bytes()
    first = pipeline.Run(Options(smallest=True), runs=None)
    out = pipeline.optimize(data, first, "tiny_unet")
    assert out.result.graph.memo is first.memo  # every candidate graph shares the run's memo
    assert first.memo.views and first.memo.encoded and first.memo.decoded
    second = pipeline.Run(Options(smallest=True), runs=None)
    assert not second.memo.views and not second.memo.encoded and not second.memo.decoded
    again = pipeline.optimize(data, second, "tiny_unet")
    assert again.data == out.data  # what one run remembers changes no answer of another


def test_the_run_carries_the_search_limits(tiny_unet: Path) -> None:
    """A run's Limits reach the chain search: a starved budget gives a plan no better than the
    default one, and not the same search (fewer planner runs)."""
    data = tiny_unet.read_bytes()
    full = pipeline.optimize(data, pipeline.Run(Options(smallest=True), runs=None), "tiny_unet")
    starved = pipeline.optimize(
        data,
        pipeline.Run(Options(smallest=True, limits=Limits(work=1, rows=1, tries=1)), runs=None),
        "tiny_unet",
    )
    assert starved.result.plan.head >= full.result.plan.head
    assert starved.data != full.data


def test_the_table_and_report_name_what_kept_chains_short() -> None:
    """A float32 PRELU whose alpha varies over rows (Keras' PReLU() without shared_axes) is left
    out of chains, and the table lines say so, operator by operator; a float32 or int8 U-Net
    streams every operator."""
    import numpy as np
    import synth

    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import model_to_bytes
    from tinyseg_plugin.report.steps import not_streamed_lines, report_dict, steps_table
    from tinyseg_plugin.transforms.stream import stage_gaps

    b = synth.ModelBuilder(dtype="FLOAT32")  # a small U-Net with a per-pixel PRELU in its skip
    x1 = b.conv(b.conv(b.input([1, 80, 120, 3]), 8), 8)
    alpha = b._tensor([80, 120, 8], "FLOAT32", "alpha", np.full((80, 120, 8), 0.1, np.float32))
    p = b.activation([1, 80, 120, 8], "prelu")
    b._op("PRELU", [x1, alpha], [p])
    y = b.conv(b.add(p, b.transpose_conv(b.conv(b.pool(x1), 16), 8)), 8)
    gaps = stage_gaps(build_graph(b.build([b.conv(y, 1, k=1, relu=False)])))
    assert [g.opcode for g in gaps] == ["PRELU"] and "varies over rows" in gaps[0].reason
    table = "\n".join(not_streamed_lines(gaps))
    assert "not streamed: 1 row-local operators" in table
    assert "an alpha that varies over rows" in table
    f32 = model_to_bytes(synth.tiny_unet_like(0, dtype="FLOAT32"))
    out32 = pipeline.optimize(f32, pipeline.Run(Options(smallest=True), runs=None), "float_unet")
    assert out32.result.not_streamed == [] and out32.result.chains
    report = report_dict(out32.result, "float_unet", "out", None)
    assert report["not_streamed"] == []
    int8 = model_to_bytes(synth.tiny_unet_like(0, dtype="INT8"))
    out8 = pipeline.optimize(int8, pipeline.Run(Options(smallest=True), runs=None), "int8_unet")
    assert out8.result.not_streamed == []
    assert "not streamed" not in steps_table(out8.result)
