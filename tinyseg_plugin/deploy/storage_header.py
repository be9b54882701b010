"""The Nicla Vision sketch's RAM storage regions, as a generated C++ header.

A plan may keep spill slots in RAM regions of the STM32H747 beside the flash (docs/runtime.md,
"Several storage regions"). For each (region index, board region name, bytes) the header defines
the region's memory where the board map's ``address`` or ``section`` puts it, its RAM block
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
- ``sram3`` (``.lwip_sec``) and ``sram4`` (OpenAMP, the PDM buffer, TinySeg's erase ring) have
  neither: there is no room a plan can count on, and a plan with slots there is refused.

These places are the preset's ``address`` and ``section`` (memory/boards.py); a user's board file
gives its own the same way (docs/boards.md), and the header follows the map, not the board's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..contract.customops import (  # region 0 is Runtime::spill, the sketch's flash
    MAX_REGIONS,
    SECTOR_BYTES,
    slot_region_bytes,
)
from ..errors import TinySegError, shown

VECTOR_TABLE = ((166 * 4) + 7) & ~7  # what both linker scripts reserve at the start of DTCM/D2
ALIGN = 32  # a fixed range starts on a cache line
# The STM32H747's D2 SRAM banks: the M4 core's RAM when it runs (its linker script's RAM_D2), and
# clocked only once their RCC AHB2ENR bit is set.
D2_CLOCKS = (
    (0x30000000, 0x30020000, "RCC_AHB2ENR_D2SRAM1EN"),
    (0x30020000, 0x30040000, "RCC_AHB2ENR_D2SRAM2EN"),
    (0x30040000, 0x30048000, "RCC_AHB2ENR_D2SRAM3EN"),
)


@dataclass(frozen=True)
class Place:
    """Where a board RAM region's spill bytes may live."""

    start: int | None  # fixed address; None: a static array in ``section``
    end: int  # one past the last usable byte (for a section: its capacity)
    section: str = ""
    clock: str = ""  # RCC AHB2ENR bit to set before use
    needs_m4_idle: bool = False


def place_of(region) -> Place | None:
    """Where the header puts a board RAM region's spill bytes (memory/boards.py ``Region``: its
    ``address`` or ``section`` and its free bytes); None when the map gives neither. Flash and the
    refused RAM regions have no place: the sketch's own storage code owns flash."""
    if region.kind != "ram":
        return None
    if region.section:
        return Place(None, region.free, section=region.section)
    if region.address is None:
        return None
    d2 = next((c for c in D2_CLOCKS if c[0] <= region.address < c[1]), None)
    start = -(-region.address // ALIGN) * ALIGN
    # A D2 bank the M4 fills is free only when the M4 runs nothing (m4_idle): then all of it.
    room = region.capacity if d2 and region.free == 0 else region.free
    return Place(
        start, region.address + room, "", d2[2] if d2 else "", bool(d2 and not region.free)
    )


def places_of(board) -> dict[str, Place]:
    """The places of every board RAM region that has one, by name."""
    return {r.name: p for r in board.regions if (p := place_of(r)) is not None}


@dataclass(frozen=True)
class _Region:
    index: int
    name: str
    size: int
    address: int | None  # fixed address, or None for a section array
    place: Place


def _check(
    plan_regions: Iterable[tuple[int, str, int]], places: dict[str, Place], m4_idle: bool
) -> list[_Region]:
    """The RAM regions with their addresses; TinySegError (one sentence) for anything the board
    cannot hold. Region 0 is the sketch's flash storage (Runtime::spill): not defined here."""
    seen: set[int] = set()
    used: dict[str, int] = {}
    out: list[_Region] = []
    for index, name, size in plan_regions:
        if not isinstance(index, int) or not 0 <= index < MAX_REGIONS or index in seen:
            raise TinySegError(
                f"region index {index!r} must be a distinct integer 0..{MAX_REGIONS - 1}"
            )
        seen.add(index)
        if index == 0 and name in places:
            raise TinySegError(
                f"region 0 is Runtime::spill, the sketch's flash storage; put {name!r} in 1..7"
            )
        if index == 0:
            continue
        if name not in places:
            raise TinySegError(
                f"board region '{shown(name)}' has no address or linker section for spill bytes: "
                'give it address = 0x... (where its free bytes start) or section = "..." in the '
                "board file, or keep slots out of it"
            )
        place = places[name]
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
        out.append(_Region(index, name, size, start if place.start is not None else None, place))
    return out


def _named(index: int, name: str, size: int) -> str:
    """The comment line of one plan region: region 0 is named, not defined (the sketch's flash)."""
    if index == 0:
        return f"//   region 0: {name}, the sketch's flash storage (Runtime::spill)"
    return f"//   region {index}: {name}, {size} bytes"


def _memory(r: _Region) -> str:
    if r.address is None:
        return (
            f"uint8_t g_memory{r.index}[{r.size}] "
            f'__attribute__((section("{r.place.section}"), aligned(32)));'
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


def _helpers(slots: int) -> str:
    """The constants and config builders every region's objects use (the header's fixed part)."""
    return f"""
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
"""


def storage_header(
    plan_regions: Iterable[tuple[int, str, int]],
    places: dict[str, Place],
    slots: int = 16,
    m4_idle: bool = False,
    source: str = "",
) -> str:
    """The header text for ``plan_regions``: (region index, board region name, bytes) per storage
    region of the plan; ``places``: where each RAM region's bytes go (``places_of(board)``).
    ``slots``: SpillSlots per region (40 B each on Cortex-M7); ``source``: a line naming what the
    plan came from, for the header's comment. TinySegError (one sentence) when
    the board cannot hold a region."""
    plan_regions = list(plan_regions)
    regions = _check(plan_regions, places, m4_idle)
    if not 1 <= slots <= 4096:
        raise TinySegError(f"slots must be 1..4096, not {slots!r}")
    names = "\n".join(_named(i, n, b) for i, n, b in sorted(plan_regions))
    clocks = sorted({r.place.clock for r in regions if r.place.clock})
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
{_helpers(slots)}{"".join(_objects(r, slots) for r in regions)}}}  // namespace

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


