#!/usr/bin/env python3
"""Runtime figures of TinySeg on the Tiny U-Net: compression of its real skip activations, the
codec's cost in instructions per byte, and the modelled latency of each spill storage beside the
paper's Table 5.

1. Activations: examples/models/tiny_unet.tflite runs in the real TFLM interpreter (tflite_micro,
   ``InterpreterConfig.kPreserveAllTensors``) on a deterministic, natural-looking synthetic image
   (a car-like shape on a road under a sky gradient, shading and mild sensor noise; the model's
   weights are seeded random, so the activations have a trained model's shapes and ranges but
   not its semantics). The three skip tensors are read with ``GetTensor``.
2. Compression: the C++ codec of tflm_ops/core (MeasureEncodedSize) on those bytes, per block size.
3. Instructions per byte: valgrind --tool=callgrind on a small harness built from the core,
   counting only inside ``tinyseg::Encode`` / ``tinyseg::StreamReader::DecodeRange`` (x86-64
   instructions; the Cortex-M7 time estimate assumes the same count at 1 instruction per cycle).
4. Latency model: the compute baseline and its split over the operators come from the cost model
   (tinyseg_plugin/memory/cost.py, board nicla-vision, reference kernels): the paper's measured
   1199 ms (Table 5, "+ Temp. tensor quant.", no spilling) for the Tiny U-Net, in proportion to
   each operator's MACs. The harness
   replays one inference of the optimized model on the core's SpillManager: compute time advances
   a VirtualClock; the spill (after op 3) and the band-wise fetch (fused FetchingConv2D, op 21+22)
   go to a NorFlashSim with the STM32H757 internal flash or the AT25QL128A QSPI timing profile
   (tflm_ops/core/include/tinyseg/flash_profiles.h: the QSPI part's own SFDP typicals; the H7
   figures from ST's DS12110 for the same flash, provisional until checked against DS12930), with SyncEraseQueue (M7 erases) or ModelledEraseQueue (M4 erases in parallel).
   Remote storage: RemoteBlockDevice's link model (COBS framing, 20-byte header + CRC, one
   round trip per 4 KB chunk, stop-and-wait) at a given payload rate. "No compression" is the
   codec's raw mode (every block stored raw, +1.2 % block headers), same code path.
5. The streamed model: the chains and row spills `tinyseg optimize` picks for the
   reference kernels; its storage calls (BeginStream, Append per row, EndStream, FetchRange per
   row) in the order the StreamChain kernel makes them (stream.simulate's schedule, which is
   chain_schedule.h's), each computed row advancing the clock by its MAC share of the same
   compute time, replayed on the same storage models beside the spilled model: bytes written,
   stored and read, latency, erases, and inferences before the spill region wears out (the
   region's sectors times the part's endurance over the steady-state erases per inference).

    python benchmarks/runtime_table.py            # needs g++ (cmake not required), valgrind optional
    python benchmarks/runtime_table.py --readme examples/nicla_vision/README.md --check   # docs in step?
    python benchmarks/runtime_table.py --readme examples/nicla_vision/README.md --write   # bring them in step

The README's figures sit between ``<!-- runtime_table.py:NAME -->`` and ``<!-- /runtime_table.py:NAME -->``
markers; ``--check`` exits 1 (and prints a diff) when they are not what this script computes, and
tests/test_docs_figures.py runs it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
from tinyseg_plugin.memory.boards import load_board  # noqa: E402

MODEL = ROOT / "examples" / "models" / "tiny_unet.tflite"
CORE = ROOT / "tflm_ops" / "core"

# Paper Table 5 (ms): rows x (internal, external, remote); None where the paper has no figure.
PAPER = {
    "original": (None, 1190, None),
    "temp_quant": (None, 1199, None),
    "spilling": (2421, 2494, 1583),
    "fused": (2430, 2511, 1587),
    "compression": (2333, 2046, 1470),
    "async": (1270, 1718, None),
}
M7_HZ = load_board("nicla-vision").clock_hz  # the codec's instructions at 1 per cycle

HARNESS = r"""
// Benchmark harness for benchmarks/runtime_table.py (written to a temp dir and built there).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "tinyseg/codec.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/flash_profiles.h"
#include "tinyseg/nor_flash_sim.h"
#include "tinyseg/remote_protocol.h"
#include "tinyseg/spill_manager.h"
using namespace tinyseg;

static std::vector<uint8_t> Load(const char* path) {
  std::vector<uint8_t> v;
  FILE* f = std::fopen(path, "rb");
  if (!f) { std::fprintf(stderr, "cannot read %s\n", path); std::exit(2); }
  uint8_t buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + n);
  std::fclose(f);
  return v;
}

