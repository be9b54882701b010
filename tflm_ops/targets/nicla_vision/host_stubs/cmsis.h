// Compile-check stub (declarations only): the CMSIS and STM32H7 HAL names used
// by tflm_ops/targets/nicla_vision, which on the board come from Mbed's
// target "cmsis.h" (stm32h7xx.h -> stm32h7xx_hal.h). Not linked.
#pragma once
#include <cstdint>

#if defined(CORE_CM7)
#define __DCACHE_PRESENT 1U
void SCB_InvalidateDCache_by_Addr(volatile void* addr, int32_t dsize);
void SCB_CleanInvalidateDCache_by_Addr(volatile void* addr, int32_t dsize);
#endif

void __DSB();
void __SEV();
void __WFE();

typedef enum { HAL_OK = 0, HAL_ERROR = 1, HAL_BUSY = 2, HAL_TIMEOUT = 3 } HAL_StatusTypeDef;
HAL_StatusTypeDef HAL_HSEM_FastTake(uint32_t SemID);
void HAL_HSEM_Release(uint32_t SemID, uint32_t ProcessID);
void tinyseg_stub_hsem_clk_enable();
#define __HAL_RCC_HSEM_CLK_ENABLE() tinyseg_stub_hsem_clk_enable()
