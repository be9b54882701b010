// tinyseg::BlockDevice over the STM32H747/H757 internal flash through Mbed's
// FlashIAP, restricted to a sector-aligned region of bank 2 (nicla_layout.h).
// Device addresses are region-relative.
//
// Geometry: 32-byte program unit (one 256-bit flash word with ECC, programmable
// once per erase -- the SpillManager pads every spill to it), 128 KB sectors,
// byte reads. Reads are memory-mapped: on the Cortex-M7 the D-cache lines of
// the range are invalidated first, because the M4 may have erased the sector
// behind the M7's cache.
//
// Threading: Read/Program here, Erase on the M4 -- wrap the M7's instance in
// tinyseg::BankLockedDevice (hsem_ring_platform.h) so they never overlap on a
// bank; the M4's erase worker takes the same lock itself.
#ifndef TINYSEG_TARGETS_NICLA_VISION_INTERNAL_FLASH_BLOCK_DEVICE_H_
#define TINYSEG_TARGETS_NICLA_VISION_INTERNAL_FLASH_BLOCK_DEVICE_H_

#include "FlashIAP.h"
#include "nicla_layout.h"
#include "region_block_device.h"

namespace tinyseg_nicla {

class InternalFlashBlockDevice final : public RegionBlockDevice<mbed::FlashIAP> {
 public:
  InternalFlashBlockDevice(uint32_t region_start = kInternalRegionStart,
                           uint32_t region_size = kInternalRegionSize);
  // FlashIAP init and checks: region inside bank 2, sector and page sizes as
  // expected, region above this core's own image (FLASHIAP_APP_ROM_END_ADDR).
  tinyseg::Status Init();

  // The driver's read after invalidating the range's D-cache lines on the M7.
  tinyseg::Status Read(uint64_t addr, void* dst, size_t len) override;
  uint8_t erased_value() const override { return erase_value_; }
  // Physical bank (0 or 1) of a region-relative address.
  uint32_t BankOf(uint64_t addr) const override;

 private:
  uint8_t erase_value_ = 0xFF;
};

}  // namespace tinyseg_nicla

#endif  // TINYSEG_TARGETS_NICLA_VISION_INTERNAL_FLASH_BLOCK_DEVICE_H_
