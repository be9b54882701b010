"""The command line: outputs, and every bad input gives one line, a non-zero code and no file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import synth
from conftest import ROOT

from tinyseg_plugin.cli import build_parser, main
from tinyseg_plugin.ir.modelio import model_to_bytes, save_model


@pytest.fixture(scope="module")
def unet_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("m") / "unet.tflite"
    save_model(synth.tiny_unet_like(), p)
    return p


def _bad_models(tmp: Path) -> dict[str, tuple[Path, str]]:
    good = model_to_bytes(synth.random_unet(2))
    cases = {
        "missing": (tmp / "nope.tflite", "no such file"),
        "empty": (tmp / "empty.tflite", "empty file"),
        "text": (tmp / "text.tflite", "not a flatbuffer"),
        "identifier": (tmp / "ident.tflite", "wrong file identifier"),
        "truncated": (tmp / "trunc.tflite", "corrupt or truncated flatbuffer"),
        "dynamic": (tmp / "dyn.tflite", "dynamic shape"),
        "directory": (tmp, "is a directory"),
    }
    cases["empty"][0].write_bytes(b"")
    cases["text"][0].write_bytes(b"this is not a model, just some text that is long enough")
    cases["identifier"][0].write_bytes(good[:4] + b"XXXX" + good[8:])
    cases["truncated"][0].write_bytes(good[: len(good) // 2])
    m = synth.random_unet(2)
    m.subgraphs[0].tensors[m.subgraphs[0].inputs[0]].shape[1] = -1
    cases["dynamic"][0].write_bytes(model_to_bytes(m))
    return cases


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize(
    "case", ["missing", "empty", "text", "identifier", "truncated", "dynamic", "directory"]
)
@pytest.mark.parametrize("command", ["analyze", "optimize"])
def test_bad_model_one_line_no_output(tmp_path: Path, case: str, command: str) -> None:
    path, message = _bad_models(tmp_path)[case]
    out = tmp_path / "out"
    args = [command, str(path)]
    if command == "analyze":
        args += [
            "--json",
            str(out / "a.json"),
            "--csv",
            str(out / "csv"),
            "--plot",
            str(out / "p.png"),
        ]
    else:
        out.mkdir()
        args += [
            "-o",
            str(out / "o.tflite"),
            "--report",
            str(out / "r.json"),
            "--plot",
            str(out / "p.png"),
        ]
    r = _run(args, tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinyseg: error:"), r.stderr
    assert message and message in lines[0]
    assert "Traceback" not in r.stderr
    assert not out.exists() or not any(out.iterdir())


def test_bad_arguments(tmp_path: Path, unet_file: Path) -> None:
    for args, message in (
        (
            ["optimize", str(unet_file), "-o", str(tmp_path / "o.tflite"), "--target", "12XB"],
            "not a size",
        ),
        (
            ["optimize", str(unet_file), "-o", str(tmp_path / "no" / "dir" / "o.tflite")],
            "does not exist",
        ),
        (["analyze", str(unet_file), "--kernels", "fast"], "invalid choice"),
        (["frobnicate"], "invalid choice"),
    ):
        r = _run(args, tmp_path)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and message in lines[0], r.stderr
    assert not (tmp_path / "o.tflite").exists()


def test_analyze_outputs(tmp_path: Path, unet_file: Path, capsys) -> None:
    rc = main(
        [
            "analyze",
            str(unet_file),
            "--json",
            str(tmp_path / "a.json"),
            "--csv",
            str(tmp_path / "csv"),
            "--plot",
            str(tmp_path / "p.png"),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "<== head" in text and "307,200" in text
    d = json.loads((tmp_path / "a.json").read_text())
    assert d["schema"] == "tinyseg.analysis/3" and d["head"] == 307_200 and d["exact"]
    assert d["peak"]["live_bytes"] <= d["head"]
    assert {"tensors.csv", "operators.csv", "buffers.csv"} <= {
        p.name for p in (tmp_path / "csv").iterdir()
    }
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_optimize_then_verify(tmp_path: Path, unet_file: Path, capsys) -> None:
    out = tmp_path / "o.tflite"
    smallest = ["--target", "min"]
    rc = main(
        ["optimize", str(unet_file), "-o", str(out), "--report", str(tmp_path / "r.json"), "-q"]
        + smallest
    )
    assert rc == 0 and out.exists()
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["original"]["head"] == 307_200 and rep["optimized"]["head"] <= 64_000  # streamed
    assert rep["verified"]["identical"] and rep["streamed_chains"] and not rep["spilled"]
    assert rep["bytes_moved_per_inference"] > 0 and rep["steps"][-1]["technique"] == "streaming"
    assert rep["verified"]["original_cached"] == 0
    assert "original's outputs from the cache" not in rep["verification"]
    capsys.readouterr()
    assert main(["verify", str(unet_file), str(out)]) == 0
    # the same original on the same inputs: optimize's check left its outputs in the cache
    assert "; original's outputs from the cache)" in capsys.readouterr().out
    again = ["optimize", str(unet_file), "-o", str(tmp_path / "o2.tflite"), "-q"] + smallest
    assert main(again + ["--report", str(tmp_path / "r2.json")]) == 0
    rep = json.loads((tmp_path / "r2.json").read_text())
    assert rep["verified"]["original_cached"] == 6
    assert "original's outputs from the cache" in rep["verification"]
    # --no-stream: spilling and fused fetching only (the paper's passes)
    rc = main(
        [
            "optimize",
            str(unet_file),
            "-o",
            str(out),
            "--report",
            str(tmp_path / "r.json"),
            "-q",
            "--no-stream",
        ]
        + smallest
    )
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rc == 0 and 64_000 < rep["optimized"]["head"] <= 153_600
    assert rep["spilled"] and not rep["streamed_chains"] and rep["bytes_moved_per_inference"] > 0
    assert main(["verify", str(unet_file), str(out)]) == 0


def test_unreachable_target_writes_best_and_exits_3(tmp_path: Path, unet_file: Path) -> None:
    out = tmp_path / "o.tflite"
    r = _run(["optimize", str(unet_file), "-o", str(out), "--target", "10KB", "-q"], tmp_path)
    assert r.returncode == 3 and out.exists() and "not reachable" in r.stderr


def test_verify_detects_a_different_model(tmp_path: Path, unet_file: Path) -> None:
    other = tmp_path / "other.tflite"
    save_model(synth.tiny_unet_like(seed=9), other)
    r = _run(["verify", str(unet_file), str(other)], tmp_path)
    assert r.returncode == 4 and "differ" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_no_split_switch(tmp_path: Path) -> None:
    """`--no-split` keeps the V-Net-like decoder's ADD whole (and the head above the split result)."""
    m = tmp_path / "vnet.tflite"
    save_model(synth.vnet_like(), m)
    heads = {}
    for flag in ([], ["--no-split"]):
        rep = tmp_path / f"r{len(flag)}.json"
        assert (
            main(
                [
                    "optimize",
                    str(m),
                    "-o",
                    str(tmp_path / f"o{len(flag)}.tflite"),
                    "--report",
                    str(rep),
                    "-q",
                    "--no-stream",
                    "--target",
                    "min",
                    *flag,
                ]
            )
            == 0
        )
        r = json.loads(rep.read_text())
        heads[bool(flag)] = r["optimized"]["head"]
        assert any(s["technique"] == "operator splitting" for s in r["steps"]) != bool(flag)
    assert heads[False] < heads[True]


