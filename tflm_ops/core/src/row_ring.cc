// The ring of one tensor in a streamed chain (see row_ring.h).
#include "tinyseg/row_ring.h"

#include <cstring>

namespace tinyseg {

Status RowRing::Init(uint8_t* buffer, int32_t capacity_rows, size_t row_bytes) {
  if (buffer == nullptr || capacity_rows <= 0 || row_bytes == 0) return Status::kInvalidArgument;
  buffer_ = buffer;
  capacity_ = capacity_rows;
  row_bytes_ = row_bytes;
  first_ = 0;
  count_ = 0;
  moved_ = 0;
  return Status::kOk;
}

Status RowRing::Reserve(int32_t row, int32_t keep_from, uint8_t** out) {
  if (buffer_ == nullptr || out == nullptr || row != end()) return Status::kInvalidArgument;
  if (count_ == capacity_) {
    if (keep_from > row) keep_from = row;
    const int32_t drop = keep_from - first_;
    if (drop <= 0) return Status::kOutOfRange;
    const int32_t kept = count_ - drop;
    if (kept > 0) {
      std::memmove(buffer_, buffer_ + static_cast<size_t>(drop) * row_bytes_,
                   static_cast<size_t>(kept) * row_bytes_);
      moved_ += static_cast<uint64_t>(kept) * row_bytes_;
    }
    first_ += drop;
    count_ = kept;
  }
  if (count_ == 0) first_ = row;
  *out = buffer_ + static_cast<size_t>(count_) * row_bytes_;
  ++count_;
  return Status::kOk;
}

Status RowRing::Rows(int32_t lo, int32_t hi, const uint8_t** out) const {
  if (out == nullptr || buffer_ == nullptr) return Status::kInvalidArgument;
  if (lo > hi || lo < first_ || hi >= end()) return Status::kOutOfRange;
  *out = buffer_ + static_cast<size_t>(lo - first_) * row_bytes_;
  return Status::kOk;
}

}  // namespace tinyseg
