"""Which board region holds each storage slot of a plan: the one owner of that choice.

A plan's slots (a Spill's, or a StreamChain's row spill) go first to the board's RAM regions
other than the arena's that have free bytes, fastest first, then to its flash regions, the one
with the most erase cycles first (on the Nicla Vision the QSPI NOR's 100,000 before the internal
bank's 10,000: flash wears, so the region that lasts longest takes the writes). Capacity: a slot
is written once per inference and the Runtime keeps every slot of a region until it is fetched,
so the simplest rule that is always right holds: the bytes the device needs for the slots a
region holds (``slot_region_bytes``, the one count the storage header sizes its regions by too),
summed, fit its free bytes. A slot no region has room for stays in the spill region (the cost
model then warns that it is overfull).

Region indices, as the written model's options carry them (contract/customops.py ``region``):
0 is the board's ``spill_region`` (so a one-region plan carries no ``region`` key); 1, 2, ... are the other regions the plan uses, in the board's listing order. The
application attaches one SpillManager per index (``Placement.names``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from ..contract.customops import BLOCK_BYTES, BLOCK_HEADER_BYTES, MAX_REGIONS
from .boards import Board, Region

SECTOR_BYTES = 4096  # erase unit of a RAM region (SectorInfo per 4 KB: 12 B each on Cortex-M7)


def slot_region_bytes(raw: int) -> int:
    """The bytes of a region one slot of ``raw`` bytes needs in SpillManager's ring log: its
    encoded blocks (a header per codec block, stored raw at worst) in whole sectors, and one sector
    more for where the ring's write position starts inside a sector."""
    encoded = raw + -(-raw // BLOCK_BYTES) * BLOCK_HEADER_BYTES
    return (-(-encoded // SECTOR_BYTES) + 1) * SECTOR_BYTES


@dataclass(frozen=True)
class SlotUse:
    """One storage slot of a plan: the bytes it holds (uncompressed) and its traffic per
    inference. ``row``: a StreamChain row spill (the cost model counts a plan's row spills as one
    write stream, its Spills as one stream each)."""

    slot: int
    bytes: int
    written: int
    read: int
    row: bool = False


@dataclass(frozen=True)
class Placement:
    """Slot -> region index, and index -> region name (``names[0]`` is the spill region)."""

    names: tuple[str, ...]
    slots: tuple[tuple[int, int], ...] = ()  # (slot, region index), by slot

    def index_of(self, slot: int) -> int:
        return dict(self.slots).get(slot, 0)

    def region_of(self, slot: int) -> str:
        return self.names[self.index_of(slot)]

    def as_dict(self, uses: Sequence[SlotUse] = ()) -> dict:
        """The ``placement`` key of the optimize report: the index -> region table the application
        attaches its storage by, and each slot's region and bytes."""
        size = {u.slot: u.bytes for u in uses}
        return {
            "regions": [{"index": i, "region": n} for i, n in enumerate(self.names)],
            "slots": [
                {"slot": s, "region": self.names[i], "index": i, "bytes": size.get(s, 0)}
                for s, i in self.slots
            ],
        }


def preference(board: Board) -> list[Region]:
    """The regions a slot may go to, the preferred first: RAM other than the arena's with free
    bytes, the fastest first (the slower of its read and write bandwidths), then flash with free
    bytes, the most erase cycles first, then the faster; the board's order breaks ties."""
    rams = [r for r in board.regions if not r.is_flash and not r.arena and r.free > 0]
    flash = [r for r in board.regions if r.is_flash and r.free > 0]
    rams.sort(key=lambda r: -min(r.read_bandwidth, r.write_bandwidth))
    flash.sort(key=lambda r: (-r.endurance, -min(r.read_bandwidth, r.write_bandwidth)))
    return rams + flash


def assign(board: Board, uses: Iterable[SlotUse]) -> Placement:
    """Each slot's region: the slots with the most traffic per byte first (then the larger), each
    to the first region in ``preference`` order that still has room for it. At most
    ``MAX_REGIONS`` indices (what a Runtime holds): past the spill region, only the first
    ``MAX_REGIONS - 1`` regions in that order are used."""
    others = [r for r in preference(board) if r.name != board.spill_region][: MAX_REGIONS - 1]
    order = [r for r in preference(board) if r in others or r.name == board.spill_region]
    room = {r.name: r.free for r in order}
    where: dict[int, str] = {}
    ranked = sorted(uses, key=lambda u: (-(u.written + u.read) / max(u.bytes, 1), -u.bytes, u.slot))
    for u in ranked:
        need = slot_region_bytes(u.bytes)
        region = next((r.name for r in order if room[r.name] >= need), board.spill_region)
        if region in room:
            room[region] -= need
        where[u.slot] = region
    used = {n for n in where.values() if n != board.spill_region}
    names = (board.spill_region,) + tuple(r.name for r in board.regions if r.name in used)
    index = {n: i for i, n in enumerate(names)}
    return Placement(names, tuple(sorted((s, index[n]) for s, n in where.items())))