// The reference host of the remote protocol, answering synchronously: the
// board-side RemoteClient + RemoteBlockDevice (with its read-ahead /
// write-behind buffer) run for real, and the device reports the wire time of
// the requests it actually sent.
class Loop final : public remote::ByteStream {
 public:
  explicit Loop(remote::RemoteServer& s) : srv_(s), back_(*this) {}
  Status Write(const uint8_t* d, size_t n) override { return srv_.Feed(d, n, back_); }
  Status Read(uint8_t* dst, size_t len, uint32_t, size_t* got) override {
    const size_t n = len < in_.size() - pos_ ? len : in_.size() - pos_;
    std::memcpy(dst, in_.data() + pos_, n);
    pos_ += n;
    if (pos_ == in_.size()) { in_.clear(); pos_ = 0; }
    *got = n;
    return Status::kOk;
  }
  uint32_t NowMs() override { return 0; }
 private:
  struct Back final : remote::ByteStream {
    explicit Back(Loop& l) : l(l) {}
    Status Write(const uint8_t* d, size_t n) override { l.in_.insert(l.in_.end(), d, d + n); return Status::kOk; }
    Status Read(uint8_t*, size_t, uint32_t, size_t* got) override { *got = 0; return Status::kOk; }
    uint32_t NowMs() override { return 0; }
    Loop& l;
  };
  remote::RemoteServer& srv_;
  Back back_;
  std::vector<uint8_t> in_;
  size_t pos_ = 0;
};

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* mode = argv[1];
  std::vector<uint8_t> t = Load(argv[2]);
  if (!std::strcmp(mode, "measure")) {  // FILE BLOCK
    CodecParams p; p.elem_size = 1; p.block_bytes = static_cast<uint32_t>(std::atoi(argv[3]));
    size_t n = 0;
    if (!Ok(MeasureEncodedSize(t.data(), t.size(), p, &n))) return 1;
    std::printf("%zu\n", n);
    return 0;
  }
  if (!std::strcmp(mode, "encode") || !std::strcmp(mode, "decode")) {  // FILE REPS
    const int reps = std::atoi(argv[3]);
    CodecParams p;
    std::vector<uint8_t> enc(WorstCaseEncodedSize(t.size(), p)), back(t.size());
    size_t n = 0;
    if (!Ok(EncodeToBuffer(t.data(), t.size(), p, enc.data(), enc.size(), &n, nullptr))) return 1;
    for (int r = 0; r < reps; ++r) {
      if (mode[0] == 'e') {
        MemorySink sink(enc.data(), enc.size());
        if (!Ok(Encode(t.data(), t.size(), p, sink, nullptr))) return 1;
      } else {
        MemorySource src(enc.data(), n);
        StreamReader rd;
        if (!Ok(rd.Open(src)) || !Ok(rd.DecodeRange(0, t.size(), back.data()))) return 1;
      }
    }
    if (reps > 0 && mode[0] == 'd' && std::memcmp(back.data(), t.data(), t.size()) != 0) return 1;
    std::printf("%zu %d\n", t.size(), reps);
    return 0;
  }
  // spill FILE STORAGE ASYNC RAW PRE_MS MID_MS FETCHCONV_MS POST_MS BAND_ROWS ROW_BYTES INFERENCES [RATE RTT_US]
  // replay BLOB STORAGE ASYNC RAW EVENTS INFERENCES [RATE RTT_US]
  const bool replay = !std::strcmp(mode, "replay");
  if ((!replay && std::strcmp(mode, "spill")) || argc < (replay ? 8 : 13)) return 2;
  const char* storage = argv[3];
  const bool async = std::atoi(argv[4]) != 0, raw = std::atoi(argv[5]) != 0;
  const int rate_arg = replay ? 8 : 13;
  if (raw) {  // incompressible bytes: every codec block is stored raw
    uint64_t s = 88172645463325252ull;
    for (auto& v : t) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; v = static_cast<uint8_t>(s >> 24); }
  }
  NorFlashConfig fc;
  uint64_t region_off = 0, region = 0;
  const bool remote_link = !std::strcmp(storage, "remote");
  if (!std::strcmp(storage, "internal")) {
    fc = Stm32h757InternalFlash();
    region_off = 0x180000; region = 0x80000;  // last 512 KB of bank 2
  } else if (!std::strcmp(storage, "qspi")) {
    fc = Resized(NiclaVisionQspiFlash(), 1 << 20);
    region = 1 << 20;
  } else if (remote_link) {
    fc.geometry.read_size = 1; fc.geometry.program_size = 1; fc.geometry.erase_size = 4096;
    fc.geometry.total_size = 512 * 1024; region = 512 * 1024;
  } else {
    return 2;
  }
  std::vector<uint8_t> mem(static_cast<size_t>(fc.geometry.total_size));
  std::vector<uint32_t> counts(fc.geometry.num_sectors());
  std::vector<uint8_t> flags(NorFlashSim::ProgramFlagBytes(fc));
  NorFlashSim sim(fc, mem.data(), counts.data(), flags.data());
  // Remote: host slot store + reference server + loopback + client + device.
  std::vector<uint8_t> host_mem(static_cast<size_t>(fc.geometry.total_size));
  uint32_t host_sizes[1];
  uint8_t host_present[1];
  remote::RamSlotStore store(host_mem.data(), host_sizes, host_present, 1,
                             static_cast<uint32_t>(fc.geometry.total_size));
  std::vector<uint8_t> sbuf(remote::ServerBufferBytes(4096));
  remote::RemoteServer server(store, 4096, sbuf.data(), sbuf.size());
  Loop loop(server);
  remote::ClientConfig cc;
  cc.max_payload = 4096;
  std::vector<uint8_t> cbuf(remote::ClientBufferBytes(cc.max_payload));
  remote::RemoteClient client(loop, cc, cbuf.data(), cbuf.size());
  remote::LinkModel link;
  if (remote_link && argc >= rate_arg + 2) {
    link.bytes_per_second = static_cast<uint64_t>(std::atof(argv[rate_arg]));
    link.round_trip_ns = static_cast<uint64_t>(std::atof(argv[rate_arg + 1]) * 1000.0);
  }
  std::vector<uint8_t> link_cache(4096);
  remote::RemoteBlockDevice rdev(client, 0, fc.geometry, link, link_cache.data(), link_cache.size());
  BlockDevice* dev = remote_link ? static_cast<BlockDevice*>(&rdev) : static_cast<BlockDevice*>(&sim);
  if (remote_link) {
    if (!Ok(client.Init()) || !Ok(client.Hello()) || !Ok(rdev.Init())) return 1;
  } else if (!Ok(sim.Init())) {
    return 1;
  }
  // What one inference does: the spill harness's fixed pattern (one whole-tensor Spill, a
  // band-wise fetch), or a replayed event list (a streamed model's row streams, written by
  // runtime_table.py): c NS | b SLOT BYTES BLOCK | a SLOT BLOB_OFFSET BYTES | e SLOT |
  // f SLOT OFFSET BYTES BLOB_OFFSET. Like the StreamChain kernel, nothing releases a slot: the
  // next inference's stream into it replaces the data.
  struct Event { char kind; uint64_t a, b, c, d; };
  std::vector<Event> events;
  uint32_t num_slots = 2, max_block = 1024;
  if (replay) {
    FILE* f = std::fopen(argv[6], "r");
    if (!f) return 2;
    char kind;
    while (std::fscanf(f, " %c", &kind) == 1) {
      Event e{kind, 0, 0, 0, 0};
      unsigned long long v[4] = {0, 0, 0, 0};
      const int want = kind == 'c' || kind == 'e' ? 1 : kind == 'a' || kind == 'b' ? 3 : 4;
      for (int k = 0; k < want; ++k) {
        if (std::fscanf(f, "%llu", &v[k]) != 1) return 2;
      }
      e.a = v[0]; e.b = v[1]; e.c = v[2]; e.d = v[3];
      if (kind != 'c' && e.a + 1 > num_slots) num_slots = static_cast<uint32_t>(e.a + 1);
      if (kind == 'b') {
        if (e.c > max_block) max_block = static_cast<uint32_t>(e.c);
      }
      events.push_back(e);
    }
    std::fclose(f);
  }
  int inferences = std::atoi(argv[replay ? 7 : 12]);
  VirtualClock clock;
  SyncEraseQueue sq(*dev, &clock);
  EraseRecord rec[256];
  ModelledEraseQueue mq(*dev, clock, rec, 256);
  EraseQueue& q = async ? static_cast<EraseQueue&>(mq) : static_cast<EraseQueue&>(sq);
  const size_t nsec = static_cast<size_t>(region / fc.geometry.erase_size);
  std::vector<SectorInfo> sectors(nsec);
  std::vector<SpillSlot> slots(num_slots);
  std::vector<SpillStream> streams(num_slots);
  std::vector<uint8_t> accumulators(static_cast<size_t>(num_slots) * max_block);
  uint8_t staging[512];
  SpillMemory m{slots.data(), num_slots, sectors.data(), nsec};
  SpillConfig sc;
  sc.region_offset = region_off;
  sc.region_size = region;
  sc.assume_erased = true;
  size_t encoded = 0;
  CodecParams cp;
  MeasureEncodedSize(t.data(), t.size(), cp, &encoded);
  const size_t per_spill = (encoded + fc.geometry.erase_size - 1) / fc.geometry.erase_size + 1;
  sc.pre_erase_sectors = static_cast<uint32_t>(per_spill < nsec - 1 ? per_spill : nsec - 1);
  if (remote_link || !async) sc.pre_erase_sectors = 0;  // nothing to hide: erase on demand
  SpillManager mgr(*dev, q, sc, m, &clock);
  if (!Ok(mgr.Init())) return 1;
  // Steady state: the ring must wrap a few times so erases show up at their real rate.
  const int wrap = static_cast<int>(3 * region / (encoded + 1)) + 2;
  if (inferences < wrap) inferences = wrap;
  uint64_t start_ns = 0, total_ns = 0, wait_ns = 0, wait0 = 0, spill_ns = 0, fetch_ns = 0, erases0 = 0;
  if (replay) {
    std::vector<uint8_t> row;
    for (int i = 0; i < inferences; ++i) {
      if (i == 1) {  // the first one warms up
        start_ns = clock.now_ns;
        wait0 = clock.erase_wait_ns;
        erases0 = mgr.stats().erases_submitted;
      }
      for (const Event& e : events) {
        const uint64_t t0 = clock.now_ns;
        uint32_t slot = static_cast<uint32_t>(e.a);
        switch (e.kind) {
          case 'c': clock.Advance(e.a); continue;
          case 'b':
            if (!Ok(mgr.BeginStream(slot, e.b, 1, accumulators.data() + slot * max_block, &streams[slot],
                                    static_cast<uint32_t>(e.c)))) return 1;
            break;
          case 'a':
            if (e.b + e.c > t.size() || !Ok(mgr.Append(&streams[slot], t.data() + e.b, e.c))) return 1;
            break;
          case 'e':
            if (!Ok(mgr.EndStream(&streams[slot]))) return 1;
            break;
          case 'f':
            row.resize(e.c);
            if (!Ok(mgr.FetchRange(slot, e.b, e.c, row.data()))) return 1;
            if (e.d + e.c > t.size() || std::memcmp(row.data(), t.data() + e.d, e.c) != 0) return 1;
            break;
          default:
            return 2;
        }
        if (i > 0) (e.kind == 'f' ? fetch_ns : spill_ns) += clock.now_ns - t0;
      }
      mgr.EndInference();
    }
  } else {
    const double pre = std::atof(argv[6]), mid = std::atof(argv[7]), conv = std::atof(argv[8]),
                 post = std::atof(argv[9]);
    const size_t band_rows = static_cast<size_t>(std::atoi(argv[10])),
                 row_bytes = static_cast<size_t>(std::atoi(argv[11]));
    std::vector<uint8_t> band(band_rows * row_bytes);
    const size_t rows = t.size() / row_bytes;
    for (int i = 0; i < inferences; ++i) {
      if (i == 1) {  // the first one warms up
        start_ns = clock.now_ns;
        wait0 = clock.erase_wait_ns;
        erases0 = mgr.stats().erases_submitted;
      }
      clock.Advance(static_cast<uint64_t>(pre * 1e6));
      uint64_t t0 = clock.now_ns;
      if (!Ok(mgr.Spill(0, t.data(), t.size(), 1, ByteSpan{staging, sizeof staging}))) return 1;
      if (i > 0) spill_ns += clock.now_ns - t0;
      clock.Advance(static_cast<uint64_t>(mid * 1e6));
      const size_t bands = (rows + band_rows - 1) / band_rows;
      for (size_t r = 0; r < rows; r += band_rows) {
        const size_t n = (r + band_rows <= rows ? band_rows : rows - r) * row_bytes;
        t0 = clock.now_ns;
        if (!Ok(mgr.FetchRange(0, r * row_bytes, n, band.data()))) return 1;
        if (std::memcmp(band.data(), t.data() + r * row_bytes, n) != 0) return 1;
        if (i > 0) fetch_ns += clock.now_ns - t0;
        clock.Advance(static_cast<uint64_t>(conv * 1e6 / static_cast<double>(bands)));
      }
      if (!Ok(mgr.Release(0))) return 1;
      clock.Advance(static_cast<uint64_t>(post * 1e6));
      mgr.EndInference();
    }
  }
  total_ns = clock.now_ns - start_ns;
  wait_ns = clock.erase_wait_ns - wait0;
  const double k = 1e6 * (inferences - 1);
  // total spill fetch wait (ms per inference), stored bytes, erases per inference, inferences,
  // requests per inference, and the inferences before a sector reaches the part's endurance: the
  // manager rotates over the region's sectors, so each takes its share of the steady-state erases.
  const double steady = static_cast<double>(mgr.stats().erases_submitted - erases0) / (inferences - 1);
  const double wear_out = steady > 0 ? static_cast<double>(nsec) * fc.timing.endurance_cycles / steady : 0.0;
  std::printf("%.3f %.3f %.3f %.3f %zu %.3f %d %llu %.0f\n", total_ns / k, spill_ns / k, fetch_ns / k,
              wait_ns / k, static_cast<size_t>(mgr.stats().encoded_bytes / static_cast<uint64_t>(inferences)),
              static_cast<double>(mgr.stats().erases_submitted) / inferences, inferences,
              static_cast<unsigned long long>(rdev.requests() / static_cast<uint64_t>(inferences)), wear_out);
  return 0;
}
"""


# ----------------------------------------------------------------------------- activations


def natural_image(h: int = 80, w: int = 120, seed: int = 7) -> np.ndarray:
    """A Carvana-like scene: sky gradient, road, a shaded car body with wheels and windows, noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    horizon = 0.45 * h
    sky = (y < horizon)[..., None]
    img += sky * np.stack(
        [150 + 60 * (1 - y / horizon), 180 + 50 * (1 - y / horizon), 235 + 0 * y], -1
    )
    road = 90 + 25 * (y - horizon) / (h - horizon) + 6 * np.sin(x / 7.0)
    img += (~sky) * np.stack([road, road, road * 1.05], -1)
    cx, cy, rx, ry = 0.52 * w, 0.58 * h, 0.36 * w, 0.2 * h
    body = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 < 1
    roof = (((x - cx) / (0.55 * rx)) ** 2 + ((y - (cy - 0.8 * ry)) / (0.55 * ry)) ** 2 < 1) & (
        y < cy - 0.2 * ry
    )
    car = body | roof
    shade = 0.75 + 0.25 * np.cos((x - cx) / rx * 1.2) * np.cos((y - cy) / ry)
    paint = np.stack([170 * shade, 30 * shade, 40 * shade], -1)
    img = np.where(car[..., None], paint, img)
    window = roof & (((x - cx) / (0.45 * rx)) ** 2 + ((y - (cy - 0.85 * ry)) / (0.4 * ry)) ** 2 < 1)
    img = np.where(window[..., None], np.array([60, 80, 100], np.float32), img)
    for wx in (cx - 0.6 * rx, cx + 0.6 * rx):
        wheel = ((x - wx) ** 2 + (y - (cy + 0.75 * ry)) ** 2) < (0.28 * ry) ** 2 * 4
        img = np.where(wheel[..., None], np.array([25, 25, 28], np.float32), img)
    img += rng.normal(0, 3.0, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)[None]


