// Simulated NOR flash (see nor_flash_sim.h).
#include "tinyseg/nor_flash_sim.h"

#include <cstring>

namespace tinyseg {

NorFlashSim::NorFlashSim(const NorFlashConfig& config, uint8_t* storage, uint32_t* erase_counts,
                         uint8_t* program_flags)
    : cfg_(config), mem_(storage), erase_counts_(erase_counts), flags_(program_flags) {}

size_t NorFlashSim::ProgramFlagBytes(const NorFlashConfig& config) {
  const Geometry& g = config.geometry;
  if (g.program_size == 0) return 0;
  const uint64_t units = g.total_size / g.program_size;
  return static_cast<size_t>((units + 7) / 8);
}

Status NorFlashSim::Init() {
  TINYSEG_RETURN_IF_ERROR(ValidateGeometry(cfg_.geometry));
  if (mem_ == nullptr || erase_counts_ == nullptr) return Status::kInvalidArgument;
  if (cfg_.single_program_per_unit && flags_ == nullptr) return Status::kInvalidArgument;
  // Flag bytes must not straddle sectors (erase and program may run on two
  // threads, each on its own sectors).
  if (flags_ && (cfg_.geometry.erase_size / cfg_.geometry.program_size) % 8 != 0) {
    return Status::kInvalidArgument;
  }
  if (cfg_.timing.program_unit_bytes == 0) return Status::kInvalidArgument;
  if (cfg_.bank_size != 0 && cfg_.bank_size % cfg_.geometry.erase_size != 0) {
    return Status::kInvalidArgument;
  }
  std::memset(mem_, 0xFF, static_cast<size_t>(cfg_.geometry.total_size));
  std::memset(erase_counts_, 0, sizeof(uint32_t) * cfg_.geometry.num_sectors());
  if (flags_) std::memset(flags_, 0, ProgramFlagBytes(cfg_));
  ResetStats();
  return Status::kOk;
}

void NorFlashSim::ResetStats() {
  access_ = NorAccessStats();
  erase_ = NorEraseStats();
}

uint32_t NorFlashSim::max_erase_count() const {
  uint32_t m = 0;
  for (uint32_t s = 0; s < cfg_.geometry.num_sectors(); ++s) {
    if (erase_counts_[s] > m) m = erase_counts_[s];
  }
  return m;
}

uint32_t NorFlashSim::min_erase_count() const {
  const uint32_t n = cfg_.geometry.num_sectors();
  if (n == 0) return 0;
  uint32_t m = erase_counts_[0];
  for (uint32_t s = 1; s < n; ++s) {
    if (erase_counts_[s] < m) m = erase_counts_[s];
  }
  return m;
}

uint32_t NorFlashSim::BankOf(uint64_t addr) const {
  if (cfg_.bank_size == 0) return 0;
  return static_cast<uint32_t>(addr / cfg_.bank_size);
}

uint64_t NorFlashSim::ModelledNs(Op op, uint64_t addr, uint64_t len) const {
  const FlashTiming& t = cfg_.timing;
  switch (op) {
    case Op::kRead:
      if (len == 0) return 0;
      return t.read_cmd_ns + (len * t.read_ps_per_byte) / 1000;
    case Op::kProgram: {
      if (len == 0) return 0;
      const uint64_t u = t.program_unit_bytes;
      const uint64_t first = addr / u;
      const uint64_t last = (addr + len - 1) / u;
      const uint64_t units = last - first + 1;
      return units * (t.program_unit_ns + t.program_cmd_ns) + (len * t.program_ps_per_byte) / 1000;
    }
    case Op::kErase:
      return (len / cfg_.geometry.erase_size) * t.erase_sector_ns;
  }
  return 0;
}

Status NorFlashSim::Read(uint64_t addr, void* dst, size_t len) {
  const Status s = CheckAccess(cfg_.geometry, addr, len, cfg_.geometry.read_size);
  if (!Ok(s)) return s;
  if (len) std::memcpy(dst, mem_ + addr, len);
  ++access_.read_ops;
  access_.bytes_read += len;
  access_.read_ns += ModelledNs(Op::kRead, addr, len);
  return Status::kOk;
}

Status NorFlashSim::Program(uint64_t addr, const void* src, size_t len) {
  const Geometry& g = cfg_.geometry;
  Status s = CheckAccess(g, addr, len, g.program_size);
  if (!Ok(s)) {
    ++access_.rejected_programs;
    return s;
  }
  if (len == 0) return Status::kOk;
  const uint8_t* in = static_cast<const uint8_t*>(src);
  // Validate everything first so a rejected program changes nothing.
  if (cfg_.single_program_per_unit) {
    const uint64_t u0 = addr / g.program_size;
    const uint64_t u1 = (addr + len) / g.program_size;
    for (uint64_t u = u0; u < u1; ++u) {
      if (flags_[u >> 3] & (1u << (u & 7))) {
        ++access_.rejected_programs;
        return Status::kNotErased;
      }
    }
  }
  for (size_t i = 0; i < len; ++i) {
    if ((mem_[addr + i] & in[i]) != in[i]) {
      ++access_.rejected_programs;
      return Status::kNotErased;
    }
  }
  for (size_t i = 0; i < len; ++i) mem_[addr + i] &= in[i];
  if (cfg_.single_program_per_unit) {
    const uint64_t u0 = addr / g.program_size;
    const uint64_t u1 = (addr + len) / g.program_size;
    for (uint64_t u = u0; u < u1; ++u) {
      flags_[u >> 3] = static_cast<uint8_t>(flags_[u >> 3] | (1u << (u & 7)));
    }
  }
  ++access_.program_ops;
  access_.bytes_programmed += len;
  access_.program_ns += ModelledNs(Op::kProgram, addr, len);
  return Status::kOk;
}

Status NorFlashSim::Erase(uint64_t addr, uint64_t len) {
  const Geometry& g = cfg_.geometry;
  const Status s = CheckAccess(g, addr, len, g.erase_size);
  if (!Ok(s)) {
    ++erase_.rejected_erases;
    return s;
  }
  std::memset(mem_ + addr, 0xFF, static_cast<size_t>(len));
  if (flags_) {
    // Sector boundaries are multiples of program_size; clear unit flags.
    const uint64_t u0 = addr / g.program_size;
    const uint64_t u1 = (addr + len) / g.program_size;
    for (uint64_t u = u0; u < u1; ++u) {
      flags_[u >> 3] = static_cast<uint8_t>(flags_[u >> 3] & ~(1u << (u & 7)));
    }
  }
  for (uint64_t a = addr; a < addr + len; a += g.erase_size) {
    ++erase_counts_[a / g.erase_size];
    ++erase_.erases;
  }
  erase_.erase_ns += ModelledNs(Op::kErase, addr, len);
  return Status::kOk;
}

}  // namespace tinyseg
