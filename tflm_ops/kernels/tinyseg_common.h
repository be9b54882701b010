// Shared pieces of the TinySeg kernels: option parsing, the runtime lookup,
// and the strided fetch that decodes a spilled operand into its place in a
// concatenation (or a band buffer) through the staging buffer.
//
// Memory contract (docs/custom_ops.md): every kernel keeps exactly the OpData
// bytes the contract gives, so the structs below have fixed sizes that are
// checked at compile time for both 32- and 64-bit pointers.
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_COMMON_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_COMMON_H_

#include <cstddef>
#include <cstdint>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_contract.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_tflm_compat.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_runtime.h"
#include "tensorflow/lite/micro/micro_log.h"
#include "tinyseg/codec.h"
#include "tinyseg/spill_manager.h"

namespace tflite {
namespace tinyseg_ops {

constexpr int kContractVersion = contract::kVersion;
constexpr int kMaxDims = contract::kMaxDims;
static_assert(contract::kMaxBlock == ::tinyseg::kMaxBlockBytes,
              "contract: the block limit is the codec's");
static_assert(contract::kBlockHeaderBytes == ::tinyseg::kBlockHeaderBytes,
              "contract: staging is one encoded block");

// Scratch every kernel stages codec blocks through: one encoded block.
inline size_t StagingBytes(int32_t block) {
  return static_cast<size_t>(block) + ::tinyseg::kBlockHeaderBytes;
}

// ------------------------------------------------------------ OpData layouts

// Spill: 16 bytes.
struct SpillOpData {
  uint32_t slot;
  int32_t block;
  int staging_index;  // RequestScratchBufferInArena takes int*
  int16_t elem_size;
  int16_t region;  // the Runtime's storage region that holds the slot
};
static_assert(sizeof(SpillOpData) == contract::kSpillOpDataBytes, "contract: Spill OpData");

// One fetched operand of a Fetching: 16 + 2 * pointer bytes.
struct FetchedConcatOperand {
  int32_t position;  // index in the concatenation
  uint32_t slot;
  int32_t axis_dim;  // its extent along the concatenation axis
  int32_t region;    // the Runtime's storage region that holds the slot
  size_t elements;   // from its `shape` option
  size_t run_bytes;  // contiguous bytes per outer index (Prepare)
};
static_assert(sizeof(FetchedConcatOperand) == contract::kFetchedOperandBytes,
              "contract: 16 + 2 pointers per fetched operand");

// Fetching header: 32 bytes, followed by the fetched operands.
struct FetchingHeader {
  int32_t axis;
  int32_t operands;
  int32_t num_fetched;
  int32_t block;
  int staging_index;  // RequestScratchBufferInArena takes int*
  int32_t elem_size;
  int32_t reserved[2];
};
constexpr size_t kFetchingHeaderBytes = contract::kFetchingHeaderBytes;
static_assert(sizeof(FetchingHeader) == kFetchingHeaderBytes,
              "contract: Fetching OpData header is 32 bytes");

// One fetched operand of a FetchingConv2D: 16 + 2 * pointer bytes.
struct FetchedConvOperand {
  int16_t position;  // < operands <= kMaxOperands
  int16_t region;    // the Runtime's storage region that holds the slot
  uint32_t slot;
  int32_t height;
  int32_t width;
  size_t channels;
  size_t elements;
};
static_assert(sizeof(FetchedConvOperand) == contract::kFetchedOperandBytes,
              "contract: 16 + 2 pointers per fetched operand");

// FetchingConv2D header: at most 64 bytes (the contract reserves exactly 64).
struct FetchingConvHeader {
  int32_t* per_channel_multiplier;  // Prepare: persistent, 4 * C_out bytes
  int32_t* per_channel_shift;       // Prepare: persistent, 4 * C_out bytes
  int16_t num_fetched;              // <= kMaxFetched (4096)
  int16_t operands;  // the `operands` option: in-RAM inputs + num_fetched (Prepare checks it)
  int32_t band_rows;
  int band_index;
  int staging_index;  // RequestScratchBufferInArena takes int*
  int32_t input_offset;
  int32_t output_offset;
  int32_t activation_min;  // int8/int16: quantized range
  int32_t activation_max;
  int16_t stride_h;
  int16_t stride_w;
  int16_t dilation_h;
  int16_t dilation_w;
  int16_t pad_h;
  int16_t pad_w;
  uint16_t staging_bytes;
  uint8_t padding : 7;            // TfLitePadding
  uint8_t int32_accumulator : 1;  // int16 without bias: quantized_bias_type INT32
  uint8_t activation;             // TfLiteFusedActivation
};
static_assert(contract::kMaxRegion <= INT16_MAX, "OpData keeps a region in 16 bits");
static_assert(contract::kMaxOperands <= INT16_MAX && contract::kMaxFetched <= INT16_MAX,
              "FetchingConvHeader keeps operands and num_fetched in 16 bits");
constexpr size_t kFetchingConvHeaderBytes = contract::kFetchingConvHeaderBytes;
static_assert(sizeof(FetchingConvHeader) <= kFetchingConvHeaderBytes,
              "contract: FetchingConv2D OpData header is 64 bytes");

inline FetchedConcatOperand* ConcatOperands(FetchingHeader* h) {
  return reinterpret_cast<FetchedConcatOperand*>(reinterpret_cast<uint8_t*>(h) +
                                                 kFetchingHeaderBytes);
}
inline FetchedConvOperand* ConvOperands(FetchingConvHeader* h) {
  return reinterpret_cast<FetchedConvOperand*>(reinterpret_cast<uint8_t*>(h) +
                                               kFetchingConvHeaderBytes);
}

// The operand expansion, written once: operand k is the fetched entry whose
// position is k, otherwise the next in-RAM input. Call Next for k = 0, 1, ...
// in order (customops.operand_sources is the same rule in Python).
template <typename Fetched>
class OperandWalk {
 public:
  OperandWalk(const Fetched* fetched, int32_t count) : fetched_(fetched), count_(count) {}
  // The fetched entry at position k; else nullptr, and *input is the index of
  // the in-RAM input that operand k is.
  const Fetched* Next(int32_t k, int* input) {
    for (int32_t i = 0; i < count_; ++i) {
      if (fetched_[i].position == k) return &fetched_[i];
    }
    *input = next_input_++;
    return nullptr;
  }

