"""Slot -> region placement (memory/placement.py), its encoding in the written model
(transforms/passes/regions.py) and its price in the cost model, on the presets and on the
bundled Tiny U-Net."""

from __future__ import annotations

import pytest
from conftest import TINY_UNET

from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.modelio import model_to_bytes
from tinyseg_plugin.memory.boards import load_board
from tinyseg_plugin.memory.cost import place
from tinyseg_plugin.memory.placement import (
    EXACT_WAYS,
    Placement,
    SlotUse,
    preference,
    slot_region_bytes,
)
from tinyseg_plugin.pipeline import Run, load, optimize
from tinyseg_plugin.transforms.optimizer import Options


def _use(slot: int, n: int) -> SlotUse:
    return SlotUse(slot, n, n, n)


def test_nicla_places_each_slot_where_it_costs_least_time() -> None:
    """The regions a slot may go to are the free RAM and the flash with free bytes; of the ways to
    share the slots among them, the least modelled time wins (memory/cost.py), within each
    region's free bytes."""
    b = load_board("nicla-vision")
    assert [r.name for r in preference(b)] == ["dtcm", "qspi", "internal-flash"]
    qspi = b.region("qspi").free
    uses = [
        _use(0, 110_000),  # the DTCM holds it: RAM copies cost least
        _use(1, 1_000_000),  # only the QSPI holds it
        _use(2, 500_000),  # too large for the DTCM, and the QSPI is full: internal flash
        _use(3, 50),  # still fits the DTCM's last sectors
        _use(4, qspi + 1),  # no region has room for it: the spill region (cost warns)
    ]
    p = place(b, uses)
    assert p.names == ("qspi", "dtcm", "internal-flash")  # 0 = spill region, then board order
    assert [p.region_of(u.slot) for u in uses] == ["dtcm", "qspi", "internal-flash", "dtcm", "qspi"]
    for name in ("dtcm", "qspi", "internal-flash"):  # capacity: what a region holds fits it
        held = sum(slot_region_bytes(u.bytes) for u in uses[:4] if p.region_of(u.slot) == name)
        assert held <= b.region(name).free


def _two_flashes(fast_endurance: int):
    """A board with two flash regions of one size: ``slow`` (the spill region, listed first,
    10^6 erase cycles) and ``fast`` (erases 50 times quicker)."""
    from tinyseg_plugin.memory.boards import board_from_dict

    arena = {"name": "sram", "kind": "ram", "capacity": 10**6, "read_bandwidth": 1e9,
             "write_bandwidth": 1e9}  # fmt: skip
    flash = {"kind": "flash", "capacity": 1 << 20, "read_bandwidth": 20e6, "write_bandwidth": 5e6,
             "page_size": 256, "sector_size": 4096, "page_program_time": 640e-6}  # fmt: skip
    slow = {**flash, "name": "slow", "sector_erase_time": 0.5, "endurance": 10**6}
    fast = {**flash, "name": "fast", "sector_erase_time": 0.01, "endurance": fast_endurance}
    return board_from_dict({"region": [arena, slow, fast], "spill_region": "slow"}, "two.json")


def test_placement_prefers_the_region_of_lower_modelled_time() -> None:
    """Two flash regions that wear out together, the faster one listed last: a slot goes to the
    one whose programs, reads and erases cost less, whatever the listing order."""
    from tinyseg_plugin.memory.cost import storage_time

    b = _two_flashes(10**6)
    uses = [_use(0, 20_000)]
    p = place(b, uses)
    assert p.region_of(0) == "fast"
    others = Placement(("slow",), ((0, 0),))
    assert storage_time(b, uses, p) < storage_time(b, uses, others)


def test_placement_never_trades_flash_life_for_time() -> None:
    """The faster flash has a thousandth of the erase cycles: the slot stays where the flash
    lasts, though the other region would cost less time."""
    from tinyseg_plugin.memory.cost import storage_time, wearout

    b = _two_flashes(1000)
    uses = [_use(0, 20_000)]
    p = place(b, uses)
    assert p.region_of(0) == "slow"
    there = Placement(("slow", "fast"), ((0, 1),))
    assert storage_time(b, uses, there) < storage_time(b, uses, p)
    assert wearout(b, uses, there) < wearout(b, uses, p)


