// Compile-check stub (declarations only) of mbed::FlashIAP. Not linked.
#pragma once
#include <cstdint>

extern uint32_t __etext;
extern uint32_t __data_start__;
extern uint32_t __data_end__;
// uintptr_t first so the stub also compiles for a 64-bit host.
#define FLASHIAP_APP_ROM_END_ADDR                                       \
  ((uint32_t)(uintptr_t)&__etext + (uint32_t)(uintptr_t)&__data_end__ - \
   (uint32_t)(uintptr_t)&__data_start__)

namespace mbed {
class FlashIAP {
 public:
  constexpr FlashIAP() {}
  int init();
  int deinit();
  int read(void* buffer, uint32_t addr, uint32_t size);
  int program(const void* buffer, uint32_t addr, uint32_t size);
  int erase(uint32_t addr, uint32_t size);
  uint32_t get_sector_size(uint32_t addr) const;
  uint32_t get_flash_start() const;
  uint32_t get_flash_size() const;
  uint32_t get_page_size() const;
  uint8_t get_erase_value() const;
};
}  // namespace mbed
