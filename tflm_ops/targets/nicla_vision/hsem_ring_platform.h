// tinyseg::RingPlatform for the STM32H747/H757: bank locks are hardware
// semaphores (HSEM, 1-step "fast take": a semaphore taken by one core cannot
// be taken by the other until released), the doorbell is SEV (the M4 may
// sleep in WFE between polls), waits yield to other RTOS threads.
//
// One platform object per storage on each core: the internal flash uses
// semaphores base + bank (bank 0/1), the QSPI chip one semaphore for bank 0.
// The M7 and the M4 must construct it with the same base.
#ifndef TINYSEG_TARGETS_NICLA_VISION_HSEM_RING_PLATFORM_H_
#define TINYSEG_TARGETS_NICLA_VISION_HSEM_RING_PLATFORM_H_

#include "nicla_layout.h"
#include "tinyseg/erase_ring.h"

namespace tinyseg_nicla {

class HsemRingPlatform final : public tinyseg::RingPlatform {
 public:
  explicit HsemRingPlatform(uint32_t first_semaphore) : base_(first_semaphore) {}
  // Enables the HSEM clock (idempotent; RPC.begin() does it too).
  void Init();
  void LockBank(uint32_t bank) override;
  void UnlockBank(uint32_t bank) override;
  void Notify() override;
  void Relax() override;
  uint32_t NowUs() override;

 private:
  uint32_t base_;
};

// The erase ring in SRAM4, shared by both cores.
inline tinyseg::EraseRingShared& SharedEraseRing() {
  return *reinterpret_cast<tinyseg::EraseRingShared*>(static_cast<uintptr_t>(kEraseRingAddr));
}

// M7 only (no-op on the M4): call after RingEraseQueue::Init() and before
// RPC.begin(), without touching the ring in between. Until RPC.begin() maps
// SRAM4 non-cacheable, the M7's stores to the ring sit in its write-back
// D-cache, and RPC.begin() changes the MPU attributes without cache
// maintenance: the M4 it then boots would not see the initialised ring, and
// the dirty lines could later be evicted over words the M4 has written. This
// writes the ring's lines back to SRAM4 and drops them from the cache.
void WriteBackSharedEraseRing();

}  // namespace tinyseg_nicla

#endif  // TINYSEG_TARGETS_NICLA_VISION_HSEM_RING_PLATFORM_H_
