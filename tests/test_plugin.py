"""The tflite-tools plugin through pluggy, with a host harness declaring the same hook specifications."""

from __future__ import annotations

import argparse

import pytest
import synth
from tflite_tools_host import describe_all, manager, parse, run_optimize

from tinyseg_plugin import plugin
from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.checks.verify import verify
from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import model_to_bytes, parse_model
from tinyseg_plugin.memory.planner import plan_graph


@pytest.fixture(scope="module")
def unet() -> bytes:
    return model_to_bytes(synth.tiny_unet_like())


@pytest.fixture(scope="module")
def optimized(unet: bytes) -> tuple[bytes, list[dict]]:
    return run_optimize(manager(plugin), unet, ["-i", "m.tflite", "--no-stream", "--target", "min"])


def test_options_are_registered_through_the_host_parser() -> None:
    pm = manager(plugin)
    a = parse(pm, ["--target", "160KB", "--kernel-set", "cmsis-nn", "--no-fuse"])
    assert (a.target, a.kernel_set, a.no_fuse, a.no_partial) == ("160KB", "cmsis-nn", True, False)


# The plugin's old spellings, as the CLI's (tests/test_cli.py): (old, new, dest, value).
DEPRECATED_OPTIONS = [
    ("--runtime", "--kernel-set", "kernel_set", "cmsis-nn"),
    ("--kernels", "--kernel-set", "kernel_set", "cmsis-nn"),
    ("--arch", "--build-profile", "build_profile", "cortex-m"),
]


@pytest.mark.parametrize("old, new, dest, value", DEPRECATED_OPTIONS)
def test_deprecated_option_warns_once_and_acts_as_the_new_one(
    capsys, old: str, new: str, dest: str, value: str
) -> None:
    pm = manager(plugin)
    assert getattr(parse(pm, [new, value]), dest) == value
    assert capsys.readouterr().err == ""
    assert getattr(parse(pm, [old, value]), dest) == value
    assert capsys.readouterr().err == f"tinyseg: warning: {old} is deprecated; use {new}\n"


def test_analyze_gets_no_optimize_options() -> None:
    pm = manager(plugin)
    p = argparse.ArgumentParser(allow_abbrev=False)
    pm.hook.tflite_tools_add_options(parser=p, command="analyze")
    text = p.format_help()
    assert "--kernel-set" in text and "--build-profile" in text
    assert (
        "--runtime" not in text and "--kernels" not in text and "--arch" not in text
    )  # deprecated spellings: not shown
    assert "--target" not in text and "--verify-runs" not in text and "--no-fuse" not in text


def test_optimize_hook_rewrites_and_report_hook_contributes(unet: bytes, optimized, capsys) -> None:
    out, sections = optimized
    assert out != unet
    g0, g1 = build_graph(parse_model(unet)), build_graph(parse_model(out))
    assert plan_graph(g1).head < plan_graph(g0).head
    assert verify(g0, g1).identical
    (s,) = sections
    assert s["name"] == "tinyseg" and s["head"] == plan_graph(g1).head and s["tinyseg_ops"]
    assert "kernel scratch" in s["head_is"]
    (victim,) = [v for v in s["spilled"].values() if v["bytes"] == 76_800]
    assert set(victim) == {"name", "bytes", "slot", "after_operator"}


def test_optimize_hook_streams_with_target_min(unet: bytes) -> None:
    """Through the host's hooks too, --target min streams: StreamChain operators,
    described like every TinySeg operator, the head under 64,000 B, verified."""
    out, (s,) = run_optimize(manager(plugin), unet, ["-i", "m.tflite", "--target", "min"])
    g0, g1 = build_graph(parse_model(unet)), build_graph(parse_model(out))
    assert {op.opcode for op in g1.operators} == {customops.STREAM_CHAIN}
    assert s["head"] == plan_graph(g1).head <= 64_000 and verify(g0, g1).identical
    assert [d["type"] for d in describe_all(manager(plugin), out)] == [
        customops.STREAM_CHAIN
    ] * len(g1.operators)


def test_wear_warning_goes_to_stderr_as_the_command_line_prints_it(unet: bytes, capsys) -> None:
    """--target min writes flash on the generic board: the wear warning is on stderr, the summary
    and the plans on stdout."""
    run_optimize(manager(plugin), unet, ["-i", "m.tflite", "--target", "min", "--no-verify"])
    printed = capsys.readouterr()
    assert "tinyseg: warning: generic 'flash' wears out after" in printed.err
    assert "warning" not in printed.out and "written head" in printed.out


