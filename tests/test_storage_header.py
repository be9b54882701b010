"""The Nicla Vision storage-regions header generator (tinyseg_plugin/deploy/storage_header.py):
what it places where, and the one sentence for a plan the board cannot hold. The header compiles
against the real Arduino Mbed core in tests/test_nicla_build.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinyseg_plugin.deploy import storage_header as sh
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.memory.boards import load_board

KB = 1024


NICLA = load_board("nicla-vision")
PLACES = sh.places_of(NICLA)


def test_the_preset_places_its_ram_regions_by_the_linker_scripts() -> None:
    """The Nicla preset's address and section give the places the Arduino Mbed core's linker
    scripts leave: DTCM after the vector table up to its end, the AXI SRAM's free bytes in
    .uninitialized, the D2 banks whole (an idle M4), and nothing in SRAM3, SRAM4 or flash."""
    board = {r.name: r for r in NICLA.regions}
    assert set(PLACES) == {"dtcm", "axi-sram", "sram1", "sram2"}
    assert PLACES["dtcm"].start == 0x200002A0 and PLACES["dtcm"].end == 0x20020000
    assert PLACES["axi-sram"] == sh.Place(None, board["axi-sram"].free, section=".uninitialized")
    assert PLACES["sram1"].end - PLACES["sram1"].start == board["sram1"].capacity
    assert PLACES["sram2"].end == 0x30040000 and PLACES["sram2"].needs_m4_idle


def test_regions_are_placed_one_after_another() -> None:
    text = sh.storage_header(
        [
            (0, "qspi", 1 << 20),
            (1, "dtcm", 64 * KB),
            (2, "axi-sram", 128 * KB),
            (3, "dtcm", 32 * KB),
        ],
        PLACES,
    )
    assert "reinterpret_cast<uint8_t*>(0x200002A0u)" in text  # after the 664 B vector table
    assert f"reinterpret_cast<uint8_t*>(0x{0x200002A0 + 64 * KB:08X}u)" in text
    assert 'uint8_t g_memory2[131072] __attribute__((section(".uninitialized")' in text
    assert re.findall(r"runtime\.regions\[(\d)\] = ", text) == ["1", "2", "3"]  # not region 0
    assert "g_manager0" not in text and "RCC" not in text
    assert "g_sectors2[32]" in text and "kSlots = 16" in text


def test_d2_sram_needs_an_idle_m4_and_its_clock() -> None:
    with pytest.raises(TinySegError, match="M4 core's RAM while it runs the erase worker"):
        sh.storage_header([(1, "sram1", 64 * KB)], PLACES)
    text = sh.storage_header([(1, "sram1", 64 * KB), (2, "sram2", 64 * KB)], PLACES, m4_idle=True)
    assert "RCC->AHB2ENR |= RCC_AHB2ENR_D2SRAM1EN;" in text
    assert "RCC->AHB2ENR |= RCC_AHB2ENR_D2SRAM2EN;" in text
    assert "0x30020000u" in text


@pytest.mark.parametrize(
    "plan,message",
    [
        ([(1, "sram3", 4 * KB)], "'sram3' has no address or linker section for spill bytes"),
        ([(1, "sram4", 4 * KB)], "'sram4' has no address or linker section"),
        ([(1, "qspi", 4 * KB)], "'qspi' has no address or linker section"),
        ([(1, "itcm", 4 * KB)], "'itcm' has no address or linker section"),
        ([(0, "dtcm", 4 * KB)], "region 0 is Runtime::spill"),
        ([(8, "dtcm", 4 * KB)], "region index 8 must be a distinct integer 0..7"),
        ([(1, "dtcm", 4 * KB), (1, "axi-sram", 4 * KB)], "region index 1 must be a distinct"),
        ([(1, "dtcm", 5000)], "region 1 (dtcm) has 5000 bytes; give a positive multiple of 4096"),
        ([(1, "dtcm", 64 * KB), (2, "dtcm", 64 * KB)], "need more than its 130400 free bytes"),
        ([(1, "axi-sram", 516 * KB)], "need more than its 523264 free bytes"),
    ],
)
def test_a_plan_the_board_cannot_hold_is_one_sentence(plan, message: str) -> None:
    with pytest.raises(TinySegError) as exc:
        sh.storage_header(plan, PLACES)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def _cli(args: list[str], cwd) -> subprocess.CompletedProcess:
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_optimize_writes_the_header_of_the_plan_it_wrote(tiny_unet, tmp_path) -> None:
    """--board nicla-vision --target 64KB: the plan keeps its slots in the DTCM (region 1), and the
    header defines that region, large enough for the slots' ring log, and attaches it there."""
    out = _cli(
        [
            "optimize",
            str(tiny_unet),
            "-o",
            "m.tflite",
            "--board",
            "nicla-vision",
            "--target",
            "64KB",
            "--storage-header",
            "storage.h",
            "--report",
            "r.json",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "storage.h").read_text()
    slots = json.loads((tmp_path / "r.json").read_text())["cost"]["placement"]["slots"]
    assert {s["region"] for s in slots} == {"dtcm"} and {s["index"] for s in slots} == {1}
    need = sum(sh.slot_region_bytes(s["bytes"]) for s in slots)
    assert f"region 1: dtcm, {need} bytes" in text
    assert "runtime.regions[1] = &g_manager1;" in text
    assert f"kSlots = {max(s['slot'] for s in slots) + 1}" in text


# A user's map of the same chip: the Nicla's flash regions, a DTCM and a D2 bank it gives fixed
# addresses, an SRAM4 it gives none; spill_region and the regions' keys vary per test.
USER_BOARD = """name = "my-h747"
spill_region = "{spill}"

[[region]]
name = "axi"
kind = "ram"
capacity = "512KiB"
read_bandwidth = 1.92e9
write_bandwidth = 1.92e9
arena = true

[[region]]
name = "fast"
kind = "ram"
capacity = "128KiB"
read_bandwidth = 3.84e9
write_bandwidth = 3.84e9
{fast}

[[region]]
name = "sram4"
kind = "ram"
capacity = "64KiB"
read_bandwidth = 0.96e9
write_bandwidth = 0.96e9

[[region]]
name = "qspi"
kind = "flash"
capacity = "1MiB"
read_bandwidth = 20e6
write_bandwidth = 5e6
page_size = 256
sector_size = 4096
page_program_time = 640e-6
sector_erase_time = 64e-3
endurance = 100000
"""


def _optimize_with(board: str, tmp_path, tiny_unet, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "board.toml").write_text(board)
    args = ["optimize", str(tiny_unet), "-o", "m.tflite", "--board", "board.toml"]
    return _cli([*args, "--target", "64KB", "--storage-header", "s.h", *extra], tmp_path)


def _refused(out: subprocess.CompletedProcess, tmp_path, message: str) -> None:
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "m.tflite").exists() and not (tmp_path / "s.h").exists()


