// The Cortex-M4 half of asynchronous block erase (paper section 5.2): the
// loop the M4 sketch runs. It attaches to the erase ring the M7 initialised
// in SRAM4 and erases each queued sector on its own device instance while
// holding that bank's HSEM, so the M7 keeps computing (and touches a bank
// only when no erase runs there).
#ifndef TINYSEG_TARGETS_NICLA_VISION_M4_ERASE_WORKER_H_
#define TINYSEG_TARGETS_NICLA_VISION_M4_ERASE_WORKER_H_

#include "hsem_ring_platform.h"
#include "tinyseg/block_device.h"
#include "tinyseg/erase_ring.h"

namespace tinyseg_nicla {

struct EraseWorkerStats {
  uint32_t erases = 0;
  uint32_t idle_waits = 0;
};

// Waits for the M7's ring, then serves it forever. `device` is the M4's own,
// unlocked device (the worker locks around each erase). `idle` is called
// when the ring is empty (default: WFE, woken by the M7's SEV or any IRQ).
[[noreturn]] void RunEraseWorker(tinyseg::BlockDevice& device, HsemRingPlatform& platform,
                                 void (*idle)() = nullptr, EraseWorkerStats* stats = nullptr);

}  // namespace tinyseg_nicla

#endif  // TINYSEG_TARGETS_NICLA_VISION_M4_ERASE_WORKER_H_
