// Storage fault injection for the spill path: a fault-injecting block device
// wraps a RAM device, the simulated QSPI NOR flash and the simulated STM32H7
// internal flash (32-byte flash words, one program per word), and a workload
// of one "inference" (two Spills, one row stream, full and range fetches,
// releases) runs against it.
//
//   bit flips   one bit of what a spill stored, every bit of every byte of
//               each slot's stream (headers, index, block headers, data):
//               a fetch must fail or return the right bytes.
//   transient   one failing / partial / interrupted / silently short program,
//               one program refused for lack of space (a full remote host),
//               one failing read, one failing or interrupted erase, at
//               spread-out points of an inference: at most the inference it
//               hits fails, and every later one succeeds.
//   permanent   a sector whose programs or erases always fail: it is retired
//               after kRetireAfterFailures failures and the ring skips it.
//   full        a tensor larger than the region: kNoSpace, then spilling works.
// Also with the second-core erase ring (RingEraseQueue/RingEraseWorker).
// Prints its counts; any wrong activation returned with status OK fails.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "tinyseg/block_device.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/erase_ring.h"
#include "tinyseg/flash_profiles.h"
#include "tinyseg/nor_flash_sim.h"
#include "tinyseg/spill_manager.h"
#include "tinytest.h"
#include "sim_box.h"

using namespace tinyseg;
using tinytest::Rng;

namespace {

enum class Fault : uint8_t {
  kNone,
  kProgramFails,        // nothing written, error
  kProgramPartial,      // first half written, error
  kProgramInterrupted,  // first half written, the next unit half-programmed, error
  kProgramSilentShort,  // first half written, reported OK (caught by the block check)
  kProgramNoSpace,      // refused: the device (remote host) is full
  kReadFails,
  kEraseFails,        // nothing erased, error
  kEraseInterrupted,  // erased, then the second half of the range cleared, error
};

constexpr const char* kFaultNames[] = {
    "none",
    "program fails",
    "program partial",
    "program interrupted",
    "program silently short",
    "program: device full",
    "read fails",
    "erase fails",
    "erase interrupted",
};
static_assert(tinyseg::NamesUpTo(kFaultNames, Fault::kEraseInterrupted), "a name for every Fault");

const char* FaultName(Fault f) { return tinyseg::EnumName(f, kFaultNames); }

Op OpOf(Fault f) {
  if (f == Fault::kReadFails) return Op::kRead;
  if (f == Fault::kEraseFails || f == Fault::kEraseInterrupted) return Op::kErase;
  return Op::kProgram;
}

// Forwards to `inner`, except for the armed fault: it hits the `at`-th call
// (from 0) of its kind touching [lo, hi) after Arm, once or, if permanent,
// every such call from then on.
class FaultDevice final : public BlockDevice {
 public:
  explicit FaultDevice(BlockDevice& inner) : in_(inner) {}

  void Arm(Fault f, uint32_t at, bool permanent = false, uint64_t lo = 0, uint64_t hi = ~0ull) {
    fault_ = f;
    at_ = at;
    permanent_ = permanent;
    lo_ = lo;
    hi_ = hi;
    seen_ = 0;
    fired_ = 0;
  }
  void Disarm() { fault_ = Fault::kNone; }
  uint32_t fired() const { return fired_; }
  void ResetCounts() {
    for (uint32_t& c : calls_) c = 0;
  }
  uint32_t calls(Op op) const { return calls_[static_cast<int>(op)]; }

  const Geometry& geometry() const override { return in_.geometry(); }
  uint8_t erased_value() const override { return in_.erased_value(); }
  uint64_t ModelledNs(Op op, uint64_t addr, uint64_t len) const override {
    return in_.ModelledNs(op, addr, len);
  }
  uint32_t BankOf(uint64_t addr) const override { return in_.BankOf(addr); }
  bool IsRam() const override { return in_.IsRam(); }

  Status Read(uint64_t addr, void* dst, size_t len) override {
    if (Hit(Op::kRead, addr, len)) return Status::kIoError;
    return in_.Read(addr, dst, len);
  }

