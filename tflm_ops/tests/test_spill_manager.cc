// Spill manager: round trips, ring rotation, wear statistics, space checks
// and the modelled benefit of asynchronous erase.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

#include "tinyseg/block_device.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/flash_profiles.h"
#include "tinyseg/nor_flash_sim.h"
#include "tinyseg/source_recording_device.h"
#include "tinyseg/spill_manager.h"
#include "tinytest.h"
#include "sim_box.h"
#include "spill_tables.h"

using namespace tinyseg;
using tinytest::Rng;

namespace {

// A SpillManager over a simulated flash whose whole device is its region, with a synchronous erase
// queue and `tables`. Tests take the parts by name: auto& [b, q, tb, m] = rig.
struct Rig {
  static constexpr uint32_t kDefaultBlock = 1024;
  Rig(const NorFlashConfig& flash, SpillTables tables, uint32_t block = kDefaultBlock,
      uint32_t pre_erase = 2)
      : b(flash),
        q(b.sim),
        tb(std::move(tables)),
        m(b.sim, q, Config(flash, block, pre_erase), tb.memory()) {}
  Status Init() {
    const Status s = b.sim.Init();
    return s != Status::kOk ? s : m.Init();
  }
  static SpillConfig Config(const NorFlashConfig& flash, uint32_t block, uint32_t pre_erase) {
    SpillConfig cfg;
    cfg.region_size = flash.geometry.total_size;
    cfg.codec_block_bytes = block;
    cfg.pre_erase_sectors = pre_erase;
    return cfg;
  }
  SimBox b;
  SyncEraseQueue q;
  SpillTables tb;
  SpillManager m;
};

// Activation-like int8 tensor: ~`permille`/1000 of elements equal `rep`.
std::vector<uint8_t> Activation(size_t n, uint32_t permille, Rng& rng) {
  std::vector<uint8_t> t(n);
  const uint8_t rep = static_cast<uint8_t>(rng.Next());
  for (auto& v : t) v = rng.Below(1000) < permille ? rep : static_cast<uint8_t>(rng.Next());
  return t;
}

}  // namespace

TEST(SpillFetchRoundTripWithRotationAndWear) {
  Rig rig(Resized(NiclaVisionQspiFlash(), 64 * 1024), SpillTables(4, 16, 256), Rig::kDefaultBlock,
          2);  // 16 sectors of 4 KB
  CHECK_OK(rig.Init());
  auto& [b, q, tb, m] = rig;
  Rng rng(11);
  std::vector<uint8_t> out(12000);
  uint64_t programmed_before = 0;
  const int kInferences = 60;
  for (int inf = 0; inf < kInferences; ++inf) {
    // Three skip-connection tensors live at once, released after fetching.
    std::vector<uint8_t> t0 = Activation(9000, 600, rng);
    std::vector<uint8_t> t1 = Activation(5000, 500, rng);
    std::vector<uint8_t> t2 = Activation(2400, 800, rng);
    CHECK_OK(m.Spill(0, t0.data(), t0.size(), 1, tb.span()));
    CHECK_OK(m.Spill(1, t1.data(), t1.size(), 1, tb.span()));
    CHECK_OK(m.Spill(2, t2.data(), t2.size(), 1, tb.span()));
    CHECK(FetchesBackAndReleases(m, 2, t2, out));
    // Row band of t1 (rows 10..19 of a 50x100 tensor).
    CHECK(FetchesRange(m, 1, 1000, 1000, t1, out));
    CHECK(FetchesBackAndReleases(m, 1, t1, out));
    CHECK(FetchesBackAndReleases(m, 0, t0, out));
    m.EndInference();
    if (inf == 0) programmed_before = m.stats().bytes_programmed;
  }
  CHECK_EQ(b.sim.access_stats().rejected_programs, 0u);
  // The manager's erase counts are the device's.
  for (uint32_t s = 0; s < 16; ++s) CHECK_EQ(m.sector(s).erases, b.sim.erase_count(s));
  const WearReport w = m.Wear(10000);
  CHECK_EQ(w.inferences, static_cast<uint64_t>(kInferences));
  // Rotation: every sector used, evenly.
  CHECK(w.min_sector_erases > 0);
  CHECK(w.max_sector_erases - w.min_sector_erases <= 1);
  // Erases per inference ~ flash bytes per inference / sector size.
  const double per_inf = static_cast<double>(m.stats().bytes_programmed) / kInferences;
  const WearEstimate est = EstimateWear(64 * 1024, 4096, static_cast<uint64_t>(per_inf), 10000);
  CHECK(w.erases_per_inference > 0.8 * est.erases_per_inference);
  CHECK(w.erases_per_inference < 1.2 * est.erases_per_inference + 0.1);
  CHECK(w.projected_inferences > 0.8 * est.inferences_to_limit);
  CHECK(w.projected_inferences < 1.2 * est.inferences_to_limit);
  CHECK(m.stats().encoded_bytes < m.stats().raw_bytes_spilled);  // compression helps
  CHECK(programmed_before > 0);
}

