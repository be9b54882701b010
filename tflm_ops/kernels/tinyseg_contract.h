// GENERATED from tinyseg_plugin/contract/customops.py and stages/ by
// `python -m tinyseg_plugin.contract.header`.
// Do not edit: change customops.py or stages/ and regenerate (tests/test_contract.py checks the two agree).
// The custom-operator contract, defined once: option keys, limits, dtype rules, OpData sizes.
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tensorflow/lite/c/common.h"

namespace tflite {
namespace tinyseg_ops {
namespace contract {

constexpr int kVersion = 1;
constexpr char kSpill[] = "Spill";
constexpr char kFetching[] = "Fetching";
constexpr char kFetchingConv2D[] = "FetchingConv2D";
constexpr char kStreamChain[] = "StreamChain";
// How many custom operators the names above register.
constexpr unsigned int kOpCount = 4;

// Option keys.
constexpr char kKeyActivation[] = "activation";
constexpr char kKeyAxis[] = "axis";
constexpr char kKeyBandRows[] = "band_rows";
constexpr char kKeyBlock[] = "block";
constexpr char kKeyDilationH[] = "dilation_h";
constexpr char kKeyDilationW[] = "dilation_w";
constexpr char kKeyFetch[] = "fetch";
constexpr char kKeyFetched[] = "fetched";
constexpr char kKeyFields[] = "fields";
constexpr char kKeyInputs[] = "inputs";
constexpr char kKeyName[] = "name";
constexpr char kKeyOp[] = "op";
constexpr char kKeyOpScratch[] = "op_scratch";
constexpr char kKeyOperands[] = "operands";
constexpr char kKeyOptions[] = "options";
constexpr char kKeyOutputs[] = "outputs";
constexpr char kKeyPadding[] = "padding";
constexpr char kKeyPosition[] = "position";
constexpr char kKeyQuant[] = "quant";
constexpr char kKeyQuantizedBiasType[] = "quantized_bias_type";
constexpr char kKeyQuantizedDimension[] = "quantized_dimension";
constexpr char kKeyRegion[] = "region";
constexpr char kKeyRingBytes[] = "ring_bytes";
constexpr char kKeyRings[] = "rings";
constexpr char kKeyScale[] = "scale";
constexpr char kKeyShape[] = "shape";
constexpr char kKeySink[] = "sink";
constexpr char kKeySlot[] = "slot";
constexpr char kKeySlotRegions[] = "slot_regions";
constexpr char kKeySource[] = "source";
constexpr char kKeySpill[] = "spill";
constexpr char kKeySpilled[] = "spilled";
constexpr char kKeyStages[] = "stages";
constexpr char kKeyStrideH[] = "stride_h";
constexpr char kKeyStrideW[] = "stride_w";
constexpr char kKeyTensors[] = "tensors";
constexpr char kKeyTokens[] = "tokens";
constexpr char kKeyType[] = "type";
constexpr char kKeyVersion[] = "version";
constexpr char kKeyZeroPoint[] = "zero_point";

// Builtin options fields of a StreamChain stage (the TFLite schema's names).
constexpr char kFieldPadding[] = "padding";
constexpr char kFieldStrideW[] = "strideW";
constexpr char kFieldStrideH[] = "strideH";
constexpr char kFieldDilationWFactor[] = "dilationWFactor";
constexpr char kFieldDilationHFactor[] = "dilationHFactor";
constexpr char kFieldFusedActivationFunction[] = "fusedActivationFunction";
constexpr char kFieldFilterWidth[] = "filterWidth";
constexpr char kFieldFilterHeight[] = "filterHeight";
constexpr char kFieldAxis[] = "axis";
constexpr char kFieldAlignCorners[] = "alignCorners";
constexpr char kFieldHalfPixelCenters[] = "halfPixelCenters";
constexpr char kFieldAlpha[] = "alpha";
constexpr char kFieldKeepDims[] = "keepDims";

// Integer options: least and greatest accepted value.
constexpr int64_t kMinSlot = 0;
constexpr int64_t kMaxSlot = 2147483647;
constexpr int64_t kMinRegion = 0;
constexpr int64_t kMaxRegion = 7;
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
constexpr int64_t kMinRingBytes = 0;
constexpr int64_t kMaxRingBytes = 2147483647;
constexpr int64_t kMinOpScratch = 0;
constexpr int64_t kMaxOpScratch = 2147483647;
constexpr int64_t kMinSpilled = 0;
constexpr int64_t kMaxSpilled = 4096;
constexpr int64_t kMinFetched = 0;
constexpr int64_t kMaxFetched = 4096;

// A key's least and greatest accepted value.
struct IntLimit {
  const char* key;
  int64_t min;
  int64_t max;
};

// The integer option limits by key (Options::Int looks an option's limits up here).
constexpr IntLimit kIntLimits[] = {
    {"slot", 0, 2147483647},
    {"region", 0, 7},
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
    {"ring_bytes", 0, 2147483647},
    {"op_scratch", 0, 2147483647},
    {"spilled", 0, 4096},
    {"fetched", 0, 4096},
};

// StreamChain stage fields: least and greatest accepted value (a boolean counts 0/1); an absent
// field takes the schema's default.
using FieldLimit = IntLimit;
constexpr FieldLimit kFieldLimits[] = {
    {"padding", 0, 1},
    {"strideW", 1, 32767},
    {"strideH", 1, 32767},
    {"dilationWFactor", 1, 32767},
    {"dilationHFactor", 1, 32767},
    {"fusedActivationFunction", 0, 3},
    {"filterWidth", 1, 32767},
    {"filterHeight", 1, 32767},
    {"axis", -4, 3},
    {"alignCorners", 0, 1},
    {"halfPixelCenters", 0, 1},
    {"keepDims", 0, 1},
};

// A StreamChain body tensor's quantization (scale finite, in [min, max]; zero point in its type's range),
// and the largest persistent block of one StreamChain.
constexpr double kStreamMinScale = 2.3283064365386963e-10;
constexpr double kStreamMaxScale = 4294967296.0;
constexpr int64_t kStreamMaxBodyBytes = 2147483647;
inline bool ZeroPointInRange(TfLiteType type, int64_t zero_point) {
  switch (type) {
    case kTfLiteInt8: return zero_point >= -128 && zero_point <= 127;
    case kTfLiteUInt8: return zero_point >= 0 && zero_point <= 255;
    case kTfLiteInt16: return zero_point >= 0 && zero_point <= 0;
    case kTfLiteInt32: return zero_point >= 0 && zero_point <= 0;
    case kTfLiteFloat32: return zero_point >= 0 && zero_point <= 0;
    default: return false;
  }
}

constexpr int kMaxDims = 6;
constexpr int kMaxRegions = 8;
constexpr int kMaxRowStreams = 8;
constexpr int kConvAxis = 3;
constexpr int kConvRank = 4;

// OpData bytes.
constexpr size_t kSpillOpDataBytes = 16;
constexpr size_t kFetchingHeaderBytes = 32;
constexpr size_t kFetchingConvHeaderBytes = 64;
constexpr size_t kFetchedOperandBytes = 16 + 2 * sizeof(void*);
constexpr size_t kPerChannelBytes = 4;
constexpr size_t kBlockHeaderBytes = 8;
constexpr size_t kStreamChainOpDataBytes = 96;
constexpr size_t kStreamTensorBytes = 88;
constexpr size_t kStreamScheduleTensorBytes = 16;
constexpr size_t kStreamStageBytes = 112;
constexpr size_t kStreamEdgeBytes = 32;
constexpr size_t kSpillStreamBytes = 208;
constexpr size_t kStreamInt32PerTensor = 3;
constexpr size_t kStreamInt32PerStage = 1;
constexpr int kStreamMaxStageInputs = 16;
constexpr size_t kStreamLookupTableBytes = 256;
constexpr size_t kStreamAccumulatorBytes = 4;

// StreamChain: the stages it computes, and which of a stage's inputs are activations.
enum class StageOp : int32_t {
  kConv2d = 0,
  kDepthwiseConv2d = 1,
  kTransposeConv = 2,
  kMaxPool2d = 3,
  kAveragePool2d = 4,
  kAdd = 5,
  kSub = 6,
  kMul = 7,
  kQuantize = 8,
  kDequantize = 9,
  kLogistic = 10,
  kTanh = 11,
  kRelu = 12,
  kRelu6 = 13,
  kHardSwish = 14,
  kLeakyRelu = 15,
  kPrelu = 16,
  kElu = 17,
  kPad = 18,
  kPadv2 = 19,
  kResizeNearestNeighbor = 20,
  kResizeBilinear = 21,
  kConcatenation = 22,
  kMean = 23,
  kUnknown = -1,
};

inline StageOp ParseStageOp(const char* name) {
  if (std::strcmp(name, "CONV_2D") == 0) return StageOp::kConv2d;
  if (std::strcmp(name, "DEPTHWISE_CONV_2D") == 0) return StageOp::kDepthwiseConv2d;
  if (std::strcmp(name, "TRANSPOSE_CONV") == 0) return StageOp::kTransposeConv;
  if (std::strcmp(name, "MAX_POOL_2D") == 0) return StageOp::kMaxPool2d;
  if (std::strcmp(name, "AVERAGE_POOL_2D") == 0) return StageOp::kAveragePool2d;
  if (std::strcmp(name, "ADD") == 0) return StageOp::kAdd;
  if (std::strcmp(name, "SUB") == 0) return StageOp::kSub;
  if (std::strcmp(name, "MUL") == 0) return StageOp::kMul;
  if (std::strcmp(name, "QUANTIZE") == 0) return StageOp::kQuantize;
  if (std::strcmp(name, "DEQUANTIZE") == 0) return StageOp::kDequantize;
  if (std::strcmp(name, "LOGISTIC") == 0) return StageOp::kLogistic;
  if (std::strcmp(name, "TANH") == 0) return StageOp::kTanh;
  if (std::strcmp(name, "RELU") == 0) return StageOp::kRelu;
  if (std::strcmp(name, "RELU6") == 0) return StageOp::kRelu6;
  if (std::strcmp(name, "HARD_SWISH") == 0) return StageOp::kHardSwish;
  if (std::strcmp(name, "LEAKY_RELU") == 0) return StageOp::kLeakyRelu;
  if (std::strcmp(name, "PRELU") == 0) return StageOp::kPrelu;
  if (std::strcmp(name, "ELU") == 0) return StageOp::kElu;
  if (std::strcmp(name, "PAD") == 0) return StageOp::kPad;
  if (std::strcmp(name, "PADV2") == 0) return StageOp::kPadv2;
  if (std::strcmp(name, "RESIZE_NEAREST_NEIGHBOR") == 0) return StageOp::kResizeNearestNeighbor;
  if (std::strcmp(name, "RESIZE_BILINEAR") == 0) return StageOp::kResizeBilinear;
  if (std::strcmp(name, "CONCATENATION") == 0) return StageOp::kConcatenation;
  if (std::strcmp(name, "MEAN") == 0) return StageOp::kMean;
  return StageOp::kUnknown;
}

// Whether input k of a stage is an activation (else a constant: filter, bias, shape).
inline bool IsActivationInput(StageOp op, int k) {
  switch (op) {
    case StageOp::kConv2d: return k == 0;
    case StageOp::kDepthwiseConv2d: return k == 0;
    case StageOp::kTransposeConv: return k == 2;
    case StageOp::kMaxPool2d: return k == 0;
    case StageOp::kAveragePool2d: return k == 0;
    case StageOp::kAdd: return k == 0 || k == 1;
    case StageOp::kSub: return k == 0 || k == 1;
    case StageOp::kMul: return k == 0 || k == 1;
    case StageOp::kQuantize: return k == 0;
    case StageOp::kDequantize: return k == 0;
    case StageOp::kLogistic: return k == 0;
    case StageOp::kTanh: return k == 0;
    case StageOp::kRelu: return k == 0;
    case StageOp::kRelu6: return k == 0;
    case StageOp::kHardSwish: return k == 0;
    case StageOp::kLeakyRelu: return k == 0;
    case StageOp::kPrelu: return k == 0;
    case StageOp::kElu: return k == 0;
    case StageOp::kPad: return k == 0;
    case StageOp::kPadv2: return k == 0;
    case StageOp::kResizeNearestNeighbor: return k == 0;
    case StageOp::kResizeBilinear: return k == 0;
    case StageOp::kConcatenation: return true;
    case StageOp::kMean: return k == 0;
    default: return false;
  }
}

// Whether a stage requantizes per output channel (persistent multiplier and shift).
inline bool PerChannelStage(StageOp op) {
  return op == StageOp::kConv2d || op == StageOp::kDepthwiseConv2d || op == StageOp::kTransposeConv;
}

// Whether a stage looks elements up in a persistent int8 table (kStreamLookupTableBytes in the pool).
inline bool LookupTableStage(StageOp op) {
  return op == StageOp::kElu;
}

// Whether a stage accumulates every input row into per-channel sums at the end of op_scratch
// (kStreamAccumulatorBytes a channel) and writes its one-pixel output after the last row.
inline bool AccumulatingStage(StageOp op) {
  return op == StageOp::kMean;
}

// The row types of a stage (the C++ value is the index of contract/stages/record.py ROWS).
enum class Rows : int32_t { kQuantized = 0, kFloat32 = 1, kInt16 = 2 };
constexpr const char* kRowsNames[] = {"quantized", "float32", "int16"};

// Every stage StreamChain computes, by operator and row type, in the registry's order.
struct StageKey {
  StageOp op;
  Rows rows;
};
constexpr StageKey kStageKeys[] = {
    {StageOp::kConv2d, Rows::kQuantized},
    {StageOp::kDepthwiseConv2d, Rows::kQuantized},
    {StageOp::kTransposeConv, Rows::kQuantized},
    {StageOp::kMaxPool2d, Rows::kQuantized},
    {StageOp::kAveragePool2d, Rows::kQuantized},
    {StageOp::kAdd, Rows::kQuantized},
    {StageOp::kSub, Rows::kQuantized},
    {StageOp::kMul, Rows::kQuantized},
    {StageOp::kQuantize, Rows::kQuantized},
    {StageOp::kDequantize, Rows::kQuantized},
    {StageOp::kLogistic, Rows::kQuantized},
    {StageOp::kTanh, Rows::kQuantized},
    {StageOp::kRelu, Rows::kQuantized},
    {StageOp::kRelu6, Rows::kQuantized},
    {StageOp::kHardSwish, Rows::kQuantized},
    {StageOp::kLeakyRelu, Rows::kQuantized},
    {StageOp::kPrelu, Rows::kQuantized},
    {StageOp::kElu, Rows::kQuantized},
    {StageOp::kPad, Rows::kQuantized},
    {StageOp::kPadv2, Rows::kQuantized},
    {StageOp::kResizeNearestNeighbor, Rows::kQuantized},
    {StageOp::kResizeBilinear, Rows::kQuantized},
    {StageOp::kConcatenation, Rows::kQuantized},
    {StageOp::kMean, Rows::kQuantized},
    {StageOp::kConv2d, Rows::kFloat32},
    {StageOp::kDepthwiseConv2d, Rows::kFloat32},
    {StageOp::kTransposeConv, Rows::kFloat32},
    {StageOp::kMaxPool2d, Rows::kFloat32},
    {StageOp::kAveragePool2d, Rows::kFloat32},
    {StageOp::kAdd, Rows::kFloat32},
    {StageOp::kSub, Rows::kFloat32},
    {StageOp::kMul, Rows::kFloat32},
    {StageOp::kQuantize, Rows::kFloat32},
    {StageOp::kLogistic, Rows::kFloat32},
    {StageOp::kTanh, Rows::kFloat32},
    {StageOp::kRelu, Rows::kFloat32},
    {StageOp::kRelu6, Rows::kFloat32},
    {StageOp::kHardSwish, Rows::kFloat32},
    {StageOp::kLeakyRelu, Rows::kFloat32},
    {StageOp::kPrelu, Rows::kFloat32},
    {StageOp::kElu, Rows::kFloat32},
    {StageOp::kPad, Rows::kFloat32},
    {StageOp::kPadv2, Rows::kFloat32},
    {StageOp::kResizeNearestNeighbor, Rows::kFloat32},
    {StageOp::kResizeBilinear, Rows::kFloat32},
    {StageOp::kConcatenation, Rows::kFloat32},
    {StageOp::kMean, Rows::kFloat32},
    {StageOp::kConv2d, Rows::kInt16},
    {StageOp::kDepthwiseConv2d, Rows::kInt16},
    {StageOp::kTransposeConv, Rows::kInt16},
    {StageOp::kMaxPool2d, Rows::kInt16},
    {StageOp::kAveragePool2d, Rows::kInt16},
    {StageOp::kAdd, Rows::kInt16},
    {StageOp::kSub, Rows::kInt16},
    {StageOp::kMul, Rows::kInt16},
    {StageOp::kQuantize, Rows::kInt16},
    {StageOp::kDequantize, Rows::kInt16},
    {StageOp::kLogistic, Rows::kInt16},
    {StageOp::kTanh, Rows::kInt16},
    {StageOp::kRelu, Rows::kInt16},
    {StageOp::kRelu6, Rows::kInt16},
    {StageOp::kLeakyRelu, Rows::kInt16},
    {StageOp::kPrelu, Rows::kInt16},
    {StageOp::kPad, Rows::kInt16},
    {StageOp::kPadv2, Rows::kInt16},
    {StageOp::kResizeNearestNeighbor, Rows::kInt16},
    {StageOp::kConcatenation, Rows::kInt16},
    {StageOp::kMean, Rows::kInt16},
};
constexpr int32_t kNumStageKeys = 68;

// Whether a table of entries with .op and .rows (tinyseg_stream.cc kStages) holds every key of
// kStageKeys exactly once and nothing else.
template <typename Entry, size_t N>
constexpr bool StagesMatchKeys(const Entry (&entries)[N]) {
  if (N != static_cast<size_t>(kNumStageKeys)) return false;
  for (size_t k = 0; k < N; ++k) {
    size_t in_entries = 0, in_keys = 0;
    for (size_t i = 0; i < N; ++i) {
      in_entries += entries[i].op == kStageKeys[k].op && entries[i].rows == kStageKeys[k].rows;
      in_keys += entries[k].op == kStageKeys[i].op && entries[k].rows == kStageKeys[i].rows;
    }
    if (in_entries != 1 || in_keys != 1) return false;
  }
  return true;
}

// QUANTIZE stages: the (input, output) types computed.
inline bool StreamQuantizeTypes(TfLiteType in, TfLiteType out) {
  return (in == kTfLiteUInt8 && out == kTfLiteInt8) ||
         (in == kTfLiteInt8 && out == kTfLiteUInt8) ||
         (in == kTfLiteInt8 && out == kTfLiteInt8) ||
         (in == kTfLiteFloat32 && out == kTfLiteInt8) ||
         (in == kTfLiteFloat32 && out == kTfLiteInt16) ||
         (in == kTfLiteInt8 && out == kTfLiteInt16) ||
         (in == kTfLiteInt16 && out == kTfLiteInt8) ||
         (in == kTfLiteInt16 && out == kTfLiteInt16);
}

// DEQUANTIZE stages: the (input, output) types computed.
inline bool StreamDequantizeTypes(TfLiteType in, TfLiteType out) {
  return (in == kTfLiteInt8 && out == kTfLiteFloat32) ||
         (in == kTfLiteInt16 && out == kTfLiteFloat32);
}

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
