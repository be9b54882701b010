"""The modelled cost of one plan on one board (boards.py): latency per inference (compute +
storage), flash bytes written per inference, and how many inferences (and years, at a rate) the
spill region lasts. One owner for these figures: ``tinyseg optimize`` prints and reports them and
benchmarks/runtime_table.py takes its compute baseline and per-operator split from here.

Compute is calibrated on one measurement: the paper's 1,199 ms per inference of the Tiny U-Net on
the Nicla Vision's 480 MHz Cortex-M7 with TFLM's reference kernels (Table 5, "+ Temp. tensor
quant."), split over the operators by MACs (a pooling, quantize or concatenation counts its output
elements). Other clocks scale it linearly; CMSIS-NN kernels divide their operators' share by
``CMSIS_NN_SPEEDUP``. Storage moves raw (uncompressed) bytes at the spill region's bandwidth, plus,
in flash, one page program per page written and one sector erase per sector's worth of bytes
written (the spill region is used as a ring); on a board with an erase worker (``Board.erase_worker``,
the Nicla Vision's M4) the spill region's erases it keeps up with are off the critical path
(``hide_erases``).
All of it is a model: no board has run it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Sequence

from ..ir.graph import Graph
from .boards import Board, Region
from .placement import Placement, Rank, SlotUse, assign

REFERENCE_MS = 1199.0  # paper Table 5: Tiny U-Net, reference kernels, Nicla Vision M7, no spilling
REFERENCE_MACS = 76_152_000  # op_macs of examples/models/tiny_unet.tflite (tests/test_cost.py)
REFERENCE_HZ = 480e6  # the Nicla Vision's M7 clock
# CMSIS-NN's own figure: "4.6X improvement in runtime/throughput" of a CNN on a Cortex-M7 over a
# baseline without its kernels (Lai, Suda, Chandra, "CMSIS-NN: Efficient Neural Network Kernels
# for Arm Cortex-M CPUs", arXiv:1801.06601, 2018). An estimate for TFLM's reference kernels as the
# baseline: not measured here.
CMSIS_NN_SPEEDUP = 4.6
SECONDS_PER_YEAR = 365.25 * 24 * 3600
# The widest figures printed: past these a wear-out is "more than" them, so that a board's extreme
# but accepted figures (boards.LIMITS, sizes.MIN_RATE) never print a 30-digit number.
MAX_YEARS_SHOWN = 1_000_000
MAX_INFERENCES_SHOWN = 10**15


def inferences_text(n: float) -> str:
    """An inference count as printed, at most MAX_INFERENCES_SHOWN."""
    return f"{n:,.0f}" if n < MAX_INFERENCES_SHOWN else f"more than {MAX_INFERENCES_SHOWN:,}"


def lifetime_text(years: float) -> str:
    """A wear-out time as printed: days under a year, years up to MAX_YEARS_SHOWN."""
    if years >= MAX_YEARS_SHOWN:
        return f"more than {MAX_YEARS_SHOWN:,} years"
    return f"{years:,.1f} years" if years >= 1 else f"{years * 365.25:,.1f} days"


# The default plan (optimize without --target) may add at most this share of the original's
# modelled latency, and write no flash: a plan a user gets without asking costs them nothing.
FREE_LATENCY_SHARE = 0.01


def op_macs(graph: Graph) -> list[int]:
    """MACs of each operator in execution order (``macs``)."""

    def shapes(ids: Sequence[int]) -> list[tuple | None]:
        return [graph.tensors[i].shape if i >= 0 else None for i in ids]

    return [macs(op.opcode, shapes(op.inputs), shapes(op.outputs)) for op in graph.operators]


def macs(opcode: str, inputs: Sequence[tuple | None], outputs: Sequence[tuple | None]) -> int:
    """MACs of one operator (or StreamChain stage) from its operands' shapes (None: omitted):
    CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and TRANSPOSE_CONV by their filters; every other
    operator counts its output elements."""
    o = math.prod(outputs[0]) if outputs and outputs[0] is not None else 0
    w = inputs[1] if len(inputs) > 1 and inputs[1] is not None else ()
    if opcode == "CONV_2D" and w:
        return o * math.prod(w[1:])  # filter [out, h, w, in]
    if opcode == "DEPTHWISE_CONV_2D" and w:
        return o * math.prod(w[1:3])  # filter [1, h, w, out]
    if opcode == "FULLY_CONNECTED" and w:
        return o * w[-1]  # weights [out, in]
    if opcode == "TRANSPOSE_CONV" and len(inputs) > 2 and inputs[2] is not None and w:
        return math.prod(inputs[2]) * math.prod(w[:3])
    return o


def accelerated_ops(kernel_set: str) -> frozenset[str]:
    """Operators the kernel set runs with CMSIS-NN (their compute share is divided by the speedup)."""
    from .kernels.profiles import FORK_KERNEL_SETS, UPSTREAM_CMSIS_NN

    if kernel_set == "cmsis-nn":
        return UPSTREAM_CMSIS_NN
    fork = FORK_KERNEL_SETS.get(kernel_set)
    if fork is not None and fork.implementation == "cmsis-nn":
        return fork.optimized_ops
    return frozenset()  # reference kernels; ESP-NN: no published factor found, reference time


@dataclass(frozen=True)
class OpCost:
    index: int
    opcode: str
    macs: int
    compute_s: float
    accelerated: bool  # CMSIS-NN's share (divided by CMSIS_NN_SPEEDUP)


def compute_rate(board: Board, kernel_set: str = "reference") -> Callable[[str, int], float]:
    """Seconds an operator of a given opcode and MAC count takes on ``board`` with ``kernel_set``
    (the calibration, scaled by the clock; CMSIS-NN's operators divided by the speedup)."""
    s_per_mac = REFERENCE_MS / 1e3 / REFERENCE_MACS * (REFERENCE_HZ / board.clock_hz)
    fast = accelerated_ops(kernel_set)
    return lambda opcode, n: n * s_per_mac / (CMSIS_NN_SPEEDUP if opcode in fast else 1)


def op_costs(graph: Graph, board: Board, kernel_set: str = "reference") -> list[OpCost]:
    """Modelled compute time of each operator of ``graph`` (the model as given, before TinySeg's
    rewrites: spills and streaming move bytes, they add no MACs; streaming's extra instructions,
    benchmarks/stream_overhead.py, are not modelled)."""
    rate = compute_rate(board, kernel_set)
    fast = accelerated_ops(kernel_set)
    return [
        OpCost(op.index, op.opcode, n, rate(op.opcode, n), op.opcode in fast)
        for op, n in zip(graph.operators, op_macs(graph))
    ]


@dataclass(frozen=True)
class Traffic:
    """Storage traffic of one inference: raw bytes written to and read from the spill region.
    ``streams``: separate write streams (each starts a page); ``reads``: read calls (each pays
    the region's read command time; 0 when not known)."""

    written: int = 0
    read: int = 0
    streams: int = 0
    reads: int = 0


@dataclass(frozen=True)
class RegionCost:
    """What one inference's traffic costs in one region."""

    region: str
    kind: str
    bytes_written: int
    bytes_read: int
    read_s: float  # transfer + read commands
    write_s: float  # transfer + page programs (flash) on the critical path
    erase_s: float  # sector erases per inference x erase time (0 for RAM)
    erases_per_inference: float
    inferences_to_wearout: float | None  # None: no wear (RAM, or nothing written)
    years_to_wearout: float | None  # at the cost's rate
    # The region's free bytes: every slot is written once per inference and each holds a whole
    # tensor (before compression), so the bytes written are what the slots hold together.
    free: int | None = None
    erase_hidden_s: float = 0.0  # of erase_s, what the board's erase worker hides (hide_erases)

    @property
    def overfull(self) -> bool:
        return self.free is not None and self.bytes_written > self.free

    @property
    def erase_blocks(self) -> bool:
        """Whether some of its erases are on the critical path."""
        return self.erase_s > self.erase_hidden_s

    @property
    def storage_s(self) -> float:
        return self.read_s + self.write_s + self.erase_s - self.erase_hidden_s


@dataclass(frozen=True)
class EraseWorker:
    """What a board's erase worker (a second core erasing the spill region's sectors ahead of the
    writes) must sustain per inference: ``erase_s`` of sector erases in the ``window_s`` it has
    (all of the inference but the CPU's own reads and programs of that region, which keep the part
    busy). It hides ``hidden_s``; the rest the writes wait for."""

    erase_s: float
    window_s: float
    hidden_s: float

    @property
    def load(self) -> float:
        """The erases over the time it has: above 1, the worker does not keep up."""
        return self.erase_s / self.window_s if self.window_s > 0 else math.inf

    @property
    def blocking_s(self) -> float:
        return self.erase_s - self.hidden_s

    def as_dict(self) -> dict:
        return {
            "erase_ms": round(self.erase_s * 1e3, 3),
            "window_ms": round(self.window_s * 1e3, 3),
            "hidden_ms": round(self.hidden_s * 1e3, 3),
            "load": None if math.isinf(self.load) else round(self.load, 4),
        }


@dataclass(frozen=True)
class Cost:
    """The modelled figures of one plan on one board (seconds, bytes, per inference)."""

    board: str
    kernel_set: str
    rate: float  # inferences per second the wear-out years assume
    compute_s: float
    storage_s: float
    latency_s: float  # compute_s + storage_s
    flash_bytes_written: int  # per inference, summed over the flash regions
    regions: tuple[RegionCost, ...]  # the regions the plan moves bytes through
    ops: tuple[OpCost, ...]
    placement: Placement | None = None  # which region holds each slot (None: all in one region)
    uses: tuple[SlotUse, ...] = ()  # the plan's slots
    worker: EraseWorker | None = None  # the board's erase worker, when the plan erases any sector
    no_dma: tuple[str, ...] = ()  # the board's regions DMA masters do not reach

    @property
    def wearout_years(self) -> float | None:
        """The first flash region to wear out, in years at ``rate``; None when nothing wears."""
        years = [r.years_to_wearout for r in self.regions if r.years_to_wearout is not None]
        return min(years) if years else None

    @property
    def wearout_inferences(self) -> float | None:
        n = [r.inferences_to_wearout for r in self.regions if r.inferences_to_wearout is not None]
        return min(n) if n else None

    def warnings(self) -> list[str]:
        """One line per region the plan's slots do not fit (uncompressed), and per flash region
        that wears out in under a year at ``rate``."""
        full = [
            f"warning: the plan's slots hold {r.bytes_written:,} B (uncompressed) in {self.board} "
            f"'{r.region}', which has {r.free:,} B free: give a higher --target, or a board whose "
            "spill region has room (--board FILE)"
            for r in self.regions
            if r.overfull
        ]
        return (
            full
            + self._dma_warnings()
            + [
                f"warning: {self.board} '{r.region}' wears out after "
                f"{inferences_text(r.inferences_to_wearout)} inferences, "
                f"{lifetime_text(r.years_to_wearout)} at {self.rate:g} inference/s: "
                "lower --rate, spill to another region (--board FILE) or give a higher --target"
                for r in self.regions
                if r.years_to_wearout is not None and r.years_to_wearout < 1.0
            ]
        )

    def _dma_warnings(self) -> list[str]:
        """A slot a DMA master moves in a region DMA does not reach: only when no region DMA
        reaches had room for it (memory/placement.py then leaves it in the spill region)."""
        if self.placement is None:
            return []
        return [
            f"warning: slot {u.slot} is moved by DMA but sits in {self.board} "
            f"'{self.placement.region_of(u.slot)}', which DMA does not reach: give a board whose "
            "regions DMA reaches have room (--board FILE)"
            for u in self.uses
            if u.dma and self.placement.region_of(u.slot) in self.no_dma
        ]

    def as_dict(self) -> dict:
        """The ``cost`` key of the optimize report (docs/analysis_json.md)."""
        return {
            "board": self.board,
            "kernel_set": self.kernel_set,
            "rate_per_second": self.rate,
            "latency_ms": round(self.latency_s * 1e3, 3),
            "compute_ms": round(self.compute_s * 1e3, 3),
            "storage_ms": round(self.storage_s * 1e3, 3),
            "flash_bytes_written_per_inference": self.flash_bytes_written,
            "wearout_inferences": None
            if self.wearout_inferences is None
            else round(self.wearout_inferences),
            "wearout_years": None if self.wearout_years is None else round(self.wearout_years, 3),
            "regions": [
                {
                    "region": r.region,
                    "kind": r.kind,
                    "bytes_written": r.bytes_written,
                    "bytes_read": r.bytes_read,
                    "read_ms": round(r.read_s * 1e3, 3),
                    "write_ms": round(r.write_s * 1e3, 3),
                    "erase_ms": round(r.erase_s * 1e3, 3),
                    "erase_hidden_ms": round(r.erase_hidden_s * 1e3, 3),
                    "erase_blocks": r.erase_blocks,
                    "erases_per_inference": round(r.erases_per_inference, 4),
                    "wearout_inferences": None
                    if r.inferences_to_wearout is None
                    else round(r.inferences_to_wearout),
                    "wearout_years": None
                    if r.years_to_wearout is None
                    else round(r.years_to_wearout, 3),
                }
                for r in self.regions
            ],
            "erase_worker": None if self.worker is None else self.worker.as_dict(),
        } | ({} if self.placement is None else {"placement": self.placement.as_dict(self.uses)})


def region_cost(region: Region, traffic: Traffic, rate: float = 1.0) -> RegionCost:
    """One inference's traffic in one region. Flash: every written byte is programmed once (pages
    rounded up per write stream), and in steady state each ``sector_size`` bytes written cost one
    sector erase; the free part of the region is a ring, so each sector wears at the same pace.
    Every erase is on the critical path here; ``hide_erases`` takes off what a worker hides."""
    w, r = traffic.written, traffic.read
    read_s = r / region.read_bandwidth + traffic.reads * region.read_command_time
    write_s = w / region.write_bandwidth
    if not region.is_flash:
        return RegionCost(
            region.name, region.kind, w, r, read_s, write_s, 0.0, 0.0, None, None, region.free
        )
    streams = max(traffic.streams, 1) if w else 0
    pages = math.ceil(w / region.page_size) + (streams - 1 if streams else 0)
    write_s += pages * (region.page_program_time + region.program_command_time)
    erases = w / region.sector_size
    wear = years = None
    if erases:
        wear = (region.free // region.sector_size) * region.endurance / erases
        years = wear / rate / SECONDS_PER_YEAR
    return RegionCost(
        region.name,
        region.kind,
        w,
        r,
        read_s,
        write_s,
        erases * region.sector_erase_time,
        erases,
        wear,
        years,
        region.free,
    )


def hide_erases(
    board: Board, regions: Sequence[RegionCost], compute_s: float
) -> tuple[tuple[RegionCost, ...], EraseWorker | None]:
    """The regions' costs with the erases ``board``'s erase worker hides taken off the critical
    path, and what the worker must sustain (None: no worker, or nothing for it to erase). The
    worker erases the spill region, the flash storage both cores attach (examples/nicla_vision:
    the M4 sketch erases the one storage the M7 sketch spills to); other regions' erases stay on
    the critical path. It erases while the CPU does anything but program or read that region
    (the compute and every other region's time); what it cannot erase in that window the writes
    wait for. So the inference takes max(compute + storage without the spill region's erases,
    the spill region's reads, programs and erases)."""
    mine = next((r for r in regions if r.region == board.spill_region and r.erase_s), None)
    if not board.erase_worker or mine is None:
        return tuple(regions), None
    window = compute_s + sum(r.storage_s for r in regions if r is not mine)
    hidden = min(mine.erase_s, window)
    hid = tuple(replace(r, erase_hidden_s=hidden) if r is mine else r for r in regions)
    return hid, EraseWorker(mine.erase_s, window, hidden)


def placed_traffic(
    board: Board, uses: Sequence[SlotUse], placement: Placement
) -> list[tuple[Region, Traffic]]:
    """Each region's share of the plan's traffic, in index order (``placement``: which region
    holds each slot). Write streams: each Spill one, the row spills one together."""
    out = []
    for i, name in enumerate(placement.names):
        mine = [u for u in uses if placement.index_of(u.slot) == i]
        w, r = sum(u.written for u in mine), sum(u.read for u in mine)
        if not (w or r):
            continue
        n = sum(1 for u in mine if not u.row) + any(u.row and u.written for u in mine)
        out.append((board.region(name), Traffic(w, r, n)))
    return out


def placed_costs(
    board: Board,
    uses: Sequence[SlotUse],
    placement: Placement,
    compute_s: float,
    rate: float = 1.0,
) -> tuple[tuple[RegionCost, ...], EraseWorker | None]:
    """The one price of a plan's slots placed on ``board``: each region's cost, the erase worker's
    share taken off (``hide_erases``)."""
    costs = [region_cost(r, t, rate) for r, t in placed_traffic(board, uses, placement)]
    return hide_erases(board, costs, compute_s)


def storage_time(
    board: Board,
    uses: Sequence[SlotUse],
    placement: Placement | None = None,
    compute_s: float = 0.0,
) -> float:
    """Seconds a plan's slots add to one inference (``placed_costs``), placed by ``placement``,
    else where memory/placement.py puts them: what the search's objective and the placement
    rank plans by."""
    p = placement if placement is not None else place(board, uses, compute_s)
    return sum(r.storage_s for r in placed_costs(board, uses, p, compute_s)[0])


def wearout(board: Board, uses: Sequence[SlotUse], placement: Placement) -> float:
    """Inferences until the first flash region ``placement`` writes to wears out (``region_cost``;
    infinite when no slot writes flash): what the placement keeps as long as it can."""
    n = [
        c.inferences_to_wearout
        for r, t in placed_traffic(board, uses, placement)
        if (c := region_cost(r, t)).inferences_to_wearout is not None
    ]
    return min(n, default=math.inf)


def placement_rank(board: Board, compute_s: float = 0.0) -> Rank:
    """How memory/placement.py ranks a placement of slots on ``board``: the later flash wear-out
    first (a placement never trades the flash's life for time: a slot moved from the spill region
    to a flash region of fewer erase cycles, the one that holds the firmware on most boards, would
    save milliseconds and wear it out in days), then the modelled storage time (``compute_s``, the
    inference's compute, is when an erase worker erases), then the flash bytes written."""

    def rank(uses: Sequence[SlotUse], p: Placement) -> tuple:
        flash = sum(u.written for u in uses if board.region(p.region_of(u.slot)).is_flash)
        return (-wearout(board, uses, p), storage_time(board, uses, p, compute_s), flash)

    return rank


def place(board: Board, uses: Sequence[SlotUse], compute_s: float = 0.0) -> Placement:
    """Each slot's region on ``board`` (memory/placement.py ``assign``, ranked by
    ``placement_rank``)."""
    return _place(board, tuple(uses), compute_s)


@lru_cache(maxsize=4096)
def _place(board: Board, uses: tuple[SlotUse, ...], compute_s: float) -> Placement:
    return assign(board, uses, placement_rank(board, compute_s))


def compute_seconds(graph: Graph, board: Board, kernel_set: str = "reference") -> float:
    """Modelled compute of one inference of ``graph`` (``op_costs``, summed)."""
    return sum(o.compute_s for o in op_costs(graph, board, kernel_set))


def estimate(
    graph: Graph,
    traffic: Traffic,
    board: Board,
    kernel_set: str = "reference",
    rate: float = 1.0,
    region: str | None = None,
    uses: Sequence[SlotUse] = (),
) -> Cost:
    """The modelled cost of running ``graph`` (the model before TinySeg's rewrites: its operators
    give the compute) with ``traffic`` through ``region`` (default: the board's spill region).
    ``uses``: the plan's slots; given (and no ``region``), each slot's traffic is priced in the
    region memory/placement.py assigns it (RAM: copies at its bandwidth, no wear; flash: as one
    region's), and ``traffic`` is not used. A board's erase worker hides erases (``hide_erases``)."""
    ops = tuple(op_costs(graph, board, kernel_set))
    compute = sum(o.compute_s for o in ops)
    placement = None
    if uses and region is None:
        placement = place(board, uses, compute)
        regions, worker = placed_costs(board, uses, placement, compute, rate)
    else:
        spill = board.region(region) if region is not None else board.spill
        rc = region_cost(spill, traffic, rate)
        regions, worker = hide_erases(
            board, (rc,) if traffic.written or traffic.read else (), compute
        )
    storage = sum(x.storage_s for x in regions)
    flash = sum(x.bytes_written for x in regions if x.kind == "flash")
    no_dma = tuple(r.name for r in board.regions if not r.dma)
    return Cost(
        board.name,
        kernel_set,
        rate,
        compute,
        storage,
        compute + storage,
        flash,
        regions,
        ops,
        placement,
        tuple(uses),
        worker,
        no_dma,
    )


def costs_nothing(
    graph: Graph, board: Board, kernel_set: str = "reference"
) -> Callable[[Sequence[SlotUse]], bool]:
    """Whether a plan's slots (placed as ``estimate`` places them) write no flash and add at most
    ``FREE_LATENCY_SHARE`` of ``graph``'s modelled compute: the test the default plan passes."""
    compute = compute_seconds(graph, board, kernel_set)
    allowed = FREE_LATENCY_SHARE * compute

    def free(uses: Sequence[SlotUse]) -> bool:
        p = place(board, uses, compute)
        regions, _ = placed_costs(board, uses, p, compute)
        if any(r.kind == "flash" and r.bytes_written for r in regions):
            return False
        return sum(r.storage_s for r in regions) <= allowed

    return free


def summary_lines(cost: Cost) -> list[str]:
    """The lines ``tinyseg optimize`` prints under its table (warnings() go to stderr)."""
    parts = [
        f"board {cost.board}: modelled {cost.latency_s * 1e3:,.1f} ms per inference "
        f"(compute {cost.compute_s * 1e3:,.1f} ms, storage {cost.storage_s * 1e3:,.1f} ms)"
    ]
    for r in cost.regions:
        line = f"  {r.region}: {r.bytes_written:,} B written, {r.bytes_read:,} B read per inference"
        if r.inferences_to_wearout is not None:
            when = lifetime_text(r.years_to_wearout)
            count = inferences_text(r.inferences_to_wearout)
            line += f"; wears out after {count} inferences ({when} at {cost.rate:g}/s)"
        parts.append(line)
    w = cost.worker
    if w is not None:
        parts.append(
            f"  erase worker: hides {w.hidden_s * 1e3:,.1f} ms of {w.erase_s * 1e3:,.1f} ms of "
            f"sector erases per inference (load {w.load:.0%} of the {w.window_s * 1e3:,.1f} ms "
            "it has"
            + ("" if w.load <= 1 else f"; {w.blocking_s * 1e3:,.1f} ms on the critical path")
            + ")"
        )
    p = cost.placement
    if p is not None and len(p.names) > 1:  # more than the spill region: say where each slot is
        size = {u.slot: u.bytes for u in cost.uses}
        parts.append(
            "  slots: "
            + ", ".join(f"{s} in {p.names[i]} ({size.get(s, 0):,} B)" for s, i in p.slots)
        )
        # Only the indices a slot uses: region 0 (the spill region) keeps its index when no slot
        # is there, and then the application attaches nothing at 0 (the header agrees).
        used = sorted({i for _, i in p.slots})
        parts.append(
            "  storage regions the application attaches: "
            + ", ".join(f"{i} = {p.names[i]}" for i in used)
        )
    return parts
