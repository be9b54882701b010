// A BlockDevice decorator that records where programmed bytes came from: tests
// use it to prove that a spill stages only through the buffer it was given
// (for the kernels, their arena scratch), never through memory of its own.
#ifndef TINYSEG_SOURCE_RECORDING_DEVICE_H_
#define TINYSEG_SOURCE_RECORDING_DEVICE_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/block_device.h"

namespace tinyseg {

class SourceRecordingDevice final : public BlockDevice {
 public:
  explicit SourceRecordingDevice(BlockDevice& inner) : inner_(inner) {}
  const Geometry& geometry() const override { return inner_.geometry(); }
  Status Read(uint64_t addr, void* dst, size_t len) override { return inner_.Read(addr, dst, len); }
  Status Program(uint64_t addr, const void* src, size_t len) override {
    const uintptr_t a = reinterpret_cast<uintptr_t>(src);
    if (programs_ == 0 || a < lo_) lo_ = a;
    if (programs_ == 0 || a + len > hi_) hi_ = a + len;
    if (len > longest_) longest_ = len;
    ++programs_;
    return inner_.Program(addr, src, len);
  }
  Status Erase(uint64_t addr, uint64_t len) override { return inner_.Erase(addr, len); }
  uint8_t erased_value() const override { return inner_.erased_value(); }
  bool IsRam() const override { return inner_.IsRam(); }

  // Starts a new record.
  void Forget() {
    programs_ = 0;
    longest_ = 0;
  }
  // True when there were programs and every programmed byte came from [p, p + n).
  bool AllFrom(const uint8_t* p, size_t n) const {
    const uintptr_t b = reinterpret_cast<uintptr_t>(p);
    return programs_ > 0 && lo_ >= b && hi_ <= b + n;
  }
  // The longest single program since Forget().
  size_t longest() const { return longest_; }

 private:
  BlockDevice& inner_;
  uint32_t programs_ = 0;
  uintptr_t lo_ = 0, hi_ = 0;
  size_t longest_ = 0;
};

}  // namespace tinyseg

#endif  // TINYSEG_SOURCE_RECORDING_DEVICE_H_