 private:
  const Fetched* fetched_;
  int32_t count_;
  int next_input_ = 0;
};

// ------------------------------------------------------------ options

// A checked view of a custom operator's FlexBuffers options map.
class Options {
 public:
  // False (with a message) unless the buffer is a valid FlexBuffers map whose
  // `version` equals kContractVersion.
  bool Open(const char* op, const char* buffer, size_t length);
  // Integer key in [lo, hi]; false (with a message) otherwise.
  bool Int(const char* key, int64_t lo, int64_t hi, int64_t* out) const;
  // Integer key within the contract's limits for that key (contract::kIntLimits).
  bool Int(const char* key, int64_t* out) const;
  // String key; false (with a message) if missing.
  bool String(const char* key, const char** out) const;
  const flexbuffers::Map& map() const { return map_; }
  const char* op() const { return op_; }

 private:
  const char* op_ = "";
  flexbuffers::Map map_ = flexbuffers::Map::EmptyMap();
};

// One entry of the `fetched` option.
struct FetchedOption {
  int32_t position = 0;
  uint32_t slot = 0;
  int32_t rank = 0;
  int32_t shape[kMaxDims] = {};
  size_t elements = 0;
  int32_t region = 0;  // optional key; absent = 0
};

// The optional `region` key of an operator's map or a fetched entry (absent: 0); false (with a
// message) when it is not an integer in 0..kMaxRegion.
bool ReadRegion(const flexbuffers::Map& m, const char* op, const char* what, int32_t* out);

// Number of entries of `fetched` (false with a message if malformed).
bool CountFetched(const Options& options, int32_t* count);
// Entry i of `fetched`, validated.
bool ReadFetched(const Options& options, int32_t i, FetchedOption* out);

// The options Fetching and FetchingConv2D share: axis, operands, block, and how many entries
// `fetched` has.
struct FetchingOptions {
  int64_t axis = 0, operands = 0, block = 0;
  int32_t num_fetched = 0;
};
bool ReadFetchingOptions(const Options& options, FetchingOptions* o);

// The `fetched` entries into f[0 .. n): `store` checks entry i's FetchedOption against the
// operator's rules and writes it into f[i] (false: refused, with its message); two entries at one
// position are refused here.
template <typename Operand, typename Store>
bool ReadFetchedOperands(const Options& options, int32_t n, Operand* f, Store store) {
  for (int32_t i = 0; i < n; ++i) {
    FetchedOption o;
    if (!ReadFetched(options, i, &o) || !store(i, o, &f[i])) return false;
    for (int32_t j = 0; j < i; ++j) {
      if (f[j].position == f[i].position) {
        MicroPrintf("%s: two fetched operands at position %d", options.op(),
                    static_cast<int>(o.position));
        return false;
      }
    }
  }
  return true;
}

// ------------------------------------------------------------ runtime

// The application's Runtime attached to this interpreter, or nullptr (with a
// message naming `op`) if none or a foreign object is attached.
::tinyseg::Runtime* GetRuntime(TfLiteContext* context, const char* op);
// The attached runtime, or nullptr without a word (for kernels that only report statistics).
::tinyseg::Runtime* PeekRuntime(TfLiteContext* context);

// What a storage failure means, for the message that reports it: the stored
// bytes failed their CRC-32, or the device failed; "" for other statuses.
const char* StorageFaultHint(::tinyseg::Status s);

// The SpillManager of storage region `region`, or nullptr with a message naming the slot in it
// and the Runtime member to attach.
::tinyseg::SpillManager* RegionStorage(const ::tinyseg::Runtime& rt, int32_t region, uint32_t slot,
                                       const char* op);
// For Prepare: refuses a slot's region that the attached Runtime has no storage for. Without an
// attached Runtime it passes (Eval then refuses to run without one).
TfLiteStatus CheckRegion(TfLiteContext* context, int32_t region, uint32_t slot, const char* op);

// For Prepare: the node's inputs (or outputs) first .. first + count - 1 are tokens, tensors of
// zero elements that carry no data (the edges from a slot's writer to its readers); refused with
// the reason otherwise. The kernels never read or write them.
TfLiteStatus CheckTokens(TfLiteContext* context, TfLiteNode* node, bool inputs, int first,
                         int count, const char* op);

// Checks that `slot` of storage region `region` holds a live spilled tensor of exactly
// `raw_bytes`.
TfLiteStatus CheckSlot(::tinyseg::Runtime& rt, int32_t region, uint32_t slot, size_t raw_bytes,
                       const char* op);

// Decodes `runs` consecutive runs of `run_bytes` starting at byte
// `src_offset` of slot `slot` (of storage region `region`) into dst, run i at dst + i * dst_stride.
// Contiguous destinations and runs at least as large as the staging buffer
// are decoded straight into dst; shorter runs are decoded a staging buffer at
// a time and scattered from there.
TfLiteStatus FetchStrided(::tinyseg::Runtime& rt, int32_t region, uint32_t slot, size_t src_offset,
                          size_t runs, size_t run_bytes, uint8_t* dst, size_t dst_stride,
                          uint8_t* staging, size_t staging_bytes, const char* op);

// Bytes per element of the types the contract allows (0 otherwise).
size_t ElementBytes(TfLiteType type);

// Same scale and zero point (per-tensor parameters).
bool SameQuantization(const TfLiteTensor& a, const TfLiteTensor& b);

}  // namespace tinyseg_ops
}  // namespace tflite

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_COMMON_H_
