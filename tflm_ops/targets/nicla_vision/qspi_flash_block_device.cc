// QSPI-flash spill storage on the Nicla Vision (see the header).
#include "qspi_flash_block_device.h"

namespace tinyseg_nicla {

using tinyseg::Status;

QspiFlashBlockDevice::QspiFlashBlockDevice(uint32_t region_start, uint32_t region_size)
    : RegionBlockDevice<QSPIFBlockDevice>(region_start, region_size, /*program_size=*/1,
                                          /*erase_size=*/4096) {}

Status QspiFlashBlockDevice::Init() {
  if (ready_) return Status::kOk;
  if (driver_.init() != 0) return Status::kIoError;
  const uint64_t chip = driver_.size();
  if (chip < static_cast<uint64_t>(start_) + g_.total_size) return Status::kOutOfRange;
  const uint64_t erase = driver_.get_erase_size(start_);
  if (erase == 0 || erase > g_.erase_size || g_.erase_size % erase != 0 ||
      start_ % g_.erase_size != 0) {
    return Status::kUnsupported;
  }
  if (driver_.get_program_size() > g_.program_size || driver_.get_read_size() > g_.read_size) {
    return Status::kUnsupported;
  }
  ready_ = true;
  return tinyseg::ValidateGeometry(g_);
}

}  // namespace tinyseg_nicla
