"""What a newcomer meets first: usage errors, --version, names, -o and --target edge cases, file modes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import synth

from tinyseg_plugin.cli import main
from tinyseg_plugin.ir.modelio import save_model
from tinyseg_plugin.memory.planner import plan_model


@pytest.fixture(scope="module")
def unet_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("m") / "unet.tflite"
    save_model(synth.tiny_unet_like(), p)
    return p


def _tinyseg(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def test_no_arguments_names_the_program_once() -> None:
    p = _tinyseg()
    assert p.returncode == 2
    assert p.stderr == "tinyseg: error: the following arguments are required: COMMAND\n"


def test_subcommand_usage_error_names_the_subcommand_once(capsys) -> None:
    assert main(["analyze"]) == 2
    assert (
        capsys.readouterr().err
        == "tinyseg: error: analyze: the following arguments are required: model\n"
    )


def test_version() -> None:
    from importlib.metadata import version

    p = _tinyseg("--version")
    assert p.returncode == 0 and p.stdout == f"tinyseg {version('tinyseg-plugin')}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["optimize", "{m}", "-o", "{o}", "--targ", "1M"],
        ["analyze", "{m}", "--js"],
        ["optimize", "{m}", "-o", "{o}", "--no-ver"],
    ],
)
def test_abbreviations_are_refused(
    unet_file: Path, tmp_path: Path, argv: list[str], capsys
) -> None:
    out = tmp_path / "o.tflite"
    assert main([a.format(m=unet_file, o=out) for a in argv]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err
    assert not out.exists()


def test_verify_help_describes_its_arguments() -> None:
    text = _tinyseg("verify", "--help").stdout
    assert "the model before optimization" in text and "random inputs, at least 1" in text


def test_top_level_help_describes_optimize_as_it_runs() -> None:
    text = " ".join(_tinyseg("--help").stdout.split())
    assert "row streaming" in text and "spill, fuse and narrow" not in text
    assert "writes no flash and adds at most 1% modelled latency" in text


def test_remote_host_help_describes_baud_and_its_default() -> None:
    text = " ".join(_tinyseg("remote-host", "--help").stdout.split())
    assert "--baud BAUD bits per second on the serial line" in text
    assert "(default: 921600)" in text


@pytest.mark.parametrize(
    "command",
    [[], ["analyze"], ["optimize"], ["verify"], ["boards"], ["tflm", "install"], ["remote-host"]],
)
def test_help_fits_80_columns_on_a_wide_terminal(command: list[str]) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", *command, "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=600,
    )
    assert p.returncode == 0
    wide = [line for line in p.stdout.splitlines() if len(line) > 80]
    assert not wide, wide


def test_output_equal_to_input_is_refused_without_force(
    unet_file: Path, tmp_path: Path, capsys
) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(unet_file.read_bytes())
    assert main(["optimize", str(model), "-o", str(model), "-q", "--runs", "1"]) == 2
    assert "is the input model" in capsys.readouterr().err
    assert model.read_bytes() == unet_file.read_bytes()
    assert main(["optimize", str(model), "-o", str(model), "-q", "--runs", "1", "--force"]) == 0
    assert plan_model_head(model) < plan_model_head(unet_file)


def plan_model_head(path: Path) -> int:
    from tinyseg_plugin.ir.modelio import load_model

    return plan_model(load_model(str(path))).head


def test_target_already_met_writes_the_input_unchanged(
    unet_file: Path, tmp_path: Path, capsys
) -> None:
    head = plan_model_head(unet_file)
    out, report = tmp_path / "o.tflite", tmp_path / "r.json"
    assert (
        main(
            [
                "optimize",
                str(unet_file),
                "-o",
                str(out),
                "--target",
                str(head),
                "--report",
                str(report),
            ]
        )
        == 0
    )
    assert out.read_bytes() == unet_file.read_bytes()
    assert f"already meets --target {head:,} B" in capsys.readouterr().out
    r = json.loads(report.read_text())
    assert (r["target_bytes"], r["target_met"], r["unchanged"], r["steps"]) == (
        head,
        True,
        True,
        [],
    )


def test_report_records_the_target_asked_for(unet_file: Path, tmp_path: Path) -> None:
    out, report = tmp_path / "o.tflite", tmp_path / "r.json"
    assert (
        main(
            [
                "optimize",
                str(unet_file),
                "-o",
                str(out),
                "--target",
                "200KB",
                "-q",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    r = json.loads(report.read_text())
    assert (
        r["target_bytes"] == 200_000
        and r["target_met"] is True
        and r["build_profile"] == r["arch"] == "host64"  # "arch": deprecated, one release
        and "target" not in r
    )


def test_files_respect_the_umask(unet_file: Path, tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        assert main(["analyze", str(unet_file), "--json", str(tmp_path / "a.json")]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o640


def test_analysis_names_the_build_profile_and_fits_in_100_columns(
    unet_file: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    # A short relative path, as a user types it: the first line names the file, and the suite's
    # own temporary path (which depends on where the clone is) must not decide the width.
    monkeypatch.chdir(unet_file.parent)
    assert (
        main(
            [
                "analyze",
                unet_file.name,
                "--build-profile",
                "cortex-m",
                "--json",
                str(tmp_path / "a.json"),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert (
        "build profile: cortex-m" in text.splitlines()[0] and "target" not in text.splitlines()[0]
    )
    assert max(len(line) for line in text.splitlines()) <= 100, max(text.splitlines(), key=len)
    d = json.loads((tmp_path / "a.json").read_text())
    assert d["build_profile"] == "cortex-m" and "target" not in d
    big = [t for t in d["tensors"] if t["offset"] and t["offset"] >= 1000]
    assert big and f"{big[0]['offset']:,}" in text  # offsets with separators, like bytes


def test_nothing_to_gain_writes_the_input_unchanged_without_running_tflm(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """One convolution: no pass can lower its arena, so the output is the input, byte for byte, and
    verification (two TFLM runs per input, the whole cost on big models) is not needed."""
    import synth

    from tinyseg_plugin.checks import verify as verify_mod
    from tinyseg_plugin.ir.modelio import save_model

    model, out, report = tmp_path / "one.tflite", tmp_path / "o.tflite", tmp_path / "r.json"
    save_model(synth.chain(1), model)
    head = plan_model_head(model)

    def no_verify(*a, **k):
        raise AssertionError("verification ran on an unchanged model")

    monkeypatch.setattr(verify_mod, "verify", no_verify)
    assert main(["optimize", str(model), "-o", str(out), "--report", str(report)]) == 0
    assert out.read_bytes() == model.read_bytes()
    assert (
        f"no pass lowers the arena of {model} (head {head:,} B): wrote it unchanged"
        in capsys.readouterr().out
    )
    r = json.loads(report.read_text())
    assert r["unchanged"] is True and r["steps"] == [] and "verification" not in r
    # A --target below what is reachable: still written unchanged, exit 3 with the reason.
    assert main(["optimize", str(model), "-o", str(out), "--target", str(head - 1), "--force"]) == 3
    assert f"target {head - 1:,} B not reachable: best head {head:,} B" in capsys.readouterr().err


def test_a_header_written_beside_an_unchanged_model_is_announced(
    unet_file: Path, tmp_path: Path, capsys
) -> None:
    """--storage-header is a file optimize writes like -o: it says so, also when the model is
    written unchanged (the target already met: the header then defines no region)."""
    head = plan_model_head(unet_file)
    out, header = tmp_path / "o.tflite", tmp_path / "h.h"
    args = ["optimize", str(unet_file), "-o", str(out), "--target", str(head)]
    assert main([*args, "--storage-header", str(header)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "wrote it unchanged to" in lines[-2]
    assert lines[-1] == f"wrote {header}: the plan's storage regions for the sketch"
    assert "//   (none)" in header.read_text()
