// Compile-check stub (declarations only): the HAL, CMSIS and RTOS names used
// by tflm_ops/targets/nicla_vision. Not linked.
#pragma once
#include <chrono>
#include <cstdint>

typedef enum { HAL_OK = 0, HAL_ERROR = 1, HAL_BUSY = 2, HAL_TIMEOUT = 3 } HAL_StatusTypeDef;
HAL_StatusTypeDef HAL_HSEM_FastTake(uint32_t SemID);
void HAL_HSEM_Release(uint32_t SemID, uint32_t ProcessID);
void tinyseg_stub_hsem_clk_enable();
#define __HAL_RCC_HSEM_CLK_ENABLE() tinyseg_stub_hsem_clk_enable()
void __DSB();
void __SEV();
void __WFE();

namespace rtos {
namespace ThisThread {
void yield();
void sleep_for(std::chrono::milliseconds ms);
}  // namespace ThisThread
}  // namespace rtos
