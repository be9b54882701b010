// Test support for the TinySeg kernel tests: a RAM-backed SpillManager behind
// a tinyseg::Runtime (its device records where programmed bytes come from),
// FlexBuffers options as the optimizer writes them, and a small deterministic
// random generator.
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TESTS_TINYSEG_TEST_SUPPORT_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TESTS_TINYSEG_TEST_SUPPORT_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "flatbuffers/flexbuffers.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_runtime.h"
#include "tensorflow/lite/micro/micro_log.h"
#include "tinyseg/block_device.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/source_recording_device.h"
#include "tinyseg/spill_manager.h"

namespace tflite {
namespace tinyseg_testing {

using RecordingDevice = ::tinyseg::SourceRecordingDevice;

// 256 KB of RAM as spill storage: 64 sectors of 4 KB, 16 slots, programmed
// in units of `program_size` bytes.
class RamStorage {
 public:
  static constexpr size_t kBytes = 256 * 1024;
  static constexpr uint32_t kSector = 4096;
  static constexpr size_t kSlots = 16;
  // What a Spill kernel with the default block (1024) gets from the arena.
  static constexpr size_t kStagingBytes = 1024 + 8;

  explicit RamStorage(uint32_t program_size = 1)
      : ram_(Geom(program_size), memory_),
        device_(ram_),
        erase_queue_(device_),
        manager_(device_, erase_queue_, Config(), Memory()) {}

  // Fresh storage and runtime (call at the start of every test).
  ::tinyseg::Runtime& Reset() {
    ram_.Init();
    manager_.Init();
    device_.Forget();
    runtime_ = ::tinyseg::Runtime();
    runtime_.spill = &manager_;
    return runtime_;
  }
  ::tinyseg::SpillManager& manager() { return manager_; }
  RecordingDevice& device() { return device_; }
  // The storage bytes themselves (region offset 0), for bit-flip tests.
  uint8_t* memory() { return memory_; }
  // The runtime of the last Reset (its stats survive until the next one).
  ::tinyseg::Runtime& runtime() { return runtime_; }
  // A staging buffer for tests that call SpillManager::Spill themselves.
  ::tinyseg::ByteSpan Staging() { return ::tinyseg::ByteSpan{staging_, sizeof(staging_)}; }

 private:
  static ::tinyseg::Geometry Geom(uint32_t program_size) {
    ::tinyseg::Geometry g;
    g.read_size = 1;
    g.program_size = program_size;
    g.erase_size = kSector;
    g.total_size = kBytes;
    return g;
  }
  static ::tinyseg::SpillConfig Config() {
    ::tinyseg::SpillConfig c;
    c.region_offset = 0;
    c.region_size = kBytes;
    c.codec_block_bytes = 1024;
    return c;
  }
  ::tinyseg::SpillMemory Memory() {
    ::tinyseg::SpillMemory m;
    m.slots = slots_;
    m.num_slots = kSlots;
    m.sectors = sectors_;
    m.num_sectors = kBytes / kSector;  // read_size 1: no read bounce
    return m;
  }

  uint8_t memory_[kBytes];
  ::tinyseg::SpillSlot slots_[kSlots];
  ::tinyseg::SectorInfo sectors_[kBytes / kSector];
  uint8_t staging_[kStagingBytes];
  ::tinyseg::RamBlockDevice ram_;
  RecordingDevice device_;
  ::tinyseg::SyncEraseQueue erase_queue_;
  ::tinyseg::SpillManager manager_;
  ::tinyseg::Runtime runtime_;
};

inline RamStorage& Storage() {
  static RamStorage storage;  // 256 KB: too large for the stack
  return storage;
}

// Storage programmed in 32-byte words, as the STM32H7's internal flash.
inline RamStorage& WordStorage() {
  static RamStorage storage(32);
  return storage;
}

// Deterministic pseudo-random numbers (xorshift32).
class Random {
 public:
  explicit Random(uint32_t seed) : s_(seed ? seed : 1u) {}
  uint32_t Next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 17;
    s_ ^= s_ << 5;
    return s_;
  }
  // Uniform in [lo, hi].
  int32_t Int(int32_t lo, int32_t hi) {
    return lo + static_cast<int32_t>(Next() % static_cast<uint32_t>(hi - lo + 1));
  }
  // Activations that compress: a share of `zero` at `zero_point`.
  template <typename T>
  void Fill(T* data, size_t n, int32_t lo, int32_t hi, int zero_percent, T zero_point) {
    for (size_t i = 0; i < n; ++i) {
      data[i] = Int(0, 99) < zero_percent ? zero_point : static_cast<T>(Int(lo, hi));
    }
  }
  void FillFloat(float* data, size_t n, int zero_percent) {
    for (size_t i = 0; i < n; ++i) {
      data[i] = Int(0, 99) < zero_percent ? 0.0f : static_cast<float>(Int(-1000, 1000)) / 250.0f;
    }
  }

