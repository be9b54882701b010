"""Board memory maps (tinyseg_plugin/memory/boards.py, docs/boards.md): the presets validate, the
Nicla Vision's flash figures are the ones the C++ core models (flash_profiles.cc), and every error
path of a user's file is one sentence and exit code 2 through the command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import ROOT, TINY_UNET

from tinyseg_plugin import cli, plugin
from tinyseg_plugin.memory.boards import PRESETS, Region, board_from_dict, load_board, presets_table

PROFILES_CC = ROOT / "tflm_ops" / "core" / "src" / "flash_profiles.cc"


def _as_file_dict(board) -> dict:
    """A preset written back as a user's map (what docs/boards.md describes)."""
    return {
        "name": board.name,
        "clock_hz": board.clock_hz,
        "spill_region": board.spill_region,
        "note": board.note,
        "erase_worker": board.erase_worker,
        "region": [  # an absent address is no key (a map has no null)
            {f.name: getattr(r, f.name) for f in fields(Region) if getattr(r, f.name) is not None}
            for r in board.regions
        ],
    }


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_pass_the_user_file_checks(name: str) -> None:
    """Every preset, written as a user's file, passes the same checks and comes back equal."""
    b = load_board(name)
    assert b.name == name and sum(r.arena for r in b.regions) == 1
    assert b.arena.kind == "ram" and b.arena.free > 0
    assert board_from_dict(_as_file_dict(b), f"{name}.json") == b


def _function(text: str, name: str) -> str:
    start = text.index(f"NorFlashConfig {name}(")
    return text[start : text.index("\n}\n", start)]


def _int(expr: str, env: dict[str, int]) -> int:
    """A C++ integer constant expression of the profiles file (literals, *, /, + and constants)."""
    expr = re.sub(r"(\d+)ull\b|(\d+)u?\b", lambda m: m.group(1) or m.group(2), expr)
    assert re.fullmatch(r"[\w\s*/+()]+", expr), expr
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, env))  # noqa: S307


def _fields(body: str, env: dict[str, int]) -> dict[str, int]:
    out = {}
    for m in re.finditer(r"c\.(?:geometry|timing)\.(\w+)\s*=\s*([^;]+);", body):
        if m.group(1) != "name" and "[" not in m.group(2):
            out[m.group(1)] = _int(m.group(2), env)
    return out


def test_nicla_flash_figures_are_the_cores() -> None:
    """One set of figures: the Python preset and NorFlashSim's profiles (flash_profiles.cc,
    sources in flash_profiles.h) agree on every timing and size the cost model uses."""
    text = PROFILES_CC.read_text()
    nicla = load_board("nicla-vision")

    h7 = _function(text, "Stm32h757InternalFlash")
    word = [_int(v, {}) for v in re.search(r"kWordNs\[4\] = \{([^}]*)\}", h7).group(1).split(",")]
    erase = [_int(v, {}) for v in re.search(r"kEraseNs\[4\] = \{([^}]*)\}", h7).group(1).split(",")]
    x32 = 2  # H7Parallelism::kX32, the default (flash_profiles.h)
    f = _fields(h7, {})
    r = nicla.region("internal-flash")
    assert r.page_program_time == pytest.approx(word[x32] * 1e-9)
    assert r.sector_erase_time == pytest.approx(erase[x32] * 1e-9)
    assert (r.page_size, r.sector_size, r.capacity) == (
        f["program_size"],
        f["erase_size"],
        f["total_size"],
    )
    assert r.endurance == f["endurance_cycles"]
    assert r.read_bandwidth == pytest.approx(1e12 / f["read_ps_per_byte"])

    qs = _function(text, "NiclaVisionQspiFlash")
    env = {"kClockHz": _int(re.search(r"kClockHz = ([^;]+);", qs).group(1), {})}
    env["kClockPs"] = _int(re.search(r"kClockPs = ([^;]+);", qs).group(1), env)
    f = _fields(qs, env)
    r = nicla.region("qspi")
    assert r.page_program_time == pytest.approx(f["program_unit_ns"] * 1e-9)
    assert r.sector_erase_time == pytest.approx(f["erase_sector_ns"] * 1e-9)
    assert (r.page_size, r.sector_size, r.capacity) == (
        f["program_unit_bytes"],
        f["erase_size"],
        f["total_size"],
    )
    assert r.endurance == f["endurance_cycles"]
    assert r.read_bandwidth == pytest.approx(1e12 / f["read_ps_per_byte"])
    assert r.write_bandwidth == pytest.approx(1e12 / f["program_ps_per_byte"])
    assert r.read_command_time == pytest.approx(f["read_cmd_ns"] * 1e-9)
    assert r.program_command_time == pytest.approx(f["program_cmd_ns"] * 1e-9)


