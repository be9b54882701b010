"""Which board region holds each storage slot of a plan: the one owner of that choice.

The regions a slot may go to (``preference``) are the board's RAM regions other than the arena's
and its flash regions, each with free bytes; of the ways to share the slots among them, ``assign``
keeps the one whose flash wears out last (no flash written: never), then whose storage traffic
costs the least modelled time (memory/cost.py
``storage_time``, the one price: copies, page programs, and the erases the board's erase worker
does not hide), then the fewer flash bytes written, then the earlier regions in ``preference``
order. Every way is tried while there are at most ``EXACT_WAYS``; past that, the slots that move
the most bytes choose first, each the region that adds the least time.

Capacity: a slot is written once per inference and the Runtime keeps every slot of a region until
it is fetched, so the simplest rule that is always right holds: the bytes the device needs for
the slots a region holds (``slot_region_bytes``, the one count the storage header sizes its
regions by too), summed, fit its free bytes. A slot no region has room for stays in the spill
region (the cost model then warns that it is overfull). DMA: a slot a DMA master moves
(``SlotUse.dma``) never goes to a region DMA masters do not reach (``Region.dma``).

Region indices, as the written model's options carry them (contract/customops.py ``region``):
0 is the board's ``spill_region`` (so a one-region plan carries no ``region`` key); 1, 2, ... are
the other regions the plan uses, in the board's listing order. The application attaches one
SpillManager per index (``Placement.names``)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Callable, Iterable, Sequence

from ..contract.customops import MAX_REGIONS, SECTOR_BYTES, slot_region_bytes  # noqa: F401
from .boards import Board, Region

# The most placements ``assign`` prices one by one (regions ** slots): 5 slots over 3 regions
# (the Tiny U-Net's streamed plan on the Nicla Vision) are 243 ways
EXACT_WAYS = 1024


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
    # A DMA master moves its bytes: it never goes to a region with ``dma`` false. The plans
    # optimize writes have none (docs/boards.md, "DMA"): RamBlockDevice copies a RAM region's
    # slots with the CPU, and a flash driver moves a slot's bytes to and from the arena
    dma: bool = False


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
    """The regions a slot may go to, in the order that breaks ties between equal times: RAM other
    than the arena's with free bytes, the fastest first (the slower of its read and write
    bandwidths), then flash with free bytes, the most erase cycles first, then the faster; the
    board's order breaks ties. At most ``MAX_REGIONS`` indices (what a Runtime holds): past the
    spill region, only the first ``MAX_REGIONS - 1`` of them."""
    rams = [r for r in board.regions if not r.is_flash and not r.arena and r.free > 0]
    flash = [r for r in board.regions if r.is_flash and r.free > 0]
    rams.sort(key=lambda r: -min(r.read_bandwidth, r.write_bandwidth))
    flash.sort(key=lambda r: (-r.endurance, -min(r.read_bandwidth, r.write_bandwidth)))
    ordered = rams + flash
    others = [r for r in ordered if r.name != board.spill_region][: MAX_REGIONS - 1]
    return [r for r in ordered if r in others or r.name == board.spill_region]


def _table(board: Board, where: dict[int, str]) -> Placement:
    """The index table of slot -> region name ``where``: the spill region first, then board order."""
    used = {n for n in where.values() if n != board.spill_region}
    names = (board.spill_region,) + tuple(r.name for r in board.regions if r.name in used)
    index = {n: i for i, n in enumerate(names)}
    return Placement(names, tuple(sorted((s, index[n]) for s, n in where.items())))


def _fits(board: Board, uses: Sequence[SlotUse], regions: Sequence[Region]) -> bool:
    """Whether each region of ``regions`` (one per slot of ``uses``) holds its slots and, for a
    DMA-moved slot, is reached by DMA."""
    held: dict[str, int] = {}
    for u, r in zip(uses, regions):
        if u.dma and not r.dma:
            return False
        held[r.name] = held.get(r.name, 0) + slot_region_bytes(u.bytes)
    return all(n <= board.region(name).free for name, n in held.items())


# A placement's rank, lower is better (memory/cost.py ``placement_rank``: the one price): the
# slots it places and their regions' index table.
Rank = Callable[[Sequence[SlotUse], Placement], tuple]


def assign(board: Board, uses: Iterable[SlotUse], rank: Rank) -> Placement:
    """Each slot's region: the placement of least ``rank`` (memory/cost.py prices it), then the
    earlier regions in ``preference`` order."""
    uses = tuple(uses)
    order = preference(board)
    homeless = {
        u.slot: board.spill_region for u in uses if not any(_fits(board, [u], [r]) for r in order)
    }
    placed = [u for u in uses if u.slot not in homeless]
    price = _pricer(board, uses, order, rank)
    if len(order) ** len(placed) <= EXACT_WAYS:
        ways = (
            {u.slot: r.name for u, r in zip(placed, rs)}
            for rs in product(order, repeat=len(placed))
            if _fits(board, placed, rs)
        )
        best = min(ways, key=lambda w: price(w | homeless), default=None)
        if best is not None:
            return _table(board, best | homeless)
    return _table(board, _greedy(board, placed, order, price, homeless))


Price = Callable[[dict[int, str]], tuple]  # a slot -> region name map's rank (``_pricer``)


def _pricer(board: Board, uses: Sequence[SlotUse], order: Sequence[Region], rank: Rank) -> Price:
    """The rank of a (partial) slot -> region name map: ``rank`` of the slots it places, then
    their regions' places in ``order``."""
    place = {r.name: k for k, r in enumerate(order)}

    def price(where: dict[int, str]) -> tuple:
        mine = [u for u in uses if u.slot in where]
        ties = tuple(place.get(where[u.slot], len(order)) for u in mine)
        return rank(mine, _table(board, where)) + (ties,)

    return price


def _greedy(
    board: Board,
    placed: Sequence[SlotUse],
    order: Sequence[Region],
    price: Price,
    fixed: dict[int, str],
) -> dict[int, str]:
    """Too many ways to try each: the slots moving the most bytes first (then the larger), each
    to the region with room that, with the slots placed before it, costs the least; the spill
    region when none has room left."""
    where: dict[int, str] = {}
    done: list[SlotUse] = []
    for u in sorted(placed, key=lambda u: (-(u.written + u.read), -u.bytes, u.slot)):
        held = [board.region(where[d.slot]) for d in done]
        room = [r for r in order if _fits(board, done + [u], held + [r])]
        if not room:
            fixed = fixed | {u.slot: board.spill_region}
            continue
        where[u.slot] = min(room, key=lambda r: price(where | {u.slot: r.name} | fixed)).name
        done.append(u)
    return where | fixed
