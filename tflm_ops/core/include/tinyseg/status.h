// TinySeg runtime core: status codes shared by every component.
//
// The core is built without exceptions, so every fallible call returns a
// Status. Values are stable (they may cross the M7/M4 RPC boundary later).
#ifndef TINYSEG_STATUS_H_
#define TINYSEG_STATUS_H_

#include <cstddef>
#include <cstdint>

namespace tinyseg {

enum class Status : int32_t {
  kOk = 0,
  kInvalidArgument = 1,    // bad parameter (null pointer, zero size, bad elem size)
  kOutOfRange = 2,         // address/offset beyond the device, region or tensor
  kMisaligned = 3,         // address/length not a multiple of the required unit
  kNotErased = 4,          // NOR rule: program would set a 0 bit back to 1
  kBufferTooSmall = 5,     // caller-provided buffer cannot hold the result
  kCorrupt = 6,            // encoded stream fails validation
  kIoError = 7,            // host file back-end failed
  kBusy = 8,               // erase queue full
  kNoSpace = 9,            // spill region has no room without clobbering live data
  kNotFound = 10,          // unknown / empty spill slot
  kUnsupported = 11,       // feature not available in this build
  kChecksumMismatch = 12,  // stored bytes fail their CRC-32 (bit error, torn write)
};

// Short constant name for logs ("kOk" -> "ok").
const char* StatusName(Status s);

inline bool Ok(Status s) { return s == Status::kOk; }

// The name of an enum value for logs, from a table by value: names[k] for the
// values 0..N-1 of an enum numbered from 0 without gaps, "unknown" for any
// other value (a corrupt byte cast to the enum).
template <typename Enum, size_t N>
const char* EnumName(Enum e, const char* const (&names)[N]) {
  const auto k = static_cast<uint64_t>(static_cast<int64_t>(e));
  return k < N ? names[k] : "unknown";
}
// Whether such a table names every value up to `last` (for a static_assert
// beside it, so a new enumerator cannot go without a name).
template <typename Enum, size_t N>
constexpr bool NamesUpTo(const char* const (&)[N], Enum last) {
  return N == static_cast<size_t>(last) + 1;
}

}  // namespace tinyseg

// Propagate a non-ok Status to the caller.
#define TINYSEG_RETURN_IF_ERROR(expr)                 \
  do {                                                \
    const ::tinyseg::Status tinyseg_status_ = (expr); \
    if (tinyseg_status_ != ::tinyseg::Status::kOk) {  \
      return tinyseg_status_;                         \
    }                                                 \
  } while (0)

#endif  // TINYSEG_STATUS_H_
