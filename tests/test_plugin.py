"""The tflite-tools plugin through pluggy, with a host harness declaring the same hook specifications."""
from __future__ import annotations

import pytest

from tflite_tools_host import manager, run_optimize
from tinyseg_plugin import plugin, synth, tflm
from tinyseg_plugin.graph import build_graph
from tinyseg_plugin.modelio import model_to_bytes, parse_model
from tinyseg_plugin.planner import plan_graph
from tinyseg_plugin.verify import verify


@pytest.fixture(scope="module")
def unet() -> bytes:
    return model_to_bytes(synth.tiny_unet_like())


def test_options_are_registered_through_the_host_parser() -> None:
    import argparse

    pm = manager(plugin)
    p = argparse.ArgumentParser()
    pm.hook.tflite_tools_add_options(parser=p)
    a = p.parse_args(["--target", "160KB", "--kernels", "cmsis-nn", "--no-fuse"])
    assert (a.target, a.kernels, a.no_fuse, a.no_partial) == ("160KB", "cmsis-nn", True, False)


def test_optimize_hook_rewrites_and_report_hook_contributes(unet: bytes) -> None:
    pm = manager(plugin)
    out, sections = run_optimize(pm, unet, ["-i", "m.tflite"])
    assert out != unet
    g0, g1 = build_graph(parse_model(unet)), build_graph(parse_model(out))
    assert plan_graph(g1).head < plan_graph(g0).head
    assert verify(g0, g1).identical
    (s,) = sections
    assert s["name"] == "tinyseg" and s["head"] == plan_graph(g1).head and s["spill_ops"]
    assert s["spilled"] and s["spilled"][0]["bytes"] == 76_800


def test_bad_option_value_is_a_clear_error(unet: bytes) -> None:
    pm = manager(plugin)
    with pytest.raises(plugin.PluginError, match="--target: '12XB' is not a size"):
        run_optimize(pm, unet, ["--target", "12XB"])
    with pytest.raises(plugin.PluginError, match="--kernels: 'fast'"):
        run_optimize(pm, unet, ["--kernels", "fast"])


def test_model_the_plugin_cannot_improve_is_returned_unchanged() -> None:
    b = synth.ModelBuilder(seed=1)
    x = b.input([1, 8, 8, 4])
    model = model_to_bytes(b.build([b.conv(x, 4)]))
    out, sections = run_optimize(manager(plugin), model, [])
    assert out == model
    assert sections[0]["head"] == tflm.arena_usage(model).head


def test_entry_point_is_declared() -> None:
    import tomllib
    from pathlib import Path

    meta = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["tflite_tools"]["tinyseg"] == "tinyseg_plugin.plugin"
