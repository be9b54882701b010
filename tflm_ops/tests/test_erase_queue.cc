// Synchronous and modelled-asynchronous erase queues.
#include <cstring>
#include <initializer_list>
#include <vector>

#include "tinyseg/erase_queue.h"
#include "tinyseg/flash_profiles.h"
#include "tinyseg/nor_flash_sim.h"
#include "tinytest.h"
#include "sim_box.h"

using namespace tinyseg;

namespace {

constexpr uint64_t kMs = 1000000;

// One 4 KB QSPI sector erase, taken from the profile (not copied) so the
// queue tests follow the datasheet figures.
uint64_t QspiEraseNs() { return NiclaVisionQspiFlash().timing.erase_sector_ns; }

// A modelled queue of `capacity` (at most 4) erases over 64 KB of QSPI flash. Tests take the parts
// by name: auto& [b, clock, rec, q] = rig.
struct QspiQueue {
  explicit QspiQueue(size_t capacity) : q(b.sim, clock, rec, capacity) {}
  SimBox b{Resized(NiclaVisionQspiFlash(), 64 * 1024)};
  VirtualClock clock;
  EraseRecord rec[4];
  ModelledEraseQueue q;
};

}  // namespace

TEST(SyncQueueErasesImmediately) {
  SimBox b(Resized(NiclaVisionQspiFlash(), 64 * 1024));
  CHECK_OK(b.sim.Init());
  uint8_t d[16];
  std::memset(d, 0, sizeof(d));
  CHECK_OK(b.sim.Program(4096, d, 16));
  VirtualClock clock;
  SyncEraseQueue q(b.sim, &clock);
  EraseTicket t1 = 0, t2 = 0;
  CHECK_OK(q.Submit(4096, 4096, &t1));
  CHECK_EQ(t1, 1u);
  CHECK(q.IsDone(t1));
  CHECK_EQ(b.sim.erase_count(1), 1u);
  CHECK_EQ(clock.now_ns, QspiEraseNs());  // on the critical path
  CHECK_EQ(clock.erase_wait_ns, QspiEraseNs());
  CHECK_OK(q.Wait(t1));
  CHECK_OK(q.Submit(100, 4096, &t2));  // misaligned: reported by Wait
  CHECK_EQ(t2, 2u);
  CHECK_OK(q.Wait(t1));
  CHECK_STATUS(q.Wait(t2), Status::kMisaligned);
  CHECK_STATUS(q.Drain(), Status::kMisaligned);
  CHECK_STATUS(q.Wait(7), Status::kInvalidArgument);
}

TEST(ModelledQueueOverlapsWithCaller) {
  QspiQueue rig(2);
  auto& [b, clock, rec, q] = rig;
  CHECK_OK(b.sim.Init());
  EraseTicket t1, t2, t3;
  const uint64_t e = QspiEraseNs();
  CHECK(e > 10 * kMs && e <= 100 * kMs);  // the steps below assume this
  CHECK_OK(q.Submit(0, 4096, &t1));
  CHECK_OK(q.Submit(4096, 4096, &t2));
  CHECK_STATUS(q.Submit(8192, 4096, &t3), Status::kBusy);  // capacity 2
  CHECK_EQ(clock.now_ns, 0u);                              // submit costs the caller nothing
  CHECK_EQ(b.sim.erase_count(0), 1u);                      // device state already erased
  CHECK(!q.IsDone(t1));
  clock.Advance(10 * kMs);  // caller computes for 10 ms
  CHECK_OK(q.Wait(t1));     // erase 1 ends at e
  CHECK_EQ(clock.now_ns, e);
  CHECK_EQ(clock.erase_wait_ns, e - 10 * kMs);
  CHECK(!q.IsDone(t2));
  clock.Advance(100 * kMs);  // erase 2 ended at 2e
  CHECK(q.IsDone(t2));
  CHECK_OK(q.Wait(t2));
  CHECK_EQ(clock.erase_wait_ns, e - 10 * kMs);  // no extra wait
  CHECK_OK(q.Submit(8192, 4096, &t3));          // records retired: room again
  CHECK_OK(q.Drain());
  CHECK_EQ(clock.now_ns, 2 * e + 100 * kMs);
  CHECK_EQ(q.engine_busy_ns(), 3 * e);
}

TEST(ModelledQueueBankContention) {
  // STM32H757: two 1 MB banks; an erase blocks its own bank only.
  SimBox b(Stm32h757InternalFlash(H7Parallelism::kX32));
  CHECK_OK(b.sim.Init());
  VirtualClock clock;
  EraseRecord rec[4];
  ModelledEraseQueue q(b.sim, clock, rec, 4);
  EraseTicket t;
  const uint64_t bank1 = 1024 * 1024;
  CHECK_OK(q.Submit(bank1, 128 * 1024, &t));
  CHECK_OK(q.AwaitBankIdle(0, 32));  // bank 0: free
  CHECK_EQ(clock.now_ns, 0u);
  CHECK_OK(q.AwaitBankIdle(bank1 + 128 * 1024, 32));  // bank 1: busy 1.1 s
  CHECK_EQ(clock.now_ns, 1100 * kMs);
  // QSPI: one chip, any erase blocks every access.
  SimBox bq(Resized(NiclaVisionQspiFlash(), 64 * 1024));
  CHECK_OK(bq.sim.Init());
  VirtualClock c2;
  ModelledEraseQueue q2(bq.sim, c2, rec, 4);
  CHECK_OK(q2.Submit(0, 4096, &t));
  CHECK_OK(q2.Submit(4096, 4096, &t));
  CHECK_OK(q2.AwaitBankIdle(60000, 4));  // waits for both queued erases
  CHECK_EQ(c2.now_ns, 2 * QspiEraseNs());
}

TEST(ModelledQueueReportsErrors) {
  QspiQueue rig(4);
  auto& [b, clock, rec, q] = rig;
  CHECK_OK(b.sim.Init());
  EraseTicket t1, t2, t3;
  CHECK_OK(q.Submit(0, 4096, &t1));
  CHECK_OK(q.Submit(1, 4096, &t2));
  CHECK_OK(q.Submit(4096, 4096, &t3));
  CHECK_OK(q.Wait(t1));
  CHECK_STATUS(q.Wait(t2), Status::kMisaligned);
  CHECK_OK(q.Wait(t3));  // each ticket reports its own erase: a failure is not sticky
  CHECK_STATUS(q.Wait(t2), Status::kMisaligned);
}

TINYTEST_MAIN("erase_queue")