def test_nicla_regions_follow_the_linker_scripts() -> None:
    """The RAM sizes of the preset are the STM32H747's, and the vector table the NICLA_VISION linker
    script keeps at the start of DTCM (((166 * 4) + 7) & ~7 bytes) is counted as used."""
    b = load_board("nicla-vision")
    sizes = {r.name: r.capacity // 1024 for r in b.regions if r.kind == "ram"}
    assert sizes == {
        "dtcm": 128,
        "axi-sram": 512,
        "sram1": 128,
        "sram2": 128,
        "sram3": 32,
        "sram4": 64,
    }
    assert b.region("dtcm").used == 664 and b.arena.name == "axi-sram"


GOOD = {
    "name": "mine",
    "region": [
        {
            "name": "sram",
            "kind": "ram",
            "capacity": "256KiB",
            "read_bandwidth": 1e9,
            "write_bandwidth": 1e9,
        },
        {
            "name": "nor",
            "kind": "flash",
            "capacity": 1048576,
            "read_bandwidth": 2e7,
            "write_bandwidth": 5e6,
            "page_size": 256,
            "sector_size": 4096,
            "page_program_time": 0.0007,
            "sector_erase_time": 0.05,
            "endurance": 100000,
        },
    ],
}


def _bad(**change) -> dict:
    d = json.loads(json.dumps(GOOD))
    for path, value in change.items():
        target, key = (d["region"][int(path[1])], path[3:]) if path[0] == "r" else (d, path)
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return d


# (file content as a dict, what the one sentence must say)
BAD_FILES = {
    "unknown_key": (_bad(r1_speed=3), "region 'nor': unknown key 'speed'"),
    "unknown_top_key": (_bad(colour="red"), "unknown key 'colour'"),
    "missing_capacity": (_bad(r0_capacity=None), "region 'sram' has no capacity"),
    "negative_bandwidth": (_bad(r1_read_bandwidth=-5), "read_bandwidth must be positive, not -5"),
    "flash_without_endurance": (
        _bad(r1_endurance=None),
        "flash region 'nor' in",
    ),
    "bad_kind": (_bad(r0_kind="sram"), 'kind must be "ram" or "flash"'),
    "no_regions": ({"name": "x", "region": []}, "no regions"),
    "used_over_capacity": (_bad(r0_used=1 << 30), "is more than its capacity"),
    "sector_not_pages": (_bad(r1_sector_size=1000), "is not a multiple of page_size"),
    "unknown_spill_region": (_bad(spill_region="eeprom"), "spill_region 'eeprom' is not one of"),
    "bad_size": (_bad(r0_capacity="lots"), "capacity 'lots' is not a size"),
    "flash_arena": (_bad(r1_arena=True), "the arena cannot live in flash"),
    "fractional_address": (_bad(r0_address=0.5), "address must be a whole byte address, not 0.5"),
    "negative_address": (_bad(r0_address=-4), "address must be zero or more, not -4"),
    "worker_not_bool": (_bad(erase_worker="yes"), "erase_worker must be true or false, not 'yes'"),
    "worker_number": (_bad(erase_worker=1), "erase_worker must be true or false, not 1"),
    "dma_not_bool": (_bad(r0_dma="no"), "region 'sram': dma must be true or false, not 'no'"),
}


def _toml(d: dict) -> str:
    """The dict as TOML (flat values and one array of tables: all a board file has)."""

    def v(x):
        return (
            json.dumps(x)
            if isinstance(x, str)
            else repr(x).lower()
            if isinstance(x, bool)
            else repr(x)
        )

    lines = [f"{k} = {v(x)}" for k, x in d.items() if k != "region"]
    for r in d.get("region", []):
        lines += ["", "[[region]]"] + [f"{k} = {v(x)}" for k, x in r.items()]
    return "\n".join(lines) + "\n"


def test_erase_worker_and_dma_keys_load(tmp_path: Path) -> None:
    """Both default to the plain case (no worker, DMA reaches the region) and load from a file."""
    plain = board_from_dict(json.loads(json.dumps(GOOD)), "b.json")
    assert not plain.erase_worker and all(r.dma for r in plain.regions)
    f = tmp_path / "b.toml"
    f.write_text(_toml(_bad(erase_worker=True, r0_dma=False)))
    b = load_board(str(f))
    assert b.erase_worker and not b.region("sram").dma and b.region("nor").dma
    assert b.as_dict()["erase_worker"] and not b.as_dict()["regions"][0]["dma"]
    lines = presets_table().splitlines()
    nicla = lines.index(next(x for x in lines if x.startswith("nicla-vision:")))
    assert lines[nicla].endswith(", erase worker")
    assert not any(x.endswith("erase worker") for x in lines if x.startswith("generic:"))
    dtcm = next(x for x in lines[nicla:] if x.strip().startswith("dtcm"))
    assert dtcm.endswith(", no DMA")
    assert not any("no DMA" in x for x in lines[nicla:] if x.strip().startswith("axi-sram"))


def test_a_good_file_loads_in_both_formats(tmp_path: Path) -> None:
    (tmp_path / "b.toml").write_text(_toml(GOOD))
    (tmp_path / "b.json").write_text(json.dumps(GOOD))
    a, b = load_board(str(tmp_path / "b.toml")), load_board(str(tmp_path / "b.json"))
    assert a == b and a.arena.name == "sram" and a.spill_region == "nor"
    assert a.arena.capacity == 256 * 1024 and a.region("nor").endurance == 100_000


@pytest.mark.parametrize("case", sorted(BAD_FILES))
@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_bad_board_file_is_one_sentence_and_exit_2(
    case: str, suffix: str, tmp_path: Path, capsys
) -> None:
    content, says = BAD_FILES[case]
    f = tmp_path / f"{case}{suffix}"
    f.write_text(_toml(content) if suffix == ".toml" else json.dumps(content))
    out = tmp_path / "out.tflite"
    rc = cli.main(["optimize", str(TINY_UNET), "-o", str(out), "--board", str(f), "--unverified"])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert err.count("\n") == 1 and err.startswith("tinyseg: error: ") and says in err, err
    assert "Traceback" not in err
    rc = cli.main(["analyze", str(TINY_UNET), "--board", str(f)])
    assert rc == 2 and says in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, suffix, says",
    [
        ("name = ", ".toml", "is not valid TOML"),
        ("{", ".json", "is not valid JSON"),
        ("name: x", ".yaml", "a board file ends in .toml or .json"),
    ],
)
def test_unparsable_board_file(text: str, suffix: str, says: str, tmp_path: Path, capsys) -> None:
    f = tmp_path / f"b{suffix}"
    f.write_text(text)
    assert cli.main(["analyze", str(TINY_UNET), "--board", str(f)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_unknown_board_name_in_a_child_process(tmp_path: Path) -> None:
    """The installed entry point: one line, exit code 2, nothing written."""
    p = subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", "optimize", str(TINY_UNET), "-o", "o.tflite"]
        + ["--board", "nicla"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert p.returncode == 2 and not (tmp_path / "o.tflite").exists()
    assert p.stderr == (
        "tinyseg: error: unknown board 'nicla': give one of generic, nicla-vision, esp32-s3-psram "
        "or a .toml/.json file with your board's memory map (docs/boards.md)\n"
    )


def test_boards_command_lists_every_preset(capsys) -> None:
    assert cli.main(["boards"]) == 0
    text = capsys.readouterr().out
    assert all(f"{name}:" in text for name in PRESETS)
    assert cli.main(["boards", "--json"]) == 0
    assert [b["name"] for b in json.loads(capsys.readouterr().out)] == list(PRESETS)


def test_boards_command_shows_what_flash_writes_cost_and_what_free_leaves_out(capsys) -> None:
    """A flash region's line gives its page program and sector erase (not its bus rate as a write
    rate: the internal flash's 2,500 MB/s hid 130 µs per 32 B); the arena region's says what its
    free figure does not count (on the Nicla Vision everything but the stack); 100 columns."""
    assert cli.main(["boards"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    flash = next(i for i, line in enumerate(lines) if line.startswith("  internal-flash "))
    assert "write" not in lines[flash] and "10,000 cycles" in lines[flash]
    assert lines[flash + 1] == (
        "    page program 130 µs per 32 B, sector erase 1.1 s per 128 KB: "
        "80 kB/s written with erases"
    )
    qspi = next(i for i, line in enumerate(lines) if line.startswith("  qspi "))
    assert "page program 640 µs per 256 B, sector erase 64 ms per 4 KB" in lines[qspi + 1]
    nicla = text[text.index("nicla-vision:") : text.index("esp32-s3-psram:")]
    arena = " ".join(nicla[nicla.index("  axi-sram ") :].splitlines()[1:4])
    assert "free leaves out what used (1,024 B) does not count" in arena
    assert "only the 1 KB stack" in arena and "Mbed OS" in arena and "frame buffer" in arena
    assert text.count("free leaves out") == len(PRESETS)  # one arena region each


def test_plugin_refuses_a_bad_board_before_the_model(tmp_path: Path) -> None:
    import argparse

    f = tmp_path / "b.json"
    f.write_text(json.dumps(BAD_FILES["negative_bandwidth"][0]))
    with pytest.raises(plugin.PluginError) as e:
        plugin.tflite_tools_check_options(argparse.Namespace(board=str(f)), "optimize")
    assert e.value.exit_code == 2 and "read_bandwidth must be positive" in str(e.value)
    with pytest.raises(plugin.PluginError) as e:
        plugin.tflite_tools_check_options(argparse.Namespace(rate="fast"), "optimize")
    assert e.value.exit_code == 2 and "--rate" in str(e.value)


def test_plugin_takes_board_and_rate_through_the_host(capsys) -> None:
    """The tflite-tools plugin's option list has --board (analyze too) and --rate (optimize), and
    its optimize prints the same cost lines as `tinyseg optimize`."""
    import synth
    from tflite_tools_host import manager, parse, run_optimize

    from tinyseg_plugin.ir.modelio import model_to_bytes

    pm = manager(plugin)
    a = parse(pm, ["--board", "nicla-vision", "--rate", "0.5"])
    assert (a.board, a.rate) == ("nicla-vision", "0.5")
    assert parse(pm, ["--board", "generic"], command="analyze").board == "generic"
    unet = model_to_bytes(synth.tiny_unet_like())
    run_optimize(pm, unet, ["-i", "m.tflite", "--board", "esp32-s3-psram", "--no-verify"])
    out = capsys.readouterr().out
    assert "tinyseg: board esp32-s3-psram: modelled " in out and "tinyseg: psram: " in out