# ---------------------------------------------------------------- verify's arguments


def _one_line(r: subprocess.CompletedProcess, code: int, message: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code and len(lines) == 1 and lines[0].startswith("tinyseg: error:"), (
        r.stderr
    )
    assert message in lines[0], lines[0]
    assert "Traceback" not in r.stderr


def test_verify_models_with_different_inputs(tmp_path: Path, unet_file: Path) -> None:
    other = tmp_path / "other.tflite"
    save_model(
        synth.random_unet(5), other
    )  # 1x16x16x.. input against the 80x120x3 Tiny-U-Net-like one
    r = _run(["verify", str(unet_file), str(other)], tmp_path)
    _one_line(r, 2, "the models' inputs differ")


@pytest.mark.parametrize("runs", ["0", "-1", "two"])
def test_runs_must_be_positive(tmp_path: Path, unet_file: Path, runs: str) -> None:
    for args in (
        ["verify", str(unet_file), str(unet_file), "--runs", runs],
        ["optimize", str(unet_file), "-o", str(tmp_path / "o.tflite"), "--runs", runs],
    ):
        r = _run(args, tmp_path)
        _one_line(r, 2, "--runs")
    assert not (tmp_path / "o.tflite").exists()


def test_verify_swapped_arguments_name_the_optimized_file(tmp_path: Path, unet_file: Path) -> None:
    out = tmp_path / "o.tflite"
    assert main(["optimize", str(unet_file), "-o", str(out), "-q"]) == 0
    r = _run(["verify", str(out), str(unet_file)], tmp_path)
    _one_line(r, 2, f"{out} holds TinySeg operators")
    assert "give the original first" in r.stderr and "swapped" in r.stderr


# ---------------------------------------------------------------- outputs: all or nothing (point 10)


def test_optimize_writes_nothing_when_an_output_directory_is_missing(
    tmp_path: Path, unet_file: Path
) -> None:
    out = tmp_path / "o.tflite"
    for extra in (
        ["--report", str(tmp_path / "missing" / "r.json")],
        ["--plot", str(tmp_path / "missing" / "p.png")],
    ):
        r = _run(["optimize", str(unet_file), "-o", str(out), "-q", *extra], tmp_path)
        _one_line(r, 2, "does not exist")
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_analyze_plot_into_missing_directory_leaves_no_csv_directory(
    tmp_path: Path, unet_file: Path
) -> None:
    r = _run(
        [
            "analyze",
            str(unet_file),
            "--csv",
            str(tmp_path / "csv"),
            "--json",
            str(tmp_path / "a.json"),
            "--plot",
            str(tmp_path / "missing" / "p.png"),
        ],
        tmp_path,
    )
    _one_line(r, 2, "does not exist")
    assert list(tmp_path.iterdir()) == []


def test_unwritable_output_directory_is_one_line(tmp_path: Path, unet_file: Path) -> None:
    """/proc refuses new files even for root (the tests may run as root, where chmod does not bite)."""
    for args in (
        ["optimize", str(unet_file), "-o", "/proc/tinyseg_o.tflite", "-q"],
        ["analyze", str(unet_file), "--json", "/proc/tinyseg_a.json"],
        ["analyze", str(unet_file), "--csv", "/proc/tinyseg_csv"],
    ):
        r = _run(args, tmp_path)
        _one_line(r, 2, "/proc/tinyseg_")


def test_written_files_respect_the_umask(tmp_path: Path, unet_file: Path) -> None:
    import os

    old = os.umask(0o027)
    try:
        assert (
            main(
                [
                    "analyze",
                    str(unet_file),
                    "--json",
                    str(tmp_path / "a.json"),
                    "--csv",
                    str(tmp_path / "csv"),
                ]
            )
            == 0
        )
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "csv" / "tensors.csv").stat().st_mode & 0o777 == 0o640