TEST(FetchRangeReadsOnlyNeededBlocks) {
  Rig rig(Resized(NiclaVisionQspiFlash(), 256 * 1024), SpillTables(2, 64, 512), 1024);
  CHECK_OK(rig.Init());
  auto& [b, q, tb, m] = rig;
  Rng rng(12);
  std::vector<uint8_t> t = Activation(80 * 120 * 8, 500, rng);  // 76,800 bytes
  CHECK_OK(m.Spill(0, t.data(), t.size(), 1, tb.span()));
  const uint64_t before = m.stats().bytes_read;
  std::vector<uint8_t> band(3 * 120 * 8);  // three rows
  CHECK_OK(m.FetchRange(0, 40 * 960, band.size(), band.data()));
  CHECK(std::memcmp(band.data(), &t[40 * 960], band.size()) == 0);
  const uint64_t read = m.stats().bytes_read - before;
  CHECK(read < 4 * 1024);  // a few blocks, not 76 KB
  CHECK(read < m.slot(0)->length / 10);
  // Every row band of the tensor, in order.
  for (int r = 0; r < 80; r += 3) {
    const int rows = r + 3 <= 80 ? 3 : 80 - r;
    CHECK_OK(m.FetchRange(0, static_cast<size_t>(r) * 960, rows * 960u, band.data()));
    CHECK(std::memcmp(band.data(), &t[static_cast<size_t>(r) * 960], rows * 960u) == 0);
  }
}

TEST(BlockChosenPerSpill) {
  // The Spill operator's `block` option is the codec block of that spill; fetches read
  // the block size from the stream. Incompressible bytes are stored raw, so the encoded
  // length is the worst case of exactly that block size.
  Rig rig(Resized(NiclaVisionQspiFlash(), 256 * 1024), SpillTables(3, 64, 512), 1024);
  CHECK_OK(rig.Init());
  auto& [b, q, tb, m] = rig;
  Rng rng(21);
  std::vector<uint8_t> t(6000);
  for (auto& v : t) v = static_cast<uint8_t>(rng.Next());
  const uint32_t blocks[3] = {0u, 64u, 256u};  // 0: the config's 1024
  for (uint32_t s = 0; s < 3; ++s) {
    CHECK_OK(m.Spill(s, t.data(), t.size(), 2, tb.span(), blocks[s]));
    const uint32_t used = blocks[s] != 0 ? blocks[s] : 1024u;
    CHECK_EQ(m.slot(s)->length, WorstCaseEncodedSize(t.size(), CodecParams{2, used}));
    std::vector<uint8_t> out(t.size());
    CHECK_OK(m.Fetch(s, out.data(), out.size()));
    CHECK(out == t);
    CHECK(FetchesRange(m, s, 1001, 333, t, out));
  }
  CHECK(m.slot(1)->length > m.slot(2)->length);  // smaller blocks: more headers
  // A block the codec cannot take (not a multiple of the element size, or too big).
  CHECK_STATUS(m.Spill(0, t.data(), t.size(), 2, tb.span(), 63), Status::kInvalidArgument);
  CHECK_STATUS(m.Spill(0, t.data(), t.size(), 2, tb.span(), kMaxBlockBytes + 2),
               Status::kInvalidArgument);
}

