// Block-device abstraction for spill storage, with a RAM back-end.
//
// Modelled on NOR flash: reads at read_size granularity, programs at
// program_size granularity/alignment, erases whole erase_size sectors.
// Addresses are device-relative byte offsets. Every call returns a Status.
//
// Threading contract (all back-ends in this directory): one thread may run
// Erase on some sectors while one other thread runs Read/Program on *other*
// sectors (the asynchronous-erase case of paper section 5.2). Anything else
// must be serialised by the caller.
#ifndef TINYSEG_BLOCK_DEVICE_H_
#define TINYSEG_BLOCK_DEVICE_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/status.h"

namespace tinyseg {

struct Geometry {
  uint32_t read_size = 1;
  uint32_t program_size = 1;
  uint32_t erase_size = 4096;
  uint64_t total_size = 0;

  uint32_t num_sectors() const {
    return erase_size ? static_cast<uint32_t>(total_size / erase_size) : 0;
  }
};

enum class Op : uint8_t { kRead = 0, kProgram = 1, kErase = 2 };

class BlockDevice {
 public:
  virtual const Geometry& geometry() const = 0;
  virtual Status Read(uint64_t addr, void* dst, size_t len) = 0;
  virtual Status Program(uint64_t addr, const void* src, size_t len) = 0;
  virtual Status Erase(uint64_t addr, uint64_t len) = 0;
  // Byte value of erased memory.
  virtual uint8_t erased_value() const { return 0xFF; }
  // Modelled (datasheet) duration of an operation in nanoseconds; 0 for
  // back-ends without a timing model.
  virtual uint64_t ModelledNs(Op op, uint64_t addr, uint64_t len) const {
    (void)op;
    (void)addr;
    (void)len;
    return 0;
  }
  // Bank holding addr. An erase keeps its whole bank busy (no read or program
  // there until it finishes); other banks stay usable.
  virtual uint32_t BankOf(uint64_t addr) const {
    (void)addr;
    return 0;
  }
  // Plain RAM, where a stored-block check buys nothing unless the memory
  // itself is suspect (SpillConfig::check_ram decides).
  virtual bool IsRam() const { return false; }

 protected:
  ~BlockDevice() = default;
};

// Validates [addr, addr + len) against the device size and `unit` alignment.
Status CheckAccess(const Geometry& g, uint64_t addr, uint64_t len, uint32_t unit);

// Checks that a geometry is usable: non-zero sizes, erase_size a multiple of
// program_size and read_size, total_size a multiple of erase_size.
Status ValidateGeometry(const Geometry& g);

// Plain RAM back-end (no NOR rules: programs overwrite). Storage is caller
// memory of geometry.total_size bytes.
class RamBlockDevice final : public BlockDevice {
 public:
  RamBlockDevice(const Geometry& g, uint8_t* storage) : g_(g), mem_(storage) {}
  // Validates the geometry and fills the storage with the erased value.
  Status Init();
  const Geometry& geometry() const override { return g_; }
  Status Read(uint64_t addr, void* dst, size_t len) override;
  Status Program(uint64_t addr, const void* src, size_t len) override;
  Status Erase(uint64_t addr, uint64_t len) override;
  bool IsRam() const override { return true; }

 private:
  Geometry g_;
  uint8_t* mem_;
};

}  // namespace tinyseg

#endif  // TINYSEG_BLOCK_DEVICE_H_