def test_tflm_log_never_reaches_stderr(tmp_path: Path) -> None:
    """A model TFLM refuses at load: tinyseg's line is the only line on stderr."""
    from test_validate import float16_model

    m = tmp_path / "f16.tflite"
    save_model(float16_model(), m)
    r = _run(["verify", str(m), str(m)], tmp_path)
    _one_line(r, 2, "float16")


def test_plugin_verify_runs_must_be_positive() -> None:
    """The tflite-tools plugin cannot switch the check off with --verify-runs 0 either."""
    import argparse

    from tflite_tools_host import manager

    from tinyseg_plugin import plugin
    from tinyseg_plugin.checks.verify import verify
    from tinyseg_plugin.errors import TinySegError
    from tinyseg_plugin.ir.graph import build_graph

    p = argparse.ArgumentParser()
    hook = manager(plugin).hook
    hook.tflite_tools_add_options(parser=p, command="optimize")
    for bad in ("0", "-1"):
        # the command line's --runs sentence, under the plugin's spelling
        with pytest.raises(
            plugin.PluginError, match=r"--verify-runs: '-?\d'(: must be from 1| is not a whole)"
        ):
            hook.tflite_tools_check_options(
                options=p.parse_args(["--verify-runs", bad]), command="optimize"
            )
    g = build_graph(synth.random_unet(1))
    with pytest.raises(TinySegError, match="at least one"):
        verify(g, g, runs=0)


# ---------------------------------------------------------------- the layout the check runs