@dataclass
class Skip:
    name: str
    tensor: int
    shape: tuple[int, ...]
    data: np.ndarray
    zero_point: int


def preserved_interpreter(model_path: Path):
    """The model run once in TFLM on the natural image, every tensor kept (GetTensor reads them)."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(
        model_path.read_bytes(),
        arena_size=16 << 20,
        intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors,
    )
    it.set_input(natural_image(), 0)
    it.invoke()
    return it


def skip_activations(model_path: Path) -> list[Skip]:
    """Run the model in TFLM keeping every tensor; return the long-living inputs of each CONCATENATION."""
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.ir.schema import BUILTIN_CODES

    names = {v: k for k, v in BUILTIN_CODES.items()}
    m = load_model(model_path)
    sg = m.subgraphs[0]
    producer = {t: i for i, op in enumerate(sg.operators) for t in op.outputs}
    it = preserved_interpreter(model_path)
    skips = []
    for i, op in enumerate(sg.operators):
        oc = m.operatorCodes[op.opcodeIndex]
        if names.get(max(oc.builtinCode, oc.deprecatedBuiltinCode)) != "CONCATENATION":
            continue
        t = min(op.inputs, key=lambda t: producer.get(t, -1))  # the one produced longest ago
        tt = sg.tensors[t]
        shape = tuple(int(d) for d in tt.shape)
        data = np.asarray(it.GetTensor(int(t), 0)["tensor_data"]).reshape(shape)
        skips.append(
            Skip(
                tt.name.decode(errors="replace"),
                int(t),
                shape,
                data,
                int(tt.quantization.zeroPoint[0]),
            )
        )
    return sorted(skips, key=lambda s: -s.data.size)


def op_ms(model_path: Path) -> list[tuple[str, float]]:
    """(operator, modelled compute ms) in execution order: the cost model's split of the Nicla
    Vision's reference-kernel time (tinyseg_plugin/memory/cost.py, the one owner of it)."""
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.memory.boards import load_board
    from tinyseg_plugin.memory.cost import op_costs

    g = build_graph(load_model(model_path))
    return [(c.opcode, c.compute_s * 1e3) for c in op_costs(g, load_board("nicla-vision"))]


