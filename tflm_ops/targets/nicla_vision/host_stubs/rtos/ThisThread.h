// Compile-check stub (declarations only) of Mbed's rtos::ThisThread, with the
// same overloads as the real header. Not linked.
#pragma once
#include <chrono>
#include <cstdint>

namespace rtos {
namespace Kernel {
struct Clock {
  using duration_u32 = std::chrono::duration<uint32_t, std::milli>;
};
}  // namespace Kernel
namespace ThisThread {
void sleep_for(uint32_t millisec);
void sleep_for(Kernel::Clock::duration_u32 rel_time);
void yield();
}  // namespace ThisThread
}  // namespace rtos