def test_a_board_whose_spill_region_is_ram_is_refused_before_anything_is_written(
    tiny_unet, tmp_path
) -> None:
    """The reviewer's map: spill_region sram4 (RAM, no address): the sketch would send region 0's
    bytes to its flash storage while the figures model RAM."""
    board = USER_BOARD.format(spill="sram4", fast="address = 0x20000298").replace(
        'name = "my-h747"', 'name = "nicla-vision"'
    )
    out = _optimize_with(board, tmp_path, tiny_unet)
    _refused(out, tmp_path, "the board's spill_region 'sram4' is RAM")


def test_a_ram_region_without_address_or_section_is_refused(tiny_unet, tmp_path) -> None:
    out = _optimize_with(USER_BOARD.format(spill="qspi", fast=""), tmp_path, tiny_unet)
    _refused(out, tmp_path, "board region 'fast' has no address or linker section")


def test_a_users_board_with_addresses_gets_the_header_byte_for_byte_in_any_folder(
    tiny_unet, tmp_path
) -> None:
    """The user's own map (not the preset's name) places its region at the address it gives; the
    header names the output by its file name only, so two folders give the same bytes."""
    texts = []
    for k, fast in enumerate(("address = 0x20000298", 'section = ".dtcm_spill"')):
        for folder in ("a", "b"):
            d = tmp_path / f"{k}{folder}"
            d.mkdir()
            out = _optimize_with(USER_BOARD.format(spill="qspi", fast=fast), d, tiny_unet)
            assert out.returncode == 0, out.stderr
            texts.append((d / "s.h").read_bytes())
    assert texts[0] == texts[1] and texts[2] == texts[3]
    assert b"reinterpret_cast<uint8_t*>(0x200002A0u);  // fast, fixed" in texts[0]
    assert b'__attribute__((section(".dtcm_spill"), aligned(32)))' in texts[2]
    assert b"runtime.regions[1] = &g_manager1;" in texts[0]
    assert str(tmp_path).encode() not in texts[0] + texts[2]


def test_a_slot_needs_its_encoded_blocks_in_whole_sectors_and_one_more() -> None:
    assert sh.slot_region_bytes(1) == 2 * sh.SECTOR_BYTES
    assert sh.slot_region_bytes(4096 - 32) == 2 * sh.SECTOR_BYTES  # 4 blocks: 32 B of headers
    assert sh.slot_region_bytes(4096) == 3 * sh.SECTOR_BYTES