TEST(ElementSizesAndH7FlashWords) {
  // 4 sectors of 128 KB, 32-byte ECC flash words: spills pad to 32 bytes.
  Rig rig(Resized(Stm32h757InternalFlash(), 512 * 1024), SpillTables(3, 4, 64));
  CHECK_OK(rig.Init());
  auto& [b, q, tb, m] = rig;
  Rng rng(13);
  for (int round = 0; round < 12; ++round) {
    for (uint32_t es : {1u, 2u, 4u}) {
      std::vector<uint8_t> t(es * (3001 + 17 * round));
      const uint32_t rep = static_cast<uint32_t>(rng.Next());
      for (size_t i = 0; i < t.size() / es; ++i) {
        uint32_t v = rng.Below(2) ? rep : static_cast<uint32_t>(rng.Next());
        std::memcpy(&t[i * es], &v, es);
      }
      const uint32_t slot = es == 1 ? 0 : es == 2 ? 1 : 2;
      CHECK_OK(m.Spill(slot, t.data(), t.size(), es, tb.span()));
      CHECK_EQ(m.slot(slot)->start % 32, 0u);
      std::vector<uint8_t> out(t.size());
      CHECK_OK(m.Fetch(slot, out.data(), out.size()));
      CHECK(out == t);
      // An element-unaligned byte range too.
      CHECK(FetchesRange(m, slot, 3, 101, t, out));
    }
  }
  CHECK_EQ(b.sim.access_stats().rejected_programs, 0u);
  CHECK_STATUS(m.Spill(0, nullptr, 8, 1, tb.span()), Status::kInvalidArgument);
  CHECK_STATUS(m.Spill(9, "x", 1, 1, tb.span()), Status::kInvalidArgument);
}

TEST(NoSpaceWhenLiveDataWouldBeOverwritten) {
  Rig rig(Resized(NiclaVisionQspiFlash(), 32 * 1024), SpillTables(8, 8, 256));  // 8 sectors
  CHECK_OK(rig.Init());
  auto& [b, q, tb, m] = rig;
  Rng rng(14);
  std::vector<uint8_t> big(40 * 1024);
  for (auto& v : big) v = static_cast<uint8_t>(rng.Next());
  CHECK_STATUS(m.Spill(0, big.data(), big.size(), 1, tb.span()), Status::kNoSpace);
  std::vector<uint8_t> t(7000);  // incompressible: 2 sectors each
  for (auto& v : t) v = static_cast<uint8_t>(rng.Next());
  CHECK_OK(m.Spill(0, t.data(), t.size(), 1, tb.span()));
  CHECK_OK(m.Spill(1, t.data(), t.size(), 1, tb.span()));
  CHECK_OK(m.Spill(2, t.data(), t.size(), 1, tb.span()));
  CHECK_OK(m.Spill(3, t.data(), 6000, 1, tb.span()));
  // Would overwrite slot 0.
  CHECK_STATUS(m.Spill(4, t.data(), t.size(), 1, tb.span()), Status::kNoSpace);
  std::vector<uint8_t> out(t.size());
  CHECK_OK(m.Fetch(0, out.data(), out.size()));  // slot 0 intact
  CHECK(out == t);
  CHECK_OK(m.Release(0));
  CHECK_OK(m.Spill(4, t.data(), t.size(), 1, tb.span()));  // now fits (wraps)
  CHECK_OK(m.Fetch(4, out.data(), out.size()));
  CHECK(out == t);
  CHECK_OK(m.Fetch(1, out.data(), out.size()));
  CHECK(out == t);
  CHECK_STATUS(m.Fetch(0, out.data(), out.size()), Status::kNotFound);
  CHECK_STATUS(m.Release(0), Status::kNotFound);
  CHECK_STATUS(m.Fetch(1, out.data(), 10), Status::kBufferTooSmall);
  CHECK_EQ(b.sim.access_stats().rejected_programs, 0u);
}

