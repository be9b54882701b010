// Compile-check stub (declarations only) of Mbed's QSPIFBlockDevice. Not linked.
#pragma once
#include <cstdint>

namespace mbed {
typedef uint64_t bd_addr_t;
typedef uint64_t bd_size_t;
}  // namespace mbed

class QSPIFBlockDevice {
 public:
  QSPIFBlockDevice();
  virtual ~QSPIFBlockDevice();
  virtual int init();
  virtual int deinit();
  virtual int read(void* buffer, mbed::bd_addr_t addr, mbed::bd_size_t size);
  virtual int program(const void* buffer, mbed::bd_addr_t addr, mbed::bd_size_t size);
  virtual int erase(mbed::bd_addr_t addr, mbed::bd_size_t size);
  virtual mbed::bd_size_t get_read_size() const;
  virtual mbed::bd_size_t get_program_size() const;
  virtual mbed::bd_size_t get_erase_size() const;
  virtual mbed::bd_size_t get_erase_size(mbed::bd_addr_t addr) const;
  virtual mbed::bd_size_t size() const;
};
