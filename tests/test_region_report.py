"""The memory report of `tinyseg optimize` (memory/usage.py, report/steps.py memory_lines): each
board region with the written plan on it, in the table, the --report JSON and --csv's regions.csv
alike; each operator's modelled compute and storage time; a board file's `reserve`."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest
from conftest import TINY_UNET

from tinyseg_plugin import cli
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model
from tinyseg_plugin.memory.boards import load_board, presets_table

ROW_KEYS = ("capacity", "used", "reserve", "arena", "slots", "free_after")


@pytest.fixture(scope="module")
def nicla(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The acceptance run: Tiny U-Net, --board nicla-vision --target 64KB, with --report and --csv."""
    d = tmp_path_factory.mktemp("nicla")
    out, report, csv_dir = d / "o.tflite", d / "r.json", d / "csv"
    argv = ["optimize", str(TINY_UNET), "-o", str(out), "--board", "nicla-vision"]
    argv += [
        "--target",
        "64KB",
        "--unverified",
        "-q",
        "--report",
        str(report),
        "--csv",
        str(csv_dir),
    ]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(argv)
    assert rc == 0
    return {"stdout": buf.getvalue(), "report": json.loads(report.read_text()), "out": out,
            "csv": csv_dir}  # fmt: skip


def table_rows(stdout: str) -> dict[str, dict]:
    """The memory table's rows as printed: region -> its figures and whether it fits."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("memory on "))
    rows = {}
    for line in lines[start + 2 :]:
        words = line.split()
        if not line.startswith("  ") or words[0] == "model":
            break
        name, kind, *figures, fits = words
        values = dict(zip(ROW_KEYS, (int(f.replace(",", "")) for f in figures)))
        rows[name] = {"kind": kind, **values, "fits": fits == "yes"}
    return rows


def test_table_figures_are_the_report_s(nicla: dict) -> None:
    printed = table_rows(nicla["stdout"])
    reported = {r["region"]: r for r in nicla["report"]["memory"]["regions"]}
    names = [r.name for r in load_board("nicla-vision").regions]
    assert list(printed) == names == list(reported)
    for name, row in printed.items():
        assert row == {k: reported[name][k] for k in ("kind",) + ROW_KEYS + ("fits",)}, name
    # the figures are the plan's: the arena is head + tail, the slots are where the cost puts them
    opt = nicla["report"]["optimized"]
    assert reported["axi-sram"]["arena"] == opt["head"] + opt["tail_estimate"] > 0
    placed = {s["region"] for s in nicla["report"]["cost"]["placement"]["slots"]}
    assert {n for n, r in reported.items() if r["slots"]} == placed
    with open(nicla["csv"] / "regions.csv") as f:
        from_csv = list(csv.DictReader(f))
    assert [r["region"] for r in from_csv] == names
    for r in from_csv:
        assert {k: int(r[k]) for k in ROW_KEYS} == {k: reported[r["region"]][k] for k in ROW_KEYS}
    model = nicla["report"]["memory"]["model"]
    assert model["bytes_before"] == TINY_UNET.stat().st_size
    assert model["bytes_after"] == nicla["out"].stat().st_size
    assert (
        f"model file {model['bytes_before']:,} B -> {model['bytes_after']:,} B" in nicla["stdout"]
    )
    lines = nicla["stdout"].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("memory on "))
    assert all(len(line) <= 100 for line in lines[start : start + len(names) + 3])


def test_operators_csv_has_one_row_per_operator_and_sums_to_the_cost(nicla: dict) -> None:
    written = build_graph(load_model(str(nicla["out"])))
    with open(nicla["csv"] / "operators.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["index"]) for r in rows] == list(range(len(written.operators)))
    assert [r["opcode"] for r in rows] == [op.opcode for op in written.operators]
    cost = nicla["report"]["cost"]
    ops = nicla["report"]["operators"]
    slack = 0.0005 * len(rows) + 0.001  # each figure rounded to 3 decimals
    assert abs(sum(float(r["compute_ms"]) for r in rows) - cost["compute_ms"]) <= slack
    assert abs(sum(float(r["storage_ms"]) for r in rows) - cost["storage_ms"]) <= slack
    assert cost["storage_ms"] > 0 and any(o["storage_ms"] > 0 for o in ops)
    chains = [o for o in ops if o["opcode"] == "StreamChain"]
    assert chains and all(o["stages"] for o in chains)
    assert not [o for o in ops if o["opcode"] != "StreamChain" and o.get("stages")]
    for o in chains:  # a StreamChain's stages add up to it
        stages = sum(s["compute_ms"] for s in o["stages"])
        assert abs(stages - o["compute_ms"]) <= 0.0005 * len(o["stages"]) + 0.001


def _board(tmp_path: Path, reserve: object | None, name: str = "b.json") -> Path:
    tcm = {"name": "tcm", "kind": "ram", "capacity": "128KiB", "read_bandwidth": 3e9,
           "write_bandwidth": 3e9}  # fmt: skip
    if reserve is not None:
        tcm["reserve"] = reserve
    board = {
        "name": "tiny",
        "region": [
            {"name": "sram", "kind": "ram", "capacity": "512KiB", "read_bandwidth": 2e9,
             "write_bandwidth": 2e9, "arena": True},
            tcm,
            {"name": "nor", "kind": "flash", "capacity": "1MiB", "read_bandwidth": 2e7,
             "write_bandwidth": 5e6, "page_size": 256, "sector_size": 4096,
             "page_program_time": 0.00064, "sector_erase_time": 0.064, "endurance": 100000},
        ],
    }  # fmt: skip
    f = tmp_path / name
    f.write_text(json.dumps(board))
    return f


def _regions(tmp_path: Path, board: Path) -> dict[str, dict]:
    report = tmp_path / f"{board.stem}.json"
    argv = ["optimize", str(TINY_UNET), "-o", str(tmp_path / f"{board.stem}.tflite")]
    argv += ["--board", str(board), "--target", "64KB", "--unverified", "-q"]
    assert cli.main(argv + ["--report", str(report)]) == 0
    return {r["region"]: r for r in json.loads(report.read_text())["memory"]["regions"]}


def test_reserve_lowers_free_and_moves_the_slots_out(tmp_path: Path, capsys) -> None:
    open_board, kept = _board(tmp_path, None, "open.json"), _board(tmp_path, "120KiB", "kept.json")
    assert load_board(str(open_board)).region("tcm").free == 128 * 1024
    assert load_board(str(kept)).region("tcm").free == 8 * 1024
    before = _regions(tmp_path, open_board)
    assert before["tcm"]["slots"] > 0 and before["nor"]["slots"] == 0
    after = _regions(tmp_path, kept)
    assert after["tcm"]["reserve"] == 120 * 1024 and after["tcm"]["slots"] == 0
    assert after["nor"]["slots"] > 0 and all(r["fits"] for r in after.values())
    out = capsys.readouterr().out
    assert "  tcm            ram" in out  # the table prints for a board file too


@pytest.mark.parametrize(
    "reserve, says",
    [
        (-1, "reserve must be zero or more, not -1"),
        (1.5, "reserve must be a whole number of bytes, not 1.5"),
        ("lots", "reserve"),
        (True, "reserve must be a number, not True"),
        ("129KiB", "reserve (132,096 B) is more than the 131,072 B its capacity"),
    ],
)
def test_a_bad_reserve_is_one_sentence_and_exit_2(
    reserve: object, says: str, tmp_path: Path, capsys
) -> None:
    board = _board(tmp_path, reserve)
    out = tmp_path / "out.tflite"
    rc = cli.main(
        ["optimize", str(TINY_UNET), "-o", str(out), "--board", str(board), "--unverified"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert err.count("\n") == 1 and err.startswith("tinyseg: error: ") and says in err, err
    assert "Traceback" not in err


def test_reserve_and_used_together_past_the_capacity_are_refused(tmp_path: Path, capsys) -> None:
    board = json.loads(_board(tmp_path, "100KiB").read_text())
    board["region"][1]["used"] = "64KiB"
    f = tmp_path / "both.json"
    f.write_text(json.dumps(board))
    assert cli.main(["analyze", str(TINY_UNET), "--board", str(f)]) == 2
    err = capsys.readouterr().err
    assert "leaves after used (65,536 B)" in err and err.count("\n") == 1


def test_no_table_without_board_and_csv_needs_a_directory(tmp_path: Path, capsys) -> None:
    out = tmp_path / "o.tflite"
    assert cli.main(["optimize", str(TINY_UNET), "-o", str(out), "--unverified", "-q"]) == 0
    assert "memory on " not in capsys.readouterr().out
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out.unlink()
    argv = ["optimize", str(TINY_UNET), "-o", str(out), "--unverified", "--csv", str(blocker)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and not out.exists()


def test_boards_says_what_every_used_figure_holds() -> None:
    text = presets_table()
    lines = text.splitlines()
    for name in ("generic", "nicla-vision", "esp32-s3-psram"):
        board = lines.index(next(line for line in lines if line.startswith(f"{name}: ")))
        for r in load_board(name).regions:
            if not r.used:
                continue
            at = next(i for i in range(board, len(lines)) if lines[i].startswith(f"  {r.name} "))
            said = " ".join(lines[at + 1 : at + 4])
            assert f"used ({r.used:,} B)" in said, (name, r.name)