  Status Program(uint64_t addr, const void* src, size_t len) override {
    const Fault fault = fault_;  // Hit disarms a transient fault
    if (!Hit(Op::kProgram, addr, len)) return in_.Program(addr, src, len);
    const uint32_t ps = in_.geometry().program_size;
    const size_t half = len / 2 / ps * ps;
    const uint8_t* p = static_cast<const uint8_t*>(src);
    switch (fault) {
      case Fault::kProgramFails:
        return Status::kIoError;
      case Fault::kProgramNoSpace:
        return Status::kNoSpace;
      case Fault::kProgramPartial:
        if (half) (void)in_.Program(addr, p, half);
        return Status::kIoError;
      case Fault::kProgramInterrupted: {
        if (half) (void)in_.Program(addr, p, half);
        if (len - half >= ps && ps <= sizeof(torn_)) {
          // Power lost while the next unit was programming: only some of
          // its bits reached 0.
          for (uint32_t i = 0; i < ps; ++i) torn_[i] = static_cast<uint8_t>(p[half + i] | 0xA5);
          (void)in_.Program(addr + half, torn_, ps);
        }
        return Status::kIoError;
      }
      case Fault::kProgramSilentShort:
        if (half) (void)in_.Program(addr, p, half);
        return Status::kOk;
      default:
        return in_.Program(addr, src, len);
    }
  }

  Status Erase(uint64_t addr, uint64_t len) override {
    const Fault fault = fault_;
    if (!Hit(Op::kErase, addr, len)) return in_.Erase(addr, len);
    if (fault == Fault::kEraseInterrupted) {
      (void)in_.Erase(addr, len);
      const uint32_t ps = in_.geometry().program_size;
      std::memset(torn_, 0, sizeof(torn_));
      for (uint64_t off = len / 2; off + ps <= len && ps <= sizeof(torn_); off += ps) {
        (void)in_.Program(addr + off, torn_, ps);
      }
    }
    return Status::kIoError;
  }

 private:
  bool Hit(Op op, uint64_t addr, uint64_t len) {
    ++calls_[static_cast<int>(op)];
    if (fault_ == Fault::kNone || OpOf(fault_) != op) return false;
    if (addr + len <= lo_ || addr >= hi_) return false;
    const uint32_t n = seen_++;
    if (n == at_ || (permanent_ && n > at_)) {
      ++fired_;
      if (!permanent_) fault_ = Fault::kNone;
      return true;
    }
    return false;
  }

  BlockDevice& in_;
  Fault fault_ = Fault::kNone;
  uint32_t at_ = 0;
  bool permanent_ = false;
  uint64_t lo_ = 0, hi_ = ~0ull;
  uint32_t seen_ = 0;
  uint32_t fired_ = 0;
  uint32_t calls_[3] = {0, 0, 0};
  uint8_t torn_[64];
};

// Runs the worker whenever the main core waits: a second core that erases
// exactly when it is needed (single-threaded, deterministic).
struct PollingPlatform final : RingPlatform {
  RingEraseWorker* worker = nullptr;
  void LockBank(uint32_t) override {}
  void UnlockBank(uint32_t) override {}
  void Relax() override {
    if (worker) (void)worker->Poll();
  }
};

// The workload's tensors: activation-like (one dominant value).
struct Tensors {
  std::vector<uint8_t> a, b, c;
  explicit Tensors(uint64_t seed) {
    Rng rng(seed);
    a = Make(1000, 1, rng);
    b = Make(500, 2, rng);
    c = Make(900, 1, rng);
  }
  static std::vector<uint8_t> Make(size_t n, uint32_t es, Rng& rng) {
    std::vector<uint8_t> t(n * es);
    const uint32_t rep = static_cast<uint32_t>(rng.Next());
    for (size_t i = 0; i < n; ++i) {
      const uint32_t v = rng.Below(100) < 60 ? rep : static_cast<uint32_t>(rng.Next());
      std::memcpy(&t[i * es], &v, es);
    }
    return t;
  }
};

struct Outcome {
  bool ok = true;      // every call returned kOk
  bool wrong = false;  // a fetch returned kOk with bytes that differ
  Status first = Status::kOk;
  void Note(Status s) {
    if (!Ok(s) && ok) {
      ok = false;
      first = s;
    }
  }
};

// One device, one erase queue, one manager, and the workload.
class Rig {
 public:
  Rig(BlockDevice& inner, uint8_t* storage, bool use_ring, bool check_ram = true)
      : dev_(inner), storage_(storage), sync_(dev_) {
    const Geometry& g = inner.geometry();
    slots_.resize(4);
    sectors_.resize(g.num_sectors());
    staging_.resize(264);
    acc_.resize(128);
    got_.resize(2000);
    if (use_ring) {
      ring_q_ = new RingEraseQueue(ring_, pf_, dev_);
      ring_w_ = new RingEraseWorker(ring_, pf_, dev_);
      pf_.worker = ring_w_;
    }
    SpillConfig cfg;
    cfg.region_size = g.total_size;
    cfg.check_ram = check_ram;
    SpillMemory mem;
    mem.slots = slots_.data();
    mem.num_slots = slots_.size();
    mem.sectors = sectors_.data();
    mem.num_sectors = sectors_.size();
    EraseQueue& q = use_ring ? static_cast<EraseQueue&>(*ring_q_) : sync_;
    m_ = new SpillManager(dev_, q, cfg, mem);
  }
  ~Rig() {
    delete m_;
    delete ring_w_;
    delete ring_q_;
  }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  Status Init() {
    if (ring_q_) {
      TINYSEG_RETURN_IF_ERROR(ring_q_->Init());
      if (!ring_w_->Attach()) return Status::kIoError;
    }
    return m_->Init();
  }

