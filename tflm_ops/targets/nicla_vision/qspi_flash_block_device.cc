// QSPI-flash spill storage on the Nicla Vision (see the header).
#include "qspi_flash_block_device.h"

namespace tinyseg_nicla {

using tinyseg::Status;

QspiFlashBlockDevice::QspiFlashBlockDevice(uint32_t region_start, uint32_t region_size)
    : start_(region_start) {
  g_.read_size = 1;
  g_.program_size = 1;
  g_.erase_size = 4096;
  g_.total_size = region_size;
}

Status QspiFlashBlockDevice::Init() {
  if (ready_) return Status::kOk;
  if (qspi_.init() != 0) return Status::kIoError;
  const uint64_t chip = qspi_.size();
  if (chip < static_cast<uint64_t>(start_) + g_.total_size) return Status::kOutOfRange;
  const uint64_t erase = qspi_.get_erase_size(start_);
  if (erase == 0 || erase > g_.erase_size || g_.erase_size % erase != 0 ||
      start_ % g_.erase_size != 0) {
    return Status::kUnsupported;
  }
  if (qspi_.get_program_size() > g_.program_size || qspi_.get_read_size() > g_.read_size) {
    return Status::kUnsupported;
  }
  ready_ = true;
  return tinyseg::ValidateGeometry(g_);
}

Status QspiFlashBlockDevice::Read(uint64_t addr, void* dst, size_t len) {
  if (!ready_) return Status::kInvalidArgument;
  TINYSEG_RETURN_IF_ERROR(tinyseg::CheckAccess(g_, addr, len, g_.read_size));
  if (len == 0) return Status::kOk;
  return qspi_.read(dst, start_ + addr, len) == 0 ? Status::kOk : Status::kIoError;
}

Status QspiFlashBlockDevice::Program(uint64_t addr, const void* src, size_t len) {
  if (!ready_) return Status::kInvalidArgument;
  TINYSEG_RETURN_IF_ERROR(tinyseg::CheckAccess(g_, addr, len, g_.program_size));
  if (len == 0) return Status::kOk;
  return qspi_.program(src, start_ + addr, len) == 0 ? Status::kOk : Status::kIoError;
}

Status QspiFlashBlockDevice::Erase(uint64_t addr, uint64_t len) {
  if (!ready_) return Status::kInvalidArgument;
  TINYSEG_RETURN_IF_ERROR(tinyseg::CheckAccess(g_, addr, len, g_.erase_size));
  if (len == 0) return Status::kOk;
  return qspi_.erase(start_ + addr, len) == 0 ? Status::kOk : Status::kIoError;
}

}  // namespace tinyseg_nicla