def test_the_default_plan_gets_its_header(tiny_unet, tmp_path) -> None:
    """Without --target the plan on the Nicla Vision keeps its slots in RAM; placement counts each
    slot as the header sizes it (placement.slot_region_bytes), so the header's regions fit."""

    args = ["optimize", str(tiny_unet), "-o", "m.tflite", "--board", "nicla-vision"]
    out = _cli(args + ["--storage-header", "h.h", "--report", "r.json", "--unverified"], tmp_path)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "h.h").read_text()
    board = {r.name: r for r in load_board("nicla-vision").regions}
    regions = re.findall(r"^// +region (\d+): ([\w-]+), (\d+) bytes", text, re.M)
    assert regions, text
    used: dict[str, int] = {}
    for _, name, size in regions:
        used[name] = used.get(name, 0) + int(size)
    for name, size in used.items():
        assert size <= board[name].free, (name, size)
    slots = json.loads((tmp_path / "r.json").read_text())["cost"]["placement"]["slots"]
    assert sum(used.values()) == sum(
        sh.slot_region_bytes(s["bytes"]) for s in slots if s["region"] in used
    )


def _attach_line(stdout: str) -> str:
    return next(
        (ln for ln in stdout.splitlines() if "storage regions the application attaches" in ln), ""
    )


def _header_indices(text: str) -> dict[int, str]:
    return {int(i): n for i, n in re.findall(r"^// +region (\d+): ([\w-]+),", text, re.M)}


@pytest.mark.parametrize(
    "target,attached",
    [((), {1: "dtcm"}), (("--target", "min"), {0: "qspi", 1: "dtcm"})],
)
def test_the_attach_line_and_the_header_name_the_regions_slots_use(
    tiny_unet, tmp_path, target: tuple[str, ...], attached: dict[int, str]
) -> None:
    """Without --target the Nicla plan keeps every slot in the DTCM (region 1): region 0, the QSPI,
    holds none, so neither the printed line nor the header names it; --target min also spills to
    the QSPI, and both name it. optimize says it wrote the header."""
    args = ["optimize", str(tiny_unet), "-o", "m.tflite", "--board", "nicla-vision", *target]
    out = _cli([*args, "--unverified", "--storage-header", "h.h"], tmp_path)
    assert out.returncode == 0, out.stderr
    line = _attach_line(out.stdout)
    listed = ", ".join(f"{i} = {n}" for i, n in sorted(attached.items()))
    assert line == f"  storage regions the application attaches: {listed}", out.stdout
    text = (tmp_path / "h.h").read_text()
    assert _header_indices(text) == attached, text
    assert ("runtime.regions[0]" in text) is False and "runtime.regions[1] = &g_manager1;" in text
    assert out.stdout.splitlines()[-1] == "wrote h.h: the plan's storage regions for the sketch"
    assert out.stdout.splitlines()[-2] == "wrote m.tflite"


def _preset_as_json(preset: str, **changes) -> str:
    """A preset written as a user's board file (docs/boards.md): ``region``, no ``free``, no null."""
    d = load_board(preset).as_dict()
    regions = [
        {k: v for k, v in r.items() if k != "free" and v is not None} for r in d.pop("regions")
    ]
    return json.dumps({**d, "region": regions, **changes}, indent=1)


def test_a_copy_of_the_nicla_preset_gets_the_presets_header(tiny_unet, tmp_path) -> None:
    """The preset copied to a file and renamed: the same header as the preset's, but for the board
    name in its comment line, written in another folder too (no absolute path in it)."""
    texts = {}
    for board in ("nicla-vision", "my-nicla"):
        d = tmp_path / board
        d.mkdir()
        if board == "my-nicla":
            (d / "b.json").write_text(_preset_as_json("nicla-vision", name=board))
        spec = "b.json" if board == "my-nicla" else board
        args = ["optimize", str(tiny_unet), "-o", "m.tflite", "--board", spec, "--unverified"]
        out = _cli([*args, "--storage-header", "h.h"], d)
        assert out.returncode == 0, out.stderr
        assert "wrote h.h: the plan's storage regions for the sketch" in out.stdout
        texts[board] = (d / "h.h").read_text()
    mine = texts["my-nicla"]
    assert "--board my-nicla)" in mine and str(tmp_path) not in mine
    assert mine.replace("--board my-nicla)", "--board nicla-vision)") == texts["nicla-vision"]


def test_a_board_file_without_addresses_or_sections_is_one_sentence(tiny_unet, tmp_path) -> None:
    """The preset copied without any address or section: the DTCM the plan uses has no place, so
    the header is refused in one sentence, exit 2, and neither the model nor the header is
    written."""
    d = json.loads(_preset_as_json("nicla-vision", name="my-nicla"))
    for r in d["region"]:
        r.pop("address", None)
        r.pop("section", None)
    (tmp_path / "b.json").write_text(json.dumps(d))
    args = ["optimize", str(tiny_unet), "-o", "m.tflite", "--board", "b.json", "--unverified"]
    out = _cli([*args, "--storage-header", "s.h"], tmp_path)
    _refused(out, tmp_path, "board region 'dtcm' has no address or linker section for spill bytes")
