"""What a written plan takes of the board, region by region, and what each operator of the written
model costs: the memory report of ``tinyseg optimize`` (the table under its board lines,
``--report``'s ``memory`` and ``operators`` keys, ``--csv``'s regions.csv and operators.csv, the
lanes of ``--plot``).

One owner for these figures, so the table, the report and the CSV files cannot disagree. The
region figures are the ones placement checks (memory/placement.py): a slot takes
``slot_region_bytes`` of its region, and ``Region.free`` leaves out ``used`` and ``reserve``. The
operator figures split the cost model's totals (memory/cost.py): compute by each operator's MACs
(a StreamChain's by its stages'), storage time by the bytes each operator moves in each region
(``op_traffic``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..contract import customops
from ..contract.customops import slot_region_bytes
from ..ir.graph import Graph, Operator
from .boards import Board
from .cost import Cost, compute_rate, macs
from .placement import Placement, SlotUse


@dataclass(frozen=True)
class RegionUse:
    """One region of the board with the plan on it (bytes). ``used``: the board's figure for what
    the firmware, the other core or the bootloader take; ``reserve``: what the board file keeps
    for the application; ``arena``: the head (StreamChain rings included) and the tail estimate,
    in the arena region only; ``slots``: the device bytes of the storage slots placed here."""

    region: str
    kind: str
    capacity: int
    used: int
    reserve: int
    arena: int
    slots: int

    @property
    def free_after(self) -> int:
        """What is left with the plan in place; negative when the plan does not fit."""
        return self.capacity - self.used - self.reserve - self.arena - self.slots

    @property
    def fits(self) -> bool:
        return self.free_after >= 0

    def as_dict(self) -> dict:
        return {
            "region": self.region,
            "kind": self.kind,
            "capacity": self.capacity,
            "used": self.used,
            "reserve": self.reserve,
            "arena": self.arena,
            "slots": self.slots,
            "free_after": self.free_after,
            "fits": self.fits,
        }


def region_usage(
    board: Board,
    head: int,
    tail: int,
    placement: Placement | None,
    uses: Sequence[SlotUse],
) -> list[RegionUse]:
    """Each region of ``board`` with a plan of arena ``head`` + ``tail`` and slots ``uses`` placed
    by ``placement`` (None: every slot in the spill region), in the board's order."""
    held: dict[str, int] = {}
    for u in uses:
        name = board.spill_region if placement is None else placement.region_of(u.slot)
        held[name] = held.get(name, 0) + slot_region_bytes(u.bytes)
    return [
        RegionUse(
            r.name,
            r.kind,
            r.capacity,
            r.used,
            r.reserve,
            head + tail if r.arena else 0,
            held.get(r.name, 0),
        )
        for r in board.regions
    ]


@dataclass(frozen=True)
class ModelBytes:
    """The model file before and after the rewrite, and the bytes of its constant buffers
    (weights, biases, metadata), which the application keeps in flash. The code TinySeg's kernels
    add to the firmware is not counted: it is measured for no board."""

    before: int
    after: int
    weights_before: int
    weights_after: int

    def as_dict(self) -> dict:
        return {
            "bytes_before": self.before,
            "bytes_after": self.after,
            "weights_before": self.weights_before,
            "weights_after": self.weights_after,
        }


def weight_bytes(graph: Graph) -> int:
    """Bytes of the model's buffers that hold data."""
    return sum(len(b.data) for b in graph.model.buffers or () if b.data is not None)


@dataclass(frozen=True)
class OpTime:
    """The modelled time of one operator of the written model. ``name``: its first output's
    tensor name (its input's for a Spill, which has none); ``stages``: a StreamChain's stages,
    each with its modelled compute."""

    index: int
    opcode: str
    name: str
    compute_s: float
    storage_s: float
    stages: tuple[tuple[str, float], ...] = ()

    def as_dict(self) -> dict:
        return {
            "index": self.index,
            "opcode": self.opcode,
            "name": self.name,
            "compute_ms": round(self.compute_s * 1e3, 3),
            "storage_ms": round(self.storage_s * 1e3, 3),
            "stages": [{"op": op, "compute_ms": round(s * 1e3, 3)} for op, s in self.stages],
        }


def _chain_stages(graph: Graph, op: Operator, o: customops.StreamChainOptions) -> list:
    """Each stage's opcode and MACs, its operands' shapes resolved through the chain's local ids
    (the StreamChain's inputs, then its outputs, then its body's tensors)."""
    shapes = [graph.tensors[i].shape if i >= 0 else None for i in op.inputs + op.outputs]
    shapes += [t.shape for t in o.tensors]

    def shape(i: int) -> tuple | None:
        return shapes[i] if 0 <= i < len(shapes) else None

    return [
        (s.op, macs(s.op, [shape(i) for i in s.inputs], [shape(i) for i in s.outputs]))
        for s in o.stages
    ]


def _fetching_conv_macs(graph: Graph, op: Operator, o: customops.FetchingConv2DOptions) -> int:
    """A FetchingConv2D computes a concatenation (its operands' elements, the fetched ones
    included) and the convolution over it."""
    shape = [graph.tensors[i].shape if i >= 0 else None for i in op.inputs]
    out = [graph.tensors[i].shape for i in op.outputs]
    held = o.fetching.operands - len(o.fetching.fetched)  # the operands that are inputs
    joined = sum(macs("", [], [s]) for s in shape[:held]) + sum(
        macs("", [], [f.shape]) for f in o.fetching.fetched
    )
    return joined + macs("CONV_2D", [None] + shape[held:], out)