@dataclass
class StreamTrace:
    """One inference of the streamed model as the replay harness reads it, and its totals."""

    events: Path  # c NS | b SLOT BYTES BLOCK | a SLOT BLOB_OFFSET BYTES | e SLOT | f SLOT OFFSET BYTES BLOB_OFFSET
    blob: Path  # the spilled tensors' real bytes, one after another
    head_before: int
    head: int
    streams: int  # row streams written per inference
    written: int  # raw bytes written per inference
    fetched: int  # raw bytes read per inference
    fetches: int  # FetchRange calls per inference
    decoded: (
        int  # bytes of the codec blocks those calls decode (a row reads every block it touches)
    )


def stream_trace(model_path: Path, work: Path) -> StreamTrace:
    """The storage accesses of one inference of the model as `tinyseg optimize` streams it (the
    chains and row spills stream_search picks for the reference kernels), in the order the
    StreamChain kernel makes them: stream.simulate's schedule is chain_schedule.h's (tests/
    test_stream.py compares the two). Each computed row advances the clock by its operator's
    compute time in the cost model (op_ms) over its output rows; operators outside the chains by
    their whole time. The spilled tensors' bytes are the real activations on the natural image."""
    from tinyseg_plugin.contract import customops
    from tinyseg_plugin.ir.graph import build_graph
    from tinyseg_plugin.ir.modelio import load_model
    from tinyseg_plugin.transforms.stream import row_bytes, simulate
    from tinyseg_plugin.transforms.stream_search import choose_streaming

    g = build_graph(load_model(model_path))
    choice = choose_streaming(g, kernel_only=True)
    if choice.streamed is None:
        raise SystemExit(
            f"runtime_table: error: {model_path.name}: streaming does not lower the head"
        )
    st = choice.streamed
    block = next(
        customops.decode(op).block
        for op in st.graph.operators
        if op.opcode == customops.STREAM_CHAIN
    )
    it = preserved_interpreter(model_path)
    offset, parts = {}, []
    for t in st.spilled:
        offset[t] = sum(len(p) for p in parts)
        parts.append(np.asarray(it.GetTensor(int(t), 0)["tensor_data"]).astype(np.int8).tobytes())
    blob = work / "stream_blob.bin"
    blob.write_bytes(b"".join(parts))
    op_ns = [ms * 1e6 for _, ms in op_ms(model_path)]
    first = {c.ops[0]: c for c in st.chains}
    member = {i for c in st.chains for i in c.ops}
    lines: list[str] = []
    written = fetched = fetches = decoded = 0
    for i in range(len(g.operators)):
        if i in first:
            c = first[i]
            trace: list[tuple[int, int]] = []
            reads: list[tuple[int, int, int]] = []
            simulate(g, list(c.ops), frozenset(c.spilled), frozenset(c.fetched), trace, reads)
            lines += [
                f"b {st.slots[t]} {len(parts[st.spilled.index(t)])} {block}" for t in c.spilled
            ]
            k = 0
            for step, (op, y) in enumerate(trace + [(-1, 0)]):
                while k < len(reads) and reads[k][0] <= step:
                    _, t, row = reads[k]
                    rb = row_bytes(g, t)
                    lines.append(f"f {st.slots[t]} {row * rb} {rb} {offset[t] + row * rb}")
                    fetched, fetches, k = fetched + rb, fetches + 1, k + 1
                    decoded += (
                        ((row + 1) * rb - 1) // block * block - row * rb // block * block + block
                    )
                if op < 0:
                    break
                out = g.operators[op].outputs[0]
                lines.append(f"c {round(op_ns[op] / g.tensors[out].shape[1])}")
                if out in c.spilled:
                    rb = row_bytes(g, out)
                    lines.append(f"a {st.slots[out]} {offset[out] + y * rb} {rb}")
                    written += rb
            lines += [f"e {st.slots[t]}" for t in c.spilled]
        elif i not in member:
            lines.append(f"c {round(op_ns[i])}")
    events = work / "stream_events.txt"
    events.write_text("\n".join(lines) + "\n")
    return StreamTrace(
        events,
        blob,
        choice.base_head,
        choice.head,
        len(st.spilled),
        written,
        fetched,
        fetches,
        decoded,
    )