  FaultDevice& dev() { return dev_; }
  SpillManager& manager() { return *m_; }
  uint8_t* storage() { return storage_; }

  // Spills a, b (Spill) and c (row stream); returns after the first failure.
  Outcome SpillAll(const Tensors& t) {
    Outcome o;
    const ByteSpan span{staging_.data(), staging_.size()};
    o.Note(m_->Spill(0, t.a.data(), t.a.size(), 1, span, 128));
    if (o.ok) o.Note(m_->Spill(1, t.b.data(), t.b.size(), 2, span, 256));
    if (!o.ok) return o;
    SpillStream st;
    o.Note(m_->BeginStream(2, t.c.size(), 1, acc_.data(), &st, 128));
    for (size_t off = 0; o.ok && off < t.c.size(); off += 100) {
      const size_t n = t.c.size() - off < 100 ? t.c.size() - off : 100;
      o.Note(m_->Append(&st, t.c.data() + off, n));
    }
    if (o.ok) o.Note(m_->EndStream(&st));
    return o;
  }

  // Fetches every slot whole and a range of each; a fetch that returns kOk
  // with other bytes than were spilled sets `wrong`.
  void FetchAll(const Tensors& t, Outcome* o) {
    const std::vector<uint8_t>* src[3] = {&t.a, &t.b, &t.c};
    for (uint32_t s = 0; s < 3; ++s) {
      const std::vector<uint8_t>& want = *src[s];
      const Status f = m_->FetchRange(s, 0, want.size(), got_.data());
      if (Ok(f) && std::memcmp(got_.data(), want.data(), want.size()) != 0) o->wrong = true;
      o->Note(f);
      const Status r = m_->FetchRange(s, 301, 77, got_.data());  // parts of blocks
      if (Ok(r) && std::memcmp(got_.data(), want.data() + 301, 77) != 0) o->wrong = true;
      o->Note(r);
    }
  }

  // One inference: spill, fetch, release. A failed inference releases
  // nothing (the application just runs the next one).
  Outcome Inference(const Tensors& t) {
    Outcome o = SpillAll(t);
    if (o.ok) FetchAll(t, &o);
    if (o.ok) {
      for (uint32_t s = 0; s < 3; ++s) o.Note(m_->Release(s));
    }
    m_->EndInference();
    return o;
  }