def test_a_dma_target_never_goes_to_a_region_dma_cannot_reach() -> None:
    """The Nicla Vision's DTCM (only the CPU and the MDMA reach it): a slot a DMA master moves
    goes to flash even though the DTCM would cost less; the same slot moved by the CPU goes to
    the DTCM."""
    b = load_board("nicla-vision")
    assert not b.region("dtcm").dma
    assert all(r.dma for r in b.regions if r.name != "dtcm")
    cpu = place(b, [_use(0, 40_000)])
    assert cpu.region_of(0) == "dtcm"
    dma = [SlotUse(0, 40_000, 40_000, 40_000, dma=True), _use(1, 40_000)]
    p = place(b, dma)
    assert p.region_of(0) != "dtcm" and b.region(p.region_of(0)).dma
    assert p.region_of(1) == "dtcm"
    many = [SlotUse(k, 9_000, 9_000, 9_000, dma=k % 2 == 0) for k in range(8)]
    p = place(b, many)  # more ways than EXACT_WAYS: the greedy walk keeps the rule too
    assert len(preference(b)) ** len(many) > EXACT_WAYS
    assert all(b.region(p.region_of(u.slot)).dma for u in many if u.dma)
    assert any(p.region_of(u.slot) == "dtcm" for u in many if not u.dma)


def test_no_dma_region_left_keeps_a_dma_target_in_the_spill_region_and_warns() -> None:
    """A board whose only free region besides the spill region DMA does not reach."""
    from dataclasses import replace

    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.memory.cost import Traffic, estimate

    b = load_board("nicla-vision")
    b = replace(b, regions=tuple(replace(r, dma=False) for r in b.regions))
    uses = [SlotUse(0, 9_000, 9_000, 9_000, dma=True)]
    assert place(b, uses).region_of(0) == "qspi"
    c = estimate(build_graph(load_model(str(TINY_UNET))), Traffic(), b, uses=uses)
    assert any("moved by DMA" in w for w in c.warnings())


def test_one_region_board_keeps_every_slot_in_region_zero() -> None:
    for name in ("generic", "esp32-s3-psram"):
        b = load_board(name)
        p = place(b, [_use(0, 1000), _use(1, 5000)])
        assert p.names == (b.spill_region,)
        assert {i for _, i in p.slots} == {0}


def test_generic_board_writes_the_same_model_as_no_board() -> None:
    """Without --board (generic: one arena, one flash) the written model is the one an optimize
    without any board writes: no slot leaves region 0, no option gains a 'region' key."""
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.transforms.optimizer import search_plans as search

    g = build_graph(load_model(str(TINY_UNET)))
    o = Options(target_bytes=64 * 1024)
    plain = search(g, o)
    generic = search(g, o, None, load_board("generic"))
    assert generic.uses and generic.placement.names == ("flash",)
    assert model_to_bytes(plain.graph.model) == model_to_bytes(generic.graph.model)


@pytest.fixture(scope="module")
def nicla_64k():
    data = TINY_UNET.read_bytes()
    run = Run(Options(target_bytes=64 * 1024), runs=3, board=load_board("nicla-vision"))
    return optimize(data, run, "tiny_unet", load(data, "tiny_unet"))


def test_nicla_64kb_tiny_unet_writes_nothing_to_flash_and_verifies(nicla_64k) -> None:
    out = nicla_64k
    assert out.target_met
    assert out.verification is not None and out.verification.identical
    c = out.cost
    assert c.flash_bytes_written == 0
    assert [r.kind for r in c.regions] == ["ram"]
    unspilled = c.compute_s  # the same model without storage traffic
    assert c.latency_s <= 1.03 * unspilled
    # The written model names the regions: every slot in the DTCM, index 1 of the table.
    p = out.result.placement
    assert p.names[0] == "qspi" and "dtcm" in p.names
    graph = load(out.data, "written")
    regions = {}
    for op in graph.operators:
        if op.opcode not in customops.TINYSEG_OPS:
            continue
        o = customops.decode(op, {})
        if isinstance(o, customops.StreamChainOptions):
            for _, s in o.spill + o.fetch:
                regions[s] = o.region_of(s)
        elif isinstance(o, customops.SpillOptions):
            regions[o.slot] = o.region
    assert regions and set(regions.values()) == {p.names.index("dtcm")}
    report = out.report("tiny_unet", "o")["cost"]["placement"]
    assert report["regions"][0] == {"index": 0, "region": "qspi"}
    assert sum(s["bytes"] for s in report["slots"]) == c.regions[0].bytes_written