# ----------------------------------------------------------------------------- harness


def build_harness(work: Path) -> Path:
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        raise SystemExit("runtime_table: error: no C++ compiler (g++/clang++) found")
    src = work / "runtime_harness.cc"
    src.write_text(HARNESS)
    exe = work / "runtime_harness"
    core = [str(p) for p in sorted((CORE / "src").glob("*.cc"))]
    cmd = [
        cxx,
        "-std=c++17",
        "-O2",
        "-g",
        "-fno-exceptions",
        "-fno-rtti",
        f"-I{CORE / 'include'}",
        str(src),
        *core,
        "-o",
        str(exe),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"runtime_table: error: harness build failed:\n{p.stderr[-3000:]}")
    return exe


def run(exe: Path, *args) -> str:
    p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(
            f"runtime_table: error: harness {' '.join(map(str, args))} failed: {p.stderr.strip()}"
        )
    return p.stdout.strip()


def callgrind_ir(exe: Path, mode: str, data: Path, reps: int, work: Path) -> float | None:
    """Instructions per tensor byte of one encode / full decode (None without valgrind).

    Two callgrind runs, with `reps` repetitions and with none; the difference is `reps` times the
    codec alone (set-up, file loading and process start cancel out)."""
    if shutil.which("valgrind") is None:
        return None
    totals = []
    for n in (reps, 0):
        out = work / f"cg.{mode}.{n}.out"
        p = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                str(exe),
                mode,
                str(data),
                str(n),
            ],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            return None
        lines = [
            ln for ln in out.read_text().splitlines() if ln.startswith(("totals:", "summary:"))
        ]
        if not lines:
            return None
        totals.append(int(lines[0].split()[1]))
    return (totals[0] - totals[1]) / (reps * data.stat().st_size)


