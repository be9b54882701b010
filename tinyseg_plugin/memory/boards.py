"""The memory map of a target board (``--board``): its RAM and flash regions, what each holds
already, and the bandwidth and flash timings the cost model (cost.py) prices storage traffic with.

Three presets (``generic``, ``nicla-vision``, ``esp32-s3-psram``) and a user's own map from a
TOML or JSON file (docs/boards.md). A bad file is refused with one sentence (TinySegError, exit
code 2); this module owns a board file's limits (its size, nesting, numbers and names). Every preset figure names its source; figures marked ``estimate`` are not datasheet
values. The Nicla Vision's flash timings are the ones tflm_ops/core/src/flash_profiles.cc gives
NorFlashSim (tests/test_boards.py parses that file and compares)."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import textwrap
from dataclasses import dataclass, fields
from pathlib import Path

from ..errors import TinySegError, shown, unprintable
from ..sizes import MAX_DIGITS, MAX_SIZE, parse_size

RAM, FLASH = "ram", "flash"


@dataclass(frozen=True)
class Region:
    """One memory region. Bandwidths in bytes per second; times in seconds. ``used`` bytes are
    taken by others (the Arduino core, the M4 core, the firmware image) and ``reserve`` bytes the
    user keeps for the application (a board file's key): ``free`` is what is left for the arena
    (RAM) or for spilled tensors (flash, or a RAM region used as spill storage)."""

    name: str
    kind: str  # "ram" | "flash"
    capacity: int
    read_bandwidth: float
    write_bandwidth: float
    used: int = 0
    used_by: str = ""  # who takes ``used`` bytes, with the source
    arena: bool = False  # the tensor arena lives here (RAM only)
    # flash only
    page_size: int = 0  # bytes programmed by one page program
    sector_size: int = 0  # smallest erase
    page_program_time: float = 0.0
    sector_erase_time: float = 0.0
    endurance: int = 0  # erase cycles per sector
    read_command_time: float = 0.0  # fixed cost of one read call (command, address, dummy)
    program_command_time: float = 0.0  # fixed cost of one page program (write enable, command)
    note: str = ""  # sources of the figures; "estimate" marks what is not a datasheet value
    # RAM only, for optimize --storage-header: where the free bytes start (after ``used``), or the
    # linker section a static array of spill bytes goes to; neither: no spills can be placed there
    address: int | None = None
    section: str = ""
    # Whether general DMA masters reach the region: a region they do not (the STM32H7's DTCM, which
    # only the CPU and the MDMA reach) never holds a slot a DMA master moves (memory/placement.py)
    dma: bool = True
    # Bytes kept for the application on top of ``used`` (a board file's ``reserve``): no arena,
    # slot or header region counts on them
    reserve: int = 0

    @property
    def free(self) -> int:
        return max(self.capacity - self.used - self.reserve, 0)

    @property
    def is_flash(self) -> bool:
        return self.kind == FLASH


@dataclass(frozen=True)
class Board:
    """A target: its regions, the region spilled tensors go to, and the CPU clock the compute
    model scales by (cost.py: calibrated on the Nicla Vision's 480 MHz Cortex-M7)."""

    name: str
    regions: tuple[Region, ...]
    spill_region: str
    clock_hz: float = 480e6
    note: str = ""
    # A second core erases the spill region's sectors ahead of the writes (the Nicla Vision's M4,
    # examples/nicla_vision/tinyseg_erase_m4): cost.py takes the erases it keeps up with off the
    # critical path
    erase_worker: bool = False

    def region(self, name: str) -> Region:
        return next(r for r in self.regions if r.name == name)

    @property
    def arena(self) -> Region:
        return next(r for r in self.regions if r.arena)

    @property
    def spill(self) -> Region:
        return self.region(self.spill_region)

    def as_dict(self) -> dict:
        """The JSON form (the ``board`` key of the optimize report; ``tinyseg boards --json``)."""
        return {
            "name": self.name,
            "clock_hz": self.clock_hz,
            "spill_region": self.spill_region,
            "erase_worker": self.erase_worker,
            "regions": [
                {f.name: getattr(r, f.name) for f in fields(Region)} | {"free": r.free}
                for r in self.regions
            ],
        }


KB, MB = 1024, 1024 * 1024

# ----------------------------------------------------------------------------- the presets

# STM32H757 internal flash at x32 parallelism and the AT25QL128A QSPI NOR at 40 MHz: the same
# figures as tflm_ops/core/src/flash_profiles.cc (sources in flash_profiles.h).
H7_WORD_PROGRAM_S = 130e-6  # 256-bit flash word, x32, typ (DS12110, provisional)
H7_SECTOR_ERASE_S = 1.1  # 128 KB sector, x32, typ (DS12110, provisional)
H7_READ_PS_PER_BYTE = 400  # estimate: 256-bit word per ~3 AXI cycles at 240 MHz
QSPI_HZ = 40e6  # MBED_CONF_QSPIF_QSPI_FREQ (ArduinoCore-mbed variants/NICLA_VISION/mbed_config.h)
QSPI_READ_CLOCKS_PER_BYTE = 2  # 1-4-4 read (EBh)
QSPI_READ_COMMAND_CLOCKS = 20  # 8 opcode + 6 address + 2 mode + 4 dummy
QSPI_PROGRAM_CLOCKS_PER_BYTE = 8  # 1-1-1 page program
QSPI_PROGRAM_COMMAND_CLOCKS = 40  # WREN + 02h + 24-bit address

_LINKER = "ArduinoCore-mbed b4ad4e72 variants/NICLA_VISION/linker_script.ld"
_M4_LINKER = "variants/GENERIC_STM32H747_M4/linker_script.ld"
_VECTORS = ((166 * 4) + 7) & ~7  # the RAM vector table both linker scripts reserve (664 B)


def _nicla_vision() -> Board:
    ram = "estimate: bus width x clock, not a measured copy rate"
    return Board(
        "nicla-vision",
        (
            Region(
                "dtcm", RAM, 128 * KB, 3.84e9, 3.84e9, _VECTORS,
                f"vector table ({_LINKER}: DTCMRAM starts after {_VECTORS} B; no section is placed there)",
                note=f"0x20000000; 64-bit at 480 MHz ({ram}); only the CPU and the MDMA reach "
                "it, other DMA masters bus-fault there (RM0399 bus matrix; PX4 #27645)",
                address=0x20000000 + _VECTORS, dma=False,
            ),
            Region(
                "axi-sram", RAM, 512 * KB, 1.92e9, 1.92e9, 1 * KB,
                f"only the 1 KB stack ({_LINKER}: region RAM); not counted: Mbed OS's .data, .bss "
                "and heap, the sketch's own data and a camera frame buffer, known only after linking",
                arena=True,
                note=f"0x24000000; 64-bit AXI at 240 MHz ({ram})",
                section=".uninitialized",  # NOLOAD, before .bss in RAM ({_LINKER})
            ),
            Region(
                "sram1", RAM, 128 * KB, 0.96e9, 0.96e9, 128 * KB,
                f"M4 core: its .data, .bss, heap and stack fill D2 SRAM ({_M4_LINKER}: RAM_D2 "
                "0x10000000, 288 KB) when it runs the erase worker (examples/nicla_vision, split 50_50)",
                note=f"0x30000000; 32-bit AHB at 240 MHz ({ram})",
                address=0x30000000,
            ),
            Region(
                "sram2", RAM, 128 * KB, 0.96e9, 0.96e9, 128 * KB,
                f"M4 core ({_M4_LINKER}: RAM_D2)",
                note=f"0x30020000; 32-bit AHB at 240 MHz ({ram})",
                address=0x30020000,
            ),
            Region(
                "sram3", RAM, 32 * KB, 0.96e9, 0.96e9, 32 * KB,
                f"M4 core ({_M4_LINKER}: RAM_D2) and the M7's .lwip_sec at 0x30040000 ({_LINKER})",
                note=f"0x30040000; 32-bit AHB at 240 MHz ({ram})",
            ),
            Region(
                "sram4", RAM, 64 * KB, 0.96e9, 0.96e9, 64 * KB,
                "OpenAMP between the cores from 0x38000400, the PDM buffer at 0x3800FC00 (both "
                "linker scripts: RAM_D3) and TinySeg's erase ring (examples/nicla_vision)",
                note=f"0x38000000; 32-bit AHB at 240 MHz ({ram})",
            ),
            Region(
                "internal-flash", FLASH, 2 * MB, 1e12 / H7_READ_PS_PER_BYTE,
                1e12 / H7_READ_PS_PER_BYTE, 1536 * KB,
                "bootloader 0x08000000-0x0803FFFF, M7 sketch from 0x08040000 and M4 image up to "
                "0x0817FFFF (boards.txt split 50_50; examples/nicla_vision keeps the last 512 KB of "
                "bank 2 for spills)",
                page_size=32, sector_size=128 * KB,
                page_program_time=H7_WORD_PROGRAM_S, sector_erase_time=H7_SECTOR_ERASE_S,
                endurance=10_000,
                note="STM32H757 2 MB dual-bank flash, x32 parallelism: flash-word program and sector "
                "erase typicals from ST DS12110 (provisional); endurance 10,000 unverified; read "
                "bandwidth an estimate (flash_profiles.h)",
            ),
            Region(
                "qspi", FLASH, 16 * MB, QSPI_HZ / QSPI_READ_CLOCKS_PER_BYTE,
                QSPI_HZ / QSPI_PROGRAM_CLOCKS_PER_BYTE, 15 * MB,
                "Arduino's QSPI partitions (up to 14 MB) and the unused MB after them: "
                "examples/nicla_vision keeps the last 1 MB for spills",
                page_size=256, sector_size=4 * KB,
                page_program_time=640e-6, sector_erase_time=64e-3, endurance=100_000,
                read_command_time=QSPI_READ_COMMAND_CLOCKS / QSPI_HZ,
                program_command_time=QSPI_PROGRAM_COMMAND_CLOCKS / QSPI_HZ,
                note="AT25QL128A at 40 MHz: page program and 4 KB erase typicals from its SFDP "
                "table; 1-4-4 reads, 1-1-1 programs (mbed QSPIF); endurance 100,000 provisional "
                "(flash_profiles.h)",
            ),
        ),
        spill_region="qspi",
        clock_hz=480e6,
        note="STM32H747 as the M7 sees it, with the M4 running TinySeg's erase worker",
        erase_worker=True,
    )  # fmt: skip


def _esp32_s3_psram() -> Board:
    return Board(
        "esp32-s3-psram",
        (
            Region(
                "sram", RAM, 512 * KB, 0.96e9, 0.96e9, 192 * KB,
                "ESP-IDF, Wi-Fi off, and the application's own data: about 320 KB stays for the "
                "arena (estimate)",
                arena=True,
                note="internal SRAM, 32-bit at 240 MHz (estimate)",
            ),
            Region(
                "psram", RAM, 8 * MB, 40e6, 40e6, 0, "",
                note="8 MB octal PSRAM at 80 MHz behind the cache: 40 MB/s sustained copy "
                "(estimate, below the bus's 160 MB/s peak)",
            ),
            Region(
                "flash", FLASH, 8 * MB, 20e6, 5e6, 7 * MB,
                "application image and partitions; 1 MB left for spills (assumed)",
                page_size=256, sector_size=4 * KB,
                page_program_time=640e-6, sector_erase_time=64e-3, endurance=100_000,
                note="quad SPI NOR at 40 MHz: the Nicla Vision's AT25QL128A figures, standing in "
                "for a typical part (estimate)",
            ),
        ),
        spill_region="psram",
        clock_hz=240e6,
        note="ESP32-S3 with 8 MB PSRAM; tensors spill to PSRAM (no wear)",
    )  # fmt: skip


def _generic() -> Board:
    return Board(
        "generic",
        (
            Region(
                "ram", RAM, 1 * MB, 1.92e9, 1.92e9, 0, "", arena=True,
                note="one RAM region for the arena: the Nicla Vision's AXI SRAM figures (estimate)",
            ),
            Region(
                "flash", FLASH, 1 * MB, QSPI_HZ / QSPI_READ_CLOCKS_PER_BYTE,
                QSPI_HZ / QSPI_PROGRAM_CLOCKS_PER_BYTE, 0, "",
                page_size=256, sector_size=4 * KB,
                page_program_time=640e-6, sector_erase_time=64e-3, endurance=100_000,
                read_command_time=QSPI_READ_COMMAND_CLOCKS / QSPI_HZ,
                program_command_time=QSPI_PROGRAM_COMMAND_CLOCKS / QSPI_HZ,
                note="1 MB of QSPI NOR for spills: the Nicla Vision's AT25QL128A figures",
            ),
        ),
        spill_region="flash",
        clock_hz=480e6,
        note="a 480 MHz Cortex-M7 with one arena and 1 MB of QSPI flash for spills",
    )  # fmt: skip


PRESETS = {"generic": _generic, "nicla-vision": _nicla_vision, "esp32-s3-psram": _esp32_s3_psram}
DEFAULT_BOARD = "generic"


# ----------------------------------------------------------------------------- a user's map

_BOARD_KEYS = {"name", "clock_hz", "spill_region", "note", "region", "erase_worker"}
_FLAGS = ("arena", "dma")  # a region's true-or-false keys
_REGION_KEYS = {f.name for f in fields(Region)}
_FLASH_ONLY = ("page_size", "sector_size", "page_program_time", "sector_erase_time", "endurance")
_SIZES = ("capacity", "used", "reserve", "page_size", "sector_size")
_POSITIVE = ("read_bandwidth", "write_bandwidth")

# The limits of a board file (docs/boards.md, "Limits"): checked before anything else reads it,
# so that no file can make a run allocate, recurse or compute without bound.
MAX_FILE_BYTES = 1 << 20  # a board file is a few KB; a bigger one is not read at all
MAX_DEPTH = 8  # tables and arrays nested in one another (a board map needs 3)
MAX_NAME = 64  # characters of a board's or a region's name
MAX_TEXT = 2000  # characters of a note or used_by
MAX_REGIONS_PER_BOARD = 64
MAX_SECONDS = 3600.0  # any flash timing: an hour per page or sector is no real part
# key -> (least, greatest, unit): every number a board file may hold. Sizes fit a 48-bit address
# space (sizes.MAX_SIZE), a page or sector 32 bits; 10^15 erase cycles is past FRAM's 10^14.
LIMITS: dict[str, tuple[float, float, str]] = {
    "capacity": (1, MAX_SIZE, "bytes"),
    "used": (0, MAX_SIZE, "bytes"),
    "reserve": (0, MAX_SIZE, "bytes"),
    "page_size": (0, 1 << 32, "bytes"),  # flash regions need them positive (_flash_keys)
    "sector_size": (0, 1 << 32, "bytes"),
    "endurance": (0, 10**15, "erase cycles"),
    "read_bandwidth": (1.0, 1e15, "bytes per second"),
    "write_bandwidth": (1.0, 1e15, "bytes per second"),
    "page_program_time": (0.0, MAX_SECONDS, "seconds"),
    "sector_erase_time": (0.0, MAX_SECONDS, "seconds"),
    "read_command_time": (0.0, MAX_SECONDS, "seconds"),
    "program_command_time": (0.0, MAX_SECONDS, "seconds"),
    "clock_hz": (1e3, 1e11, "Hz"),
    "address": (0, MAX_SIZE, "a byte address"),
}
_INTEGERS = _SIZES + ("endurance", "address")


def _bound(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _figure(value: object) -> str:
    """A refused value as a message shows it: short, whatever the file held."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**MAX_DIGITS:
        return f"a number of {len(str(abs(value)))} digits"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)):
        return f"a {'table' if isinstance(value, dict) else 'list'}"
    return shown(repr(value), 40)


def _number(where: str, key: str, value: object) -> float:
    """A number from the file within LIMITS[key] (sizes may be written '512KB'); one sentence
    naming the key and the limit when it is not."""
    lo, hi, unit = LIMITS[key]
    if key in _SIZES and isinstance(value, str):
        try:
            return parse_size(value)
        except ValueError as exc:
            raise TinySegError(
                f'{where}: {key} {exc}: write bytes, e.g. 131072 or "128KiB"'
            ) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TinySegError(f"{where}: {key} must be a number, not {_figure(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise TinySegError(f"{where}: {key} must be a finite number, not {_figure(value)}")
    if not lo <= value <= hi:
        sign = "positive" if value <= 0 < lo else "zero or more" if value < 0 else "in range"
        raise TinySegError(
            f"{where}: {key} must be {sign}, not {_figure(value)} (from {_bound(lo)} to {_bound(hi)} "
            f"{unit})"
        )
    return value


def _name(where: str, key: str, value: object) -> str:
    """A name users see in messages and tables: a printable string of 1 to MAX_NAME characters."""
    if not isinstance(value, str) or not value:
        raise TinySegError(f"{where}: {key} must be a non-empty string, not {_figure(value)}")
    if len(value) > MAX_NAME:
        raise TinySegError(
            f"{where}: {key} '{shown(value, 40)}' has {len(value):,} characters (at most {MAX_NAME})"
        )
    bad = unprintable(value)
    if bad is not None:
        raise TinySegError(
            f"{where}: {key} '{shown(value)}' holds the control character {shown(bad)}: "
            "names are printable text"
        )
    return value


def _text(where: str, key: str, value: object) -> str:
    if not isinstance(value, str):
        raise TinySegError(f"{where}: {key} must be a string, not {_figure(value)}")
    if len(value) > MAX_TEXT:
        raise TinySegError(f"{where}: {key} has {len(value):,} characters (at most {MAX_TEXT:,})")
    return value


def _flag(where: str, key: str, value: object) -> bool:
    """A true-or-false key: a JSON/TOML boolean only (1, "yes" and "true" are refused)."""
    if not isinstance(value, bool):
        raise TinySegError(f"{where}: {key} must be true or false, not {_figure(value)}")
    return value


def _region_values(here: str, raw: dict, kind: str) -> dict:
    """The region's keys checked one by one (names, texts, flags, numbers within LIMITS)."""
    values: dict = {"kind": kind}
    for key, value in raw.items():
        if key == "name":
            values[key] = value
        elif key in ("used_by", "note", "section"):
            values[key] = _text(here, key, value)
        elif key in _FLAGS:
            values[key] = _flag(here, key, value)
        elif key != "kind":
            v = _number(here, key, value)
            if key == "address" and v != int(v):
                raise TinySegError(
                    f"{here}: address must be a whole byte address, not {_figure(v)}"
                )
            if key == "reserve" and v != int(v):
                raise TinySegError(
                    f"{here}: reserve must be a whole number of bytes, not {_figure(v)}"
                )
            values[key] = int(v) if key in _INTEGERS else float(v)
    return values


def _region(where: str, raw: object) -> Region:
    if not isinstance(raw, dict):
        raise TinySegError(
            f"{where}: each [[region]] must be a table of keys (name, kind, capacity, ...)"
        )
    if raw.get("name") in (None, ""):
        raise TinySegError(f'{where}: a region has no name: give each [[region]] a name = "..."')
    name = _name(where, "region name", raw["name"])
    here = f"{where}: region '{name}'"
    unknown = sorted(set(raw) - _REGION_KEYS)
    if unknown:
        raise TinySegError(
            f"{here}: unknown key '{shown(unknown[0], 40)}' (known: {', '.join(sorted(_REGION_KEYS))})"
        )
    kind = raw.get("kind")
    if kind not in (RAM, FLASH):
        raise TinySegError(f'{here}: kind must be "ram" or "flash", not {_figure(kind)}')
    if "capacity" not in raw:
        raise TinySegError(
            f'{here} has no capacity: give it in bytes, e.g. capacity = 131072 or "128KiB"'
        )
    for key in _POSITIVE:
        if key not in raw:
            raise TinySegError(
                f"{here} has no {key}: give it in bytes per second, e.g. {key} = 20e6"
            )
    values = _region_values(here, raw, kind)
    if values.get("used", 0) > values["capacity"]:
        raise TinySegError(
            f"{here}: used ({values['used']:,} B) is more than its capacity ({values['capacity']:,} B)"
        )
    left = values["capacity"] - values.get("used", 0)
    if values.get("reserve", 0) > left:
        raise TinySegError(
            f"{here}: reserve ({values['reserve']:,} B) is more than the {left:,} B its capacity "
            f"({values['capacity']:,} B) leaves after used ({values.get('used', 0):,} B)"
        )
    if kind == FLASH:
        _flash_keys(where, here, values)
    else:
        extra = [
            k for k in _FLASH_ONLY + ("read_command_time", "program_command_time") if raw.get(k)
        ]
        if extra:
            raise TinySegError(f"{here}: {extra[0]} is for flash regions only (this one is ram)")
    return Region(**values)


def _flash_keys(where: str, here: str, values: dict) -> None:
    if values.get("arena"):
        raise TinySegError(f"{here}: the arena cannot live in flash: set arena on a ram region")
    for key in _FLASH_ONLY:
        if not values.get(key):
            example = {"endurance": "its erase cycles per sector, e.g. endurance = 100000"}.get(
                key, f"a positive {key}"
            )
            raise TinySegError(
                f"flash {here[len(where) + 2 :]} in {where} has no {key}: give {example}"
            )
    if values["sector_size"] % values["page_size"]:
        raise TinySegError(
            f"{here}: sector_size ({values['sector_size']:,} B) is not a multiple of page_size "
            f"({values['page_size']:,} B)"
        )


def _depth(raw: object) -> int:
    """How deep tables and lists nest in ``raw``, counted without recursion."""
    deepest, stack = 0, [(raw, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                items = value.values() if isinstance(value, dict) else value
                stack.extend((v, depth + 1) for v in items)
    return deepest


def board_from_dict(raw: object, where: str) -> Board:
    """A Board from a parsed TOML/JSON map; TinySegError (one sentence) when the map is wrong."""
    if not isinstance(raw, dict):
        raise TinySegError(f"{where}: the board map must be a table of keys (name, region, ...)")
    if _depth(raw) > MAX_DEPTH:
        raise TinySegError(f"{where}: tables, lists or dotted keys nest more than {MAX_DEPTH} deep")
    unknown = sorted(set(raw) - _BOARD_KEYS)
    if unknown:
        raise TinySegError(
            f"{where}: unknown key '{shown(unknown[0], 40)}' (known: {', '.join(sorted(_BOARD_KEYS))})"
        )
    raws = raw.get("region")
    if not isinstance(raws, list) or not raws:
        raise TinySegError(f'{where}: no regions: add at least one [[region]] with kind = "ram"')
    if len(raws) > MAX_REGIONS_PER_BOARD:
        raise TinySegError(
            f"{where}: {len(raws):,} regions (a board file may have at most {MAX_REGIONS_PER_BOARD})"
        )
    regions = [_region(where, r) for r in raws]
    names = [r.name for r in regions]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise TinySegError(f"{where}: two regions are named '{dup}': give each its own name")
    rams = [r for r in regions if r.kind == RAM]
    if not rams:
        raise TinySegError(f"{where}: no ram region: the arena needs one")
    arenas = [r for r in regions if r.arena]
    if len(arenas) > 1:
        raise TinySegError(
            f"{where}: regions '{arenas[0].name}' and '{arenas[1].name}' both say arena = true: "
            "the arena lives in one"
        )
    if not arenas:  # the first RAM region holds the arena
        i = regions.index(rams[0])
        regions[i] = Region(
            **{**{f.name: getattr(rams[0], f.name) for f in fields(Region)}, "arena": True}
        )
    return _board(raw, where, tuple(regions))


def _board(raw: dict, where: str, regions: tuple[Region, ...]) -> Board:
    """The board's own keys, its regions checked."""
    names = [r.name for r in regions]
    spill = raw.get("spill_region")
    if spill is None:
        flash = [r for r in regions if r.kind == FLASH]
        others = [r for r in regions if not r.arena]
        spill = (flash or others or [regions[0]])[0].name
    elif not isinstance(spill, str) or spill not in names:
        listed = ", ".join(f"'{n}'" for n in names[:8]) + (", ..." if len(names) > 8 else "")
        raise TinySegError(
            f"{where}: spill_region '{shown(spill, 40)}' is not one of its regions ({listed})"
        )
    name = _name(where, "name", raw.get("name", shown(Path(where).stem, MAX_NAME)))
    clock = _number(where, "clock_hz", raw.get("clock_hz", 480e6))
    note = _text(where, "note", raw.get("note", ""))
    worker = _flag(where, "erase_worker", raw.get("erase_worker", False))
    return Board(name, regions, spill, float(clock), note, worker)


# ----------------------------------------------------------------------------- a board file

# What the text of a file may hold before a parser sees it: strings and comments are skipped;
# brackets and braces count the nesting (both parsers recurse once per level), and so do the dots
# of a TOML dotted key (tomllib's work grows with their square); a run of digits longer than
# MAX_DIGITS is no figure a board has (Python refuses to convert 4,300 and more).
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|(?P<open>[\[{])|(?P<close>[\]}])|(?P<digits>[0-9]+)')
_TOML_TOKENS = re.compile(
    r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*'
    r"|(?P<open>[\[{])|(?P<close>[\]}])|(?P<digits>[0-9][0-9_]*)(?:\.[0-9][0-9_]*)?"
    r"|(?P<dot>\.)|(?P<newline>\n)",
    re.DOTALL,
)


def _check_text(text: str, where: str, toml: bool) -> None:
    depth = dots = 0
    for m in (_TOML_TOKENS if toml else _JSON_TOKENS).finditer(text):
        kind = m.lastgroup
        if kind == "newline":
            dots = 0
        elif kind in ("open", "dot"):
            depth += kind == "open"
            dots += kind == "dot"
            if depth > MAX_DEPTH or dots > MAX_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                raise TinySegError(
                    f"{where}: tables, lists or dotted keys nest more than {MAX_DEPTH} deep "
                    f"(line {line})"
                )
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif kind == "digits" and len(m.group("digits").replace("_", "")) > MAX_DIGITS:
            line = text.count("\n", 0, m.start()) + 1
            raise TinySegError(
                f"{where}: a number of more than {MAX_DIGITS} digits (line {line}): no board "
                "figure needs one"
            )


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int) -> str | None:
    """What a file that is not a regular file is ("a FIFO", ...); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _read_board_file(spec: str, where: str) -> str:
    """The text of a board file: its kind and size checked on the path before it is opened (a FIFO
    is never opened, so nothing blocks), then again on the open file, and at most
    MAX_FILE_BYTES + 1 bytes read."""
    limit = f"a board file may have at most {MAX_FILE_BYTES:,} B (docs/boards.md)"
    data = b""
    try:
        st = os.stat(spec)
        what = _not_regular(st.st_mode)
        if what is None and st.st_size <= MAX_FILE_BYTES:
            fd = os.open(spec, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                what = _not_regular(st.st_mode)
                data = f.read(MAX_FILE_BYTES + 1) if what is None else b""
    except OSError as exc:
        raise TinySegError(f"cannot read board file {where}: {exc.strerror or exc}") from None
    if what is not None:
        raise TinySegError(f"board file {where} is {what}: give a .toml or .json file")
    if st.st_size > MAX_FILE_BYTES or len(data) > MAX_FILE_BYTES:
        raise TinySegError(f"board file {where} has {max(st.st_size, len(data)):,} B: {limit}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TinySegError(
            f"board file {where} is not UTF-8 text (byte {exc.start:,} is not)"
        ) from None


def _parse(text: str, where: str, toml: bool) -> object:
    """The parsed map; any parser failure (the text checked first) is one sentence."""
    _check_text(text, where, toml)
    try:
        if not toml:
            return json.loads(text)
        import tomllib

        return tomllib.loads(text)
    except ImportError:  # Python 3.10
        raise TinySegError(
            f"{where}: TOML needs Python 3.11 or later: write the map as JSON"
        ) from None
    except json.JSONDecodeError as exc:
        raise TinySegError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except (ValueError, RecursionError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        reason = shown(str(exc), 200) if isinstance(exc, ValueError) else "nested too deep"
        raise TinySegError(f"{where} is not valid {'TOML' if toml else 'JSON'}: {reason}") from None


def load_board(spec: str) -> Board:
    """``--board``: a preset's name, or a .toml / .json file with a user's map (docs/boards.md)."""
    if spec in PRESETS:
        return PRESETS[spec]()
    try:
        exists = os.path.lexists(spec)
    except (ValueError, OSError):  # a NUL byte, a name too long for the system
        exists = False
    if not exists:
        raise TinySegError(
            f"unknown board '{shown(spec, 60)}': give one of {', '.join(PRESETS)} or a .toml/.json "
            "file with your board's memory map (docs/boards.md)"
        )
    where = shown(spec)
    suffix = Path(spec).suffix.lower()
    if suffix not in (".json", ".toml"):
        raise TinySegError(f"{where}: a board file ends in .toml or .json (docs/boards.md)")
    return board_from_dict(_parse(_read_board_file(spec, where), where, suffix == ".toml"), where)


def _duration(seconds: float) -> str:
    """A flash timing the way datasheets give it: 130 µs, 64 ms, 1.1 s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-6:.3g} µs"


def _bytes(n: int) -> str:
    return f"{n // KB} KB" if n >= KB and n % KB == 0 else f"{n:,} B"


def _flash_line(r: Region) -> str:
    """What writing costs in a flash region: a page program per page and a sector erase per sector
    (the bus rate alone hides them), and the rate they leave when both are paid."""
    pages = r.sector_size // r.page_size
    sector_s = (
        r.sector_size / r.write_bandwidth
        + pages * (r.page_program_time + r.program_command_time)
        + r.sector_erase_time
    )
    return (
        f"    page program {_duration(r.page_program_time)} per {_bytes(r.page_size)}, "
        f"sector erase {_duration(r.sector_erase_time)} per {_bytes(r.sector_size)}: "
        f"{r.sector_size / sector_s / 1e3:,.0f} kB/s written with erases"
    )


def _counted(r: Region) -> str:
    """``used_by`` without its parenthesised sources (``--json`` keeps them)."""
    return re.sub(r" \([^()]*\)", "", r.used_by).strip()


def _arena_lines(r: Region) -> list[str]:
    """What the arena region's free figure leaves out: all the application takes beyond ``used``."""
    text = f"arena here; free leaves out what used ({r.used:,} B) does not count. used: " + (
        _counted(r) or "nothing: the application's own RAM is not counted"
    )
    return textwrap.wrap(text, 100, initial_indent="    ", subsequent_indent="    ")


def _used_lines(r: Region) -> list[str]:
    """What another region's ``used`` bytes hold, when it has any (the arena's: ``_arena_lines``)."""
    if r.arena or not r.used:
        return []
    text = f"used ({r.used:,} B): " + (_counted(r) or "not said by the map")
    return textwrap.wrap(text, 100, initial_indent="    ", subsequent_indent="    ")


def _region_lines(r: Region) -> list[str]:
    head = f"  {r.name:<14} {r.kind:<5} {r.capacity:>10,} B  free {r.free:>10,} B  "
    if r.is_flash:  # its write bandwidth is a bus rate: the page programs and erases dominate
        return [
            head + f"read {r.read_bandwidth / 1e6:>7,.0f} MB/s  {r.endurance:,} cycles",
            _flash_line(r),
        ] + _used_lines(r)
    rates = (
        f"read {r.read_bandwidth / 1e6:>6,.0f} MB/s  write {r.write_bandwidth / 1e6:>6,.0f} MB/s"
    )
    dma = "" if r.dma else ", no DMA"  # only the CPU (and on the STM32H7 the MDMA) reaches it
    return [head + rates + dma] + (_arena_lines(r) if r.arena else _used_lines(r))


def presets_table() -> str:
    """``tinyseg boards``: each preset's regions, one line each (two for flash), at most 100
    columns; the arena region says what its free figure leaves out, every other region with
    ``used`` bytes what they hold."""
    lines = []
    for name, make in PRESETS.items():
        b = make()
        worker = ", erase worker" if b.erase_worker else ""
        lines.append(f"{name}: spills to {b.spill_region}, {b.clock_hz / 1e6:.0f} MHz{worker}")
        lines += textwrap.wrap(b.note, 100, initial_indent="  ", subsequent_indent="  ")
        for r in b.regions:
            lines += _region_lines(r)
    return "\n".join(lines) + "\n"
