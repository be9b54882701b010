// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, the zlib crc32) in
// portable C++: the remote protocol's frame check and the check of every
// stored codec block (codec.h).
//
// On an STM32 the CRC peripheral computes the same function in hardware
// (polynomial 0x04C11DB7 with input and output bit reversal, initial value
// 0xFFFFFFFF, final XOR 0xFFFFFFFF); a target can swap it in here without
// changing the stored format.
#ifndef TINYSEG_CRC32_H_
#define TINYSEG_CRC32_H_

#include <cstddef>
#include <cstdint>

namespace tinyseg {

constexpr uint32_t kCrc32Init = 0xFFFFFFFFu;

// Running state: start from kCrc32Init, feed pieces in order, then
// Crc32Final. Crc32Final(Crc32Update(kCrc32Init, d, n)) == zlib.crc32(d).
uint32_t Crc32Update(uint32_t state, const uint8_t* data, size_t len);
inline uint32_t Crc32Final(uint32_t state) { return state ^ 0xFFFFFFFFu; }
inline uint32_t Crc32(const uint8_t* data, size_t len) {
  return Crc32Final(Crc32Update(kCrc32Init, data, len));
}

}  // namespace tinyseg

#endif  // TINYSEG_CRC32_H_
