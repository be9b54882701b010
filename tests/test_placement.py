"""Slot -> region placement (memory/placement.py), its encoding in the written model
(transforms/passes/regions.py) and its price in the cost model, on the presets and on the
bundled Tiny U-Net."""

from __future__ import annotations

import pytest
from conftest import TINY_UNET

from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.modelio import model_to_bytes
from tinyseg_plugin.memory.boards import load_board
from tinyseg_plugin.memory.placement import SlotUse, assign, preference
from tinyseg_plugin.pipeline import Run, load, optimize
from tinyseg_plugin.transforms.optimizer import Options


def _use(slot: int, n: int) -> SlotUse:
    return SlotUse(slot, n, n, n)


def test_nicla_prefers_free_ram_then_qspi_then_internal_flash() -> None:
    b = load_board("nicla-vision")
    assert [r.name for r in preference(b)] == ["dtcm", "qspi", "internal-flash"]
    dtcm, qspi, internal = (b.region(n).free for n in ("dtcm", "qspi", "internal-flash"))
    uses = [
        _use(0, dtcm - 100),  # the DTCM holds it
        _use(1, qspi - 10),  # too large for the DTCM: the QSPI
        _use(2, internal - 10),  # neither the DTCM nor the (now full) QSPI has room
        _use(3, 50),  # still fits the DTCM's last 100 B
        _use(4, internal + 1),  # no region has room for it: the spill region (cost warns)
    ]
    p = assign(b, uses)
    assert p.names == ("qspi", "dtcm", "internal-flash")  # 0 = spill region, then board order
    assert [p.region_of(u.slot) for u in uses] == ["dtcm", "qspi", "internal-flash", "dtcm", "qspi"]
    for name in ("dtcm", "internal-flash"):  # capacity: the slots a region holds fit its free bytes
        held = sum(u.bytes for u in uses if p.region_of(u.slot) == name)
        assert held <= b.region(name).free


def test_one_region_board_keeps_every_slot_in_region_zero() -> None:
    for name in ("generic", "esp32-s3-psram"):
        b = load_board(name)
        p = assign(b, [_use(0, 1000), _use(1, 5000)])
        assert p.names == (b.spill_region,)
        assert {i for _, i in p.slots} == {0}


def test_generic_board_writes_the_same_model_as_no_board() -> None:
    """Without --board (generic: one arena, one flash) the written model is the one an optimize
    without any board writes: no slot leaves region 0, no option gains a 'region' key."""
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.transforms.optimizer import optimize as search

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
        {"name": f"r{k}", "kind": "ram", "capacity": 1000, "read_bandwidth": 1e9 - k,
         "write_bandwidth": 1e9 - k}
        for k in range(10)
    ]  # fmt: skip
    arena = {"name": "arena", "kind": "ram", "capacity": 10**6, "arena": True,
             "read_bandwidth": 1e9, "write_bandwidth": 1e9}  # fmt: skip
    b = board_from_dict({"region": [arena] + rams, "spill_region": "r9"}, "many.json")
    p = assign(b, [_use(k, 1000) for k in range(12)])
    assert len(p.names) == customops.MAX_REGIONS
    assert p.names == ("r9",) + tuple(f"r{k}" for k in range(customops.MAX_REGIONS - 1))
    assert max(i for _, i in p.slots) == customops.MAX_REGIONS - 1
