// Flash timing profiles; figures and sources are in flash_profiles.h.
#include "tinyseg/flash_profiles.h"

namespace tinyseg {

NorFlashConfig Stm32h757InternalFlash(H7Parallelism p) {
  // Typical word-program and 128 KB sector-erase times per parallelism.
  static const uint64_t kWordNs[4] = {290000, 180000, 130000, 100000};
  static const uint64_t kEraseNs[4] = {2000000000ull, 1800000000ull,
                                       1100000000ull, 1000000000ull};
  static const char* const kNames[4] = {
      "STM32H757 internal flash (x8)", "STM32H757 internal flash (x16)",
      "STM32H757 internal flash (x32)", "STM32H757 internal flash (x64)"};
  const int i = static_cast<int>(p) & 3;
  NorFlashConfig c;
  c.geometry.read_size = 1;
  c.geometry.program_size = 32;
  c.geometry.erase_size = 128 * 1024;
  c.geometry.total_size = 2 * 1024 * 1024;
  c.bank_size = 1024 * 1024;
  c.single_program_per_unit = true;
  c.timing.name = kNames[i];
  c.timing.erase_sector_ns = kEraseNs[i];
  c.timing.program_unit_bytes = 32;
  c.timing.program_unit_ns = kWordNs[i];
  c.timing.program_cmd_ns = 0;
  c.timing.program_ps_per_byte = 0;
  c.timing.read_cmd_ns = 0;
  c.timing.read_ps_per_byte = 400;  // estimate, see header
  c.timing.endurance_cycles = 10000;
  return c;
}

NorFlashConfig NiclaVisionQspiFlash() {
  constexpr uint64_t kClockHz = 40000000;           // Nicla Vision QSPI clock
  constexpr uint64_t kClockPs = 1000000000000ull / kClockHz;  // 25,000 ps
  NorFlashConfig c;
  c.geometry.read_size = 1;
  c.geometry.program_size = 1;
  c.geometry.erase_size = 4096;
  c.geometry.total_size = 16ull * 1024 * 1024;
  c.bank_size = 0;  // one chip: an erase blocks every access
  c.single_program_per_unit = false;
  c.timing.name = "AT25QL128A QSPI NOR @40 MHz (provisional timings)";
  c.timing.erase_sector_ns = 60000000;   // 4 KB block erase, typ
  c.timing.program_unit_bytes = 256;     // page
  c.timing.program_unit_ns = 700000;     // page program, typ
  c.timing.program_cmd_ns = 40 * kClockPs / 1000;   // WREN + cmd + address
  c.timing.program_ps_per_byte = 2 * kClockPs;      // quad data
  c.timing.read_cmd_ns = 20 * kClockPs / 1000;      // cmd + addr + mode + dummy
  c.timing.read_ps_per_byte = 2 * kClockPs;
  c.timing.endurance_cycles = 100000;
  return c;
}

NorFlashConfig Resized(NorFlashConfig config, uint64_t total_size) {
  config.geometry.total_size = total_size;
  if (config.bank_size >= total_size) config.bank_size = 0;
  return config;
}

}  // namespace tinyseg