TEST(ReadSizeBiggerThanOneUsesBounceBuffer) {
  std::vector<uint8_t> mem(16 * 1024);
  RamBlockDevice ram(Geometry{16, 8, 1024, 16 * 1024}, mem.data());
  CHECK_OK(ram.Init());
  SyncEraseQueue q(ram);
  // The bounce is one read unit; the staging lent to Spill need not be a
  // multiple of the read or program size (20 bytes: 16 are used).
  SpillTables tb(2, 16, 20, 16);
  SpillConfig cfg;
  cfg.region_size = 16 * 1024;
  cfg.codec_block_bytes = 64;
  SpillManager m(ram, q, cfg, tb.memory());
  CHECK_OK(m.Init());
  Rng rng(15);
  std::vector<uint8_t> t = Activation(3333, 500, rng);
  for (int i = 0; i < 5; ++i) {
    CHECK_OK(m.Spill(0, t.data(), t.size(), 1, tb.span()));
    std::vector<uint8_t> out(t.size());
    for (size_t off = 0; off < t.size(); off += 301) {
      const size_t len = off + 77 <= t.size() ? 77 : t.size() - off;
      const uint64_t before = m.stats().bytes_read;
      CHECK(FetchesRange(m, 0, off, len, t, out));
      CHECK_EQ((m.stats().bytes_read - before) % 16, 0u);  // whole read units only
    }
  }
  // A read_size > 1 device needs a bounce of at least one read unit.
  SpillTables none(2, 16, 20);
  SpillManager m1(ram, q, cfg, none.memory());
  CHECK_STATUS(m1.Init(), Status::kInvalidArgument);
  SpillTables short_bounce(2, 16, 20, 15);
  SpillManager m2(ram, q, cfg, short_bounce.memory());
  CHECK_STATUS(m2.Init(), Status::kBufferTooSmall);
}

// Spill programs only from the staging buffer of the call, in chunks of its
// largest program-size multiple; FetchRange needs no buffer at all.
TEST(SpillStagesThroughTheCallersBuffer) {
  SimBox b(Resized(Stm32h757InternalFlash(), 256 * 1024));  // 32-byte flash words
  CHECK_OK(b.sim.Init());
  SourceRecordingDevice dev(b.sim);
  SyncEraseQueue q(dev);
  SpillTables tb(2, 2, 0);
  SpillConfig cfg;
  cfg.region_size = 256 * 1024;
  SpillManager m(dev, q, cfg, tb.memory());  // no read bounce: read_size is 1
  CHECK_OK(m.Init());
  CHECK_EQ(m.MinStagingBytes(), 32u);
  Rng rng(17);
  std::vector<uint8_t> t = Activation(20000, 400, rng), out(t.size());
  std::vector<uint8_t> first(1032), second(100);  // block + 8, and 3 words + 4
  CHECK_OK(m.Spill(0, t.data(), t.size(), 1, ByteSpan{first.data(), first.size()}));
  CHECK(dev.AllFrom(first.data(), first.size()));
  CHECK_EQ(dev.longest(), 1024u);
  dev.Forget();
  CHECK_OK(m.Spill(1, t.data(), t.size(), 1, ByteSpan{second.data(), second.size()}));
  CHECK(dev.AllFrom(second.data(), second.size()));
  CHECK_EQ(dev.longest(), 96u);
  // Both read back with no staging; the staging buffers can be reused.
  std::fill(first.begin(), first.end(), 0);
  std::fill(second.begin(), second.end(), 0);
  CHECK_OK(m.Fetch(0, out.data(), out.size()));
  CHECK(out == t);
  CHECK_OK(m.Fetch(1, out.data(), out.size()));
  CHECK(out == t);
  CHECK_EQ(b.sim.access_stats().rejected_programs, 0u);
}

