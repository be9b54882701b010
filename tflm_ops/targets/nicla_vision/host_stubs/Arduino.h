// Compile-check stub (declarations only): the parts of the Arduino API used by
// tflm_ops/targets/nicla_vision. Not linked.
#pragma once
#include <cstddef>
#include <cstdint>

unsigned long millis();
void yield();

namespace arduino {
class Print {
 public:
  virtual size_t write(uint8_t c) = 0;
  virtual size_t write(const uint8_t* buffer, size_t size);
  virtual ~Print() = default;
};
class Stream : public Print {
 public:
  virtual int available() = 0;
  virtual int read() = 0;
  virtual int peek() = 0;
};
}  // namespace arduino
using namespace arduino;
