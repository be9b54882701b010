// Modelled spill/fetch cost of the Tiny U-Net skip connections on the two
// Nicla Vision flash targets, with synchronous vs asynchronous (second-core)
// erase. Times come from the datasheet models in tinyseg/flash_profiles.h,
// not from hardware; activations are synthetic int8 tensors in which a
// fraction `rep` of the elements equals the zero point (paper Fig. 9(b):
// ~50% for most tensors), the rest uniform random.
//
//   spill_model_bench [rep_fraction=0.5] [compute_ms_per_cold_range=100]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tinyseg/erase_queue.h"
#include "tinyseg/flash_profiles.h"
#include "tinyseg/nor_flash_sim.h"
#include "tinyseg/spill_manager.h"

using namespace tinyseg;

namespace {

struct Tensor {
  const char* name;
  size_t bytes;
};

// Tiny U-Net (paper Table 2 input 80x120x3): skip tensors x1, x2, x3.
const Tensor kSkips[] = {
    {"x1 80x120x8", 80 * 120 * 8}, {"x2 40x60x16", 40 * 60 * 16}, {"x3 20x30x32", 20 * 30 * 32}};

std::vector<uint8_t> Activation(size_t n, double rep, uint64_t seed) {
  std::vector<uint8_t> t(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& v : t) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    const uint64_t r = s * 0x2545F4914F6CDD1Dull;
    v = (static_cast<double>(r >> 11) / 9007199254740992.0) < rep
            ? 0x80  // int8 zero point -128
            : static_cast<uint8_t>(1 + (r >> 3) % 255);
  }
  return t;
}

struct Result {
  double ms_per_inference_flash = 0;  // critical-path flash time per inference
  double erase_wait_ms = 0;
  double erases_per_inference = 0;
  double lifetime_inferences = 0;
  double stored_kb = 0;
};

