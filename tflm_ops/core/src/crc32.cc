// Table-driven CRC-32, four bytes per step (see crc32.h).
#include "tinyseg/crc32.h"

namespace tinyseg {
namespace {

// Four 256-entry tables built at compile time: t[0] is the classic byte
// table, t[k][i] advances t[k-1][i] by one more zero byte, so four input
// bytes cost four lookups and no per-bit work (4 KB of read-only data).
struct CrcTables {
  uint32_t t[4][256];
  constexpr CrcTables() : t() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1);
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int k = 1; k < 4; ++k) t[k][i] = t[0][t[k - 1][i] & 0xFFu] ^ (t[k - 1][i] >> 8);
    }
  }
};
constexpr CrcTables kTables;

}  // namespace

uint32_t Crc32Update(uint32_t state, const uint8_t* data, size_t len) {
  const auto& t = kTables.t;
  while (len >= 4) {
    state ^= static_cast<uint32_t>(data[0]) | (static_cast<uint32_t>(data[1]) << 8) |
             (static_cast<uint32_t>(data[2]) << 16) | (static_cast<uint32_t>(data[3]) << 24);
    state = t[3][state & 0xFFu] ^ t[2][(state >> 8) & 0xFFu] ^ t[1][(state >> 16) & 0xFFu] ^
            t[0][state >> 24];
    data += 4;
    len -= 4;
  }
  while (len-- > 0) state = t[0][(state ^ *data++) & 0xFFu] ^ (state >> 8);
  return state;
}

}  // namespace tinyseg