def op_compute(graph: Graph, board: Board, kernel_set: str) -> list[OpTime]:
    """Each operator's modelled compute (memory/cost.py's rate per MAC): a StreamChain's stages
    each as the operator it stands for, a Fetching of several operands its concatenation, a Spill
    and a Fetching of one operand (a copy back from storage) none."""
    rate = compute_rate(board, kernel_set)
    out = []
    for op in graph.operators:
        stages: tuple[tuple[str, float], ...] = ()
        if op.opcode == customops.STREAM_CHAIN:
            o = customops.decode(op, graph.memo.decoded)
            stages = tuple((n, rate(n, m)) for n, m in _chain_stages(graph, op, o))
            seconds = sum(s for _, s in stages)
        elif op.opcode == customops.SPILL or (
            op.opcode == customops.FETCHING
            and customops.decode(op, graph.memo.decoded).operands == 1
        ):  # moves bytes: what it costs is storage time
            seconds = 0.0
        elif op.opcode == customops.FETCHING_CONV_2D:
            o = customops.decode(op, graph.memo.decoded)
            seconds = rate("CONV_2D", _fetching_conv_macs(graph, op, o))
        else:
            shape = [graph.tensors[i].shape if i >= 0 else None for i in op.inputs]
            out_shape = [graph.tensors[i].shape for i in op.outputs]
            seconds = rate(op.opcode, macs(op.opcode, shape, out_shape))
        first = op.outputs[0] if op.outputs else (op.inputs[0] if op.inputs else -1)
        name = graph.tensors[first].name if first >= 0 else ""
        out.append(OpTime(op.index, op.opcode, name, seconds, 0.0, stages))
    return out


def op_slots(graph: Graph) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """The storage slots each TinySeg operator writes and reads: a Spill writes its slot, a
    Fetching or FetchingConv2D reads its fetched operands' slots, a StreamChain writes its row
    spills' and reads its row fetches' slots."""
    out = {}
    for op in graph.operators:
        if not customops.is_tinyseg_op(op):
            continue
        o = customops.decode(op, graph.memo.decoded)
        if isinstance(o, customops.SpillOptions):
            out[op.index] = ((o.slot,), ())
        elif isinstance(o, customops.StreamChainOptions):
            out[op.index] = (tuple(s for _, s in o.spill), tuple(s for _, s in o.fetch))
        else:
            fetching = o.fetching if isinstance(o, customops.FetchingConv2DOptions) else o
            out[op.index] = ((), tuple(f.slot for f in fetching.fetched))
    return out


@dataclass(frozen=True)
class OpTraffic:
    """The bytes one operator of the written model writes to and reads from one board region per
    inference (a slot read by several operators: its reads shared evenly among them)."""

    index: int
    region: str
    written: float
    read: float


def op_traffic(graph: Graph, cost: Cost, board: Board) -> list[OpTraffic]:
    """Each operator's storage traffic by region, in operator then region order: a Spill or a
    StreamChain's row spills write their slots' bytes, each reader of a slot reads its share. The
    bytes of a region sum to the cost's bytes written to and read from it."""
    slots = op_slots(graph)
    use = {u.slot: u for u in cost.uses}
    readers: dict[int, int] = {}
    for _, read in slots.values():
        for s in read:
            readers[s] = readers.get(s, 0) + 1
    where = cost.placement.region_of if cost.placement is not None else lambda s: board.spill_region
    out = []
    for index in sorted(slots):
        written, read = slots[index]
        moved: dict[str, list[float]] = {}
        for s in (s for s in written if s in use):
            moved.setdefault(where(s), [0.0, 0.0])[0] += use[s].written
        for s in (s for s in read if s in use):
            moved.setdefault(where(s), [0.0, 0.0])[1] += use[s].read / readers[s]
        out += [OpTraffic(index, r, w, rd) for r, (w, rd) in moved.items() if w or rd]
    return out


def op_times(graph: Graph, cost: Cost, board: Board, kernel_set: str) -> list[OpTime]:
    """Each operator's modelled compute and storage time. A region's write time (copies, page
    programs and the erases on the critical path) goes to the operators that write its slots, by
    bytes written; its read time to those that read them, by bytes read (``op_traffic``)."""
    region = {r.region: r for r in cost.regions}
    storage: dict[int, float] = {}
    for t in op_traffic(graph, cost, board):
        r = region.get(t.region)
        if r is None:
            continue
        s = 0.0
        if r.bytes_written:
            s += (r.write_s + r.erase_s - r.erase_hidden_s) * t.written / r.bytes_written
        if r.bytes_read:
            s += r.read_s * t.read / r.bytes_read
        storage[t.index] = storage.get(t.index, 0.0) + s
    return [
        OpTime(t.index, t.opcode, t.name, t.compute_s, storage.get(t.index, 0.0), t.stages)
        for t in op_compute(graph, board, kernel_set)
    ]