 private:
  FaultDevice dev_;
  uint8_t* storage_;
  SyncEraseQueue sync_;
  EraseRingShared ring_;
  PollingPlatform pf_;
  RingEraseQueue* ring_q_ = nullptr;
  RingEraseWorker* ring_w_ = nullptr;
  SpillManager* m_ = nullptr;
  std::vector<SpillSlot> slots_;
  std::vector<SectorInfo> sectors_;
  std::vector<uint8_t> staging_, acc_, got_;
};

struct Counts {
  uint64_t flips = 0, detected = 0, harmless = 0, wrong_ok = 0;
  uint64_t transient = 0, recovered = 0, lost = 0, transient_wrong_ok = 0;
  uint64_t permanent = 0, retired = 0, permanent_recovered = 0, permanent_lost_max = 0;
  uint64_t full = 0, full_recovered = 0;
};
Counts g_total;

// Flips every bit of each slot's stored stream in place and fetches.
void BitFlips(Rig& rig, const Tensors& t, Counts* c) {
  CHECK(rig.Inference(t).ok);  // a clean one first
  Outcome spilled = rig.SpillAll(t);
  CHECK(spilled.ok);
  SpillManager& m = rig.manager();
  const uint64_t region = m.num_sectors() * static_cast<uint64_t>(rig.dev().geometry().erase_size);
  for (uint32_t s = 0; s < 3; ++s) {
    const SpillSlot* sl = m.slot(s);
    CHECK(sl != nullptr && sl->live);
    for (uint32_t i = 0; i < sl->length; ++i) {
      uint8_t* byte = rig.storage() + (sl->start + i) % region;
      for (int bit = 0; bit < 8; ++bit) {
        *byte ^= static_cast<uint8_t>(1u << bit);
        Outcome o;
        rig.FetchAll(t, &o);
        *byte ^= static_cast<uint8_t>(1u << bit);
        ++c->flips;
        if (o.wrong)
          ++c->wrong_ok;
        else if (!o.ok)
          ++c->detected;
        else
          ++c->harmless;  // a byte no fetch reads (row-stream padding)
      }
    }
  }
  Outcome after;
  rig.FetchAll(t, &after);
  CHECK(after.ok && !after.wrong);
}

// Arms `f` at spread-out calls of one inference; after each, counts the
// inferences lost until three in a row succeed.
void Transients(Rig& rig, const Tensors& t, Fault f, Counts* c) {
  rig.dev().ResetCounts();
  CHECK(rig.Inference(t).ok);
  const uint32_t per_inference = rig.dev().calls(OpOf(f));
  const uint32_t points = per_inference < 12 ? per_inference : 12;
  for (uint32_t p = 0; p < points; ++p) {
    const uint32_t at = p * per_inference / points;
    rig.dev().Arm(f, at);
    uint32_t lost = 0, streak = 0, runs = 0;
    bool wrong = false;
    while (streak < 3 && runs < 12) {
      const Outcome o = rig.Inference(t);
      ++runs;
      wrong = wrong || o.wrong;
      if (rig.dev().fired() == 0) continue;  // not reached yet
      if (o.ok) {
        ++streak;
      } else {
        ++lost;
        streak = 0;
      }
    }
    rig.dev().Disarm();
    if (rig.dev().fired() == 0) continue;  // this inference had fewer such calls
    ++c->transient;
    c->lost += lost;
    if (wrong) ++c->transient_wrong_ok;
    if (lost <= 1 && streak == 3) {
      ++c->recovered;
    } else {
      std::printf("  %s at call %u: %u inferences lost, %u good after\n", FaultName(f),
                  static_cast<unsigned>(at), static_cast<unsigned>(lost),
                  static_cast<unsigned>(streak));
    }
  }
}

// A sector whose programs (or erases) always fail is retired: the ring skips
// it and every inference succeeds again, through two turns of the ring.
void Permanent(Rig& rig, const Tensors& t, Fault f, Counts* c) {
  SpillManager& m = rig.manager();
  const uint32_t es = rig.dev().geometry().erase_size;
  const uint32_t sector = static_cast<uint32_t>((m.head() / es + 1) % m.num_sectors());
  const uint64_t programmed = m.stats().bytes_programmed;
  CHECK(rig.Inference(t).ok);
  const uint64_t per_inference = m.stats().bytes_programmed - programmed;
  const uint64_t region = static_cast<uint64_t>(m.num_sectors()) * es;
  const uint32_t turn = static_cast<uint32_t>(region / per_inference + 1);
  const uint64_t retired_before = m.stats().retired_sectors;
  rig.dev().Arm(f, 0, /*permanent=*/true, static_cast<uint64_t>(sector) * es,
                static_cast<uint64_t>(sector + 1) * es);
  uint32_t lost = 0, streak = 0;
  for (uint32_t run = 0; run < 5 * turn + 10 && streak < 2 * turn; ++run) {
    const Outcome o = rig.Inference(t);
    CHECK(!o.wrong);
    if (o.ok) {
      ++streak;
    } else {
      ++lost;
      streak = 0;
    }
  }
  const bool hit = rig.dev().fired() > 0;
  rig.dev().Disarm();
  CHECK(hit);
  ++c->permanent;
  if (m.stats().retired_sectors > retired_before &&
      m.sector(sector).state == SectorState::kRetired) {
    ++c->retired;
  }
  if (streak >= 2 * turn) ++c->permanent_recovered;
  if (lost > c->permanent_lost_max) c->permanent_lost_max = lost;
}

void Report(const char* name, const Counts& c) {
  std::printf(
      "%s: bit flips: %llu, detected %llu, harmless %llu, wrong-with-OK %llu; "
      "transient faults: %llu, recovered within one inference %llu "
      "(inferences lost %llu), wrong-with-OK %llu; permanent faults: %llu, "
      "sectors retired %llu, recovered %llu (at most %llu inferences lost)\n",
      name, static_cast<unsigned long long>(c.flips), static_cast<unsigned long long>(c.detected),
      static_cast<unsigned long long>(c.harmless), static_cast<unsigned long long>(c.wrong_ok),
      static_cast<unsigned long long>(c.transient), static_cast<unsigned long long>(c.recovered),
      static_cast<unsigned long long>(c.lost),
      static_cast<unsigned long long>(c.transient_wrong_ok),
      static_cast<unsigned long long>(c.permanent), static_cast<unsigned long long>(c.retired),
      static_cast<unsigned long long>(c.permanent_recovered),
      static_cast<unsigned long long>(c.permanent_lost_max));
}

const Fault kTransients[] = {
    Fault::kProgramFails,       Fault::kProgramPartial,   Fault::kProgramInterrupted,
    Fault::kProgramSilentShort, Fault::kProgramNoSpace,   Fault::kReadFails,
    Fault::kEraseFails,         Fault::kEraseInterrupted,
};

// Everything above on one device.
void Campaign(const char* name, BlockDevice& inner, uint8_t* storage, bool use_ring) {
  Counts c;
  const Tensors t(42);
  {
    Rig rig(inner, storage, use_ring);
    CHECK_OK(rig.Init());
    CHECK(rig.manager().checks_blocks());
    BitFlips(rig, t, &c);
  }
  for (Fault f : kTransients) {
    Rig rig(inner, storage, use_ring);
    CHECK_OK(rig.Init());
    for (int i = 0; i < 3; ++i) CHECK(rig.Inference(t).ok);
    Transients(rig, t, f, &c);
  }
  for (Fault f : {Fault::kProgramFails, Fault::kEraseFails}) {
    Rig rig(inner, storage, use_ring);
    CHECK_OK(rig.Init());
    CHECK(rig.Inference(t).ok);
    Permanent(rig, t, f, &c);
  }
  Report(name, c);
  CHECK_EQ(c.wrong_ok, 0u);
  CHECK_EQ(c.transient_wrong_ok, 0u);
  CHECK(c.flips > 0);
  CHECK_EQ(c.detected + c.harmless, c.flips);
  CHECK(c.transient >= 8);
  CHECK_EQ(c.recovered, c.transient);
  CHECK_EQ(c.retired, c.permanent);
  CHECK_EQ(c.permanent_recovered, c.permanent);
  g_total.flips += c.flips;
  g_total.detected += c.detected;
  g_total.harmless += c.harmless;
  g_total.wrong_ok += c.wrong_ok + c.transient_wrong_ok;
  g_total.transient += c.transient;
  g_total.recovered += c.recovered;
  g_total.permanent += c.permanent;
  g_total.retired += c.retired;
}

}  // namespace