 private:
  uint32_t s_;
};

// An untyped vector of ints under `key`, as the optimizer writes its lists.
inline void IntVector(flexbuffers::Builder& fbb, const char* key, const std::vector<int>& v) {
  fbb.Vector(key, [&]() {
    for (int x : v) fbb.Int(x);
  });
}

// A vector of such vectors under `key` (pairs such as [tensor, slot]).
inline void IntVectors(flexbuffers::Builder& fbb, const char* key,
                       const std::vector<std::vector<int>>& v) {
  fbb.Vector(key, [&]() {
    for (const std::vector<int>& p : v) {
      fbb.Vector([&]() {
        for (int x : p) fbb.Int(x);
      });
    }
  });
}

struct FetchedSpec {
  int position;
  int slot;
  std::vector<int> shape;
};

inline std::vector<uint8_t> SpillOptions(int slot, int block = 1024, int version = 1) {
  flexbuffers::Builder fbb;
  fbb.Map([&]() {
    fbb.Int("version", version);
    fbb.Int("slot", slot);
    fbb.Int("block", block);
  });
  fbb.Finish();
  return fbb.GetBuffer();
}

inline void FetchingFields(flexbuffers::Builder& fbb, int axis, int operands,
                           const std::vector<FetchedSpec>& fetched, bool typed_shape) {
  fbb.Int("version", 1);
  fbb.Int("axis", axis);
  fbb.Int("operands", operands);
  fbb.Int("block", 1024);
  fbb.Vector("fetched", [&]() {
    for (const FetchedSpec& f : fetched) {
      fbb.Map([&]() {
        fbb.Int("position", f.position);
        fbb.Int("slot", f.slot);
        if (typed_shape) {
          fbb.TypedVector("shape", [&]() {
            for (int d : f.shape) fbb.Int(d);
          });
        } else {
          IntVector(fbb, "shape", f.shape);
        }
      });
    }
  });
}

inline std::vector<uint8_t> FetchingOptions(int axis, int operands,
                                            const std::vector<FetchedSpec>& fetched,
                                            bool typed_shape = true) {
  flexbuffers::Builder fbb;
  fbb.Map([&]() { FetchingFields(fbb, axis, operands, fetched, typed_shape); });
  fbb.Finish();
  return fbb.GetBuffer();
}

struct ConvSpec {
  const char* padding = "SAME";
  int stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  const char* activation = "NONE";
  int band_rows = 1;
};

inline std::vector<uint8_t> FetchingConvOptions(int operands,
                                                const std::vector<FetchedSpec>& fetched,
                                                const ConvSpec& c) {
  flexbuffers::Builder fbb;
  fbb.Map([&]() {
    FetchingFields(fbb, 3, operands, fetched, true);
    fbb.String("padding", c.padding);
    fbb.Int("stride_h", c.stride_h);
    fbb.Int("stride_w", c.stride_w);
    fbb.Int("dilation_h", c.dilation_h);
    fbb.Int("dilation_w", c.dilation_w);
    fbb.String("activation", c.activation);
    fbb.Int("band_rows", c.band_rows);
  });
  fbb.Finish();
  return fbb.GetBuffer();
}

// How many of `cases` `matches(case, index)` fails for, each named in the log as `what` case
// index.
template <typename Case, size_t N, typename Matches>
int FailingCases(const Case (&cases)[N], const char* what, Matches matches) {
  int failing = 0;
  for (size_t i = 0; i < N; ++i) {
    if (matches(cases[i], static_cast<int>(i))) continue;
    MicroPrintf("%s case %d differs", what, static_cast<int>(i));
    ++failing;
  }
  return failing;
}

inline const char* AsChars(const std::vector<uint8_t>& v) {
  return reinterpret_cast<const char*>(v.data());
}

}  // namespace tinyseg_testing
}  // namespace tflite

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TESTS_TINYSEG_TEST_SUPPORT_H_
