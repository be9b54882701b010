// The ring of one tensor in a streamed chain: the rows its readers'
// windows still need, kept contiguous so that a TFLM kernel can read a window
// of rows as an ordinary tensor of that height (a band view), with no copy.
//
// Rows arrive in order (row r is reserved after row r - 1). When the buffer
// is full, the rows no reader needs any more (below keep_from, which the
// chain's schedule gives: ChainSchedule::lowest_needed) are dropped by moving
// the kept rows to the start of the buffer. The buffer is capacity_rows *
// row_bytes: exactly the ring the planner counts (customops ring_bytes). With
// a ring of k rows and a window sliding by one row, each new row moves k - 1
// rows, which is small beside the k * kernel_w * channels multiply-adds each
// output element of a convolution costs.
#ifndef TINYSEG_ROW_RING_H_
#define TINYSEG_ROW_RING_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/status.h"

namespace tinyseg {

class RowRing {
 public:
  // buffer: capacity_rows * row_bytes bytes (caller memory, e.g. arena scratch).
  Status Init(uint8_t* buffer, int32_t capacity_rows, size_t row_bytes);

  // Storage for row `row`, which must be end() (rows arrive in order). Rows
  // below keep_from may be dropped to make room; kOutOfRange when the rows
  // from keep_from up to `row` do not fit (the plan's ring is too small).
  Status Reserve(int32_t row, int32_t keep_from, uint8_t** out);

  // Rows [lo, hi] (all held) as one contiguous block; kOutOfRange otherwise.
  Status Rows(int32_t lo, int32_t hi, const uint8_t** out) const;

  int32_t begin() const { return first_; }         // first row held
  int32_t end() const { return first_ + count_; }  // one past the last row held
  uint64_t bytes_moved() const { return moved_; }  // by drops (for the overhead benchmark)

 private:
  uint8_t* buffer_ = nullptr;
  int32_t capacity_ = 0;
  size_t row_bytes_ = 0;
  int32_t first_ = 0;
  int32_t count_ = 0;
  uint64_t moved_ = 0;
};

}  // namespace tinyseg

#endif  // TINYSEG_ROW_RING_H_
