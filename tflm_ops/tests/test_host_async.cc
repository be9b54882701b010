// Host-only tests: std::thread erase worker and the file back-end.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "tinyseg/flash_profiles.h"
#include "tinyseg/host/file_block_device.h"
#include "tinyseg/host/thread_erase_queue.h"
#include "tinyseg/nor_flash_sim.h"
#include "tinyseg/spill_manager.h"
#include "tinytest.h"
#include "sim_box.h"
#include "spill_tables.h"

using namespace tinyseg;
using tinytest::Rng;

namespace {

std::string TempPath(const char* tag) {
  const char* dir = std::getenv("TMPDIR");
  std::string p = dir ? dir : "/tmp";
  p += "/tinyseg_";
  p += tag;
  p += "_" + std::to_string(static_cast<long>(::getpid())) + ".bin";
  return p;
}

}  // namespace

TEST(ThreadQueueErasesInBackground) {
  SimBox b(Resized(NiclaVisionQspiFlash(), 256 * 1024));  // 64 sectors
  CHECK_OK(b.sim.Init());
  // Dirty the sectors the worker will erase.
  std::vector<uint8_t> zeros(4096, 0);
  for (uint32_t s = 0; s < 32; ++s) CHECK_OK(b.sim.Program(s * 4096ull, zeros.data(), 4096));
  // 1e-3 scale: each 64 ms erase sleeps 64 us on the worker.
  ThreadEraseQueue q(b.sim, 64, 1e-3);
  std::vector<EraseTicket> tickets;
  for (uint32_t s = 0; s < 32; ++s) {
    EraseTicket t = 0;
    CHECK_OK(q.Submit(s * 4096ull, 4096, &t));
    tickets.push_back(t);
  }
  // Meanwhile the "main core" programs and verifies the other half.
  std::vector<uint8_t> pattern(4096), back(4096);
  for (uint32_t s = 32; s < 64; ++s) {
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * s);
    CHECK_OK(b.sim.Program(s * 4096ull, pattern.data(), 4096));
    CHECK_OK(b.sim.Read(s * 4096ull, back.data(), 4096));
    CHECK(back == pattern);
  }
  for (size_t i = 0; i < tickets.size(); ++i) {
    CHECK_OK(q.Wait(tickets[i]));
    CHECK(q.IsDone(tickets[i]));
    CHECK_OK(b.sim.Read(i * 4096ull, back.data(), 4096));
    for (uint8_t v : back) CHECK_EQ(v, 0xFF);
    CHECK_EQ(b.sim.erase_count(static_cast<uint32_t>(i)), 1u);
  }
  CHECK_OK(q.Drain());
}

TEST(ThreadQueueFullAndErrors) {
  SimBox b(Resized(NiclaVisionQspiFlash(), 64 * 1024));
  CHECK_OK(b.sim.Init());
  ThreadEraseQueue q(b.sim, 2, 1e-2);  // 600 us per erase
  EraseTicket t1, t2, t3;
  CHECK_OK(q.Submit(0, 4096, &t1));
  CHECK_OK(q.Submit(4096, 4096, &t2));
  Status s = q.Submit(8192, 4096, &t3);
  if (s == Status::kBusy) {  // expected unless the worker already finished one
    CHECK_OK(q.Wait(t1));
    CHECK_OK(q.Submit(8192, 4096, &t3));
  }
  CHECK_OK(q.Wait(t3));
  EraseTicket bad;
  CHECK_OK(q.Submit(123, 4096, &bad));
  CHECK_STATUS(q.Wait(bad), Status::kMisaligned);
  EraseTicket after;
  CHECK_OK(q.Submit(0, 4096, &after));
  CHECK_OK(q.Wait(after));  // a failure is not sticky
  CHECK_STATUS(q.Wait(bad), Status::kMisaligned);
  CHECK_STATUS(q.Wait(bad + 5), Status::kInvalidArgument);
  // Destruction with queued work joins cleanly.
  ThreadEraseQueue* q2 = new ThreadEraseQueue(b.sim, 8, 1e-3);
  for (int i = 0; i < 8; ++i) {
    EraseTicket t;
    CHECK_OK(q2->Submit(static_cast<uint64_t>(i) * 4096, 4096, &t));
  }
  delete q2;
}

