// Simulated NOR flash: enforces erase-before-program and counts wear and
// modelled time, so spill strategies can be judged on the host and in QEMU.
//
// Rules enforced:
//   * Program: address and length multiples of program_size; a program may
//     only clear bits (1 -> 0) -- setting a 0 bit back to 1 fails with
//     kNotErased and leaves memory untouched. With single_program_per_unit
//     (STM32H7 flash words carry ECC) each program unit can be programmed
//     once per erase, whatever the data.
//   * Erase: whole sectors only (address and length multiples of erase_size).
//   * Read: read_size granularity.
// Counters: erases per sector, bytes programmed/read, operation counts and
// modelled nanoseconds from a datasheet timing profile (flash_profiles.h).
// Erase counters and access (program/read) counters are kept apart so the
// block_device.h threading contract holds without locks.
#ifndef TINYSEG_NOR_FLASH_SIM_H_
#define TINYSEG_NOR_FLASH_SIM_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/block_device.h"

namespace tinyseg {

// Typical datasheet timings of a flash part; see flash_profiles.h.
struct FlashTiming {
  const char* name = "untimed";
  uint64_t erase_sector_ns = 0;       // one erase_size sector
  uint32_t program_unit_bytes = 1;    // flash word / page timed as one unit
  uint64_t program_unit_ns = 0;       // cell programming time of one unit
  uint64_t program_cmd_ns = 0;        // bus/command overhead per unit
  uint64_t program_ps_per_byte = 0;   // data transfer, picoseconds per byte
  uint64_t read_cmd_ns = 0;           // bus/command overhead per read call
  uint64_t read_ps_per_byte = 0;      // data transfer, picoseconds per byte
  uint32_t endurance_cycles = 10000;  // datasheet minimum erase cycles
};

struct NorFlashConfig {
  Geometry geometry;
  FlashTiming timing;
  uint64_t bank_size = 0;  // 0: the whole device is one bank
  bool single_program_per_unit = false;
};

struct NorAccessStats {
  uint64_t program_ops = 0;
  uint64_t bytes_programmed = 0;
  uint64_t program_ns = 0;
  uint64_t read_ops = 0;
  uint64_t bytes_read = 0;
  uint64_t read_ns = 0;
  uint64_t rejected_programs = 0;  // alignment or NOR-rule violations
};

struct NorEraseStats {
  uint64_t erases = 0;  // sectors erased
  uint64_t erase_ns = 0;
  uint64_t rejected_erases = 0;
};

class NorFlashSim final : public BlockDevice {
 public:
  // Caller memory: storage of total_size bytes, erase_counts of num_sectors
  // entries, program_flags of ProgramFlagBytes(config) bytes (may be null
  // unless single_program_per_unit).
  NorFlashSim(const NorFlashConfig& config, uint8_t* storage, uint32_t* erase_counts,
              uint8_t* program_flags);

  static size_t ProgramFlagBytes(const NorFlashConfig& config);

  // Validates the configuration, sets every byte to 0xFF (factory-erased) and
  // clears all counters.
  Status Init();

  const Geometry& geometry() const override { return cfg_.geometry; }
  Status Read(uint64_t addr, void* dst, size_t len) override;
  Status Program(uint64_t addr, const void* src, size_t len) override;
  Status Erase(uint64_t addr, uint64_t len) override;
  uint64_t ModelledNs(Op op, uint64_t addr, uint64_t len) const override;
  uint32_t BankOf(uint64_t addr) const override;

  const NorFlashConfig& config() const { return cfg_; }
  const NorAccessStats& access_stats() const { return access_; }
  const NorEraseStats& erase_stats() const { return erase_; }
  uint32_t erase_count(uint32_t sector) const { return erase_counts_[sector]; }
  uint32_t max_erase_count() const;
  uint32_t min_erase_count() const;
  // Zeroes the counters (not the contents or per-sector wear).
  void ResetStats();

 private:
  NorFlashConfig cfg_;
  uint8_t* mem_;
  uint32_t* erase_counts_;
  uint8_t* flags_;
  NorAccessStats access_;
  NorEraseStats erase_;
};

}  // namespace tinyseg

#endif  // TINYSEG_NOR_FLASH_SIM_H_
