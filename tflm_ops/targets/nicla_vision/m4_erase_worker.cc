// Cortex-M4 erase worker loop (see the header).
#include "m4_erase_worker.h"

#include <chrono>

// Mbed's own headers, not the Arduino "mbed.h" wrapper (see hsem_ring_platform.cc).
#include "cmsis.h"            // __WFE
#include "rtos/ThisThread.h"  // rtos::ThisThread::sleep_for

namespace tinyseg_nicla {

void RunEraseWorker(tinyseg::BlockDevice& device, HsemRingPlatform& platform, void (*idle)(),
                    EraseWorkerStats* stats) {
  tinyseg::RingEraseWorker worker(SharedEraseRing(), platform, device);
  while (!worker.Attach()) rtos::ThisThread::sleep_for(std::chrono::milliseconds(1));
  for (;;) {
    if (worker.Poll()) {
      if (stats) ++stats->erases;
      continue;
    }
    if (stats) ++stats->idle_waits;
    if (idle) {
      idle();
    } else {
      __WFE();
    }
  }
}

}  // namespace tinyseg_nicla