TEST(RamDevice) {
  std::vector<uint8_t> mem(64 * 1024);
  RamBlockDevice ram(Geometry{1, 1, 4096, mem.size()}, mem.data());
  CHECK_OK(ram.Init());
  Campaign("ram", ram, mem.data(), false);
}

TEST(QspiNorFlash) {
  SimBox b(Resized(NiclaVisionQspiFlash(), 64 * 1024));
  CHECK_OK(b.sim.Init());
  Campaign("qspi-nor", b.sim, b.mem.data(), false);
}

TEST(InternalFlash32ByteWords) {
  SimBox b(Resized(Stm32h757InternalFlash(), 3 * 128 * 1024));
  CHECK_OK(b.sim.Init());
  Campaign("internal-flash", b.sim, b.mem.data(), false);
}

TEST(QspiNorFlashWithSecondCoreEraseRing) {
  SimBox b(Resized(NiclaVisionQspiFlash(), 64 * 1024));
  CHECK_OK(b.sim.Init());
  Campaign("qspi-nor+erase-ring", b.sim, b.mem.data(), true);
}

// A tensor larger than the region: kNoSpace and nothing half-written; the
// next inference spills normally.
TEST(FullDevice) {
  SimBox b(Resized(NiclaVisionQspiFlash(), 16 * 1024));
  CHECK_OK(b.sim.Init());
  Rig rig(b.sim, b.mem.data(), false);
  CHECK_OK(rig.Init());
  const Tensors t(7);
  CHECK(rig.Inference(t).ok);
  std::vector<uint8_t> big(20 * 1024);
  Rng rng(9);
  for (uint8_t& v : big) v = static_cast<uint8_t>(rng.Next());  // incompressible
  uint8_t staging[264];
  CHECK_STATUS(rig.manager().Spill(3, big.data(), big.size(), 1, ByteSpan{staging, 264}, 256),
               Status::kNoSpace);
  CHECK(!rig.manager().slot(3)->live);
  for (int i = 0; i < 5; ++i) CHECK(rig.Inference(t).ok);
  ++g_total.full;
}

