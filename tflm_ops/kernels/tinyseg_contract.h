// GENERATED from tinyseg_plugin/customops.py by `python -m tinyseg_plugin.customops --header`.
// Do not edit: change customops.py and regenerate (tests/test_contract.py checks the two agree).
// The custom-operator contract, defined once: option keys, limits, dtype rules, OpData sizes.
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_

#include <cstddef>
#include <cstdint>

#include "tensorflow/lite/c/common.h"

namespace tflite {
namespace tinyseg_ops {
namespace contract {

constexpr int kVersion = 1;
constexpr char kSpill[] = "Spill";
constexpr char kFetching[] = "Fetching";
constexpr char kFetchingConv2D[] = "FetchingConv2D";

// Option keys.
constexpr char kKeyActivation[] = "activation";
constexpr char kKeyAxis[] = "axis";
constexpr char kKeyBandRows[] = "band_rows";
constexpr char kKeyBlock[] = "block";
constexpr char kKeyDilationH[] = "dilation_h";
constexpr char kKeyDilationW[] = "dilation_w";
constexpr char kKeyFetched[] = "fetched";
constexpr char kKeyOperands[] = "operands";
constexpr char kKeyPadding[] = "padding";
constexpr char kKeyPosition[] = "position";
constexpr char kKeyQuantizedBiasType[] = "quantized_bias_type";
constexpr char kKeyShape[] = "shape";
constexpr char kKeySlot[] = "slot";
constexpr char kKeyStrideH[] = "stride_h";
constexpr char kKeyStrideW[] = "stride_w";
constexpr char kKeyVersion[] = "version";

// Integer options: least and greatest accepted value.
constexpr int64_t kMinSlot = 0;
constexpr int64_t kMaxSlot = 2147483647;
constexpr int64_t kMinPosition = 0;
constexpr int64_t kMaxPosition = 2147483647;
constexpr int64_t kMinAxis = 0;
constexpr int64_t kMaxAxis = 5;
constexpr int64_t kMinOperands = 1;
constexpr int64_t kMaxOperands = 4096;
constexpr int64_t kMinBlock = 4;
constexpr int64_t kMaxBlock = 32768;
constexpr int64_t kMinStrideH = 1;
constexpr int64_t kMaxStrideH = 32767;
constexpr int64_t kMinStrideW = 1;
constexpr int64_t kMaxStrideW = 32767;
constexpr int64_t kMinDilationH = 1;
constexpr int64_t kMaxDilationH = 32767;
constexpr int64_t kMinDilationW = 1;
constexpr int64_t kMaxDilationW = 32767;
constexpr int64_t kMinBandRows = 1;
constexpr int64_t kMaxBandRows = 2147483647;
constexpr int64_t kMinDim = 1;
constexpr int64_t kMaxDim = 2147483647;

// The same limits by key (Options::Int looks an option's limits up here).
struct IntLimit {
  const char* key;
  int64_t min;
  int64_t max;
};
constexpr IntLimit kIntLimits[] = {
    {"slot", 0, 2147483647},
    {"position", 0, 2147483647},
    {"axis", 0, 5},
    {"operands", 1, 4096},
    {"block", 4, 32768},
    {"stride_h", 1, 32767},
    {"stride_w", 1, 32767},
    {"dilation_h", 1, 32767},
    {"dilation_w", 1, 32767},
    {"band_rows", 1, 2147483647},
    {"dim", 1, 2147483647},
};

constexpr int kMaxDims = 6;
constexpr int kConvAxis = 3;
constexpr int kConvRank = 4;
constexpr int32_t kMaxFetched = 4096;

// OpData bytes.
constexpr size_t kSpillOpDataBytes = 16;
constexpr size_t kFetchingHeaderBytes = 32;
constexpr size_t kFetchingConvHeaderBytes = 64;
constexpr size_t kFetchedOperandBytes = 16 + 2 * sizeof(void*);
constexpr size_t kPerChannelBytes = 4;
constexpr size_t kBlockHeaderBytes = 8;

// Bytes per element of the types Spill and Fetching move (0: not allowed).
inline size_t ElementBytes(TfLiteType type) {
  switch (type) {
    case kTfLiteInt8: return 1;
    case kTfLiteUInt8: return 1;
    case kTfLiteInt16: return 2;
    case kTfLiteInt32: return 4;
    case kTfLiteFloat32: return 4;
    default: return 0;
  }
}

// FetchingConv2D: the activation/filter type pairs it computes.
inline bool ConvTypes(TfLiteType activation, TfLiteType filter) {
  return (activation == kTfLiteFloat32 && filter == kTfLiteFloat32) ||
         (activation == kTfLiteInt8 && filter == kTfLiteInt8) ||
         (activation == kTfLiteInt16 && filter == kTfLiteInt8);
}

// FetchingConv2D: the bias types each activation type takes.
inline bool ConvBiasType(TfLiteType activation, TfLiteType bias) {
  return (activation == kTfLiteFloat32 && bias == kTfLiteFloat32) ||
         (activation == kTfLiteInt8 && bias == kTfLiteInt32) ||
         (activation == kTfLiteInt16 && bias == kTfLiteInt32) ||
         (activation == kTfLiteInt16 && bias == kTfLiteInt64);
}

}  // namespace contract
}  // namespace tinyseg_ops
}  // namespace tflite

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_
