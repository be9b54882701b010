"""The Nicla Vision storage-regions header generator (tinyseg_plugin/deploy/storage_header.py):
what it places where, and the one sentence for a plan the board cannot hold. The header compiles
against the real Arduino Mbed core in tests/test_nicla_build.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinyseg_plugin.deploy import storage_header as sh
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.memory.boards import FLASH, RAM, load_board

KB = 1024


def test_its_region_names_are_the_nicla_board_presets() -> None:
    """The names a plan uses come from the board preset: RAM names the generator places or refuses
    are RAM regions there, flash names flash regions, and every fixed range lies inside its region
    after what the preset counts as used."""
    board = {r.name: r for r in load_board("nicla-vision").regions}
    for name in [*sh.PLACES, *sh.REFUSED]:
        assert board[name].kind == RAM, name
    for name in sh.FLASH_NAMES:
        assert board[name].kind == FLASH, name
    dtcm = sh.PLACES["dtcm"]
    assert dtcm.start >= 0x20000000 + board["dtcm"].used
    assert dtcm.end == 0x20000000 + board["dtcm"].capacity
    assert sh.PLACES["axi-sram"].end == board["axi-sram"].capacity
    assert sh.PLACES["sram1"].end - sh.PLACES["sram1"].start == board["sram1"].capacity
    assert sh.PLACES["sram2"].end - sh.PLACES["sram2"].start == board["sram2"].capacity


def test_regions_are_placed_one_after_another() -> None:
    text = sh.storage_header(
        [
            (0, "qspi", 1 << 20),
            (1, "dtcm", 64 * KB),
            (2, "axi-sram", 128 * KB),
            (3, "dtcm", 32 * KB),
        ]
    )
    assert "reinterpret_cast<uint8_t*>(0x200002A0u)" in text  # after the 664 B vector table
    assert f"reinterpret_cast<uint8_t*>(0x{0x200002A0 + 64 * KB:08X}u)" in text
    assert 'uint8_t g_memory2[131072] __attribute__((section(".uninitialized")' in text
    assert re.findall(r"runtime\.regions\[(\d)\] = ", text) == ["1", "2", "3"]  # not region 0
    assert "g_manager0" not in text and "RCC" not in text
    assert "g_sectors2[32]" in text and "kSlots = 16" in text


def test_d2_sram_needs_an_idle_m4_and_its_clock() -> None:
    with pytest.raises(TinySegError, match="M4 core's RAM while it runs the erase worker"):
        sh.storage_header([(1, "sram1", 64 * KB)])
    text = sh.storage_header([(1, "sram1", 64 * KB), (2, "sram2", 64 * KB)], m4_idle=True)
    assert "RCC->AHB2ENR |= RCC_AHB2ENR_D2SRAM1EN;" in text
    assert "RCC->AHB2ENR |= RCC_AHB2ENR_D2SRAM2EN;" in text
    assert "0x30020000u" in text


@pytest.mark.parametrize(
    "plan,message",
    [
        ([(1, "sram3", 4 * KB)], "'sram3' cannot hold spills: the M7's .lwip_sec"),
        ([(1, "sram4", 4 * KB)], "'sram4' cannot hold spills"),
        ([(1, "itcm", 4 * KB)], "'itcm' is not a Nicla Vision storage region (use one of: "),
        ([(0, "dtcm", 4 * KB)], "region 0 is Runtime::spill"),
        ([(8, "dtcm", 4 * KB)], "region index 8 must be a distinct integer 0..7"),
        ([(1, "dtcm", 4 * KB), (1, "axi-sram", 4 * KB)], "region index 1 must be a distinct"),
        ([(1, "dtcm", 5000)], "region 1 (dtcm) has 5000 bytes; give a positive multiple of 4096"),
        ([(1, "dtcm", 64 * KB), (2, "dtcm", 64 * KB)], "need more than its 130400 free bytes"),
        ([(1, "axi-sram", 516 * KB)], "need more than its 524288 free bytes"),
    ],
)
def test_a_plan_the_board_cannot_hold_is_one_sentence(plan, message: str) -> None:
    with pytest.raises(TinySegError) as exc:
        sh.storage_header(plan)
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
    import json

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


def test_the_default_plan_gets_its_header(tiny_unet, tmp_path) -> None:
    """Without --target the plan on the Nicla Vision keeps its slots in RAM; placement counts each
    slot as the header sizes it (placement.slot_region_bytes), so the header's regions fit."""
    import json

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


def test_storage_header_needs_the_nicla_board(tiny_unet, tmp_path) -> None:
    out = _cli(["optimize", str(tiny_unet), "-o", "m.tflite", "--storage-header", "s.h"], tmp_path)
    assert out.returncode == 2 and "give --board nicla-vision" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "m.tflite").exists() and not (tmp_path / "s.h").exists()


def test_a_slot_needs_its_encoded_blocks_in_whole_sectors_and_one_more() -> None:
    assert sh.slot_region_bytes(1) == 2 * sh.SECTOR_BYTES
    assert sh.slot_region_bytes(4096 - 32) == 2 * sh.SECTOR_BYTES  # 4 blocks: 32 B of headers
    assert sh.slot_region_bytes(4096) == 3 * sh.SECTOR_BYTES
