// HSEM bank locks and SEV doorbell for the M7/M4 erase ring (see the header).
#include "hsem_ring_platform.h"

// Mbed's own headers, not the Arduino core's "mbed.h" wrapper: that one
// includes Arduino.h first, whose one-argument abs() macro breaks <chrono>
// (std::chrono::abs) under -std=gnu++17 (the core's default is gnu++14).
#include "cmsis.h"              // stm32h7xx.h: HSEM HAL, RCC clock macro, __DSB/__SEV, D-cache
#include "hal/us_ticker_api.h"  // us_ticker_read
#include "rtos/ThisThread.h"    // rtos::ThisThread::yield

namespace tinyseg_nicla {

void HsemRingPlatform::Init() { __HAL_RCC_HSEM_CLK_ENABLE(); }

void HsemRingPlatform::LockBank(uint32_t bank) {
  // Spins while the other core holds it (an erase: up to ~1-2 s on an
  // internal sector, ~64 ms on a QSPI sector).
  while (HAL_HSEM_FastTake(base_ + bank) != HAL_OK) Relax();
}

void HsemRingPlatform::UnlockBank(uint32_t bank) { HAL_HSEM_Release(base_ + bank, 0); }

void HsemRingPlatform::Notify() {
  __DSB();
  __SEV();
}

void HsemRingPlatform::Relax() { rtos::ThisThread::yield(); }

uint32_t HsemRingPlatform::NowUs() { return us_ticker_read(); }

void WriteBackSharedEraseRing() {
#if defined(CORE_CM7) && defined(__DCACHE_PRESENT) && (__DCACHE_PRESENT == 1U)
  static_assert(kEraseRingAddr % 32 == 0, "erase ring must start on a cache line");
  constexpr int32_t kBytes = static_cast<int32_t>((sizeof(tinyseg::EraseRingShared) + 31u) & ~31u);
  SCB_CleanInvalidateDCache_by_Addr(
      reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(kEraseRingAddr)), kBytes);
#endif
}

}  // namespace tinyseg_nicla