TEST(SpillWithThreadWorkerRoundTrips) {
  SimBox b(Resized(NiclaVisionQspiFlash(), 128 * 1024));
  CHECK_OK(b.sim.Init());
  ThreadEraseQueue q(b.sim, 16, 1e-4);
  SpillTables tb(3, 32, 256);
  SpillConfig cfg;
  cfg.region_size = 128 * 1024;
  cfg.pre_erase_sectors = 4;
  SpillManager m(b.sim, q, cfg, tb.memory());
  CHECK_OK(m.Init());
  Rng rng(21);
  std::vector<uint8_t> out(30000);
  for (int inf = 0; inf < 40; ++inf) {
    std::vector<uint8_t> a(12000 + rng.Below(8000)), c(3000 + rng.Below(3000));
    const uint8_t rep = static_cast<uint8_t>(rng.Next());
    for (auto& v : a) v = rng.Below(2) ? rep : static_cast<uint8_t>(rng.Next());
    for (auto& v : c) v = rng.Below(4) ? rep : static_cast<uint8_t>(rng.Next());
    CHECK_OK(m.Spill(0, a.data(), a.size(), 1, tb.span()));
    CHECK_OK(m.Spill(1, c.data(), c.size(), 1, tb.span()));
    CHECK(FetchesBackAndReleases(m, 1, c, out));
    CHECK(FetchesRange(m, 0, 777, 5000, a, out));
    CHECK(FetchesBackAndReleases(m, 0, a, out));
    m.EndInference();
  }
  CHECK_OK(m.Drain());
  CHECK_EQ(b.sim.access_stats().rejected_programs, 0u);
  const WearReport w = m.Wear();
  CHECK(w.min_sector_erases > 0);
  CHECK(w.max_sector_erases - w.min_sector_erases <= 1);
  for (uint32_t s = 0; s < 32; ++s) CHECK_EQ(m.sector(s).erases, b.sim.erase_count(s));
  std::printf("  thread worker: %llu erases, %llu spill-path stalls, %.2f erases/inference\n",
              static_cast<unsigned long long>(w.total_erases),
              static_cast<unsigned long long>(m.stats().erase_waits), w.erases_per_inference);
}

TEST(FileBlockDeviceAndSpill) {
  const std::string path = TempPath("file_bd");
  const Geometry g{1, 1, 4096, 64 * 1024};
  {
    FileBlockDevice f(g);
    CHECK_OK(f.Open(path.c_str(), true));
    uint8_t d[8] = {1, 2, 3, 4, 5, 6, 7, 8}, o[8];
    CHECK_OK(f.Program(4100, d, 8));
    CHECK_OK(f.Read(4100, o, 8));
    CHECK(std::memcmp(d, o, 8) == 0);
    CHECK_OK(f.Erase(4096, 4096));
    CHECK_OK(f.Read(4100, o, 8));
    CHECK_EQ(o[3], 0xFF);
    CHECK_STATUS(f.Erase(100, 4096), Status::kMisaligned);
    CHECK_STATUS(f.Read(65530, o, 8), Status::kOutOfRange);

    ThreadEraseQueue q(f, 8);
    SpillTables tb(2, 16, 512);
    SpillConfig cfg;
    cfg.region_size = 64 * 1024;
    SpillManager m(f, q, cfg, tb.memory());
    CHECK_OK(m.Init());
    std::vector<uint8_t> t(20000), out(20000);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint8_t>((i % 3) ? 0x80 : i);
    for (int i = 0; i < 10; ++i) {
      CHECK_OK(m.Spill(0, t.data(), t.size(), 2, tb.span()));
      CHECK_OK(m.Fetch(0, out.data(), out.size()));
      CHECK(out == t);
    }
    CHECK_OK(m.Drain());
  }
  {
    FileBlockDevice f(g);  // reopen without formatting: size must match
    CHECK_OK(f.Open(path.c_str(), false));
    FileBlockDevice wrong(Geometry{1, 1, 4096, 128 * 1024});
    CHECK_STATUS(wrong.Open(path.c_str(), false), Status::kInvalidArgument);
  }
  std::remove(path.c_str());
  FileBlockDevice nf(g);
  CHECK_STATUS(nf.Open("/nonexistent_dir_tinyseg/x.bin", true), Status::kIoError);
}

TINYTEST_MAIN("host_async")
