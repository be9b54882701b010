// RowRing: rows arrive in order, windows read contiguous rows, a too-small
// ring is refused, and a random walk agrees with a plain copy of every row.
#include <cstring>
#include <vector>

#include "tinyseg/row_ring.h"
#include "tinytest.h"

using namespace tinyseg;

namespace {

void Fill(uint8_t* row, int32_t r, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) row[i] = static_cast<uint8_t>(r * 31 + i);
}

}  // namespace

TEST(SlidingWindowOfThree) {
  uint8_t buf[3 * 4];
  RowRing ring;
  CHECK_OK(ring.Init(buf, 3, 4));
  uint8_t* dst = nullptr;
  for (int32_t r = 0; r < 10; ++r) {
    // a 3x3 convolution's output row y = r - 1 needs rows y-1..y+1: keep from r - 2
    CHECK_OK(ring.Reserve(r, r - 2, &dst));
    Fill(dst, r, 4);
    if (r >= 2) {
      const uint8_t* window = nullptr;
      CHECK_OK(ring.Rows(r - 2, r, &window));
      uint8_t expect[12];
      for (int32_t k = 0; k < 3; ++k) Fill(expect + 4 * k, r - 2 + k, 4);
      CHECK(std::memcmp(window, expect, sizeof(expect)) == 0);
    }
  }
  CHECK_EQ(ring.begin(), 7);
  CHECK_EQ(ring.end(), 10);
  CHECK_EQ(static_cast<int>(ring.bytes_moved()), 7 * 2 * 4);  // each of rows 3..9 moved two rows
}

TEST(TooSmallAndOutOfOrderAreRefused) {
  uint8_t buf[2 * 8];
  RowRing ring;
  CHECK_OK(ring.Init(buf, 2, 8));
  uint8_t* dst = nullptr;
  CHECK_OK(ring.Reserve(0, 0, &dst));
  CHECK_OK(ring.Reserve(1, 0, &dst));
  CHECK_STATUS(ring.Reserve(2, 0, &dst), Status::kOutOfRange);       // rows 0..2 needed, 2 fit
  CHECK_STATUS(ring.Reserve(3, 0, &dst), Status::kInvalidArgument);  // row 2 comes first
  const uint8_t* rows = nullptr;
  CHECK_STATUS(ring.Rows(1, 2, &rows), Status::kOutOfRange);
  CHECK_OK(ring.Rows(0, 1, &rows));
  CHECK_STATUS(ring.Init(nullptr, 2, 8), Status::kInvalidArgument);
}

TEST(RandomWalkMatchesFullCopy) {
  const size_t row_bytes = 5;
  const int32_t rows = 200;
  std::vector<uint8_t> full(rows * row_bytes);
  uint32_t seed = 12345;
  auto next = [&seed]() {
    seed = seed * 1103515245u + 12345u;
    return static_cast<int32_t>((seed >> 16) % 7);
  };
  for (int32_t cap = 1; cap <= 8; ++cap) {
    std::vector<uint8_t> buf(cap * row_bytes);
    RowRing ring;
    CHECK_OK(ring.Init(buf.data(), cap, row_bytes));
    int32_t keep = 0;
    for (int32_t r = 0; r < rows; ++r) {
      // the readers move on: keep_from never falls and stays within cap - 1 rows of r
      const int32_t lowest = r - (cap - 1);
      keep += next() % 3;
      if (keep < lowest) keep = lowest;
      if (keep > r) keep = r;
      uint8_t* dst = nullptr;
      CHECK_OK(ring.Reserve(r, keep, &dst));
      Fill(dst, r, row_bytes);
      Fill(&full[r * row_bytes], r, row_bytes);
      const uint8_t* got = nullptr;
      CHECK_OK(ring.Rows(keep < ring.begin() ? ring.begin() : keep, r, &got));
      const int32_t from = keep < ring.begin() ? ring.begin() : keep;
      CHECK(std::memcmp(got, &full[from * row_bytes], (r - from + 1) * row_bytes) == 0);
    }
  }
}

TINYTEST_MAIN("row_ring")
