// Shared-memory erase ring (the Nicla Vision M4 erase worker's portable half):
// FIFO tickets, back-pressure, error reporting, worker handshake, and -- on
// hosts with threads -- a real second "core" erasing while the SpillManager
// spills and fetches, with bank exclusion checked on every device access.
#include <cstring>
#include <vector>

#include "tinyseg/erase_ring.h"
#include "tinyseg/nor_flash_sim.h"
#include "tinyseg/spill_manager.h"
#include "tinytest.h"

#if defined(__linux__) || defined(__APPLE__)
#define TINYSEG_TEST_THREADS 1
#include <chrono>
#include <mutex>
#include <thread>
#endif

using namespace tinyseg;
using tinytest::Rng;

namespace {

// 64 KB NOR flash, 4 KB sectors, two 32 KB banks.
NorFlashConfig TwoBankFlash() {
  NorFlashConfig c;
  c.geometry.read_size = 1;
  c.geometry.program_size = 8;
  c.geometry.erase_size = 4096;
  c.geometry.total_size = 64 * 1024;
  c.bank_size = 32 * 1024;
  c.timing.erase_sector_ns = 1000000;
  return c;
}

struct Flash {
  std::vector<uint8_t> mem;
  std::vector<uint32_t> counts;
  NorFlashSim sim;
  explicit Flash(const NorFlashConfig& c)
      : mem(static_cast<size_t>(c.geometry.total_size)),
        counts(c.geometry.num_sectors()),
        sim(c, mem.data(), counts.data(), nullptr) {}
};

// Single-threaded platform: locks are counters (nothing can contend).
struct CountingPlatform final : RingPlatform {
  uint32_t held[kMaxRingBanks] = {};
  uint32_t locks = 0;
  uint32_t notifies = 0;
  void LockBank(uint32_t b) override {
    ++held[b];
    ++locks;
  }
  void UnlockBank(uint32_t b) override { --held[b]; }
  void Notify() override { ++notifies; }
};

// The flash, the ring and its queue and worker on one thread (the worker polled by hand). Tests
// take the parts by name: auto& [f, ring, pf, q, w] = rig.
struct SingleCoreRing {
  Flash f{TwoBankFlash()};
  EraseRingShared ring;
  CountingPlatform pf;
  RingEraseQueue q{ring, pf, f.sim};
  RingEraseWorker w{ring, pf, f.sim};
};

}  // namespace

TEST(TicketsCompleteInOrderAndQueueBacksOff) {
  SingleCoreRing rig;
  auto& [f, ring, pf, q, w] = rig;
  CHECK_OK(f.sim.Init());
  CHECK(!w.Attach());  // ring not initialised yet
  CHECK_OK(q.Init());
  CHECK(q.WaitForWorker(3) == Status::kIoError);
  CHECK(w.Attach());
  CHECK_OK(q.WaitForWorker(0));
  // Dirty two sectors, then erase them through the ring.
  uint8_t zeros[8] = {};
  CHECK_OK(f.sim.Program(0, zeros, 8));
  CHECK_OK(f.sim.Program(40960, zeros, 8));
  EraseTicket t = 0;
  for (uint32_t i = 0; i < kEraseRingCapacity; ++i) {
    CHECK_OK(q.Submit((i % 16) * 4096ull, 4096, &t));
    CHECK_EQ(t, i + 1);
  }
  EraseTicket extra = 0;
  CHECK(q.Submit(0, 4096, &extra) == Status::kBusy);
  CHECK_EQ(pf.notifies, kEraseRingCapacity);
  CHECK(!q.IsDone(1));
  CHECK(w.Poll());
  CHECK(q.IsDone(1));
  CHECK(!q.IsDone(2));
  CHECK_OK(q.Submit(4096, 4096, &extra));  // one entry free again
  CHECK_EQ(extra, kEraseRingCapacity + 1);
  while (w.Poll()) {
  }
  CHECK_OK(q.Wait(extra));
  CHECK_OK(q.Drain());
  CHECK(!w.Poll());
  CHECK_EQ(ring.erases_done.load(), kEraseRingCapacity + 1);
  CHECK_EQ(f.sim.erase_stats().erases, uint64_t{kEraseRingCapacity + 1});
  uint8_t back[8];
  CHECK_OK(f.sim.Read(40960, back, 8));
  CHECK_EQ(back[0], 0xFF);
  CHECK_EQ(pf.held[0] + pf.held[1], 0u);  // every lock released
  CHECK_EQ(q.blocking_waits(), 0u);
  // Shared RAM survives a reset of the main core, the worker's stamp included:
  // a re-initialised ring waits until the worker has looked at it again.
  CHECK_OK(q.Init());
  CHECK(q.WaitForWorker(3) == Status::kIoError);
  CHECK(!w.Poll());
  CHECK_OK(q.WaitForWorker(0));
}