// Checks off on a RAM device when the configuration says so; never on flash.
TEST(ChecksOffOnlyForRamWhenConfigured) {
  std::vector<uint8_t> mem(16 * 1024);
  RamBlockDevice ram(Geometry{1, 1, 4096, mem.size()}, mem.data());
  CHECK_OK(ram.Init());
  SimBox b(Resized(NiclaVisionQspiFlash(), 16 * 1024));
  CHECK_OK(b.sim.Init());
  std::vector<SpillSlot> slots(1);
  std::vector<SectorInfo> sectors(4);
  SpillMemory mem_tables{slots.data(), 1, sectors.data(), 4, nullptr, 0};
  SpillConfig cfg;
  cfg.region_size = 16 * 1024;
  cfg.check_ram = false;
  SyncEraseQueue qr(ram), qf(b.sim);
  SpillManager on_ram(ram, qr, cfg, mem_tables);
  CHECK_OK(on_ram.Init());
  CHECK(!on_ram.checks_blocks());
  std::vector<SpillSlot> slots2(1);
  std::vector<SectorInfo> sectors2(4);
  SpillMemory mem2{slots2.data(), 1, sectors2.data(), 4, nullptr, 0};
  SpillManager on_flash(b.sim, qf, cfg, mem2);
  CHECK_OK(on_flash.Init());
  CHECK(on_flash.checks_blocks());
  // The unchecked stream is 4 bytes per block shorter and still round-trips.
  const Tensors t(3);
  uint8_t staging[264];
  CHECK_OK(on_ram.Spill(0, t.a.data(), t.a.size(), 1, ByteSpan{staging, 264}, 128));
  CHECK_OK(on_flash.Spill(0, t.a.data(), t.a.size(), 1, ByteSpan{staging, 264}, 128));
  CHECK_EQ(on_flash.slot(0)->length - on_ram.slot(0)->length,
           NumBlocks(t.a.size(), 128) * kBlockCrcBytes);
  std::vector<uint8_t> back(t.a.size());
  CHECK_OK(on_ram.Fetch(0, back.data(), back.size()));
  CHECK(back == t.a);
}

// The same flips on a RAM device with the check off (check_ram = false):
// what the check catches, and proof that this suite can see wrong data.
TEST(UncheckedRamReturnsWrongDataWithOk) {
  std::vector<uint8_t> mem(64 * 1024);
  RamBlockDevice ram(Geometry{1, 1, 4096, mem.size()}, mem.data());
  CHECK_OK(ram.Init());
  Rig rig(ram, mem.data(), false, /*check_ram=*/false);
  CHECK_OK(rig.Init());
  CHECK(!rig.manager().checks_blocks());
  Counts c;
  BitFlips(rig, Tensors(42), &c);
  std::printf(
      "ram, checks off: bit flips: %llu, detected %llu, harmless %llu, wrong-with-OK %llu\n",
      static_cast<unsigned long long>(c.flips), static_cast<unsigned long long>(c.detected),
      static_cast<unsigned long long>(c.harmless), static_cast<unsigned long long>(c.wrong_ok));
  CHECK(c.wrong_ok > 0);
}

TEST(Summary) {
  std::printf(
      "all devices: bit flips: %llu, detected %llu, harmless %llu, wrong-with-OK %llu; "
      "transient faults: %llu, recovered within one inference %llu; "
      "permanent faults: %llu, sectors retired %llu\n",
      static_cast<unsigned long long>(g_total.flips),
      static_cast<unsigned long long>(g_total.detected),
      static_cast<unsigned long long>(g_total.harmless),
      static_cast<unsigned long long>(g_total.wrong_ok),
      static_cast<unsigned long long>(g_total.transient),
      static_cast<unsigned long long>(g_total.recovered),
      static_cast<unsigned long long>(g_total.permanent),
      static_cast<unsigned long long>(g_total.retired));
}

TINYTEST_MAIN("storage_faults")