def check_board(board):
    """The board's spill region, refused (one sentence) unless it is flash: the sketch's region 0
    (Runtime::spill) is its flash storage, which the header does not define."""
    spill = next(r for r in board.regions if r.name == board.spill_region)
    if spill.kind != "flash":
        raise TinySegError(
            f"--storage-header: the board's spill_region '{shown(spill.name)}' is RAM, but the "
            "sketch's region 0 (Runtime::spill) is its flash storage: set spill_region to a flash "
            "region in the board file"
        )
    return spill


def plan_header(cost, board, source: str = "") -> str:
    """The header for a written plan (``optimize --storage-header``) on ``board`` (its memory map,
    memory/boards.py): its RAM storage regions from the cost model's placement
    (memory/placement.py), each as large as the slots it holds and where the map's ``address`` or
    ``section`` puts it, and one SpillSlot per slot number the plan uses (slots are numbered across
    the whole model). Refused (one sentence) unless region 0, the spill region, is a flash region
    (the sketch's flash storage, Runtime::spill), no other region of the plan is flash, and the map
    places every RAM region of the plan."""
    spill = check_board(board)
    p = cost.placement if cost is not None else None
    size: dict[int, int] = {}
    for u in cost.uses if cost is not None else ():
        i = 0 if p is None else p.index_of(u.slot)
        size[i] = size.get(i, 0) + slot_region_bytes(u.bytes)
    names = p.names if p is not None else (spill.name,)
    kinds = {r.name: r.kind for r in board.regions}
    other_flash = [names[i] for i in sorted(size) if i > 0 and kinds[names[i]] == "flash"]
    if other_flash:
        raise TinySegError(
            f"the plan keeps slots in {other_flash[0]!r} besides the spill region {names[0]!r}, and "
            "the sketch attaches one flash storage: give a higher --target, or a board file whose "
            "spill_region is the one flash region to use"
        )
    # Region 0 only when a slot is there: the header then names the same indices as optimize's
    # "storage regions the application attaches" line.
    regions = [(i, names[i], size[i]) for i in sorted(size)]
    slots = max((u.slot for u in cost.uses), default=0) + 1 if cost is not None else 1
    return storage_header(regions, places_of(board), slots=slots, source=source)
