// Flash timing profiles; figures and full sources are in flash_profiles.h.
#include "tinyseg/flash_profiles.h"

namespace tinyseg {

NorFlashConfig Stm32h757InternalFlash(H7Parallelism p) {
  // Typical word-program and 128 KB sector-erase times per parallelism
  // (x8, x16, x32, x64): DS12110 table via third-party transcriptions; only
  // the x8 erase maximum (4 s) is confirmed for DS12930. Provisional.
  static const uint64_t kWordNs[4] = {290000, 180000, 130000, 100000};
  static const uint64_t kEraseNs[4] = {2000000000ull, 1800000000ull, 1100000000ull, 1000000000ull};
  static const char* const kNames[4] = {
      "STM32H757 internal flash (x8)", "STM32H757 internal flash (x16)",
      "STM32H757 internal flash (x32)", "STM32H757 internal flash (x64)"};
  const int i = static_cast<int>(p) & 3;
  NorFlashConfig c;
  c.geometry.read_size = 1;
  c.geometry.program_size = 32;        // 256-bit flash word (RM0399)
  c.geometry.erase_size = 128 * 1024;  // sector
  c.geometry.total_size = 2 * 1024 * 1024;
  c.bank_size = 1024 * 1024;         // two banks
  c.single_program_per_unit = true;  // ECC per flash word
  c.timing.name = kNames[i];
  c.timing.erase_sector_ns = kEraseNs[i];
  c.timing.program_unit_bytes = 32;
  c.timing.program_unit_ns = kWordNs[i];
  c.timing.program_cmd_ns = 0;
  c.timing.program_ps_per_byte = 0;
  c.timing.read_cmd_ns = 0;
  c.timing.read_ps_per_byte = 400;    // estimate, not a datasheet figure
  c.timing.endurance_cycles = 10000;  // unverified
  return c;
}

NorFlashConfig NiclaVisionQspiFlash() {
  constexpr uint64_t kClockHz = 40000000;                     // MBED_CONF_QSPIF_QSPI_FREQ
  constexpr uint64_t kClockPs = 1000000000000ull / kClockHz;  // 25,000 ps
  NorFlashConfig c;
  c.geometry.read_size = 1;
  c.geometry.program_size = 1;                  // mbed QSPIF min program size
  c.geometry.erase_size = 4096;                 // SFDP erase type 1 (20h)
  c.geometry.total_size = 16ull * 1024 * 1024;  // SFDP density 128 Mbit
  c.bank_size = 0;                              // one chip: an erase blocks every access
  c.single_program_per_unit = false;
  c.timing.name = "AT25QL128A QSPI NOR @40 MHz (SFDP timings)";
  c.timing.erase_sector_ns = 64000000;             // 4 KB erase typ, SFDP
  c.timing.program_unit_bytes = 256;               // page, SFDP
  c.timing.program_unit_ns = 640000;               // page program typ, SFDP
  c.timing.program_cmd_ns = 40 * kClockPs / 1000;  // WREN + 02h + address
  c.timing.program_ps_per_byte = 8 * kClockPs;     // 1-1-1 data (mbed QSPIF)
  c.timing.read_cmd_ns = 20 * kClockPs / 1000;     // EBh 1-4-4, SFDP cycles
  c.timing.read_ps_per_byte = 2 * kClockPs;        // quad data
  c.timing.endurance_cycles = 100000;              // provisional (AT25SL128A)
  return c;
}

NorFlashConfig Resized(NorFlashConfig config, uint64_t total_size) {
  config.geometry.total_size = total_size;
  if (config.bank_size >= total_size) config.bank_size = 0;
  return config;
}

}  // namespace tinyseg
