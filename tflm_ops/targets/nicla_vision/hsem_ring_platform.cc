// HSEM bank locks and SEV doorbell for the M7/M4 erase ring (see the header).
#include "hsem_ring_platform.h"

#include "hal/us_ticker_api.h"
#include "mbed.h"  // HAL (stm32h7xx_hal.h), CMSIS intrinsics, rtos::ThisThread

namespace tinyseg_nicla {

void HsemRingPlatform::Init() { __HAL_RCC_HSEM_CLK_ENABLE(); }

void HsemRingPlatform::LockBank(uint32_t bank) {
  // Spins while the other core holds it (an erase: up to ~1-2 s on an
  // internal sector, ~60 ms on a QSPI sector).
  while (HAL_HSEM_FastTake(base_ + bank) != HAL_OK) Relax();
}

void HsemRingPlatform::UnlockBank(uint32_t bank) { HAL_HSEM_Release(base_ + bank, 0); }

void HsemRingPlatform::Notify() {
  __DSB();
  __SEV();
}

void HsemRingPlatform::Relax() { rtos::ThisThread::yield(); }

uint32_t HsemRingPlatform::NowUs() { return us_ticker_read(); }

}  // namespace tinyseg_nicla