def test_plugin_help_describes_streaming_and_the_default() -> None:
    parser = argparse.ArgumentParser(prog="tflite-tools optimize")
    manager(plugin).hook.tflite_tools_add_options(parser=parser, command="optimize")
    text = " ".join(parser.format_help().split())
    assert "row streaming (StreamChain), spilling and fused fetching" in text
    assert "writes no flash and adds at most 1% modelled latency" in text


def test_optimize_says_what_it_verified(unet: bytes, capsys, monkeypatch) -> None:
    monkeypatch.delenv(
        "TFLM_DIR", raising=False
    )  # no TFLM tree: the fallback check, and the line says so
    run_optimize(manager(plugin), unet, ["--verify-runs", "2"])
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("tinyseg: verified")]
    assert line == [
        "tinyseg: verified: outputs bit-identical to the reordered model in TFLM on 2 random inputs "
        "and 3 edge cases (reference kernels; fallback check: TinySeg operators lowered to builtins in the tflite-micro "
        "wheel (no TFLM tree))"
    ]


def test_every_tinyseg_operator_is_described_and_others_are_not(optimized) -> None:
    out, _ = optimized
    g = build_graph(parse_model(out))
    descriptions = describe_all(manager(plugin), out)
    custom = [op for op in g.operators if op.opcode in customops.TINYSEG_OPS]
    assert len(descriptions) == len(custom) and custom
    for op, d in zip(custom, descriptions):
        assert (d["type"], d["inputs"]) == (op.opcode, list(op.inputs))
        assert sorted(d["outputs"]) == sorted(op.outputs)
    # a Spill writes its token: the edge to the operator that fetches its slot
    spills = [d for d in descriptions if d["type"] == "Spill"]
    assert spills and all(len(d["outputs"]) == 1 for d in spills)
    assert all(any(d["outputs"][0] in r["inputs"] for r in descriptions) for d in spills)
    pm = manager(plugin)
    assert (
        pm.hook.tflite_tools_describe_operator(
            op_id=0,
            custom_code="TFLite_Detection_PostProcess",
            inputs=[0],
            outputs=[1],
            custom_options=b"",
            shapes=[[1], [1]],
        )
        is None
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--target", "12XB"], "--target: '12XB' is not a size"),
        (["--kernel-set", "fast"], "--kernel-set: 'fast'"),
        (["--runtime", "fast"], "--kernel-set: 'fast'"),
        (["--build-profile", "arm"], "--build-profile: 'arm'"),
        (["--arch", "arm"], "--build-profile: 'arm'"),
        (["--verify-runs", "0"], "--verify-runs: '0'"),
        (["--verify-runs", "-1"], "--verify-runs: '-1'"),
        (["--verify-runs", "x"], "--verify-runs: 'x'"),
    ],
)
def test_bad_option_value_is_refused_before_the_model_is_read(
    argv: list[str], message: str
) -> None:
    with pytest.raises(plugin.PluginError, match=message) as e:
        parse(manager(plugin), argv)  # check_options: no model involved
    assert e.value.exit_code == 2


def test_unreachable_target_is_exit_3_with_the_best_model(unet: bytes, optimized) -> None:
    with pytest.raises(
        plugin.PluginError, match=r"target 1,000 B not reachable: best head [0-9,]+ B \(written\)"
    ) as e:
        run_optimize(manager(plugin), unet, ["--target", "1000", "--no-stream"])
    assert e.value.exit_code == 3
    assert e.value.model == optimized[0]  # the same model as without a target


def test_target_already_met_leaves_the_model_unchanged(unet: bytes, capsys) -> None:
    head = interpreter.arena_usage(unet).head
    out, _ = run_optimize(manager(plugin), unet, ["--target", str(head)])
    assert out == unet
    assert f"already meets --target {head:,} B" in capsys.readouterr().out


def test_failed_verification_is_exit_4(unet: bytes, monkeypatch) -> None:
    from tinyseg_plugin.checks import verify as verify_module

    monkeypatch.setattr(
        verify_module,
        "verify",
        lambda a, b, runs, **kw: verify_module.Verification(1, False, "output 0 differs"),
    )
    with pytest.raises(plugin.PluginError, match="verification failed: output 0 differs") as e:
        run_optimize(manager(plugin), unet, [])
    assert e.value.exit_code == 4 and not hasattr(e.value, "model")


def test_model_the_plugin_cannot_improve_is_returned_unchanged() -> None:
    b = synth.ModelBuilder(seed=1)
    x = b.input([1, 8, 8, 4])
    model = model_to_bytes(b.build([b.conv(x, 4)]))
    out, sections = run_optimize(manager(plugin), model, [])
    assert out == model
    assert sections[0]["head"] == interpreter.arena_usage(model).head
    assert sections[0]["spilled"] == "none"