TEST(WorkerErrorsReachTheWaiter) {
  SingleCoreRing rig;
  auto& [f, ring, pf, q, w] = rig;
  CHECK_OK(f.sim.Init());
  CHECK_OK(q.Init());
  CHECK(w.Attach());
  EraseTicket a = 0, b = 0, c = 0;
  CHECK_OK(q.Submit(0, 4096, &a));
  CHECK_OK(q.Submit(100, 4096, &b));  // misaligned: the worker's device refuses it
  CHECK_OK(q.Submit(8192, 4096, &c));
  while (w.Poll()) {
  }
  CHECK_OK(q.Wait(a));
  CHECK(q.Wait(b) == Status::kMisaligned);
  CHECK_OK(q.Wait(c));  // each ticket reports its own erase: a failure is not sticky
  CHECK(q.Wait(b) == Status::kMisaligned);
  // The failure outlives the reuse of its ring entry.
  for (uint32_t i = 0; i < kEraseRingCapacity; ++i) {
    EraseTicket t = 0;
    CHECK_OK(q.Submit(0, 4096, &t));
    while (w.Poll()) {
    }
    CHECK_OK(q.Wait(t));
  }
  CHECK(q.Wait(b) == Status::kMisaligned);
  CHECK_OK(q.Wait(a));
  CHECK(q.Submit(0, 0, &a) == Status::kInvalidArgument);
  CHECK(q.Wait(99) == Status::kInvalidArgument);
}

TEST(BankLockedDeviceLocksOnlyTheBanksTouched) {
  Flash f(TwoBankFlash());
  CHECK_OK(f.sim.Init());
  CountingPlatform pf;
  BankLockedDevice d(f.sim, pf);
  uint8_t buf[16] = {};
  CHECK_OK(d.Program(32768 - 8, buf, 16));  // spans both banks
  CHECK_EQ(pf.locks, 2u);
  CHECK_OK(d.Read(0, buf, 16));
  CHECK_EQ(pf.locks, 3u);
  CHECK(d.Read(70000, buf, 1) == Status::kOutOfRange);  // passed through, no lock
  CHECK_EQ(pf.locks, 3u);
  CHECK_EQ(pf.held[0] + pf.held[1], 0u);
  CHECK_EQ(d.BankOf(40000), 1u);
}

