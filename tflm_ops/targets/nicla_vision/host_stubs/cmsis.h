// Compile-check stub (declarations only) of the CMSIS cache call. Not linked.
#pragma once
#include <cstdint>
#define __DCACHE_PRESENT 1U
void SCB_InvalidateDCache_by_Addr(volatile void* addr, int32_t dsize);
