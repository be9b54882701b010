// Geometry and typical timings of the two spill targets of the Nicla Vision
// (STM32H747AII6; the STM32H757 has the same flash) for NorFlashSim. Every
// figure names its source; the .cc repeats the source tag next to the value.
// NorFlashSim models typical times only; maxima are listed for reference.
//
// (a) STM32H757 internal flash. 2 MB in two 1 MB banks (read-while-write only
//     across banks), 128 KB sectors, programmed by 256-bit flash words
//     (32 bytes, + 10 ECC bits = the datasheet's "266 bits"); a flash word can
//     be programmed only once per erase because of its ECC.
//     Times by program/erase parallelism (FLASH_CR.PSIZE), typ / max:
//         parallelism       x8          x16         x32         x64
//         word program      290/580 us  180/360 us  130/260 us  100/200 us
//         128 KB erase      2/4 s       1.8/3.6 s   1.1/2.2 s   1/2 s
//     STILL PROVISIONAL: ST's DS12930 (STM32H747xI/G) and DS12931
//     (STM32H757xI) were not reachable. The table is ST DS12110 (STM32H742/
//     743, same 2 MB dual-bank flash with 266-bit words), "Flash memory
//     programming" table, as transcribed by third parties: word times from
//     a note on DS12110 Rev 10 "Table 53" (maxima 580/260/200 us also in a
//     driver comment citing "STM32H743xI table52"), erase times from that
//     note and one on DS12110 Rev 11 Tables 43 and 140; of DS12930
//     itself only the x8 erase maximum is confirmed: a third-party firmware
//     comment quotes "DS12930 Rev 3, Table 55 gives a 4 s maximum for one
//     128-Kbyte sector erase at x8 parallelism", and the ChromiumOS EC driver
//     (chip/stm32/flash-stm32h7.c) says "maximum is about 4 seconds in x8"
//     with a 600 us word timeout. Mass/bank erase time: not found, not used.
//     Endurance 10 kcycles: not found in any reachable source, unverified.
//     Default x32: FLASH_VOLTAGE_RANGE_3 = FLASH_CR_PSIZE_1, "program/erase
//     by 32 bits" (STM32H7xx HAL stm32h7xx_hal_flash_ex.h, as shipped in
//     arduino/ArduinoCore-mbed b4ad4e72).
//     Reads are memory-mapped over AXI; the 0.4 ns/byte read cost is an
//     estimate (256-bit flash word per ~3 AXI cycles at 240 MHz), not a
//     datasheet figure.
//
// (b) Nicla Vision 16 MB QSPI NOR flash: Renesas (ex Adesto/Dialog)
//     AT25QL128A-UUE-T, part U13 ("AT25QL128A-UUE-T 128 Mbit Quad SPI flash
//     memory") in Arduino's ABX00051 datasheet (arduino/docs-content,
//     content/hardware/05.nicla/boards/nicla-vision/datasheet/datasheet.md,
//     commit 5851c9b8), powered from the board's +1V8 rail.
//     Timings: the part's own SFDP basic flash parameter table (JESD216,
//     rev 1.6), dumped from an AT25QL128A (JEDEC id 1f 42 18) by Renesas in
//     the Linux patch "mtd: spi-nor: Add Renesas AT25QL128A serial nor flash"
//     (lore.kernel.org/r/20220715105716.2415068-3-biju.das.jz@bp.renesas.com),
//     decoded per JESD216 (field layout as in ArduPilot
//     libraries/AP_FlashIface/AP_FlashIface_JEDEC.cpp). typ / SFDP max:
//         page program (256 B page)   640 us  / 6.4 ms
//         4 KB sector erase (20h)      64 ms  / 512 ms
//         32 KB block erase (52h)     208 ms  / 1.66 s
//         64 KB block erase (D8h)     352 ms  / 2.82 s
//         chip erase                   60 s   / 480 s
//         byte program first/next     5 us / 1 us (typ; not modelled)
//     SFDP encodes typical times in 64 us / 16 ms / 4 s steps and the maximum
//     as typ x multiplier, so the datasheet's own typicals may be slightly
//     lower (the AT25QL128A datasheet DS-AT25QL128A-129F was not reachable).
//     Endurance 100,000 cycles: STILL PROVISIONAL, not in SFDP; figure of the
//     1.8 V sibling AT25SL128A (DS-25SL128-090A-4/2016).
//     Geometry: 16 MB, 256-byte pages, 4 KB smallest erase (SFDP); byte-
//     programmable within a page (mbed QSPIF min program size 1).
//     Bus: 40 MHz, MBED_CONF_QSPIF_QSPI_FREQ in variants/NICLA_VISION/
//     mbed_config.h of the Arduino mbed core (ArduinoCore-mbed b4ad4e72).
//     mbed QSPIFBlockDevice (ARMmbed/mbed-os storage/blockdevice/
//     COMPONENT_QSPIF/source/QSPIFBlockDevice.cpp) reads 1-4-4 (EBh, chosen
//     from SFDP) and sends everything else 1-1-1. Read = 8 clocks opcode +
//     6 address (24 bits on 4 lines) + 2 mode + 4 dummy (SFDP) = 20 clocks,
//     then 2 clocks per byte; page program = 40 clocks (WREN + 02h + 24-bit
//     address, one line) + 8 clocks per byte. Status polling is not counted.
//     (MicroPython's ARDUINO_NICLA_VISION board runs it at 100 MHz,
//     MICROPY_HW_QSPI_PRESCALER 2; the model follows the Arduino core.)
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
