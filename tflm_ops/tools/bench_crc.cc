// Cost of the stored-block check: CRC-32 alone, and the codec's Encode /
// DecodeAll with block checks on and off, over one 16 KB activation-like
// int8 tensor (60 % one value, 1 KB blocks). benchmarks/storage_crc.py
// builds and runs it.
//
// Host:        bench_crc            prints "case bytes ns_per_byte" (wall clock)
//              bench_crc CASE N     runs only CASE N times (for callgrind's
//                                   --toggle-collect=bench_CASE)
// Cortex-M7:   run in qemu-system-arm -icount shift=0 (one instruction per
//              virtual ns); SysTick, calibrated on a loop of known length,
//              turns elapsed ticks into instructions: prints
//              "case bytes instructions".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tinyseg/codec.h"
#include "tinyseg/crc32.h"

using namespace tinyseg;

namespace {

constexpr size_t kBytes = 16384;
uint8_t g_tensor[kBytes];
uint8_t g_enc_on[kBytes + 2048];
uint8_t g_enc_off[kBytes + 2048];
size_t g_len_on = 0, g_len_off = 0;
uint8_t g_out[kBytes];
volatile uint32_t g_sink = 0;

void Setup() {
  uint32_t s = 12345;
  for (size_t i = 0; i < kBytes; ++i) {
    s = s * 1103515245u + 12345u;
    g_tensor[i] = (s >> 16) % 100 < 60 ? 0x80 : static_cast<uint8_t>(s >> 24);
  }
  (void)EncodeToBuffer(g_tensor, kBytes, CodecParams{1, 1024, true}, g_enc_on, sizeof(g_enc_on),
                       &g_len_on, nullptr);
  (void)EncodeToBuffer(g_tensor, kBytes, CodecParams{1, 1024, false}, g_enc_off, sizeof(g_enc_off),
                       &g_len_off, nullptr);
}

}  // namespace

// Not inlined, C names: callgrind toggles collection on them.
extern "C" __attribute__((noinline)) void bench_crc32() { g_sink = Crc32(g_tensor, kBytes); }
extern "C" __attribute__((noinline)) void bench_encode_checked() {
  size_t len = 0;
  g_sink = static_cast<uint32_t>(EncodeToBuffer(g_tensor, kBytes, CodecParams{1, 1024, true},
                                                g_enc_on, sizeof(g_enc_on), &len, nullptr));
}
extern "C" __attribute__((noinline)) void bench_encode_unchecked() {
  size_t len = 0;
  g_sink = static_cast<uint32_t>(EncodeToBuffer(g_tensor, kBytes, CodecParams{1, 1024, false},
                                                g_enc_off, sizeof(g_enc_off), &len, nullptr));
}
extern "C" __attribute__((noinline)) void bench_decode_checked() {
  MemorySource src(g_enc_on, g_len_on);
  g_sink = static_cast<uint32_t>(DecodeAll(src, g_out, kBytes, nullptr));
}
extern "C" __attribute__((noinline)) void bench_decode_unchecked() {
  MemorySource src(g_enc_off, g_len_off);
  g_sink = static_cast<uint32_t>(DecodeAll(src, g_out, kBytes, nullptr));
}

namespace {

struct Case {
  const char* name;
  void (*run)();
};
const Case kCases[] = {
    {"crc32", bench_crc32},
    {"encode_checked", bench_encode_checked},
    {"encode_unchecked", bench_encode_unchecked},
    {"decode_checked", bench_decode_checked},
    {"decode_unchecked", bench_decode_unchecked},
};

bool RoundTripsOk() {
  bench_decode_checked();
  if (g_sink != 0 || std::memcmp(g_out, g_tensor, kBytes) != 0) return false;
  bench_decode_unchecked();
  return g_sink == 0 && std::memcmp(g_out, g_tensor, kBytes) == 0;
}

}  // namespace

#if defined(__arm__)

namespace {

volatile uint32_t* const kSystCsr = reinterpret_cast<volatile uint32_t*>(0xE000E010u);
volatile uint32_t* const kSystRvr = reinterpret_cast<volatile uint32_t*>(0xE000E014u);
volatile uint32_t* const kSystCvr = reinterpret_cast<volatile uint32_t*>(0xE000E018u);

uint32_t Ticks(void (*fn)()) {
  *kSystCvr = 0;
  const uint32_t t0 = *kSystCvr;
  fn();
  const uint32_t t1 = *kSystCvr;
  return (t0 - t1) & 0xFFFFFFu;  // down-counter, 24 bits
}

constexpr uint32_t kLoop = 1000000;
void Loop() {
  uint32_t n = kLoop;
  __asm__ volatile("1: subs %0, %0, #1\n bne 1b" : "+r"(n) : : "cc");  // 2 per iteration
}

}  // namespace

int main() {
  Setup();
  if (!RoundTripsOk()) {
    std::printf("bench_crc: round trip failed\n");
    return 1;
  }
  *kSystRvr = 0xFFFFFFu;
  *kSystCsr = 5;  // enabled, processor clock, no interrupt
  const double per_tick = 2.0 * kLoop / static_cast<double>(Ticks(Loop));
  for (const Case& c : kCases) {
    c.run();  // warm
    const double insns = static_cast<double>(Ticks(c.run)) * per_tick;
    std::printf("%s %u %.0f\n", c.name, static_cast<unsigned>(kBytes), insns);
  }
  return 0;
}

#else

#include <chrono>

int main(int argc, char** argv) {
  Setup();
  if (!RoundTripsOk()) {
    std::fprintf(stderr, "bench_crc: round trip failed\n");
    return 1;
  }
  if (argc == 3) {  // one case, N times (callgrind)
    for (const Case& c : kCases) {
      if (std::strcmp(argv[1], c.name) != 0) continue;
      const long n = std::strtol(argv[2], nullptr, 10);
      for (long i = 0; i < n; ++i) c.run();
      return 0;
    }
    std::fprintf(stderr, "bench_crc: unknown case %s\n", argv[1]);
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  for (const Case& c : kCases) {
    long reps = 0;
    const auto t0 = Clock::now();
    auto t1 = t0;
    while (std::chrono::duration<double>(t1 - t0).count() < 0.2) {
      for (int i = 0; i < 10; ++i) c.run();
      reps += 10;
      t1 = Clock::now();
    }
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    std::printf("%s %u %.3f\n", c.name, static_cast<unsigned>(kBytes),
                ns / static_cast<double>(reps) / kBytes);
  }
  return 0;
}

#endif