def _optimized_with_layout(tmp_path: Path, unet_file: Path, offset_of) -> Path:
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.memory.planner import plan_graph
    from tinyseg_plugin.transforms.passes.layout import with_offsets

    out = tmp_path / "o.tflite"
    if not out.exists():
        assert main(["optimize", str(unet_file), "-o", str(out), "-q", "--no-stream"]) == 0
    g = build_graph(load_model(out))
    plan = plan_graph(g)
    laid = with_offsets(
        g, {b.owner: offset_of(b) for b in plan.buffers if b.kind == "tensor" and b.subgraph == 0}
    ).graph
    path = tmp_path / "laid.tflite"
    save_model(laid.model, path)
    return path


def test_verify_runs_the_offline_layout(tmp_path: Path, unet_file: Path) -> None:
    """A correct layout passes; the same model with every offset 0 must fail (it used to pass as identical)."""
    good = _optimized_with_layout(tmp_path, unet_file, lambda b: b.offset)
    assert _run(["verify", str(unet_file), str(good), "--runs", "1"], tmp_path).returncode == 0
    broken = _optimized_with_layout(tmp_path, unet_file, lambda b: 0)
    r = _run(["verify", str(unet_file), str(broken), "--runs", "1"], tmp_path)
    _one_line(r, 4, "outputs differ")


def test_verify_refuses_a_layout_of_the_wrong_length(tmp_path: Path, unet_file: Path) -> None:
    import numpy as np

    from tinyseg_plugin.ir.modelio import load_model

    good = _optimized_with_layout(tmp_path, unet_file, lambda b: b.offset)
    m = load_model(good)
    md = next(md for md in m.metadata if md.name == b"OfflineMemoryAllocation")
    for cut in (4, -4):  # one offset short, and a table longer than its header says
        data = bytes(np.asarray(m.buffers[md.buffer].data, np.uint8))
        m2 = load_model(good)
        m2.buffers[md.buffer].data = np.frombuffer(
            data[:cut] if cut < 0 else data + b"\0" * cut, np.uint8
        ).copy()
        bad = tmp_path / "bad.tflite"
        save_model(m2, bad)
        r = _run(["verify", str(unet_file), str(bad), "--runs", "1"], tmp_path)
        _one_line(r, 2, "OfflineMemoryAllocation metadata")


def test_failed_optimize_without_quiet_is_one_line(tmp_path: Path, unet_file: Path) -> None:
    """Without -q and with stderr captured (not a terminal), no progress line comes before the error."""
    r = _run(
        ["optimize", str(unet_file), "-o", str(tmp_path / "o.tflite"), "--time-limit", "0.01"],
        tmp_path,
    )
    _one_line(r, 2, "--time-limit")  # the run's deadline or a TFLM run's CPU limit
    assert not (tmp_path / "o.tflite").exists()


# Old spellings kept for one release (docs/glossary.md, "Deprecated spellings"): (old, new, value).
DEPRECATED_OPTIONS = [
    ("--runtime", "--kernel-set", "cmsis-nn"),
    ("--kernels", "--kernel-set", "cmsis-nn"),
    ("--arch", "--build-profile", "cortex-m"),
]


@pytest.mark.parametrize("old, new, value", DEPRECATED_OPTIONS)
def test_deprecated_option_warns_once_and_acts_as_the_new_one(
    unet_file: Path, capsys, old: str, new: str, value: str
) -> None:
    assert main(["analyze", str(unet_file), "--json", new, value]) == 0
    new_out = capsys.readouterr()
    assert new_out.err == ""  # the new spelling warns about nothing
    assert main(["analyze", str(unet_file), "--json", old, value]) == 0
    old_out = capsys.readouterr()
    assert old_out.err == f"tinyseg: warning: {old} is deprecated; use {new}\n"
    assert old_out.out == new_out.out  # the same analysis, byte for byte
    for command in ("analyze", "optimize"):
        help_text = build_parser()._subparsers._group_actions[0].choices[command].format_help()
        assert new in help_text and old not in help_text  # only the new spelling is documented


def test_analysis_json_keeps_deprecated_keys_beside_new_ones(unet_file: Path, capsys) -> None:
    assert main(["analyze", str(unet_file), "--json", "--kernel-set", "cmsis-nn"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["schema"] == "tinyseg.analysis/3"
    assert d["kernel_set"] == d["runtime"] == "cmsis-nn"  # "runtime": deprecated, one release
    assert d["build_profile"] == d["arch"] == "host64"  # "arch": deprecated, one release
