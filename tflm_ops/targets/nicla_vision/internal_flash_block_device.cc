// Internal-flash spill storage on the Nicla Vision (see the header).
#include "internal_flash_block_device.h"

#if defined(CORE_CM7)
#include "cmsis.h"  // SCB_InvalidateDCache_by_Addr
#endif

namespace tinyseg_nicla {

using tinyseg::Status;

InternalFlashBlockDevice::InternalFlashBlockDevice(uint32_t region_start, uint32_t region_size)
    : RegionBlockDevice<mbed::FlashIAP>(region_start, region_size, /*program_size=*/32,
                                        kInternalSector) {}

Status InternalFlashBlockDevice::Init() {
  if (ready_) return Status::kOk;
  if (start_ < kBank2Start || start_ + g_.total_size > kFlashEnd) return Status::kOutOfRange;
  if (driver_.init() != 0) return Status::kIoError;
  // The region must not hold this core's code (and the M4's image, checked
  // by the M4 sketch the same way, must end below it).
  if (FLASHIAP_APP_ROM_END_ADDR > start_ && FLASHIAP_APP_ROM_END_ADDR < kFlashEnd) {
    return Status::kNoSpace;
  }
  const uint32_t page = driver_.get_page_size();
  if (page == 0 || page > g_.program_size || g_.program_size % page != 0)
    return Status::kUnsupported;
  for (uint64_t a = 0; a < g_.total_size; a += g_.erase_size) {
    if (driver_.get_sector_size(static_cast<uint32_t>(start_ + a)) != g_.erase_size) {
      return Status::kUnsupported;
    }
  }
  erase_value_ = driver_.get_erase_value();
  ready_ = true;
  return tinyseg::ValidateGeometry(g_);
}

Status InternalFlashBlockDevice::Read(uint64_t addr, void* dst, size_t len) {
  return Access(addr, len, g_.read_size, [&](uint32_t a, uint32_t n) {
#if defined(CORE_CM7) && defined(__DCACHE_PRESENT) && (__DCACHE_PRESENT == 1U)
    // Flash is cacheable on the M7; another core may have erased it since.
    const uint32_t line = a & ~31u;
    SCB_InvalidateDCache_by_Addr(reinterpret_cast<uint32_t*>(line),
                                 static_cast<int32_t>(((a + n + 31u) & ~31u) - line));
#endif
    return driver_.read(dst, a, n);
  });
}

uint32_t InternalFlashBlockDevice::BankOf(uint64_t addr) const {
  return start_ + addr >= kBank2Start ? 1u : 0u;
}

}  // namespace tinyseg_nicla