// A staging buffer too small to hold one program unit is refused before
// anything changes; so are a missing one and one overlapping the input.
TEST(TooSmallStagingIsRefused) {
  Rig rig(Resized(Stm32h757InternalFlash(), 256 * 1024), SpillTables(2, 2, 64));  // program size 32
  CHECK_OK(rig.Init());
  auto& [b, q, tb, m] = rig;
  Rng rng(18);
  std::vector<uint8_t> t = Activation(5000, 500, rng), out(t.size());
  CHECK_OK(m.Spill(0, t.data(), t.size(), 1, tb.span()));
  const SpillStats before = m.stats();
  const uint64_t head = m.head();
  uint8_t small[31];
  CHECK_STATUS(m.Spill(0, t.data(), t.size(), 1, ByteSpan{small, sizeof(small)}),
               Status::kBufferTooSmall);
  CHECK_STATUS(m.Spill(1, t.data(), t.size(), 1, ByteSpan{nullptr, 64}), Status::kInvalidArgument);
  CHECK_STATUS(m.Spill(1, t.data(), t.size(), 1, ByteSpan{t.data() + 100, 64}),
               Status::kInvalidArgument);
  // Nothing changed: slot 0 still holds its tensor, nothing was programmed.
  CHECK_EQ(m.head(), head);
  CHECK_EQ(m.stats().spills, before.spills);
  CHECK_EQ(m.stats().bytes_programmed, before.bytes_programmed);
  CHECK(m.slot(0)->live);
  CHECK(!m.slot(1)->live);
  CHECK_OK(m.Fetch(0, out.data(), out.size()));
  CHECK(out == t);
  // Exactly one program unit is enough.
  CHECK_OK(m.Spill(1, t.data(), t.size(), 1, ByteSpan{tb.staging.data(), 32}));
  CHECK_OK(m.Fetch(1, out.data(), out.size()));
  CHECK(out == t);
}

TEST(InvalidConfigRejected) {
  SimBox b(Resized(NiclaVisionQspiFlash(), 32 * 1024));
  CHECK_OK(b.sim.Init());
  SyncEraseQueue q(b.sim);
  SpillTables tb(2, 8, 256);
  SpillConfig cfg;
  cfg.region_offset = 100;
  cfg.region_size = 16 * 1024;
  SpillManager m1(b.sim, q, cfg, tb.memory());
  CHECK_STATUS(m1.Init(), Status::kMisaligned);
  cfg.region_offset = 16 * 1024;
  cfg.region_size = 32 * 1024;
  SpillManager m2(b.sim, q, cfg, tb.memory());
  CHECK_STATUS(m2.Init(), Status::kOutOfRange);
  cfg.region_offset = 0;
  cfg.codec_block_bytes = 1022;
  SpillManager m3(b.sim, q, cfg, tb.memory());
  CHECK_STATUS(m3.Init(), Status::kInvalidArgument);
  SpillTables small(2, 4, 256);  // too few sector entries
  cfg.codec_block_bytes = 1024;
  SpillManager m4(b.sim, q, cfg, small.memory());
  CHECK_STATUS(m4.Init(), Status::kInvalidArgument);
  SpillManager m5(b.sim, q, cfg, tb.memory());
  // Not initialised.
  CHECK_STATUS(m5.Spill(0, "abcd", 4, 1, tb.span()), Status::kInvalidArgument);
}

