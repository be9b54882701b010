// Compile-check stub (declaration only) of Mbed's microsecond ticker. Not linked.
#pragma once
#include <cstdint>
uint32_t us_ticker_read(void);
