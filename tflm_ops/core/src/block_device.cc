// Block-device helpers and the RAM back-end.
#include "tinyseg/block_device.h"

#include <cstring>

namespace tinyseg {

Status CheckAccess(const Geometry& g, uint64_t addr, uint64_t len, uint32_t unit) {
  if (addr > g.total_size || len > g.total_size - addr) return Status::kOutOfRange;
  if (unit == 0 || addr % unit != 0 || len % unit != 0) return Status::kMisaligned;
  return Status::kOk;
}

Status ValidateGeometry(const Geometry& g) {
  if (g.read_size == 0 || g.program_size == 0 || g.erase_size == 0 || g.total_size == 0) {
    return Status::kInvalidArgument;
  }
  if (g.erase_size % g.program_size != 0 || g.erase_size % g.read_size != 0 ||
      g.total_size % g.erase_size != 0) {
    return Status::kInvalidArgument;
  }
  if (g.total_size > static_cast<uint64_t>(SIZE_MAX)) return Status::kInvalidArgument;
  return Status::kOk;
}

Status RamBlockDevice::Init() {
  if (mem_ == nullptr) return Status::kInvalidArgument;
  TINYSEG_RETURN_IF_ERROR(ValidateGeometry(g_));
  std::memset(mem_, erased_value(), static_cast<size_t>(g_.total_size));
  return Status::kOk;
}

Status RamBlockDevice::Read(uint64_t addr, void* dst, size_t len) {
  TINYSEG_RETURN_IF_ERROR(CheckAccess(g_, addr, len, g_.read_size));
  if (len) std::memcpy(dst, mem_ + addr, len);
  return Status::kOk;
}

Status RamBlockDevice::Program(uint64_t addr, const void* src, size_t len) {
  TINYSEG_RETURN_IF_ERROR(CheckAccess(g_, addr, len, g_.program_size));
  if (len) std::memcpy(mem_ + addr, src, len);
  return Status::kOk;
}

Status RamBlockDevice::Erase(uint64_t addr, uint64_t len) {
  TINYSEG_RETURN_IF_ERROR(CheckAccess(g_, addr, len, g_.erase_size));
  std::memset(mem_ + addr, erased_value(), static_cast<size_t>(len));
  return Status::kOk;
}

}  // namespace tinyseg
