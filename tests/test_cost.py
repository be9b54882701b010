"""The cost model (tinyseg_plugin/memory/cost.py) on the Tiny U-Net, against arithmetic done here
from independent sources: MACs counted with TensorFlow's own interpreter, the flash figures parsed
from the C++ core's flash_profiles.cc, the storage traffic from the optimize report."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import TINY_UNET
from test_boards import PROFILES_CC, _fields, _function, _int

from tinyseg_plugin import cli
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model
from tinyseg_plugin.memory import cost
from tinyseg_plugin.memory.boards import load_board
from tinyseg_plugin.memory.placement import SlotUse
from tinyseg_plugin.pipeline import Run, load, optimize
from tinyseg_plugin.transforms.optimizer import Options


def tf_macs(path: Path) -> int:
    """The Tiny U-Net's MACs from TensorFlow's interpreter (not TinySeg's reader): a convolution
    counts output elements x filter height x width x input channels, a transposed convolution input
    elements x filter out-channels x height x width, every other operator its output elements."""
    tf = pytest.importorskip("tensorflow")
    it = tf.lite.Interpreter(model_path=str(path))
    shape = {t["index"]: list(t["shape"]) for t in it.get_tensor_details()}
    total = 0
    for op in it._get_ops_details():
        out = math.prod(shape[op["outputs"][0]])
        if op["op_name"] == "CONV_2D":
            total += out * math.prod(shape[op["inputs"][1]][1:])
        elif op["op_name"] == "TRANSPOSE_CONV":
            total += math.prod(shape[op["inputs"][2]]) * math.prod(shape[op["inputs"][1]][:3])
        else:
            total += out
    return total


@pytest.fixture(scope="module")
def graph():
    return build_graph(load_model(TINY_UNET))


def test_calibration_point_is_the_tiny_unet(graph) -> None:
    """REFERENCE_MACS is the bundled Tiny U-Net's: its compute on the Nicla with reference kernels
    is the paper's 1,199 ms, split over the operators by MACs."""
    assert cost.REFERENCE_MACS == tf_macs(TINY_UNET) == sum(cost.op_macs(graph))
    ops = cost.op_costs(graph, load_board("nicla-vision"))
    assert sum(o.compute_s for o in ops) * 1e3 == pytest.approx(1199.0)
    biggest = max(ops, key=lambda o: o.macs)
    assert biggest.compute_s == pytest.approx(1.199 * biggest.macs / tf_macs(TINY_UNET))


def test_cmsis_nn_and_clock_scale_the_compute(graph) -> None:
    nicla, esp = load_board("nicla-vision"), load_board("esp32-s3-psram")
    ref = cost.op_costs(graph, nicla)
    fast = cost.op_costs(graph, nicla, "cmsis-nn")
    covered = {o.opcode for o in fast if o.accelerated}
    assert {"CONV_2D"} <= covered
    want = sum(r.compute_s / (cost.CMSIS_NN_SPEEDUP if r.opcode in covered else 1) for r in ref)
    assert sum(o.compute_s for o in fast) == pytest.approx(want)
    assert sum(o.compute_s for o in fast) < sum(o.compute_s for o in ref) / 3
    slow = cost.op_costs(graph, esp)  # 240 MHz: twice the 480 MHz M7's time
    assert sum(o.compute_s for o in slow) == pytest.approx(2 * 1.199)


def nicla_without_free_ram():
    """The nicla-vision preset with its DTCM and internal flash taken and no erase worker: every
    slot then goes to the QSPI, every erase on the critical path."""
    b = load_board("nicla-vision")
    full = tuple(
        replace(r, used=r.capacity) if r.name != "qspi" and not r.arena else r for r in b.regions
    )
    return replace(b, regions=full, erase_worker=False)


@pytest.fixture(scope="module")
def streamed(graph):
    run = Run(Options(smallest=True), runs=None, board=nicla_without_free_ram(), rate=1.0)
    return optimize(TINY_UNET.read_bytes(), run, "tiny_unet", load(TINY_UNET.read_bytes(), "m"))


def _qspi_figures() -> dict[str, float]:
    body = _function(PROFILES_CC.read_text(), "NiclaVisionQspiFlash")
    env = {"kClockHz": _int(body.split("kClockHz = ")[1].split(";")[0], {})}
    env["kClockPs"] = _int(body.split("kClockPs = ")[1].split(";")[0], env)
    return _fields(body, env)


def test_streamed_tiny_unet_on_the_nicla_qspi(streamed) -> None:
    """Latency = 1,199 ms + the QSPI's time for the row spills' bytes; wear-out from the region's
    free sectors, the part's endurance and one erase per 4 KB written."""
    out = streamed
    assert out.result.strategy == "streaming"
    report = out.report("m", "o")
    moved = report["bytes_moved_per_inference"]
    g = build_graph(load_model(TINY_UNET))
    written = sum(g.tensors[t].nbytes for c in report["streamed_chains"] for t in c["spills"])
    read = moved - written
    f = _qspi_figures()
    program_s = f["program_unit_ns"] * 1e-9 + f["program_cmd_ns"] * 1e-9
    write_s = written * f["program_ps_per_byte"] * 1e-12
    write_s += math.ceil(written / f["program_unit_bytes"]) * program_s
    erases = written / f["erase_size"]
    erase_s = erases * f["erase_sector_ns"] * 1e-9
    read_s = read * f["read_ps_per_byte"] * 1e-12
    c = out.cost
    assert c.compute_s == pytest.approx(1.199)
    assert c.storage_s == pytest.approx(read_s + write_s + erase_s)
    assert c.latency_s == pytest.approx(1.199 + read_s + write_s + erase_s)
    assert c.flash_bytes_written == written
    free_sectors = (1 << 20) // f["erase_size"]  # examples/nicla_vision: the last 1 MB of the QSPI
    wear = free_sectors * f["endurance_cycles"] / erases
    assert c.wearout_inferences == pytest.approx(wear)
    assert c.wearout_years == pytest.approx(wear / (365.25 * 86400))
    assert c.warnings() and "wears out" in c.warnings()[0]  # well under a year at 1/s
    d = report["cost"]
    assert d["flash_bytes_written_per_inference"] == written
    assert d["latency_ms"] == pytest.approx(c.latency_s * 1e3, abs=1e-3)
    assert report["board"]["name"] == "nicla-vision"
    (considered,) = report["considered"]  # spill and fuse: its spill written once, read once
    spilled = considered["bytes_moved_per_inference"] // 2
    assert considered["cost"]["flash_bytes_written_per_inference"] == spilled


def test_psram_spill_costs_bandwidth_and_no_wear(graph) -> None:
    b = load_board("esp32-s3-psram")
    c = cost.estimate(graph, cost.Traffic(76_800, 76_800, 1), b)
    psram = b.region("psram")
    assert c.storage_s == pytest.approx(
        76_800 / psram.write_bandwidth + 76_800 / psram.read_bandwidth
    )
    assert c.flash_bytes_written == 0 and c.wearout_years is None and not c.warnings()


def test_optimize_prints_and_reports_the_cost(tmp_path: Path, capsys) -> None:
    out, report = tmp_path / "o.tflite", tmp_path / "r.json"
    args = [
        "optimize",
        str(TINY_UNET),
        "-o",
        str(out),
        "--report",
        str(report),
        "--unverified",
        "--target",
        "min",
    ]
    assert cli.main(args + ["--rate", "0.001"]) == 0
    printed = capsys.readouterr()
    d = json.loads(report.read_text())
    assert d["board"]["name"] == "generic" and d["cost"]["rate_per_second"] == 0.001
    assert f"board generic: modelled {d['cost']['latency_ms']:,.1f} ms per inference" in printed.out
    assert "warning" not in printed.err  # 1 MB of flash at one inference in 1,000 s
    assert cli.main(args + ["--force", "--rate", "1000"]) == 0
    err = capsys.readouterr().err
    assert (
        err.startswith("tinyseg: warning: generic 'flash' wears out after") and err.count("\n") == 1
    )


def test_analyze_board_key(tmp_path: Path, capsys) -> None:
    assert cli.main(["analyze", str(TINY_UNET), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["board"] == {
        "name": "generic",
        "arena_region": "ram",
        "arena_free": 1 << 20,
        "fits": True,
        "compute_ms": 1199.0,
    }
    assert cli.main(["analyze", str(TINY_UNET), "--board", "nicla-vision"]) == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .startswith("board nicla-vision: arena region 'axi-sram'")
    )


def test_rate_must_be_positive(capsys, tmp_path: Path) -> None:
    rc = cli.main(["optimize", str(TINY_UNET), "-o", str(tmp_path / "o"), "--rate", "0"])
    assert rc == 2 and "the rate must be a positive number" in capsys.readouterr().err


def test_depthwise_macs_count_the_filter_window() -> None:
    """A 3x3 depthwise convolution: 9 MACs per output element (TFLM's filter [1, h, w, out])."""
    import synth

    b = synth.ModelBuilder(seed=1)
    x = b.input([1, 8, 8, 4])
    y = b.depthwise(x)
    g = build_graph(b.build([y]))
    (i,) = [op.index for op in g.operators if op.opcode == "DEPTHWISE_CONV_2D"]
    out = math.prod(g.tensors[g.operators[i].outputs[0]].shape)
    kh, kw = g.tensors[g.operators[i].inputs[1]].shape[1:3]
    assert cost.op_macs(g)[i] == out * kh * kw and kh * kw > 1


def test_slots_that_do_not_fit_the_spill_region_are_warned_of(graph) -> None:
    """Each slot holds a whole tensor and is written once per inference: written bytes beyond the
    spill region's free bytes cannot all be held there."""
    b = load_board("generic")
    free = b.spill.free
    fits = cost.estimate(graph, cost.Traffic(free, free, 1), b, rate=1e-6)
    assert not any("slots hold" in w for w in fits.warnings())
    over = cost.estimate(graph, cost.Traffic(free + 1, 0, 1), b, rate=1e-6)
    (line,) = [w for w in over.warnings() if "slots hold" in w]
    assert f"{free + 1:,} B" in line and f"{free:,} B free" in line


def test_an_arena_the_named_board_cannot_hold_is_warned_of(tmp_path: Path, capsys) -> None:
    """--board names a board whose arena region is smaller than the written model's head + tail:
    one warning line with the head that would fit; without --board (the generic default) none."""
    board = tmp_path / "small.json"
    board.write_text(
        json.dumps(
            {
                "name": "small",
                "region": [
                    {
                        "name": "sram",
                        "kind": "ram",
                        "capacity": 40_960,
                        "read_bandwidth": 1e9,
                        "write_bandwidth": 1e9,
                    }
                ],
            }
        )
    )
    out, report = tmp_path / "o.tflite", tmp_path / "r.json"
    args = ["optimize", str(TINY_UNET), "-o", str(out), "--unverified", "--report", str(report)]
    assert cli.main(args + ["--board", str(board)]) == 0
    err = capsys.readouterr().err
    d = json.loads(report.read_text())["optimized"]
    assert d["head"] + d["tail_estimate"] > 40_960
    line = f"with this tail the head must be at most {40_960 - d['tail_estimate']:,} B (--target)"
    assert "does not fit small 'sram', which has 40,960 B free" in err and line in err
    assert cli.main(args + ["--force", "--rate", "1e-6"]) == 0
    assert "does not fit" not in capsys.readouterr().err


def _qspi_only(worker: bool):
    return replace(nicla_without_free_ram(), erase_worker=worker)


def test_the_erase_worker_hides_the_erases_it_keeps_up_with(graph) -> None:
    """With an erase worker the QSPI's erases leave the critical path while they fit in the
    compute; programs and reads stay on it, and the report says what the worker sustains."""
    uses = [SlotUse(0, 19_200, 19_200, 19_200)]
    blocking = cost.estimate(graph, cost.Traffic(), _qspi_only(False), uses=uses)
    hidden = cost.estimate(graph, cost.Traffic(), _qspi_only(True), uses=uses)
    (q,) = hidden.regions
    assert blocking.worker is None and blocking.regions[0].erase_blocks
    assert q.erase_s > 0 and q.erase_hidden_s == pytest.approx(q.erase_s) and not q.erase_blocks
    assert hidden.latency_s == pytest.approx(blocking.latency_s - q.erase_s)
    assert hidden.latency_s > hidden.compute_s + q.read_s + q.write_s - 1e-12  # programs stay
    w = hidden.worker
    assert w.erase_s == pytest.approx(q.erase_s) and w.hidden_s == pytest.approx(q.erase_s)
    assert w.window_s == pytest.approx(hidden.compute_s) and w.load < 1
    assert any(line.startswith("  erase worker: hides") for line in cost.summary_lines(hidden))
    d = hidden.as_dict()
    assert d["erase_worker"]["hidden_ms"] == pytest.approx(q.erase_s * 1e3, abs=1e-3)
    assert d["regions"][0]["erase_hidden_ms"] == d["regions"][0]["erase_ms"]
    assert blocking.as_dict()["erase_worker"] is None


def test_an_overloaded_erase_worker_leaves_the_rest_on_the_critical_path(graph) -> None:
    """More erases than the worker can do in the compute: the writes wait for the rest, so the
    inference takes the flash traffic plus every erase."""
    n = 200_000  # 48.8 erases of 64 ms: 3.1 s, beyond the 1.2 s of compute
    uses = [SlotUse(0, n, n, n)]
    c = cost.estimate(graph, cost.Traffic(), _qspi_only(True), uses=uses)
    (q,) = c.regions
    w = c.worker
    assert w.load > 1 and q.erase_blocks
    assert w.hidden_s == pytest.approx(w.window_s) == pytest.approx(c.compute_s)
    assert c.latency_s == pytest.approx(q.read_s + q.write_s + q.erase_s)
    assert "on the critical path" in cost.summary_lines(c)[2]
    blocking = cost.estimate(graph, cost.Traffic(), _qspi_only(False), uses=uses)
    assert c.latency_s < blocking.latency_s


def test_the_nicla_preset_runs_an_erase_worker() -> None:
    assert load_board("nicla-vision").erase_worker
    assert not load_board("generic").erase_worker and not load_board("esp32-s3-psram").erase_worker


def test_the_erase_worker_erases_only_the_spill_region() -> None:
    """The Nicla's M4 erases the storage both sketches attach (the QSPI, the spill region): the
    internal flash's erases stay on the critical path, and its time adds to the worker's window."""
    from tinyseg_plugin.memory.placement import Placement

    b = load_board("nicla-vision")
    uses = [SlotUse(0, 19_200, 19_200, 19_200), SlotUse(1, 19_200, 19_200, 19_200)]
    p = Placement(("qspi", "internal-flash"), ((0, 0), (1, 1)))
    (q, i), w = cost.placed_costs(b, uses, p, compute_s=1.0)
    assert q.region == "qspi" and not q.erase_blocks and q.erase_hidden_s == q.erase_s > 0
    assert i.region == "internal-flash" and i.erase_blocks and i.erase_hidden_s == 0
    assert w.erase_s == q.erase_s and w.window_s == pytest.approx(1.0 + i.storage_s)
    assert cost.storage_time(b, uses, p, 1.0) == pytest.approx(q.read_s + q.write_s + i.storage_s)
