"""The Nicla Vision sketch's RAM storage regions, as a generated C++ header.

A plan may keep spill slots in RAM regions of the STM32H747 beside the flash (docs/runtime.md,
"Several storage regions"). For each (region index, board region name, bytes) the header defines
the region's memory where the Arduino Mbed core's linker scripts leave room, its RAM block
device, erase queue, slot and sector tables and SpillManager, all static (no heap), and
``tinyseg_regions::Attach(runtime)`` initialises them and fills ``Runtime::regions``. Flash regions
(internal flash, QSPI) are the sketch's own storage code (tflm_ops/targets/nicla_vision); the
header only names them.

Where each board region's bytes go (ArduinoCore-mbed b4ad4e72 variants/NICLA_VISION/linker_script.ld
and variants/GENERIC_STM32H747_M4/linker_script.ld, the same map as tinyseg_plugin/memory/boards.py):

- ``axi-sram``: a static array in ``.uninitialized``, the NOLOAD output section the M7 script puts
  in region RAM (0x24000000) before ``.bss``: the linker places it beside the arena and refuses a
  sketch that overflows the 512 KB; startup code does not clear it.
- ``dtcm``: the script maps no section to DTCMRAM, so the region's bytes are a fixed address range
  after the RAM vector table (0x20000000 + 664 B, rounded up to 32).
- ``sram1`` / ``sram2`` (D2, 0x30000000 / 0x30020000): fixed addresses too (no M7 section there
  but ``.lwip_sec`` at 0x30040000); the M4 script puts the M4's whole RAM in them, so only when the
  M4 runs nothing (``m4_idle=True``: flash split 100_0, no erase worker). Attach turns on their
  clocks (RCC AHB2ENR D2SRAM1EN / D2SRAM2EN).
- ``sram3`` (``.lwip_sec``) and ``sram4`` (OpenAMP, the PDM buffer, TinySeg's erase ring) are
  refused: there is no room a plan can count on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..contract.customops import MAX_REGIONS  # region 0 is Runtime::spill, the sketch's flash
from ..errors import TinySegError, shown
from ..memory.placement import SECTOR_BYTES, slot_region_bytes  # placement sizes slots the same

VECTOR_TABLE = ((166 * 4) + 7) & ~7  # what both linker scripts reserve at the start of DTCM/D2
FLASH_NAMES = ("internal-flash", "qspi")


@dataclass(frozen=True)
class Place:
    """Where a board RAM region's spill bytes may live."""

    start: int | None  # fixed address; None: a static array in ``section``
    end: int  # one past the last usable byte (for a section: its capacity)
    section: str = ""
    clock: str = ""  # RCC AHB2ENR bit to set before use
    needs_m4_idle: bool = False


PLACES: dict[str, Place] = {
    "axi-sram": Place(None, 512 * 1024, section=".uninitialized"),
    "dtcm": Place((0x20000000 + VECTOR_TABLE + 31) & ~31, 0x20020000),
    "sram1": Place(0x30000000, 0x30020000, clock="RCC_AHB2ENR_D2SRAM1EN", needs_m4_idle=True),
    "sram2": Place(0x30020000, 0x30040000, clock="RCC_AHB2ENR_D2SRAM2EN", needs_m4_idle=True),
}
REFUSED = {
    "sram3": "the M7's .lwip_sec (Ethernet/USB buffers) and the M4's RAM are there",
    "sram4": "OpenAMP, the PDM buffer and TinySeg's erase ring are there",
}


@dataclass(frozen=True)
class _Region:
    index: int
    name: str
    size: int
    address: int | None  # fixed address, or None for a section array