#if TINYSEG_TEST_THREADS
namespace {

// Mutex per bank; the checking device below proves they exclude.
struct ThreadPlatform final : RingPlatform {
  std::mutex m[kMaxRingBanks];
  void LockBank(uint32_t b) override { m[b].lock(); }
  void UnlockBank(uint32_t b) override { m[b].unlock(); }
  void Relax() override { std::this_thread::yield(); }
};

// Counts accesses that overlap an erase of the same bank.
class CheckingDevice final : public BlockDevice {
 public:
  explicit CheckingDevice(BlockDevice& in) : in_(in) {}
  const Geometry& geometry() const override { return in_.geometry(); }
  Status Read(uint64_t a, void* d, size_t n) override {
    return Access(a, [&] { return in_.Read(a, d, n); });
  }
  Status Program(uint64_t a, const void* s, size_t n) override {
    return Access(a, [&] { return in_.Program(a, s, n); });
  }
  Status Erase(uint64_t a, uint64_t n) override {
    const uint32_t b = in_.BankOf(a);
    if (busy_[b].exchange(1) != 0) violations_.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow erase
    const Status s = in_.Erase(a, n);
    busy_[b].store(0);
    return s;
  }
  uint32_t BankOf(uint64_t a) const override { return in_.BankOf(a); }
  uint32_t violations() const { return violations_.load(); }

 private:
  template <typename F>
  Status Access(uint64_t a, F op) {
    const uint32_t b = in_.BankOf(a);
    if (busy_[b].load() != 0) violations_.fetch_add(1);
    return op();
  }
  BlockDevice& in_;
  std::atomic<uint32_t> busy_[kMaxRingBanks] = {};
  std::atomic<uint32_t> violations_{0};
};

}  // namespace

TEST(SecondCoreErasesWhileSpillingWithBankExclusion) {
  Flash f(TwoBankFlash());
  CHECK_OK(f.sim.Init());
  CheckingDevice raw(f.sim);
  ThreadPlatform pf;
  EraseRingShared ring;
  BankLockedDevice main_dev(raw, pf);  // the M7's view
  RingEraseQueue q(ring, pf, main_dev);
  RingEraseWorker w(ring, pf, raw);  // the M4 locks inside Poll
  CHECK_OK(q.Init());
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    while (!w.Attach()) std::this_thread::yield();
    while (!stop.load()) {
      if (!w.Poll()) std::this_thread::yield();
    }
  });
  CHECK_OK(q.WaitForWorker(1000000));
  SpillSlot slots[3];
  SectorInfo sectors[16];
  uint8_t staging[256];
  SpillMemory mem{slots, 3, sectors, 16};
  SpillConfig cfg;
  cfg.region_size = 64 * 1024;
  cfg.codec_block_bytes = 512;
  cfg.pre_erase_sectors = 3;
  SpillManager m(main_dev, q, cfg, mem);
  Status st = m.Init();
  Rng rng(5);
  bool same = true;
  for (int inference = 0; inference < 40 && Ok(st) && same; ++inference) {
    std::vector<uint8_t> a(6000), b(3000);
    for (auto& v : a) v = rng.Below(2) ? 7 : static_cast<uint8_t>(rng.Next());
    for (auto& v : b) v = static_cast<uint8_t>(rng.Next());
    st = m.Spill(0, a.data(), a.size(), 1, ByteSpan{staging, sizeof(staging)});
    if (Ok(st)) st = m.Spill(1, b.data(), b.size(), 1, ByteSpan{staging, sizeof(staging)});
    std::vector<uint8_t> back(a.size());
    if (Ok(st)) st = m.FetchRange(0, 1000, 2000, back.data());
    same = same && Ok(st) && std::memcmp(back.data(), a.data() + 1000, 2000) == 0;
    if (Ok(st)) st = m.Fetch(1, back.data(), back.size());
    same = same && Ok(st) && std::memcmp(back.data(), b.data(), b.size()) == 0;
    if (Ok(st)) st = m.Release(0);
    if (Ok(st)) st = m.Release(1);
    m.EndInference();
  }
  const Status drained = m.Drain();
  stop.store(true);
  worker.join();
  CHECK_OK(st);
  CHECK_OK(drained);
  CHECK(same);
  CHECK_EQ(raw.violations(), 0u);
  CHECK(ring.erases_done.load() > 16u);  // the ring wrapped several times
  CHECK_EQ(uint64_t{ring.erases_done.load()}, f.sim.erase_stats().erases);
}
#endif

TINYTEST_MAIN("erase_ring")