def test_entry_point_loads_this_plugin() -> None:
    from importlib import metadata

    eps = metadata.entry_points().select(group="tflite_tools", name="tinyseg")
    assert len(eps) == 1, (
        "pyproject.toml must register the plugin (pip install -e . again after changing it)"
    )
    loaded = next(iter(eps)).load()
    assert loaded is plugin
    pm = manager(loaded)  # every hook implementation matches the host's specifications
    assert {h.name for h in pm.get_hookcallers(loaded)} == {
        n for n in dir(plugin) if n.startswith("tflite_tools_")
    }


# ---------------------------------------------------------------- one pipeline: the plugin as the CLI


def _plugin_error(model: bytes, argv: list[str]) -> plugin.PluginError:
    with pytest.raises(plugin.PluginError) as info:
        run_optimize(manager(plugin), model, ["-i", "m.tflite", *argv])
    return info.value


def _cli_error(tmp_path, capfd, model: bytes, argv: list[str]) -> tuple[int, str]:
    from tinyseg_plugin.cli import main

    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    rc = main(["optimize", str(path), "-o", str(tmp_path / "o.tflite"), *argv])
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return rc, lines[0].removeprefix("tinyseg: error: ")


def test_plugin_refuses_a_model_tflm_cannot_run_as_the_cli_does(tmp_path, capfd) -> None:
    """A hybrid model (float activations, int8 weights): TFLM refuses it in Prepare. The plugin
    refuses it before any search, with the CLI's sentence and exit code."""
    from test_validate import hybrid_model

    data = model_to_bytes(hybrid_model())
    rc, message = _cli_error(tmp_path, capfd, data, [])
    err = _plugin_error(data, [])
    assert (err.exit_code, rc) == (2, 2)
    assert "TFLM refuses the model in Prepare" in message
    assert str(err) == "tinyseg: " + message.replace(str(tmp_path / "m.tflite"), "model")


def test_plugin_honours_the_cpu_time_limit_as_the_cli_does(tmp_path, capfd, unet: bytes) -> None:
    """--time-limit bounds the plugin's pass and each TFLM child of its check too: the same
    one-line refusal."""
    rc, message = _cli_error(tmp_path, capfd, unet, ["--time-limit", "0.01"])
    err = _plugin_error(unet, ["--time-limit", "0.01"])
    assert (err.exit_code, rc) == (2, 2)
    # Whether the run's deadline or a TFLM child's CPU limit stops it first depends on the
    # machine; either way both say so in one line and point at --time-limit.
    for text in (message, str(err)):
        assert "stopped after the --time-limit of 0.01 s" in text or (
            "did not finish" in text and "raise the limit with --time-limit" in text
        ), text


@pytest.mark.parametrize("bad", ["0", "-1", "x", "inf"])
def test_plugin_time_limit_must_be_positive(bad: str) -> None:
    with pytest.raises(ValueError, match="--time-limit"):
        parse(manager(plugin), ["--time-limit", bad])


def test_optimize_hook_writes_the_default_plan_of_the_command_line(unet: bytes, capsys) -> None:
    """No --target through the host: the command line's default, no flash written, and the
    next plans with their options."""
    out, (s,) = run_optimize(manager(plugin), unet, ["-i", "m.tflite", "--no-verify"])
    printed = capsys.readouterr().out
    assert s["head"] == plan_graph(build_graph(parse_model(out))).head <= 153_600
    assert "written head" in printed and "no --target" in printed and "--target min" in printed
    assert "flash:" not in printed  # no flash region in the summary: nothing written to it


def test_every_option_of_the_table_is_the_plugins() -> None:
    """The plugin renders optimize's whole table: each option under its plugin spelling, none
    of the names the host owns (its -o, --csv, --plot)."""
    from tinyseg_plugin.options import OPTIMIZE

    parser = argparse.ArgumentParser(prog="tflite-tools optimize", allow_abbrev=False)
    for name in ("-i", "-o", "--csv", "--plot"):
        parser.add_argument(name)
    manager(plugin).hook.tflite_tools_add_options(parser=parser, command="optimize")
    taken = {s for a in parser._actions for s in a.option_strings}
    missing = [o.flags[0] for o in OPTIMIZE if not set(o.plugin_flags) <= taken]
    assert not missing
    assert {"--tinyseg-csv", "--tinyseg-plot", "--verify-runs", "--frontier", "-q"} <= taken