def _check(plan_regions: Iterable[tuple[int, str, int]], m4_idle: bool) -> list[_Region]:
    """The RAM regions with their addresses; TinySegError (one sentence) for anything the board
    cannot hold."""
    seen: set[int] = set()
    used: dict[str, int] = {}
    out: list[_Region] = []
    for index, name, size in plan_regions:
        if not isinstance(index, int) or not 0 <= index < MAX_REGIONS or index in seen:
            raise TinySegError(
                f"region index {index!r} must be a distinct integer 0..{MAX_REGIONS - 1}"
            )
        seen.add(index)
        if name in FLASH_NAMES:
            continue
        if name in REFUSED:
            raise TinySegError(f"board region '{shown(name)}' cannot hold spills: {REFUSED[name]}")
        if name not in PLACES:
            known = ", ".join([*PLACES, *FLASH_NAMES])
            raise TinySegError(
                f"'{shown(name)}' is not a Nicla Vision storage region (use one of: {known})"
            )
        if index == 0:
            raise TinySegError(
                f"region 0 is Runtime::spill, the sketch's flash storage; put {name!r} in 1..7"
            )
        place = PLACES[name]
        if place.needs_m4_idle and not m4_idle:
            raise TinySegError(
                f"{name!r} is the M4 core's RAM while it runs the erase worker; pass m4_idle=True "
                "only for a sketch with flash split 100_0 and no M4 image"
            )
        if not isinstance(size, int) or size <= 0 or size % SECTOR_BYTES:
            raise TinySegError(
                f"region {index} ({name}) has {size!r} bytes; give a positive multiple of "
                f"{SECTOR_BYTES}"
            )
        start = used.get(name, place.start or 0)
        if start + size > place.end:
            room = place.end - (place.start or 0)
            raise TinySegError(f"the regions in {name!r} need more than its {room} free bytes")
        used[name] = start + size
        out.append(_Region(index, name, size, start if place.start is not None else None))
    return out


def _memory(r: _Region) -> str:
    if r.address is None:
        return (
            f"uint8_t g_memory{r.index}[{r.size}] "
            f'__attribute__((section("{PLACES[r.name].section}"), aligned(32)));'
        )
    return (
        f"uint8_t* const g_memory{r.index} = reinterpret_cast<uint8_t*>(0x{r.address:08X}u);"
        f"  // {r.name}, fixed"
    )


def _objects(r: _Region, slots: int) -> str:
    i = r.index
    return f"""
// Region {i}: {r.name}, {r.size} bytes.
{_memory(r)}
::tinyseg::SpillSlot g_slots{i}[kSlots];
::tinyseg::SectorInfo g_sectors{i}[{r.size // SECTOR_BYTES}];
::tinyseg::RamBlockDevice g_device{i}(Geometry({r.size}u), g_memory{i});
::tinyseg::SyncEraseQueue g_queue{i}(g_device{i});
::tinyseg::SpillManager g_manager{i}(g_device{i}, g_queue{i}, Config({r.size}u),
{" " * len(f"::tinyseg::SpillManager g_manager{i}(")}Memory(g_slots{i}, g_sectors{i}, {r.size // SECTOR_BYTES}u));
"""


