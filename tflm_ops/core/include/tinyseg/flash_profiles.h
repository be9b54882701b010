// Geometry and typical timings of the two spill targets of the Nicla Vision
// (STM32H747AII6; the STM32H757 has the same flash) for NorFlashSim.
//
// (a) STM32H757 internal flash. 2 MB in two 1 MB banks (read-while-write only
//     across banks), 128 KB sectors, programmed by 256-bit flash words
//     (32 bytes, + 10 ECC bits = the datasheet's "266 bits"); a flash word can
//     be programmed only once per erase because of its ECC. Typical figures,
//     STM32H747xI/G / STM32H757xI datasheets (DS12930 / DS12931), table
//     "Flash memory programming", by program/erase parallelism (PSIZE):
//         parallelism          x8      x16     x32     x64
//         word program (typ)   290 us  180 us  130 us  100 us   (max 2x)
//         128 KB sector erase  2 s     1.8 s   1.1 s   1 s      (max 2x)
//     Endurance 10 kcycles. The default here is x32, the STM32Cube HAL's
//     FLASH_VOLTAGE_RANGE_3 used by 3.3 V designs.
//     NOTE: the datasheet PDF was not reachable from the build machine; the
//     table is as recalled and matches the maxima in the ChromiumOS EC driver
//     comments (chip/stm32/flash-stm32h7.c: "maximum is about 4 seconds in x8",
//     600 us word timeout). Re-check before quoting absolute numbers.
//     Reads are memory-mapped over AXI; the 0.4 ns/byte read cost is an
//     estimate (256-bit flash word per ~3 AXI cycles at 240 MHz), not a
//     datasheet figure.
//
// (b) Nicla Vision 16 MB QSPI NOR flash: Renesas/Adesto AT25QL128A-UUE-T
//     (Arduino ABX00051 datasheet, part U13). 4 KB sectors, 256-byte pages,
//     byte-programmable within a page (mbed QSPIF min program size 1).
//     QSPI clock 40 MHz: MBED_CONF_QSPIF_QSPI_FREQ in the Arduino mbed core's
//     variants/NICLA_VISION/mbed_config.h.
//     PROVISIONAL timings: the AT25QL128A datasheet itself was not reachable;
//     these are the typical figures of its 1.8 V sibling AT25SL128A
//     (DS-25SL128-090A-4/2016): page program (256 B) 0.7 ms, 4 KB block
//     erase 60 ms, 100,000 program/erase cycles.
//     Bus model, quad I/O at 40 MHz: read = 20 clocks of instruction +
//     address + mode + dummy, then 2 clocks per byte; page program = 40
//     clocks (WREN + instruction + 24-bit address on one line) + 2 clocks per
//     byte.
#ifndef TINYSEG_FLASH_PROFILES_H_
#define TINYSEG_FLASH_PROFILES_H_

#include <cstdint>

#include "tinyseg/nor_flash_sim.h"

namespace tinyseg {

enum class H7Parallelism : uint8_t { kX8 = 0, kX16 = 1, kX32 = 2, kX64 = 3 };

// Whole 2 MB internal flash of the STM32H757 (both banks).
NorFlashConfig Stm32h757InternalFlash(H7Parallelism p = H7Parallelism::kX32);

// The 16 MB AT25QL128A QSPI flash of the Nicla Vision.
NorFlashConfig NiclaVisionQspiFlash();

// Same part, fewer sectors (tests and QEMU, where RAM is limited).
// total_size must be a multiple of the sector size; banks larger than the
// new size collapse into one.
NorFlashConfig Resized(NorFlashConfig config, uint64_t total_size);

}  // namespace tinyseg

#endif  // TINYSEG_FLASH_PROFILES_H_
