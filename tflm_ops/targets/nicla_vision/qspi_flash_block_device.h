// tinyseg::BlockDevice over the Nicla Vision's 16 MB AT25QL128A QSPI NOR flash
// through Mbed's QSPIFBlockDevice (pins and 40 MHz clock from the board's
// mbed_config.h), restricted to a region outside the Arduino partitions
// (nicla_layout.h). Device addresses are region-relative.
//
// Geometry from the driver (SFDP): byte program (MBED_CONF_QSPIF_QSPI_MIN_PROG_SIZE
// = 1; the driver splits at 256-byte pages), 4 KB erase sectors, byte reads.
// The whole chip is one bank: while it erases, nothing else can use it.
//
// Both cores may hold a QSPIFBlockDevice (one per core binary); they must
// never drive the QUADSPI peripheral at the same time -- the M7 wraps its
// instance in tinyseg::BankLockedDevice and the M4's erase worker takes the
// same HSEM, so every command sequence runs under the lock.
#ifndef TINYSEG_TARGETS_NICLA_VISION_QSPI_FLASH_BLOCK_DEVICE_H_
#define TINYSEG_TARGETS_NICLA_VISION_QSPI_FLASH_BLOCK_DEVICE_H_

#include "QSPIFBlockDevice.h"
#include "nicla_layout.h"
#include "region_block_device.h"

namespace tinyseg_nicla {

class QspiFlashBlockDevice final : public RegionBlockDevice<QSPIFBlockDevice> {
 public:
  QspiFlashBlockDevice(uint32_t region_start = kQspiRegionStart,
                       uint32_t region_size = kQspiRegionSize);
  // Driver init (SFDP) and checks against the chip's size and erase size.
  tinyseg::Status Init();
};

}  // namespace tinyseg_nicla

#endif  // TINYSEG_TARGETS_NICLA_VISION_QSPI_FLASH_BLOCK_DEVICE_H_