def storage_header(
    plan_regions: Iterable[tuple[int, str, int]],
    slots: int = 16,
    m4_idle: bool = False,
    source: str = "",
) -> str:
    """The header text for ``plan_regions``: (region index, board region name, bytes) per storage
    region of the plan. ``slots``: SpillSlots per region (40 B each on Cortex-M7); ``source``: a
    line naming what the plan came from, for the header's comment. TinySegError (one sentence) when
    the board cannot hold a region."""
    plan_regions = list(plan_regions)
    regions = _check(plan_regions, m4_idle)
    if not 1 <= slots <= 4096:
        raise TinySegError(f"slots must be 1..4096, not {slots!r}")
    names = "\n".join(f"//   region {i}: {n}, {b} bytes" for i, n, b in sorted(plan_regions))
    clocks = sorted({PLACES[r.name].clock for r in regions if PLACES[r.name].clock})
    attach = "\n".join(
        f"  if (!::tinyseg::Ok(g_device{r.index}.Init()) || !::tinyseg::Ok(g_manager{r.index}.Init()))"
        f" return false;\n  runtime.regions[{r.index}] = &g_manager{r.index};"
        for r in regions
    )
    clock_lines = "".join(f"  RCC->AHB2ENR |= {c};\n" for c in clocks)
    if clocks:
        clock_lines += (
            "  (void)RCC->AHB2ENR;  // read back: the clock is on before the first access\n"
        )
    rcc = '\n#include "stm32h7xx.h"  // RCC' if clocks else ""
    end = "\n".join(f"  g_manager{r.index}.EndInference();" for r in regions)
    return f"""// GENERATED by tinyseg_plugin.deploy.storage_header.storage_header: do not edit.
// {source or "TinySeg storage regions"} for the Arduino Nicla Vision (STM32H747, Cortex-M7).
// The plan's storage regions:
{names or "//   (none)"}
// Flash regions are the sketch's own storage (Runtime::spill and its flash block devices); the
// RAM regions are defined here, all static. Include from one translation unit (the sketch).
#ifndef TINYSEG_GENERATED_STORAGE_REGIONS_H_
#define TINYSEG_GENERATED_STORAGE_REGIONS_H_

#include <cstddef>
#include <cstdint>

#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_runtime.h"
#include "tinyseg/block_device.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/spill_manager.h"{rcc}

namespace tinyseg_regions {{
namespace {{

constexpr uint32_t kSectorBytes = {SECTOR_BYTES};
constexpr size_t kSlots = {slots};

inline ::tinyseg::Geometry Geometry(uint64_t bytes) {{
  ::tinyseg::Geometry g;
  g.read_size = 1;
  g.program_size = 1;
  g.erase_size = kSectorBytes;
  g.total_size = bytes;
  return g;
}}

inline ::tinyseg::SpillConfig Config(uint64_t bytes) {{
  ::tinyseg::SpillConfig c;
  c.region_offset = 0;
  c.region_size = bytes;
  c.codec_block_bytes = 1024;  // the models' `block` option
  return c;
}}

inline ::tinyseg::SpillMemory Memory(::tinyseg::SpillSlot* slots, ::tinyseg::SectorInfo* sectors,
                                     size_t num_sectors) {{
  ::tinyseg::SpillMemory m;
  m.slots = slots;
  m.num_slots = kSlots;
  m.sectors = sectors;
  m.num_sectors = num_sectors;
  return m;
}}
{"".join(_objects(r, slots) for r in regions)}}}  // namespace

// Initialises every RAM region and puts its SpillManager in runtime.regions[i] (before
// AllocateTensors); false when a device or manager refuses to start.
inline bool Attach(::tinyseg::Runtime& runtime) {{
{clock_lines}{attach}
  (void)runtime;
  return true;
}}

// Wear and slot bookkeeping of every RAM region: call after each Invoke, beside the flash
// manager's EndInference.
inline void EndInference() {{
{end}
}}

}}  // namespace tinyseg_regions

#endif  // TINYSEG_GENERATED_STORAGE_REGIONS_H_
"""


BOARD = "nicla-vision"  # the board whose linker scripts PLACES follows


def plan_header(cost, source: str = "") -> str:
    """The header for a written plan (``optimize --storage-header``): its RAM storage regions from
    the cost model's placement (memory/placement.py), each as large as the slots it holds, and one
    SpillSlot per slot number the plan uses (slots are numbered across the whole model)."""
    if cost is None or cost.board != BOARD:
        raise TinySegError(
            f"--storage-header writes the {BOARD} sketch's storage set-up; give --board {BOARD}"
        )
    p = cost.placement
    size: dict[int, int] = {}
    for u in cost.uses:
        i = 0 if p is None else p.index_of(u.slot)
        size[i] = size.get(i, 0) + slot_region_bytes(u.bytes)
    names = p.names if p is not None else ()
    ram = [(i, names[i], size[i]) for i in sorted(size) if i > 0 and names[i] not in FLASH_NAMES]
    other_flash = [names[i] for i in sorted(size) if i > 0 and names[i] in FLASH_NAMES]
    if other_flash:
        raise TinySegError(
            f"the plan keeps slots in {other_flash[0]!r} besides the spill region {names[0]!r}, and "
            "the sketch attaches one flash storage: give a higher --target, or a board file whose "
            "spill_region is the one flash region to use"
        )
    slots = max((u.slot for u in cost.uses), default=0) + 1
    return storage_header(ram, slots=slots, source=source)
