// What the internal-flash and QSPI devices share: a tinyseg::BlockDevice over
// a region [start, start + size) of an Mbed flash driver's address space, with
// byte reads and region-relative device addresses. Driver is mbed::FlashIAP or
// QSPIFBlockDevice: both read, program and erase with (buffer,) address, size
// and return 0 on success. The device's own Init() checks the region against
// the driver and sets ready_.
#ifndef TINYSEG_TARGETS_NICLA_VISION_REGION_BLOCK_DEVICE_H_
#define TINYSEG_TARGETS_NICLA_VISION_REGION_BLOCK_DEVICE_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/block_device.h"

namespace tinyseg_nicla {

template <typename Driver>
class RegionBlockDevice : public tinyseg::BlockDevice {
 public:
  const tinyseg::Geometry& geometry() const override { return g_; }
  tinyseg::Status Read(uint64_t addr, void* dst, size_t len) override {
    return Access(addr, len, g_.read_size,
                  [&](uint32_t a, uint32_t n) { return driver_.read(dst, a, n); });
  }
  tinyseg::Status Program(uint64_t addr, const void* src, size_t len) override {
    return Access(addr, len, g_.program_size,
                  [&](uint32_t a, uint32_t n) { return driver_.program(src, a, n); });
  }
  tinyseg::Status Erase(uint64_t addr, uint64_t len) override {
    return Access(addr, len, g_.erase_size,
                  [&](uint32_t a, uint32_t n) { return driver_.erase(a, n); });
  }

 protected:
  RegionBlockDevice(uint32_t region_start, uint32_t region_size, uint32_t program_size,
                    uint32_t erase_size)
      : start_(region_start) {
    g_.read_size = 1;
    g_.program_size = program_size;
    g_.erase_size = erase_size;
    g_.total_size = region_size;
  }
  ~RegionBlockDevice() = default;

  // One driver call on region bytes [addr, addr + len), `unit` aligned:
  // kInvalidArgument before Init, CheckAccess's error, kOk for an empty range
  // without calling the driver, else whether call(start + addr, len) returned
  // 0. Init has checked that the region lies inside the flash (the internal
  // flash below kFlashEnd, the 16 MB QSPI chip), so both fit in 32 bits.
  template <typename DriverCall>
  tinyseg::Status Access(uint64_t addr, uint64_t len, uint32_t unit, DriverCall call) {
    if (!ready_) return tinyseg::Status::kInvalidArgument;
    TINYSEG_RETURN_IF_ERROR(tinyseg::CheckAccess(g_, addr, len, unit));
    if (len == 0) return tinyseg::Status::kOk;
    return call(static_cast<uint32_t>(start_ + addr), static_cast<uint32_t>(len)) == 0
               ? tinyseg::Status::kOk
               : tinyseg::Status::kIoError;
  }

  Driver driver_;
  uint32_t start_;
  tinyseg::Geometry g_;
  bool ready_ = false;
};

}  // namespace tinyseg_nicla

#endif  // TINYSEG_TARGETS_NICLA_VISION_REGION_BLOCK_DEVICE_H_