// Paper section 5.2 in the model: erases overlapping compute are hidden.
TEST(AsyncEraseHidesEraseTime) {
  uint64_t critical[2] = {0, 0};
  uint64_t waits[2] = {0, 0};
  for (int async = 0; async < 2; ++async) {
    SimBox b(Resized(NiclaVisionQspiFlash(), 128 * 1024));
    CHECK_OK(b.sim.Init());
    VirtualClock clock;
    SyncEraseQueue sq(b.sim, &clock);
    EraseRecord rec[32];
    ModelledEraseQueue mq(b.sim, clock, rec, 32);
    EraseQueue& q = async ? static_cast<EraseQueue&>(mq) : static_cast<EraseQueue&>(sq);
    SpillTables tb(2, 32, 256);
    SpillConfig cfg;
    cfg.region_size = 128 * 1024;
    cfg.pre_erase_sectors = 6;
    SpillManager m(b.sim, q, cfg, tb.memory(), &clock);
    CHECK_OK(m.Init());
    Rng rng(16);
    std::vector<uint8_t> t = Activation(20000, 500, rng);
    std::vector<uint8_t> out(t.size());
    clock.Advance(1000 * 1000000ull);  // model set-up before the first inference
    const uint64_t start = clock.now_ns;
    const uint64_t wait0 = clock.erase_wait_ns;
    for (int inf = 0; inf < 20; ++inf) {
      CHECK_OK(m.Spill(0, t.data(), t.size(), 1, tb.span()));
      clock.Advance(200 * 1000000ull);  // 200 ms of layers in the cold range
      CHECK_OK(m.Fetch(0, out.data(), out.size()));
      CHECK(out == t);
      CHECK_OK(m.Release(0));
      clock.Advance(100 * 1000000ull);  // rest of the inference
      m.EndInference();
    }
    critical[async] = clock.now_ns - start;
    waits[async] = clock.erase_wait_ns - wait0;
  }
  // Synchronous: every erase (60 ms x ~3 sectors per inference) is on the
  // critical path; asynchronous: they overlap the 300 ms of compute.
  CHECK(waits[0] > 20 * 120 * 1000000ull);
  CHECK(waits[1] < waits[0] / 10);
  CHECK(critical[1] < critical[0]);
}

// Row streams: a tensor written a few rows at a time (while a chain computes
// it) reads back like a whole spill, also with several streams open at once,
// on 1-byte-program QSPI NOR and on the H7's 32-byte ECC flash words.
TEST(RowStreamsReadBackLikeSpills) {
  for (int device = 0; device < 2; ++device) {
    SimBox b(device == 0 ? Resized(NiclaVisionQspiFlash(), 64 * 1024)
                         : Resized(Stm32h757InternalFlash(), 512 * 1024));
    CHECK_OK(b.sim.Init());
    SyncEraseQueue q(b.sim);
    const size_t region = device == 0 ? 64 * 1024 : 512 * 1024;
    SpillTables tb(4, region / b.sim.geometry().erase_size, 64);
    SpillConfig cfg;
    cfg.region_size = region;
    SpillManager m(b.sim, q, cfg, tb.memory());
    CHECK_OK(m.Init());
    Rng rng(21 + device);
    for (int inference = 0; inference < 12; ++inference) {
      // Two skips of a 40x120 and a 20x60 layer, written row by row, interleaved.
      std::vector<uint8_t> a = Activation(40 * 120 * 2, 600, rng);
      std::vector<uint8_t> c = Activation(20 * 60 * 4, 300, rng);
      std::vector<uint8_t> acc_a(1024), acc_c(512);
      SpillStream sa, sc;
      CHECK_OK(m.BeginStream(0, a.size(), 1, acc_a.data(), &sa));
      CHECK_OK(m.BeginStream(1, c.size(), 2, acc_c.data(), &sc, 512));
      const size_t row_a = 120 * 2, row_c = 60 * 4;
      for (int r = 0; r < 40; ++r) {
        CHECK_OK(m.Append(&sa, &a[r * row_a], row_a));
        if (r % 2 == 1) CHECK_OK(m.Append(&sc, &c[(r / 2) * row_c], row_c));
        if (r == 5) {  // an open stream cannot be fetched yet
          std::vector<uint8_t> tmp(8);
          CHECK_STATUS(m.FetchRange(0, 0, 8, tmp.data()), Status::kNotFound);
        }
      }
      CHECK_STATUS(m.Append(&sa, a.data(), 1), Status::kOutOfRange);
      CHECK_OK(m.EndStream(&sa));
      CHECK_OK(m.EndStream(&sc));
      // And an ordinary spill after them, sharing the ring.
      std::vector<uint8_t> d = Activation(3000, 700, rng);
      CHECK_OK(m.Spill(2, d.data(), d.size(), 1, tb.span()));
      std::vector<uint8_t> out(a.size());
      CHECK_OK(m.Fetch(0, out.data(), out.size()));
      CHECK(out == a);
      out.assign(c.size(), 0);
      CHECK_OK(m.Fetch(1, out.data(), out.size()));
      CHECK(out == c);
      CHECK_OK(m.FetchRange(0, 7 * row_a + 3, 2 * row_a, out.data()));  // a band of rows
      CHECK(std::memcmp(out.data(), &a[7 * row_a + 3], 2 * row_a) == 0);
      out.assign(d.size(), 0);
      CHECK_OK(m.Fetch(2, out.data(), out.size()));
      CHECK(out == d);
      for (uint32_t slot = 0; slot < 3; ++slot) CHECK_OK(m.Release(slot));
      m.EndInference();
    }
    CHECK_EQ(b.sim.access_stats().rejected_programs,
             0u);  // no unit programmed twice, none unerased
    CHECK(m.stats().spills == 36u);
  }
}