# ----------------------------------------------------------------------------- report


def fmt(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:,.0f}{unit}"


README_ROWS = [
    ("+ tensor spilling", "spilling"),
    ("+ fused fetching", "fused"),
    ("+ tensor compression", "compression"),
    ("+ async erase (M4)", "async"),
]
SKIP_NAMES = {0: "80x120x8 (the spilled one)"}


def readme_blocks(fig: dict) -> dict[str, str]:
    """The README's generated blocks (markdown), from the figures main() computed."""
    skips = [
        "| skip tensor | bytes | most frequent value | encoded (1 KB blocks) | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for k, (shape, nbytes, mode_share, enc) in enumerate(fig["skips"]):
        skips.append(
            f"| {SKIP_NAMES.get(k, shape)} | {nbytes:,} | {100 * mode_share:.1f} % | {enc:,} | "
            f"{nbytes / enc:.2f}x |"
        )
    ipb, codec_ms = fig["ipb"], fig["codec_ms"]
    if ipb["encode"] is None:
        codec = "Codec cost: not measured (valgrind not installed)."
    else:
        codec = (
            f"Codec cost (callgrind, x86-64 instructions per byte): encode {ipb['encode']:.1f}, decode "
            f"{ipb['decode']:.1f}, i.e. about {codec_ms['encode']:.0f} ms + {codec_ms['decode']:.0f} ms for the "
            f"spilled tensor if a 480 MHz Cortex-M7\nran the same instruction count at one per cycle."
        )
    lat = [
        "| configuration | internal paper | internal model | external paper | external model | remote paper "
        "| remote model |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, key in README_ROWS:
        cells = []
        for j, storage in enumerate(("internal", "qspi", "remote")):
            model = fig["latency"].get((key, storage))
            cells += [
                fmt(PAPER[key][j]).replace(",", "") if model is not None else "-",
                fmt(model).replace(",", "") if model is not None else "-",
            ]
        lat.append(f"| {label} | " + " | ".join(cells) + " |")
    e = fig["erases"]
    erases = f"{e['compression_off']:.2f} and {e['compression_on']:.2f} erases per inference"
    stream = [
        "| model | storage | erases by | written B | stored B | read B | storage ms | total ms | erases "
        "| inferences to wear-out |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, storage, erase, written, stored, read, storage_ms, total, erases_, wear in fig[
        "stream"
    ]:
        wear_s = f"{wear:,.0f}" if wear > 0 and storage != "remote" else "-"
        stream.append(
            f"| {name} | {storage} | {erase} | {written:,} | {stored:,.0f} | {read:,} | {storage_ms:.0f} | "
            f"{total:.0f} | {erases_:.2f} | {wear_s} |"
        )
    return {
        "skips": "\n".join(skips),
        "codec": codec,
        "latency": "\n".join(lat),
        "erases": erases,
        "stream": "\n".join(stream),
    }


def _marker(name: str) -> tuple[str, str]:
    return f"<!-- runtime_table.py:{name} -->", f"<!-- /runtime_table.py:{name} -->"


def sync_readme(path: Path, blocks: dict[str, str], write: bool) -> int:
    """Compare (or replace) each marked block of the README; 0 when all are in step."""
    import difflib
    import re

    text = path.read_text()
    new = text
    for name, body in blocks.items():
        start, end = _marker(name)
        pattern = re.compile(re.escape(start) + r"(.*?)" + re.escape(end), re.S)
        m = pattern.search(new)
        if m is None:
            print(
                f"runtime_table.py: error: {path} has no {start} ... {end} block", file=sys.stderr
            )
            return 2
        inline = "\n" not in m.group(1)
        repl = f"{start}{body}{end}" if inline else f"{start}\n{body}\n{end}"
        new = new[: m.start()] + repl + new[m.end() :]
    if new == text:
        print(f"{path}: figures in step with runtime_table.py")
        return 0
    if write:
        path.write_text(new)
        print(f"{path}: figures rewritten")
        return 0
    sys.stdout.writelines(
        difflib.unified_diff(
            text.splitlines(True), new.splitlines(True), str(path), "runtime_table.py"
        )
    )
    print(
        f"{path}: figures differ from runtime_table.py (run with --write to update)",
        file=sys.stderr,
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument(
        "--inferences",
        type=int,
        default=6,
        help="modelled inferences, at least enough to wrap the spill region 3 times (first is warm-up)",
    )
    ap.add_argument(
        "--usb-rate",
        type=float,
        default=1.0e6,
        help="remote: payload bytes/s over USB CDC (assumption, default 1 MB/s)",
    )
    ap.add_argument(
        "--rtt-us", type=float, default=1000.0, help="remote: round trip per 4 KB chunk (us)"
    )
    ap.add_argument(
        "--readme", type=Path, help="a README with runtime_table.py blocks to --check or --write"
    )
    ap.add_argument(
        "--check", action="store_true", help="with --readme: exit 1 if its figures differ"
    )
    ap.add_argument("--write", action="store_true", help="with --readme: replace its figures")
    args = ap.parse_args(argv)
    if args.readme and not (args.check or args.write):
        ap.error("--readme needs --check or --write")
    fig: dict = {"skips": [], "latency": {}, "erases": {}, "stream": []}
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        exe = build_harness(work)
        skips = skip_activations(args.model)

        print("1. Tiny U-Net skip activations (TFLM, kPreserveAllTensors, synthetic natural image)")
        print(
            f"{'tensor':<12} {'shape':<14} {'bytes':>7} {'mode share':>10} {'zp share':>9} "
            f"{'enc 512':>8} {'enc 1024':>8} {'enc 4096':>8} {'ratio@1K':>8}"
        )
        files = {}
        for s in skips:
            f = work / f"t{s.tensor}.bin"
            f.write_bytes(s.data.astype(np.int8).tobytes())
            files[s.tensor] = f
            vals, counts = np.unique(s.data, return_counts=True)
            mode_share = counts.max() / s.data.size
            zp_share = float((s.data == s.zero_point).mean())
            enc = {b: int(run(exe, "measure", f, b)) for b in (512, 1024, 4096)}
            fig["skips"].append(
                ("x".join(map(str, s.shape[1:])), s.data.size, mode_share, enc[1024])
            )
            print(
                f"t{s.tensor:<11} {'x'.join(map(str, s.shape[1:])):<14} {s.data.size:>7,} {mode_share:>10.1%} "
                f"{zp_share:>9.1%} {enc[512]:>8,} {enc[1024]:>8,} {enc[4096]:>8,} {s.data.size / enc[1024]:>7.2f}x"
            )
        spilled = skips[0]  # the 80x120x8 tensor the optimizer spills
        sp_file = files[spilled.tensor]
        enc_bytes = int(run(exe, "measure", sp_file, 1024))

        print(
            "\n2. Codec cost (callgrind, instructions inside the function per tensor byte, x86-64)"
        )
        ipb = {}
        for mode in ("encode", "decode"):
            ipb[mode] = callgrind_ir(exe, mode, sp_file, 5, work)
        if ipb["encode"] is None:
            print("valgrind not installed: skipped (apt-get install valgrind)")
        else:
            for mode in ("encode", "decode"):
                ms = ipb[mode] * spilled.data.size / M7_HZ * 1e3
                print(
                    f"{mode:<7} t{spilled.tensor}: {ipb[mode]:6.2f} instr/byte -> ~{ms:5.2f} ms for "
                    f"{spilled.data.size:,} B on a 480 MHz Cortex-M7 at 1 instr/cycle (estimate)"
                )

        # The cost model's compute split: before the spill (ops 0-3), between spill and fetch
        # (ops 4-20), the fused concat+conv (21-22), after it (23-25).
        ms = op_ms(args.model)
        base_ms = sum(m for _, m in ms)
        part = lambda a, b: sum(m for _, m in ms[a:b])  # noqa: E731
        pre, mid, conv, post = part(0, 4), part(4, 21), part(21, 23), part(23, len(ms))
        row_bytes = spilled.shape[2] * spilled.shape[3]
        band_rows = 20
        codec_ms = {
            m: (ipb[m] or 0.0) * spilled.data.size / M7_HZ * 1e3 for m in ("encode", "decode")
        }
        fig["ipb"], fig["codec_ms"] = ipb, codec_ms

        def model(
            storage: str, async_erase: bool, compressed: bool, fused: bool
        ) -> dict[str, float]:
            extra = [str(args.usb_rate), str(args.rtt_us)] if storage == "remote" else []
            rows_per_fetch = (
                band_rows if fused else spilled.shape[1]
            )  # unfused: one whole-tensor fetch
            out = run(
                exe,
                "spill",
                sp_file,
                storage,
                int(async_erase),
                int(not compressed),
                f"{pre:.3f}",
                f"{mid:.3f}",
                f"{conv:.3f}",
                f"{post:.3f}",
                rows_per_fetch,
                row_bytes,
                args.inferences,
                *extra,
            )
            tot, sp, fe, wait, stored, erases, n, reqs, wear = map(float, out.split())
            cpu = codec_ms["encode"] + codec_ms["decode"] if compressed else 0.0
            return dict(
                total=tot + cpu,
                spill=sp,
                fetch=fe,
                wait=wait,
                stored=stored,
                erases=erases,
                cpu=cpu,
                n=n,
                reqs=reqs,
                wear=wear,
            )

        print(
            f"\n3. Modelled latency of the optimized Tiny U-Net (ms per inference; compute baseline "
            f"{base_ms:.0f} ms (memory/cost.py: the paper's figure),\n   split by MACs: {pre:.0f} before the spill, {mid:.0f} "
            f"until the fetch, {conv:.0f} in FetchingConv2D, {post:.0f} after;\n   spilled t{spilled.tensor} "
            f"{spilled.data.size:,} B, {enc_bytes:,} B encoded; fused fetch in bands of {band_rows} rows; "
            f"remote at {args.usb_rate / 1e3:,.0f} KB/s + {args.rtt_us:.0f} us per 4 KB chunk)"
        )
        rows = [
            ("+ tensor spilling (raw)", "spilling", False, False, False),
            ("+ fused fetching", "fused", False, False, True),
            ("+ tensor compression", "compression", False, True, True),
            ("+ async erase (M4)", "async", True, True, True),
            ("async erase, no compression", None, True, False, True),
        ]
        head = f"{'configuration':<28}" + "".join(
            f"{s + ' (paper)':>17}{s + ' (model)':>17}" for s in ("internal", "external", "remote")
        )
        print(head)
        print(
            f"{'original / temp. quant':<28}{'-':>17}{'-':>17}{'1190 / 1199':>17}{'(baseline)':>17}{'-':>17}{'-':>17}"
        )
        details = []
        for label, key, async_erase, compressed, fused in rows:
            cells = []
            for j, storage in enumerate(("internal", "qspi", "remote")):
                paper = PAPER[key][j] if key else None
                if storage == "remote" and async_erase:
                    cells += ["-", "-"]
                    continue
                r = model(storage, async_erase, compressed, fused)
                details.append((label, storage, r))
                if key:
                    fig["latency"][(key, storage)] = r["total"]
                if storage == "internal" and not async_erase and fused:
                    fig["erases"]["compression_on" if compressed else "compression_off"] = r[
                        "erases"
                    ]
                cells += [fmt(paper), fmt(r["total"])]
            print(f"{label:<28}" + "".join(f"{c:>17}" for c in cells))
        print(
            "\n   breakdown (ms per inference): spill = Spill operator on the critical path, fetch = FetchRange "
            "calls in FetchingConv2D, wait = of those, time waiting for erases; codec = estimate above"
        )
        print(
            f"   {'configuration':<28} {'storage':<9} {'total':>8} {'spill':>8} {'fetch':>8} {'wait':>8} "
            f"{'codec':>6} {'stored B':>9} {'erases':>7} {'requests':>8} {'runs':>5}"
        )
        for label, storage, r in details:
            reqs = f"{r['reqs']:.0f}" if storage == "remote" else "-"
            print(
                f"   {label:<28} {storage:<9} {r['total']:>8.0f} {r['spill']:>8.1f} {r['fetch']:>8.1f} "
                f"{r['wait']:>8.1f} {r['cpu']:>6.2f} {r['stored']:>9,.0f} {r['erases']:>7.2f} {reqs:>8} "
                f"{r['n']:>5.0f}"
            )
        print(
            "   (erases = sectors erased per inference; requests = protocol requests per inference; runs = "
            "modelled inferences, the first one excluded)"
        )

        trace = stream_trace(args.model, work)

        def replay(storage: str, async_erase: bool) -> dict[str, float]:
            extra = [str(args.usb_rate), str(args.rtt_us)] if storage == "remote" else []
            out = run(
                exe,
                "replay",
                trace.blob,
                storage,
                int(async_erase),
                0,
                trace.events,
                args.inferences,
                *extra,
            )
            tot, sp, fe, wait, stored, erases, n, reqs, wear = map(float, out.split())
            cpu = (
                ((ipb["encode"] or 0.0) * trace.written + (ipb["decode"] or 0.0) * trace.decoded)
                / M7_HZ
                * 1e3
            )
            return dict(
                total=tot + cpu,
                spill=sp,
                fetch=fe,
                wait=wait,
                stored=stored,
                erases=erases,
                cpu=cpu,
                n=n,
                reqs=reqs,
                wear=wear,
            )

        print(
            f"\n4. The streamed Tiny U-Net (StreamChain operators, head {trace.head:,} B, was {trace.head_before:,}) "
            f"beside the spilled one (head 153,600 B;\n   compression on). Streamed: {trace.streams} row "
            f"streams, {trace.written:,} B written and {trace.fetched:,} B read per inference in {trace.fetches} "
            f"row fetches (decoding {trace.decoded:,} B of codec blocks),\n   replayed in the order the "
            f"kernel makes them, each computed row advancing the clock by its MAC share of {base_ms:.0f} ms "
            f"(StreamChain's extra host instructions,\n   benchmarks/stream_overhead.py, are not in it). "
            f"Wear-out: inferences before the most-erased sector of the region reaches the part's endurance."
        )
        print(
            f"   {'model':<9} {'storage':<9} {'erase':<6} {'written B':>10} {'stored B':>9} {'read B':>9} "
            f"{'storage ms':>10} {'codec ms':>8} {'total ms':>9} {'erases':>7} {'wear-out inferences':>20}"
        )
        for storage in ("internal", "qspi", "remote"):
            for async_erase in (False,) if storage == "remote" else (False, True):
                today = model(storage, async_erase, True, True)
                streamed = replay(storage, async_erase)
                for name, r, written, read in (
                    ("spilled", today, spilled.data.size, spilled.data.size),
                    ("streamed", streamed, trace.written, trace.fetched),
                ):
                    erase = "M4" if async_erase else "M7"
                    wear = f"{r['wear']:,.0f}" if r["wear"] > 0 and storage != "remote" else "-"
                    print(
                        f"   {name:<9} {storage:<9} {erase:<6} {written:>10,} {r['stored']:>9,.0f} {read:>9,} "
                        f"{r['spill'] + r['fetch']:>10.1f} {r['cpu']:>8.2f} {r['total']:>9.0f} {r['erases']:>7.2f} "
                        f"{wear:>20}"
                    )
                    fig["stream"].append(
                        (
                            name,
                            storage,
                            erase,
                            written,
                            r["stored"],
                            read,
                            r["spill"] + r["fetch"],
                            r["total"],
                            r["erases"],
                            r["wear"],
                        )
                    )
    print(f"\n(runtime_table.py took {time.monotonic() - t_start:.1f} s)")
    if args.readme:
        return sync_readme(args.readme, readme_blocks(fig), write=args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
