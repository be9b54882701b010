// Memory map of TinySeg's spill storage on the Arduino Nicla Vision
// (STM32H747AII6: Cortex-M7 + Cortex-M4, 2 MB flash in two 1 MB banks,
// 16 MB AT25QL128A QSPI NOR). Every value can be overridden with -D or a
// #define before including this header.
//
// Internal flash (paper: "when using both processing cores, the 2 MB
// internal flash is partitioned for the cores"). Arduino's "Flash split"
// menu for the Nicla Vision (boards.txt):
//   1MB M7 + 1MB M4   : M7 sketch 0x08040000-0x08100000, M4 0x08100000-0x08200000
//   1.5MB M7 + 0.5MB M4: M7 sketch 0x08040000-0x08180000, M4 0x08180000-0x08200000
// (the first 256 KB hold the bootloader). Spilling needs the 1MB + 1MB split:
// the spill region is the last 512 KB of bank 2 (four 128 KB sectors), so
// the M4 image must end below 0x08180000; both sketches check that at run
// time against their own image end.
//
// QSPI flash: the Arduino QSPIFormat sketch partitions 0-14 MB (WiFi
// firmware, OTA, KVStore, user data); the spill region is the last 1 MB,
// outside every partition.
//
// Shared memory: the erase ring (560 bytes) sits at the start of SRAM4
// (D3, 0x38000000). Arduino's RPC library uses 0x38000400-0x3800FBFF for
// OpenAMP and the PDM library 0x3800FC00-0x3800FFFF; RPC.begin() on the M7
// maps all of SRAM4 non-cacheable, which the ring relies on.
//
// Hardware semaphores (HSEM): OpenAMP uses IDs 0 and 1; TinySeg takes
// 24 (internal flash bank 1 = physical bank 1), 25 (internal bank 2) and 26
// (the QSPI chip) by default.
#ifndef TINYSEG_TARGETS_NICLA_VISION_NICLA_LAYOUT_H_
#define TINYSEG_TARGETS_NICLA_VISION_NICLA_LAYOUT_H_

#include <cstdint>

#ifndef TINYSEG_IFLASH_BANK2_START
#define TINYSEG_IFLASH_BANK2_START 0x08100000u
#endif
#ifndef TINYSEG_IFLASH_END
#define TINYSEG_IFLASH_END 0x08200000u
#endif
#ifndef TINYSEG_IFLASH_REGION_START
#define TINYSEG_IFLASH_REGION_START 0x08180000u
#endif
#ifndef TINYSEG_IFLASH_REGION_SIZE
#define TINYSEG_IFLASH_REGION_SIZE 0x00080000u
#endif
#ifndef TINYSEG_IFLASH_SECTOR_SIZE
#define TINYSEG_IFLASH_SECTOR_SIZE 0x00020000u
#endif

#ifndef TINYSEG_QSPI_REGION_START
#define TINYSEG_QSPI_REGION_START 0x00F00000u
#endif
#ifndef TINYSEG_QSPI_REGION_SIZE
#define TINYSEG_QSPI_REGION_SIZE 0x00100000u
#endif

#ifndef TINYSEG_ERASE_RING_ADDR
#define TINYSEG_ERASE_RING_ADDR 0x38000000u
#endif
#ifndef TINYSEG_HSEM_IFLASH_BASE
#define TINYSEG_HSEM_IFLASH_BASE 24u
#endif
#ifndef TINYSEG_HSEM_QSPI
#define TINYSEG_HSEM_QSPI 26u
#endif

namespace tinyseg_nicla {

constexpr uint32_t kBank2Start = TINYSEG_IFLASH_BANK2_START;
constexpr uint32_t kFlashEnd = TINYSEG_IFLASH_END;
constexpr uint32_t kInternalRegionStart = TINYSEG_IFLASH_REGION_START;
constexpr uint32_t kInternalRegionSize = TINYSEG_IFLASH_REGION_SIZE;
constexpr uint32_t kInternalSector = TINYSEG_IFLASH_SECTOR_SIZE;
constexpr uint32_t kQspiRegionStart = TINYSEG_QSPI_REGION_START;
constexpr uint32_t kQspiRegionSize = TINYSEG_QSPI_REGION_SIZE;
constexpr uint32_t kEraseRingAddr = TINYSEG_ERASE_RING_ADDR;
constexpr uint32_t kHsemInternalBase = TINYSEG_HSEM_IFLASH_BASE;
constexpr uint32_t kHsemQspi = TINYSEG_HSEM_QSPI;

static_assert(kInternalRegionStart >= kBank2Start, "spill region must be in bank 2");
static_assert(kInternalRegionStart + kInternalRegionSize <= kFlashEnd,
              "spill region past flash end");
static_assert(kInternalRegionStart % kInternalSector == 0, "spill region not sector aligned");
static_assert(kInternalRegionSize % kInternalSector == 0, "spill region not whole sectors");
static_assert(kQspiRegionStart % 4096 == 0 && kQspiRegionSize % 4096 == 0,
              "QSPI region not 4 KB aligned");
static_assert(kQspiRegionStart + kQspiRegionSize <= 16u * 1024 * 1024, "QSPI region past 16 MB");
static_assert(kHsemInternalBase + 1 < 32 && kHsemQspi < 32, "HSEM has 32 semaphores");

}  // namespace tinyseg_nicla

#endif  // TINYSEG_TARGETS_NICLA_VISION_NICLA_LAYOUT_H_