TEST(RowStreamErrors) {
  Rig rig(Resized(NiclaVisionQspiFlash(), 16 * 1024), SpillTables(2, 4, 64));  // 4 sectors of 4 KB
  CHECK_OK(rig.Init());
  auto& [b, q, tb, m] = rig;
  std::vector<uint8_t> acc(1024), t(100, 7);
  SpillStream s;
  CHECK_STATUS(m.BeginStream(5, 100, 1, acc.data(), &s), Status::kInvalidArgument);  // no slot 5
  CHECK_STATUS(m.BeginStream(0, 100, 1, nullptr, &s), Status::kInvalidArgument);
  CHECK_STATUS(m.BeginStream(0, 101, 2, acc.data(), &s), Status::kMisaligned);
  CHECK_STATUS(m.BeginStream(0, 64 * 1024, 1, acc.data(), &s),
               Status::kNoSpace);  // beyond the region
  CHECK_OK(m.BeginStream(0, 100, 1, acc.data(), &s));
  CHECK_OK(m.Append(&s, t.data(), 60));
  CHECK_STATUS(m.EndStream(&s), Status::kInvalidArgument);  // 40 bytes missing
  CHECK_OK(m.Append(&s, t.data(), 40));
  CHECK_OK(m.EndStream(&s));
  CHECK_STATUS(m.Append(&s, t.data(), 1), Status::kInvalidArgument);  // closed
  std::vector<uint8_t> out(100);
  CHECK_OK(m.Fetch(0, out.data(), out.size()));
  CHECK(out == t);
  // A stream that would run into live data is refused before it writes anything.
  SpillStream s2;
  // (16,150 B fit the region, but from the head they would wrap into slot 0's sector)
  CHECK_STATUS(m.BeginStream(1, 16150, 1, acc.data(), &s2), Status::kNoSpace);
  CHECK_OK(m.Fetch(0, out.data(), out.size()));
  CHECK(out == t);
}

TEST(WearEstimateFormula) {
  // 64 KB ring of 4 KB sectors, 8 KB written per inference: 2 erases per
  // inference, each sector erased every 8 inferences -> 80,000 inferences.
  const WearEstimate w = EstimateWear(64 * 1024, 4096, 8 * 1024, 10000);
  CHECK(w.erases_per_inference > 1.999 && w.erases_per_inference < 2.001);
  CHECK(w.inferences_to_limit > 79999.0 && w.inferences_to_limit < 80001.0);
  const WearEstimate z = EstimateWear(64 * 1024, 4096, 0, 10000);
  CHECK(z.erases_per_inference == 0.0);
}

TINYTEST_MAIN("spill_manager")