def test_at_most_max_regions_indices() -> None:
    """A map with more regions than a Runtime holds: only the first MAX_REGIONS - 1 regions past
    the spill region (in preference order) take slots."""
    from tinyseg_plugin.memory.boards import board_from_dict

    rams = [
        {"name": f"r{k}", "kind": "ram", "capacity": 8192, "read_bandwidth": 1e9 - k,
         "write_bandwidth": 1e9 - k}
        for k in range(10)
    ]  # fmt: skip
    arena = {"name": "arena", "kind": "ram", "capacity": 10**6, "arena": True,
             "read_bandwidth": 1e9, "write_bandwidth": 1e9}  # fmt: skip
    b = board_from_dict({"region": [arena] + rams, "spill_region": "r9"}, "many.json")
    p = place(b, [_use(k, 1000) for k in range(12)])
    assert len(p.names) == customops.MAX_REGIONS
    assert p.names == ("r9",) + tuple(f"r{k}" for k in range(customops.MAX_REGIONS - 1))
    assert max(i for _, i in p.slots) == customops.MAX_REGIONS - 1


@pytest.fixture(scope="module")
def nicla_min():
    data = TINY_UNET.read_bytes()
    run = Run(Options(smallest=True), runs=None, board=load_board("nicla-vision"))
    return optimize(data, run, "tiny_unet", load(data, "tiny_unet"))


def test_nicla_min_hides_what_its_worker_can_and_keeps_dma_targets_out_of_the_dtcm(
    nicla_min,
) -> None:
    """--target min on the Nicla Vision: the smallest head's slots (220,800 B) do not fit the
    DTCM, so 105,600 B per inference go to flash, all to the QSPI (the internal flash would save
    time and wear out in days); the M4 worker hides the erases it has time for, the rest wait on
    the critical path; no slot a DMA master moves sits in the DTCM."""
    c = nicla_min.cost
    assert nicla_min.result.plan.head == 31_872
    assert {r.region for r in c.regions if r.bytes_written and r.kind == "flash"} == {"qspi"}
    w = c.worker
    assert w is not None and w.erase_s > 0
    assert w.hidden_s == pytest.approx(min(w.erase_s, w.window_s))
    (qspi,) = [r for r in c.regions if r.region == "qspi"]
    others = sum(r.storage_s for r in c.regions if r is not qspi)
    unhidden = qspi.erase_s - w.hidden_s
    assert unhidden > 0 and qspi.erase_blocks  # the worker does not keep up at this head
    expected = c.compute_s + others + qspi.read_s + qspi.write_s + unhidden
    assert c.latency_s == pytest.approx(expected, rel=1e-6)
    assert c.latency_s < 2.0
    board = load_board("nicla-vision")
    p = nicla_min.result.placement
    assert not any(u.dma and not board.region(p.region_of(u.slot)).dma for u in c.uses)
    report = nicla_min.report("tiny_unet", "o")["cost"]
    assert report["erase_worker"]["hidden_ms"] == pytest.approx(w.hidden_s * 1e3, abs=1e-3)


def test_nicla_next_plan_hides_its_erases_under_1260_ms() -> None:
    """The plan next above --target min (head 36,128 B, 19,200 B to the QSPI per inference):
    1,552 ms with its 300 ms of erases on the critical path, 1,252 ms with the worker."""
    data = TINY_UNET.read_bytes()
    run = Run(Options(target_bytes=41_136), runs=None, board=load_board("nicla-vision"))
    out = optimize(data, run, "tiny_unet", load(data, "tiny_unet"))
    c = out.cost
    assert out.result.plan.head <= 41_136 and c.flash_bytes_written > 0
    assert c.worker.load < 1 and not any(r.erase_blocks for r in c.regions)
    assert c.latency_s <= 1.260