int Run(const char* label, const NorFlashConfig& cfg, uint64_t region_bytes, bool async,
        bool pre_erase_after_spill, double rep, double compute_ms, Result* out) {
  std::vector<uint8_t> mem(static_cast<size_t>(cfg.geometry.total_size));
  std::vector<uint32_t> counts(cfg.geometry.num_sectors());
  std::vector<uint8_t> flags(NorFlashSim::ProgramFlagBytes(cfg));
  NorFlashSim sim(cfg, mem.data(), counts.data(), flags.data());
  if (!Ok(sim.Init())) return 1;
  VirtualClock clock;
  SyncEraseQueue sq(sim, &clock);
  EraseRecord rec[64];
  ModelledEraseQueue mq(sim, clock, rec, 64);
  EraseQueue& q = async ? static_cast<EraseQueue&>(mq) : static_cast<EraseQueue&>(sq);
  const size_t nsec = static_cast<size_t>(region_bytes / cfg.geometry.erase_size);
  std::vector<SpillSlot> slots(3);
  std::vector<SectorInfo> sectors(nsec);
  std::vector<uint8_t> staging(256);
  SpillMemory m{slots.data(), slots.size(), sectors.data(), nsec};
  SpillConfig sc;
  sc.region_size = region_bytes;
  sc.pre_erase_sectors = static_cast<uint32_t>(nsec > 8 ? 8 : nsec - 1);
  sc.pre_erase_after_spill = pre_erase_after_spill;
  SpillManager mgr(sim, q, sc, m, &clock);
  Status s = mgr.Init();
  if (!Ok(s)) {
    std::fprintf(stderr, "%s: init failed: %s\n", label, StatusName(s));
    return 1;
  }
  std::vector<uint8_t> buf(80 * 120 * 8);
  const int kWarm = 3, kInferences = 30;
  uint64_t t0 = 0, w0 = 0;
  for (int inf = 0; inf < kWarm + kInferences; ++inf) {
    if (inf == kWarm) {
      t0 = clock.now_ns;
      w0 = clock.erase_wait_ns;
    }
    std::vector<uint8_t> t[3];
    for (int i = 0; i < 3; ++i) {
      t[i] = Activation(kSkips[i].bytes, rep, static_cast<uint64_t>(inf * 3 + i + 1));
      s = mgr.Spill(static_cast<uint32_t>(i), t[i].data(), t[i].size(), 1,
                    ByteSpan{staging.data(), staging.size()});
      if (!Ok(s)) {
        std::fprintf(stderr, "%s: spill: %s\n", label, StatusName(s));
        return 1;
      }
      clock.Advance(static_cast<uint64_t>(compute_ms * 1e6 / 3));  // encoder layers
    }
    clock.Advance(static_cast<uint64_t>(compute_ms * 1e6));  // bottleneck
    for (int i = 2; i >= 0; --i) {                           // decoder fetches in reverse order
      s = mgr.Fetch(static_cast<uint32_t>(i), buf.data(), buf.size());
      if (!Ok(s) || std::memcmp(buf.data(), t[i].data(), t[i].size()) != 0) {
        std::fprintf(stderr, "%s: fetch mismatch\n", label);
        return 1;
      }
      if (!Ok(mgr.Release(static_cast<uint32_t>(i)))) return 1;
      clock.Advance(static_cast<uint64_t>(compute_ms * 1e6 / 3));  // decoder layers
    }
    mgr.EndInference();
  }
  const double compute_total_ms = kInferences * compute_ms * 3;  // advanced above
  out->ms_per_inference_flash = ((clock.now_ns - t0) / 1e6 - compute_total_ms) / kInferences;
  out->erase_wait_ms = (clock.erase_wait_ns - w0) / 1e6 / kInferences;
  const WearReport w = mgr.Wear(10000);
  const double bytes_per_inf =
      static_cast<double>(mgr.stats().bytes_programmed) / (kWarm + kInferences);
  const WearEstimate e = EstimateWear(region_bytes, cfg.geometry.erase_size,
                                      static_cast<uint64_t>(bytes_per_inf), 10000);
  out->erases_per_inference = w.erases_per_inference;
  out->lifetime_inferences = e.inferences_to_limit;
  out->stored_kb = bytes_per_inf / 1024.0;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const double rep = argc > 1 ? std::atof(argv[1]) : 0.5;
  const double compute_ms = argc > 2 ? std::atof(argv[2]) : 100.0;
  if (rep < 0 || rep > 1 || compute_ms < 0) {
    std::fprintf(stderr, "usage: spill_model_bench [rep_fraction 0..1] [compute_ms >= 0]\n");
    return 2;
  }
  size_t raw = 0;
  for (const Tensor& t : kSkips) raw += t.bytes;
  std::printf(
      "Tiny U-Net skips spilled per inference: %zu bytes raw; rep fraction %.2f; "
      "compute %.0f ms per cold-range phase\n",
      raw, rep, compute_ms);
  std::printf("%-34s %-10s %9s %12s %10s %9s %14s\n", "target", "erase", "KB/inf", "flash ms/inf",
              "wait ms", "erases", "inferences@10k");
  struct Target {
    const char* name;
    NorFlashConfig cfg;
    uint64_t region;
  } targets[] = {
      {"STM32H757 internal x32, 4x128KB",
       Resized(Stm32h757InternalFlash(H7Parallelism::kX32), 1024 * 1024), 512 * 1024},
      {"AT25QL128A QSPI, 1 MB region", NiclaVisionQspiFlash(), 1024 * 1024},
  };
  for (const Target& t : targets) {
    // sync; async pre-erasing after spills and releases; async after releases only.
    for (int mode = 0; mode < 3; ++mode) {
      Result r;
      if (Run(t.name, t.cfg, t.region, mode != 0, mode != 2, rep, compute_ms, &r) != 0) return 1;
      static const char* const kMode[3] = {"sync", "async", "async-rel"};
      std::printf("%-34s %-10s %9.1f %12.1f %10.1f %9.2f %14.0f\n", t.name, kMode[mode],
                  r.stored_kb, r.ms_per_inference_flash, r.erase_wait_ms, r.erases_per_inference,
                  r.lifetime_inferences);
    }
  }
  return 0;
}
