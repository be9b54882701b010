// StreamChain: a chain of row-local operators computed row by row
// (docs/custom_ops.md "StreamChain", docs/design/streaming.md).
//
// inputs [chain inputs read whole..., constants (filters, biases, shapes)...],
// outputs [tensors written whole]; options: the planner's figures
// (ring_bytes, op_scratch, spilled, fetched, block) and the body -- stages
// (builtin operators over chain-local tensor ids), tensors (the body's own
// tensors: intermediates and the skips it spills or fetches row by row),
// spill and fetch (local id, slot) and rings (local id, rows).
//
// Eval follows tinyseg/chain_schedule.h: every output row of every stage is
// computed exactly once, when a reader first needs it. An intermediate lives
// in a RowRing of exactly the rows the plan gives (arena scratch); a row of a
// spilled tensor is computed into its ring and appended to a SpillManager row
// stream; a row of a fetched tensor is decoded into its ring with FetchRange.
// Each stage runs TFLM's own reference arithmetic on a band view (the rows of
// its input window as a tensor of that height, with the top padding shifted),
// as FetchingConv2D does, so every output element comes from the same
// products in the same order as the unfused graph: outputs are bit-identical.
//
// Memory (the planner counts it, memory/kernels/tinyseg.py stream_chain_scratch and
// customops.stream_chain_body_bytes): Init keeps an OpData of kStreamChainOpDataBytes;
// Prepare allocates one persistent block for the chain's tables and requests
// two scratch buffers: the rings plus one codec block per spilled tensor, and
// op_scratch (a TRANSPOSE_CONV's int32 accumulator for one output row; in a CMSIS-NN build also
// the CMSIS-NN stages' buffers, see tinyseg_stream_cmsis.h).
#include <cmath>
#include <cstring>
#include <new>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/common.h"
#include "tensorflow/lite/kernels/internal/cppmath.h"
#include "tensorflow/lite/kernels/internal/quantization_util.h"
#include "tensorflow/lite/kernels/internal/reference/dequantize.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/add.h"
#include "tensorflow/lite/kernels/internal/reference/hard_swish.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/logistic.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/mul.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/tanh.h"
#include "tensorflow/lite/kernels/internal/reference/leaky_relu.h"
#include "tensorflow/lite/kernels/internal/reference/pad.h"
#include "tensorflow/lite/kernels/internal/reference/prelu.h"
#include "tensorflow/lite/kernels/internal/reference/resize_nearest_neighbor.h"
#include "tensorflow/lite/kernels/internal/reference/sub.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/conv.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/depthwise_conv.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/pooling.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/transpose_conv.h"
#include "tensorflow/lite/kernels/internal/reference/requantize.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/kernels/padding.h"
#include "tensorflow/lite/micro/kernels/activations.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"
// TFLM's FloatToQuantizedType (RELU6's six, as Relu6Prepare computes it) rounds a float quotient
// with ::round; clang's -Wdouble-promotion flags that line of TFLM's header where it is
// instantiated.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#include "tensorflow/lite/micro/micro_utils.h"
#pragma GCC diagnostic pop
#include "tinyseg/chain_schedule.h"
#include "tinyseg/row_ring.h"

namespace tflite {
namespace {

namespace contract = tinyseg_ops::contract;
using contract::StageOp;

constexpr char kOp[] = "StreamChain";

// ------------------------------------------------------------ persistent layout

// Init: the option numbers and the buffer indices.
struct StreamOpData {
  const uint8_t* options;  // the model's FlexBuffers map (the model outlives the interpreter)
  uint8_t* tables;         // Prepare: the persistent block (Tables below)
  size_t options_bytes;
  int32_t ring_bytes;
  int32_t op_scratch;
  int32_t spilled;
  int32_t fetched;
  int32_t block;
  int32_t num_tensors;  // chain-local: node inputs, node outputs, body tensors
  int32_t num_stages;
  int32_t num_edges;
  int32_t num_operands;
  int32_t num_order;  // outputs the schedule pulls: node outputs, then spilled
  int32_t num_spill;
  int32_t per_channel;  // int32 entries of the pool: multiplier/shift per channel, lookup tables
  int ring_index;       // RequestScratchBufferInArena takes int*
  int op_scratch_index;
};
static_assert(sizeof(StreamOpData) <= contract::kStreamChainOpDataBytes,
              "contract: StreamChain OpData");

enum class Kind : int32_t { kNodeInput = 0, kNodeOutput = 1, kBody = 2 };

// One chain-local tensor.
struct TensorSlot {
  ::tinyseg::RowRing ring;
  int32_t height;
  int32_t width;
  int32_t channels;
  int32_t row_bytes;
  int32_t type;  // TfLiteType
  int32_t zero_point;
  float scale;
  Kind kind;
  int32_t node_index;   // kNodeInput / kNodeOutput: index among the node's inputs / outputs
  int32_t ring_rows;    // 0: no ring
  int32_t ring_offset;  // bytes into the ring scratch
  int32_t stream;       // index of its SpillStream; -1
  int32_t fetch_slot;   // storage slot it is fetched from; -1
  int32_t constant;     // 1: a constant input of the node (never streamed: no schedule edge)
};
static_assert(sizeof(TensorSlot) <= contract::kStreamTensorBytes,
              "contract: StreamChain tensor record");
static_assert(sizeof(::tinyseg::ChainTensor) == contract::kStreamScheduleTensorBytes,
              "contract: schedule tensor");
static_assert(sizeof(::tinyseg::ChainEdge) == contract::kStreamEdgeBytes,
              "contract: schedule edge");
static_assert(sizeof(::tinyseg::ChainStage) == 4 * contract::kStreamInt32PerStage,
              "contract: schedule stage");
static_assert(sizeof(::tinyseg::SpillStream) <= contract::kSpillStreamBytes,
              "contract: SpillStream");

// One stage.
struct StageSlot {
  StageOp op;
  int32_t operand_begin;  // into the operand pool
  int32_t operand_count;
  int32_t input;   // first activation input
  int32_t filter;  // local ids; -1
  int32_t bias;
  int32_t output;
  int32_t stride_h, stride_w, dilation_h, dilation_w;
  int32_t filter_h, filter_w;
  int32_t pad_h, pad_w;  // TFLM's padding of the whole operator
  int32_t input_offset, output_offset;
  int32_t act_min, act_max;
  int32_t multiplier;
  int shift;  // QUANTIZE, MUL, ADD's output; LOGISTIC: input multiplier and left shift (TFLM's int
              // shifts)
  int32_t
      per_channel;  // offset of multiplier[C] then shift[C] (ELU: its int8 table) in the pool; -1
  int32_t input2_offset;             // ADD, MUL: the second input's; PRELU: alpha's
  int32_t left_shift;                // ADD
  int32_t multiplier1, multiplier2;  // ADD: the inputs'; PRELU: outputs 1 and 2
  int shift1, shift2;
  int32_t radius;  // LOGISTIC: input range radius
  int32_t flags;   // RESIZE_NEAREST_NEIGHBOR: 1 align_corners, 2 half_pixel_centers
  int32_t input2;  // ADD, MUL: second activation input; PRELU: alpha (a node input)
};
static_assert(sizeof(StageSlot) <= contract::kStreamStageBytes,
              "contract: StreamChain stage record");

// Pointers into the persistent block (the order customops.stream_chain_body_bytes sums).
struct Tables {
  uint8_t* streams;  // num_spill * kSpillStreamBytes
  uint8_t* tensors;  // num_tensors * kStreamTensorBytes
  ::tinyseg::ChainTensor* schedule;
  uint8_t* stages;  // num_stages * kStreamStageBytes
  ::tinyseg::ChainEdge* edges;
  int32_t* done;
  int32_t* held;
  ::tinyseg::ChainStage* chain_stages;
  int32_t* operands;
  int32_t* order;
  int32_t* per_channel;

  TensorSlot& tensor(int32_t i) const {
    return *reinterpret_cast<TensorSlot*>(tensors +
                                          static_cast<size_t>(i) * contract::kStreamTensorBytes);
  }
  StageSlot& stage(int32_t i) const {
    return *reinterpret_cast<StageSlot*>(stages +
                                         static_cast<size_t>(i) * contract::kStreamStageBytes);
  }
  ::tinyseg::SpillStream& stream(int32_t i) const {
    return *reinterpret_cast<::tinyseg::SpillStream*>(streams + static_cast<size_t>(i) *
                                                                    contract::kSpillStreamBytes);
  }
};

// In 64 bits whatever the target's size_t (every count is a non-negative int32, so no term
// overflows); Count refuses a block above contract::kStreamMaxBodyBytes before anything is
// allocated.
uint64_t BodyBytes(const StreamOpData& d) {
  const uint64_t t = static_cast<uint64_t>(d.num_tensors);
  const uint64_t int32s = contract::kStreamInt32PerTensor * t +
                          contract::kStreamInt32PerStage * static_cast<uint64_t>(d.num_stages) +
                          static_cast<uint64_t>(d.num_operands) +
                          static_cast<uint64_t>(d.num_order) + static_cast<uint64_t>(d.per_channel);
  return contract::kSpillStreamBytes * static_cast<uint64_t>(d.num_spill) +
         (contract::kStreamTensorBytes + contract::kStreamScheduleTensorBytes) * t +
         contract::kStreamStageBytes * static_cast<uint64_t>(d.num_stages) +
         contract::kStreamEdgeBytes * static_cast<uint64_t>(d.num_edges) + 4 * int32s;
}

Tables Layout(const StreamOpData& d) {
  Tables t;
  uint8_t* p = d.tables;
  t.streams = p;
  p += contract::kSpillStreamBytes * static_cast<size_t>(d.num_spill);
  t.tensors = p;
  p += contract::kStreamTensorBytes * static_cast<size_t>(d.num_tensors);
  t.schedule = reinterpret_cast<::tinyseg::ChainTensor*>(p);
  p += contract::kStreamScheduleTensorBytes * static_cast<size_t>(d.num_tensors);
  t.stages = p;
  p += contract::kStreamStageBytes * static_cast<size_t>(d.num_stages);
  t.edges = reinterpret_cast<::tinyseg::ChainEdge*>(p);
  p += contract::kStreamEdgeBytes * static_cast<size_t>(d.num_edges);
  int32_t* q = reinterpret_cast<int32_t*>(p);
  t.done = q;
  q += d.num_tensors;
  t.held = q;
  q += d.num_tensors;
  t.chain_stages = reinterpret_cast<::tinyseg::ChainStage*>(q);
  q += d.num_stages;
  t.operands = q;
  q += d.num_operands;
  t.order = q;
  q += d.num_order;
  t.per_channel = q;
  return t;
}

// ------------------------------------------------------------ FlexBuffers helpers

bool IsVector(const flexbuffers::Reference& r) { return r.IsUntypedVector() || r.IsTypedVector(); }

size_t VectorSize(const flexbuffers::Reference& r) {
  if (r.IsTypedVector()) return r.AsTypedVector().size();
  if (r.IsUntypedVector()) return r.AsVector().size();
  return 0;
}

flexbuffers::Reference At(const flexbuffers::Reference& r, size_t i) {
  return r.IsTypedVector() ? r.AsTypedVector()[i] : r.AsVector()[i];
}

bool IntIn(const flexbuffers::Reference& r, int64_t lo, int64_t hi, int32_t* out) {
  if (!r.IsIntOrUint()) return false;
  const int64_t v = r.AsInt64();
  if (v < lo || v > hi) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

// A stage's builtin options field (absent: `fallback`), within contract::kFieldLimits: false (with
// the reason printed) for a value out of range or not an integer, before anything narrows it.
bool Field(const flexbuffers::Map& fields, const char* key, int32_t fallback, int32_t* out) {
  const flexbuffers::Reference r = fields[key];
  if (r.IsNull()) {
    *out = fallback;
    return true;
  }
  int64_t v = 0;
  if (r.IsBool()) {
    v = r.AsBool() ? 1 : 0;
  } else if (r.IsIntOrUint()) {
    v = r.IsUInt() && r.AsUInt64() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : r.AsInt64();
  } else {
    MicroPrintf("StreamChain: stage field %s is not an integer", key);
    return false;
  }
  for (const contract::FieldLimit& l : contract::kFieldLimits) {
    if (std::strcmp(l.key, key) != 0) continue;
    if (v < l.min || v > l.max) {
      MicroPrintf("StreamChain: stage field %s is outside %d..%d", key, static_cast<int>(l.min),
                  static_cast<int>(l.max));
      return false;
    }
    *out = static_cast<int32_t>(v);
    return true;
  }
  MicroPrintf("StreamChain: stage field %s has no limits in the contract", key);
  return false;
}

bool ParseType(const char* name, TfLiteType* out) {
  struct Named {
    const char* name;
    TfLiteType type;
  };
  static constexpr Named kTypes[] = {{"INT8", kTfLiteInt8},
                                     {"UINT8", kTfLiteUInt8},
                                     {"INT16", kTfLiteInt16},
                                     {"INT32", kTfLiteInt32},
                                     {"FLOAT32", kTfLiteFloat32}};
  for (const Named& n : kTypes) {
    if (std::strcmp(n.name, name) == 0) {
      *out = n.type;
      return true;
    }
  }
  return false;
}

// ------------------------------------------------------------ Init

void* StreamInit(TfLiteContext* context, const char* buffer, size_t length) {
  tinyseg_ops::Options options;
  if (!options.Open(kOp, buffer, length)) return nullptr;
  int64_t ring = 0, scratch = 0, spilled = 0, fetched = 0, block = 0;
  if (!options.Int(contract::kKeyRingBytes, &ring) ||
      !options.Int(contract::kKeyOpScratch, &scratch) ||
      !options.Int(contract::kKeySpilled, &spilled) ||
      !options.Int(contract::kKeyFetched, &fetched) || !options.Int(contract::kKeyBlock, &block)) {
    return nullptr;
  }
  const flexbuffers::Map& m = options.map();
  if (!IsVector(m[contract::kKeyStages]) || !IsVector(m[contract::kKeyTensors]) ||
      !IsVector(m[contract::kKeySpill]) || !IsVector(m[contract::kKeyFetch]) ||
      !IsVector(m[contract::kKeyRings]) || VectorSize(m[contract::kKeyStages]) == 0) {
    MicroPrintf(
        "StreamChain: the options hold no body (stages, tensors, spill, fetch, rings): "
        "a planning-only model cannot run");
    return nullptr;
  }
  auto* d = static_cast<StreamOpData*>(
      context->AllocatePersistentBuffer(context, contract::kStreamChainOpDataBytes));
  if (d == nullptr) return nullptr;
  std::memset(d, 0, sizeof(StreamOpData));
  d->options = reinterpret_cast<const uint8_t*>(buffer);
  d->options_bytes = length;
  d->ring_bytes = static_cast<int32_t>(ring);
  d->op_scratch = static_cast<int32_t>(scratch);
  d->spilled = static_cast<int32_t>(spilled);
  d->fetched = static_cast<int32_t>(fetched);
  d->block = static_cast<int32_t>(block);
  d->ring_index = -1;
  d->op_scratch_index = -1;
  return d;
}

// ------------------------------------------------------------ Prepare

// A TfLiteTensor carrying only what TFLM's quantization helpers read of an
// activation (type, scale, zero point): body tensors have no TfLiteTensor.
TfLiteTensor QuantView(const TensorSlot& s) {
  TfLiteTensor t;
  std::memset(&t, 0, sizeof(t));
  t.type = static_cast<TfLiteType>(s.type);
  t.params.scale = s.scale;
  t.params.zero_point = s.zero_point;
  t.quantization.type = kTfLiteAffineQuantization;
  return t;
}

// A body tensor's scale and zero point, refused unless the scale is finite and within
// [kStreamMinScale, kStreamMaxScale] and the zero point within its type's range (checked in double
// and int64, before either is narrowed).
TfLiteStatus BodyQuantization(TfLiteContext* context, int32_t index, TfLiteType type,
                              const flexbuffers::Reference& scale,
                              const flexbuffers::Reference& zero_point, TensorSlot* s) {
  const double v = scale.IsNumeric() ? scale.AsDouble() : -1.0;
  const int64_t z = zero_point.IsIntOrUint() ? zero_point.AsInt64() : INT64_MIN;
  if (!(std::isfinite(v) && v >= contract::kStreamMinScale && v <= contract::kStreamMaxScale) ||
      !contract::ZeroPointInRange(type, z)) {
    MicroPrintf(
        "StreamChain: tensors[%d] needs a finite scale in [2^-32, 2^32] and a zero point in its "
        "type's range",
        static_cast<int>(index));
    return kTfLiteError;
  }
  s->scale = static_cast<float>(v);
  s->zero_point = static_cast<int32_t>(z);
  return kTfLiteOk;
}

// Geometry and quantization of every chain-local tensor.
TfLiteStatus PrepareTensors(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                            const Tables& tab, const flexbuffers::Map& m) {
  MicroContext* mc = GetMicroContext(context);
  const int n_in = NumInputs(node);
  const int n_out = NumOutputs(node);
  const flexbuffers::Reference body = m[contract::kKeyTensors];
  for (int32_t i = 0; i < d.num_tensors; ++i) {
    TensorSlot& s = tab.tensor(i);
    new (&s) TensorSlot();
    s.stream = -1;
    s.fetch_slot = -1;
    s.ring_offset = -1;
    int32_t dims[4] = {0, 0, 0, 0};
    int rank = 0;
    if (i < n_in + n_out) {
      s.kind = i < n_in ? Kind::kNodeInput : Kind::kNodeOutput;
      s.node_index = i < n_in ? i : i - n_in;
      TfLiteTensor* t = i < n_in ? mc->AllocateTempInputTensor(node, i)
                                 : mc->AllocateTempOutputTensor(node, i - n_in);
      if (t == nullptr) {  // an omitted optional input
        s.type = kTfLiteNoType;
        continue;
      }
      rank = t->dims->size;
      for (int k = 0; k < rank && k < 4; ++k) dims[k] = t->dims->data[k];
      s.type = t->type;
      s.scale = t->params.scale;
      s.zero_point = t->params.zero_point;
      s.constant = i < n_in && IsConstantTensor(t) ? 1 : 0;
      mc->DeallocateTempTfLiteTensor(t);
    } else {
      s.kind = Kind::kBody;
      s.node_index = -1;
      const flexbuffers::Reference e = At(body, static_cast<size_t>(i - n_in - n_out));
      if (!e.IsMap()) {
        MicroPrintf("StreamChain: tensors[%d] is not a map", static_cast<int>(i - n_in - n_out));
        return kTfLiteError;
      }
      const flexbuffers::Map t = e.AsMap();
      TfLiteType type = kTfLiteNoType;
      const flexbuffers::Reference shape = t[contract::kKeyShape];
      const flexbuffers::Reference scale = t[contract::kKeyScale];
      const flexbuffers::Reference zp = t[contract::kKeyZeroPoint];
      if (!t[contract::kKeyType].IsString() ||
          !ParseType(t[contract::kKeyType].AsString().c_str(), &type) || !IsVector(shape) ||
          VectorSize(shape) != 4 || !IsVector(scale) || VectorSize(scale) != 1 || !IsVector(zp) ||
          VectorSize(zp) != 1) {
        MicroPrintf(
            "StreamChain: tensors[%d] needs a known type, a rank-4 shape and one scale and "
            "zero point",
            static_cast<int>(i - n_in - n_out));
        return kTfLiteError;
      }
      rank = 4;
      for (size_t k = 0; k < 4; ++k) {
        if (!IntIn(At(shape, k), 1, contract::kMaxDim, &dims[k])) {
          MicroPrintf("StreamChain: tensors[%d] has a bad shape",
                      static_cast<int>(i - n_in - n_out));
          return kTfLiteError;
        }
      }
      s.type = type;
      // (not TF_LITE_ENSURE_STATUS: it declares an `s` of its own)
      if (BodyQuantization(context, i - n_in - n_out, type, At(scale, 0), At(zp, 0), &s) !=
          kTfLiteOk) {
        return kTfLiteError;
      }
    }
    if (rank == 4) {
      const size_t elem = tinyseg_ops::ElementBytes(static_cast<TfLiteType>(s.type));
      const int64_t bytes = static_cast<int64_t>(dims[2]) * dims[3] * static_cast<int64_t>(elem);
      TF_LITE_ENSURE_MSG(context, dims[0] == 1 || s.kind == Kind::kNodeInput,
                         "StreamChain: chain tensors have batch 1");
      TF_LITE_ENSURE(context, bytes <= INT32_MAX);
      s.height = dims[1];
      s.width = dims[2];
      s.channels = dims[3];
      s.row_bytes = static_cast<int32_t>(bytes);
    }
  }
  return kTfLiteOk;
}

// Rings, spills and fetches: (local id, number) pairs.
TfLiteStatus PreparePairs(TfLiteContext* context, const StreamOpData& d, const Tables& tab,
                          const flexbuffers::Map& m) {
  const char* keys[3] = {contract::kKeyRings, contract::kKeySpill, contract::kKeyFetch};
  int32_t ring_offset = 0;
  int32_t streams = 0;
  for (int k = 0; k < 3; ++k) {
    const flexbuffers::Reference v = m[keys[k]];
    for (size_t i = 0; i < VectorSize(v); ++i) {
      const flexbuffers::Reference pair = At(v, i);
      int32_t id = 0, value = 0;
      if (!IsVector(pair) || VectorSize(pair) != 2 ||
          !IntIn(At(pair, 0), 0, d.num_tensors - 1, &id) ||
          !IntIn(At(pair, 1), 0, contract::kMaxSlot, &value)) {
        MicroPrintf("StreamChain: %s[%d] must be [local id, number]", keys[k], static_cast<int>(i));
        return kTfLiteError;
      }
      TensorSlot& s = tab.tensor(id);
      TF_LITE_ENSURE_MSG(context, s.kind == Kind::kBody && s.row_bytes > 0,
                         "StreamChain: rings, spills and fetches name body tensors");
      if (k == 0) {
        TF_LITE_ENSURE_MSG(context, value >= 1 && value <= s.height && s.ring_rows == 0,
                           "StreamChain: a ring holds 1..height rows of a tensor, once");
        const int64_t end =
            static_cast<int64_t>(ring_offset) + static_cast<int64_t>(value) * s.row_bytes;
        TF_LITE_ENSURE_MSG(context, end <= d.ring_bytes,
                           "StreamChain: the rings exceed ring_bytes");
        s.ring_rows = value;
        s.ring_offset = ring_offset;
        ring_offset = static_cast<int32_t>(end);
      } else if (k == 1) {
        TF_LITE_ENSURE_MSG(context, s.stream < 0 && s.ring_rows > 0,
                           "StreamChain: a spilled tensor is spilled once and has a ring");
        s.stream = streams;
        tab.order[d.num_order - d.num_spill + streams] = id;
        ++streams;
        static_cast<void>(value);
      } else {
        TF_LITE_ENSURE_MSG(context, s.fetch_slot < 0 && s.ring_rows > 0,
                           "StreamChain: a fetched tensor is fetched once and has a ring");
        s.fetch_slot = value;
      }
    }
  }
  TF_LITE_ENSURE_MSG(context, ring_offset == d.ring_bytes,
                     "StreamChain: ring_bytes is not the sum of the rings");
  return kTfLiteOk;
}

// The spill slot of each stream, in stream order (for Eval).
uint32_t SpillSlot(const flexbuffers::Map& m, int32_t stream) {
  const flexbuffers::Reference pair = At(m[contract::kKeySpill], static_cast<size_t>(stream));
  return static_cast<uint32_t>(At(pair, 1).AsInt64());
}

// ADD, SUB, MUL, LOGISTIC, PRELU and RESIZE_NEAREST_NEIGHBOR: the parameters TFLM's own Prepare
// computes (add_common.cc, sub_common.cc, mul_common.cc, logistic_common.cc, prelu_common.cc), for
// inputs of the output's shape (no broadcast but PRELU's alpha along height and width).
TfLiteStatus PrepareElementwise(TfLiteContext* context, TfLiteNode* node, const Tables& tab,
                                StageSlot& g, const flexbuffers::Map& fields,
                                TfLiteFusedActivation activation, int32_t first_edge,
                                int32_t end_edge, TfLiteTensor* out_q) {
  const TensorSlot& out = tab.tensor(g.output);
  const TensorSlot& in = tab.tensor(g.input);
  g.input2 = -1;
  if (g.op == StageOp::kAdd || g.op == StageOp::kSub || g.op == StageOp::kMul) {
    TF_LITE_ENSURE_MSG(context, g.operand_count == 2,
                       "StreamChain: ADD, SUB and MUL take two inputs");
    g.input2 = tab.operands[g.operand_begin + 1];
    MicroContext* mc = GetMicroContext(context);
    for (int32_t k = 0; k < 2; ++k) {
      // Broadcast across width and channels as TFLM's kernels do; along rows only a constant of one
      // row.
      const int32_t id = tab.operands[g.operand_begin + k];
      const TensorSlot& x = tab.tensor(id);
      int32_t dims[4] = {1, 1, 1, 1};
      if (x.constant) {
        TfLiteTensor* t = mc->AllocateTempInputTensor(node, id);
        TF_LITE_ENSURE(context, t != nullptr);
        const int rank = t->dims->size;
        for (int j = 0; j < rank && rank <= 4; ++j) dims[4 - rank + j] = t->dims->data[j];
        const bool ok = rank <= 4 && t->type == kTfLiteInt8;
        mc->DeallocateTempTfLiteTensor(t);
        TF_LITE_ENSURE_MSG(context, ok && dims[1] == 1,
                           "StreamChain: a constant ADD/SUB/MUL operand has one row");
      } else {
        dims[1] = x.height;
        dims[2] = x.width;
        dims[3] = x.channels;
        TF_LITE_ENSURE_MSG(context, dims[1] == out.height,
                           "StreamChain: ADD/SUB/MUL rows do not broadcast");
      }
      TF_LITE_ENSURE_MSG(context,
                         dims[0] == 1 && (dims[2] == 1 || dims[2] == out.width) &&
                             (dims[3] == 1 || dims[3] == out.channels),
                         "StreamChain: ADD/SUB/MUL operands broadcast to the output");
    }
    const TensorSlot& in1 = tab.tensor(tab.operands[g.operand_begin]);
    const TensorSlot& in2 = tab.tensor(g.input2);
    g.input_offset = -in1.zero_point;
    g.input2_offset = -in2.zero_point;
    g.output_offset = out.zero_point;
    if (g.op == StageOp::kAdd) {
      g.left_shift = 20;  // int8, as add_common.cc
      const double twice_max =
          2 * static_cast<double>(in1.scale > in2.scale ? in1.scale : in2.scale);
      QuantizeMultiplierSmallerThanOneExp(static_cast<double>(in1.scale) / twice_max,
                                          &g.multiplier1, &g.shift1);
      QuantizeMultiplierSmallerThanOneExp(static_cast<double>(in2.scale) / twice_max,
                                          &g.multiplier2, &g.shift2);
      QuantizeMultiplierSmallerThanOneExp(
          twice_max / ((1 << g.left_shift) * static_cast<double>(out.scale)), &g.multiplier,
          &g.shift);
    } else if (g.op == StageOp::kSub) {
      // sub_common.cc's CalculateOpDataSub for int8: unlike ADD's, its quotients are computed in
      // float and only then widened to double.
      g.left_shift = 20;
      const float twice_max = 2 * (in1.scale > in2.scale ? in1.scale : in2.scale);
      QuantizeMultiplierSmallerThanOneExp(static_cast<double>(in1.scale / twice_max),
                                          &g.multiplier1, &g.shift1);
      QuantizeMultiplierSmallerThanOneExp(static_cast<double>(in2.scale / twice_max),
                                          &g.multiplier2, &g.shift2);
      QuantizeMultiplierSmallerThanOneExp(
          static_cast<double>(twice_max / ((1 << g.left_shift) * out.scale)), &g.multiplier,
          &g.shift);
    } else {
      QuantizeMultiplier(static_cast<double>(in1.scale) * static_cast<double>(in2.scale) /
                             static_cast<double>(out.scale),
                         &g.multiplier, &g.shift);
    }
    return CalculateActivationRangeQuantized(context, activation, out_q, &g.act_min, &g.act_max);
  }
  if (g.op == StageOp::kLogistic || g.op == StageOp::kTanh) {
    // LOGISTIC as logistic_common.cc, TANH as tanh.cc's CalculateArithmeticOpData for int8 (the
    // same input multiplier, left shift and range radius; TANH checks no output quantization).
    TF_LITE_ENSURE(context,
                   in.height == out.height && in.width == out.width && in.channels == out.channels);
    if (g.op == StageOp::kLogistic)
      TF_LITE_ENSURE_EQ(context, out.zero_point, -128);  // as logistic_common.cc
    constexpr int kInputIntegerBits = 4;
    const double real =
        static_cast<double>(in.scale) * static_cast<double>(1 << (31 - kInputIntegerBits));
    int left_shift = 0;
    const double q = std::frexp(real, &left_shift);
    g.shift = left_shift;
    g.multiplier = static_cast<int32_t>(TfLiteRound(q * (1ll << 31)));
    g.radius = CalculateInputRadius(kInputIntegerBits, g.shift, 31);
    g.input_offset = in.zero_point;
    return kTfLiteOk;
  }
  if (g.op == StageOp::kRelu) {
    // RELU: the ReluOpData activations_common.cc's ReluPrepare computes for int8 (its
    // CalculateReluOpData: the real multiplier from the float quotient of the scales, the range
    // [max(-128, output zero point + round(0 / scale)), 127]); Eval calls TFLM's ReluQuantized.
    TF_LITE_ENSURE(context,
                   in.height == out.height && in.width == out.width && in.channels == out.channels);
    QuantizeMultiplier(static_cast<double>(in.scale / out.scale), &g.multiplier, &g.shift);
    const int32_t zero = out.zero_point + static_cast<int32_t>(roundf(0.0f / out.scale));
    g.act_min = zero > INT8_MIN ? zero : static_cast<int32_t>(INT8_MIN);
    g.act_max = INT8_MAX;
    g.input_offset = in.zero_point;
    g.output_offset = out.zero_point;
    return kTfLiteOk;
  }
  if (g.op == StageOp::kHardSwish) {
    // HARD_SWISH: the HardSwishParams hard_swish_common.cc's HardSwishPrepare computes for int8
    // (float quotients of the high-resolution input scale, 16-bit multipliers); Eval calls TFLM's
    // reference_ops::HardSwish. Multipliers: 1 output, 2 "relu-ish".
    TF_LITE_ENSURE(context,
                   in.height == out.height && in.width == out.width && in.channels == out.channels);
    const float hires_input_scale = (1.0f / 128.0f) * in.scale;
    const float reluish_scale = 3.0f / 32768.0f;
    int32_t fixedpoint = 0;
    int16_t fixedpoint16 = 0;
    QuantizeMultiplier(static_cast<double>(hires_input_scale / out.scale), &fixedpoint, &g.shift1);
    DownScaleInt32ToInt16Multiplier(fixedpoint, &fixedpoint16);
    g.multiplier1 = fixedpoint16;
    TF_LITE_ENSURE(context, g.shift1 <= 0);
    QuantizeMultiplier(static_cast<double>(hires_input_scale / reluish_scale), &fixedpoint,
                       &g.shift2);
    DownScaleInt32ToInt16Multiplier(fixedpoint, &fixedpoint16);
    g.multiplier2 = fixedpoint16;
    g.input_offset = in.zero_point;
    g.output_offset = out.zero_point;
    return kTfLiteOk;
  }
  if (g.op == StageOp::kLeakyRelu) {
    // LEAKY_RELU: the LeakyReluOpData leaky_relu_common.cc computes for int8 (alpha's multiplier
    // from the float product and quotient, the identity's from the float quotient of the scales);
    // Eval calls TFLM's reference_ops::QuantizeLeakyRelu. Multipliers: 1 alpha, 2 identity.
    TF_LITE_ENSURE(context,
                   in.height == out.height && in.width == out.width && in.channels == out.channels);
    const flexbuffers::Reference alpha = fields[contract::kFieldAlpha];
    TF_LITE_ENSURE_MSG(context, alpha.IsNumeric(), "StreamChain: LEAKY_RELU needs its alpha");
    const float a = alpha.AsFloat();
    TF_LITE_ENSURE_MSG(context, std::isfinite(a), "StreamChain: LEAKY_RELU's alpha is not finite");
    QuantizeMultiplier(static_cast<double>(in.scale * a / out.scale), &g.multiplier1, &g.shift1);
    QuantizeMultiplier(static_cast<double>(in.scale / out.scale), &g.multiplier2, &g.shift2);
    g.input_offset = in.zero_point;
    g.output_offset = out.zero_point;
    return kTfLiteOk;
  }
  if (g.op == StageOp::kRelu6) {
    // RELU6: Relu6OpData as Relu6Prepare computes it for int8 (the input's zero point and six in
    // the input's quantization, TFLM's FloatToQuantizedType); Eval calls TFLM's Relu6Quantized.
    TF_LITE_ENSURE(context,
                   in.height == out.height && in.width == out.width && in.channels == out.channels);
    g.act_min = in.zero_point;
    g.act_max = FloatToQuantizedType<int8_t>(6.0f, in.scale, in.zero_point);
    TF_LITE_ENSURE(context, g.act_max >= INT8_MIN && g.act_max <= INT8_MAX);
    return kTfLiteOk;
  }
  if (g.op == StageOp::kPad || g.op == StageOp::kPadv2) {
    // PAD and PADV2: TFLM's PadPrepare checks (constant int32 paddings, output = input + paddings;
    // PAD: an int8 output zero point as the pad value; PADV2: an int8 scalar pad value of the
    // output's quantization), for NHWC padding of height and width only. Eval pads one row at a
    // time with TFLM's reference_ops::Pad.
    TF_LITE_ENSURE_MSG(context, g.filter >= 0 && g.filter < NumInputs(node),
                       "StreamChain: PAD's paddings");
    MicroContext* mc = GetMicroContext(context);
    TfLiteTensor* paddings = mc->AllocateTempInputTensor(node, g.filter);
    TF_LITE_ENSURE(context, paddings != nullptr);
    const bool typed = paddings->type == kTfLiteInt32 && IsConstantTensor(paddings) &&
                       GetTensorShape(paddings).FlatSize() == 8;
    int32_t p[8] = {};
    if (typed) std::memcpy(p, GetTensorData<int32_t>(paddings), sizeof(p));
    mc->DeallocateTempTfLiteTensor(paddings);
    TF_LITE_ENSURE_MSG(context, typed,
                       "StreamChain: PAD takes constant int32 paddings of a 4-D tensor");
    bool ok = p[0] == 0 && p[1] == 0 && p[6] == 0 && p[7] == 0;
    for (int k = 0; k < 8; ++k) ok = ok && p[k] >= 0;
    TF_LITE_ENSURE_MSG(context, ok, "StreamChain: PAD pads height and width only");
    TF_LITE_ENSURE(context, out.height == in.height + p[2] + p[3] &&
                                out.width == in.width + p[4] + p[5] && out.channels == in.channels);
    TF_LITE_ENSURE(context, out.zero_point >= INT8_MIN && out.zero_point <= INT8_MAX);
    g.pad_h = p[2];                      // top: the row map reads input row y - top
    g.pad_w = p[4];                      // left
    g.filter_w = p[5];                   // right
    int32_t pad_value = out.zero_point;  // TFLM's int8 PAD without constant_values
    if (g.op == StageOp::kPadv2) {
      TF_LITE_ENSURE_MSG(context, g.bias >= 0 && g.bias < NumInputs(node),
                         "StreamChain: PADV2's pad value");
      TfLiteTensor* value = mc->AllocateTempInputTensor(node, g.bias);
      TF_LITE_ENSURE(context, value != nullptr);
      const bool scalar =
          value->type == kTfLiteInt8 && IsConstantTensor(value) && NumElements(value) == 1 &&
          value->params.zero_point == out.zero_point &&
          static_cast<double>(value->params.scale) == static_cast<double>(out.scale);
      if (scalar) pad_value = GetTensorData<int8_t>(value)[0];
      mc->DeallocateTempTfLiteTensor(value);
      TF_LITE_ENSURE_MSG(
          context, scalar,
          "StreamChain: PADV2 takes a constant int8 scalar pad value of the output's quantization");
    }
    g.output_offset = pad_value;
    return kTfLiteOk;
  }
  if (g.op == StageOp::kPrelu) {
    TF_LITE_ENSURE(context,
                   in.height == out.height && in.width == out.width && in.channels == out.channels);
    TF_LITE_ENSURE_MSG(context,
                       g.operand_count == 2 && tab.operands[g.operand_begin + 1] >= 0 &&
                           tab.operands[g.operand_begin + 1] < NumInputs(node),
                       "StreamChain: PRELU's alpha is a constant input");
    g.input2 = tab.operands[g.operand_begin + 1];
    MicroContext* mc = GetMicroContext(context);
    TfLiteTensor* alpha = mc->AllocateTempInputTensor(node, g.input2);
    TF_LITE_ENSURE(context, alpha != nullptr);
    const int rank = alpha->dims->size;
    // Broadcast along height: alpha's (4-D extended) height must be 1, so one row of it serves
    // every row.
    const bool one_row = rank < 3 || alpha->dims->data[rank - 3] == 1;
    const bool ok = alpha->type == kTfLiteInt8 && rank <= 4 && one_row;
    const double m1 = static_cast<double>(in.scale) / static_cast<double>(out.scale);
    const double m2 = static_cast<double>(in.scale) * static_cast<double>(alpha->params.scale) /
                      static_cast<double>(out.scale);
    g.input2_offset = -alpha->params.zero_point;
    mc->DeallocateTempTfLiteTensor(alpha);
    TF_LITE_ENSURE_MSG(context, ok, "StreamChain: PRELU needs an int8 alpha of one row");
    QuantizeMultiplier(m1, &g.multiplier1, &g.shift1);
    QuantizeMultiplier(m2, &g.multiplier2, &g.shift2);
    g.input_offset = -in.zero_point;
    g.output_offset = out.zero_point;
    return kTfLiteOk;
  }
  if (g.op == StageOp::kResizeNearestNeighbor) {
    int32_t align_field = 0, half_field = 0;
    TF_LITE_ENSURE(context, Field(fields, contract::kFieldAlignCorners, 0, &align_field) &&
                                Field(fields, contract::kFieldHalfPixelCenters, 0, &half_field));
    const bool align = align_field != 0;
    const bool half = half_field != 0;
    g.flags = (align ? 1 : 0) | (half ? 2 : 0);
    TF_LITE_ENSURE_MSG(
        context, !align && in.channels == out.channels && out.height % in.height == 0,
        "StreamChain: RESIZE_NEAREST_NEIGHBOR by an integer factor, without align_corners");
    // Row y must read row y / factor, as TFLM's own row arithmetic (float) does for every y.
    const int32_t factor = out.height / in.height;
    for (int32_t y = 0; y < out.height; ++y) {
      TF_LITE_ENSURE_MSG(
          context,
          reference_ops::GetNearestNeighbor(y, in.height, out.height, align, half) == y / factor,
          "StreamChain: RESIZE_NEAREST_NEIGHBOR's rows are not y / factor");
    }
    return kTfLiteOk;
  }
  static_cast<void>(first_edge);
  static_cast<void>(end_edge);
  return kTfLiteOk;
}

// `count` int32 entries of the pool for a stage (its per-channel arrays or its lookup table): the
// offset in `*at`; refused, with no arithmetic past int32, when they exceed what Count sized.
TfLiteStatus TakePool(TfLiteContext* context, const StreamOpData& d, int64_t count,
                      int32_t* pool_next, int32_t* at) {
  TF_LITE_ENSURE_MSG(context,
                     count >= 0 && count <= static_cast<int64_t>(d.per_channel) - *pool_next,
                     "StreamChain: a stage's per-channel arrays exceed the persistent block");
  *at = *pool_next;
  *pool_next = static_cast<int32_t>(*pool_next + count);
  return kTfLiteOk;
}

// ELU's transform, as elu.cc's Prepare passes it to its table builder: exp(x) - 1 below zero, in
// float.
float EluTransform(float value) { return value < 0.0f ? std::exp(value) - 1.0f : value; }

TfLiteStatus PrepareStage(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                          const Tables& tab, int32_t index, const flexbuffers::Map& st,
                          int32_t* operand_next, int32_t* edge_next, int32_t* pool_next) {
  StageSlot& g = *new (&tab.stage(index)) StageSlot();
  const flexbuffers::Reference name = st[contract::kKeyOp];
  g.op = name.IsString() ? contract::ParseStageOp(name.AsString().c_str()) : StageOp::kUnknown;
  if (g.op == StageOp::kUnknown) {
    MicroPrintf("StreamChain: stage %d (%s) is not a stage this kernel computes",
                static_cast<int>(index), name.IsString() ? name.AsString().c_str() : "?");
    return kTfLiteError;
  }
  const flexbuffers::Reference ins = st[contract::kKeyInputs];
  const flexbuffers::Reference outs = st[contract::kKeyOutputs];
  TF_LITE_ENSURE_MSG(context,
                     IsVector(ins) && IsVector(outs) && VectorSize(outs) == 1 &&
                         VectorSize(ins) >= 1 && VectorSize(ins) <= contract::kStreamMaxStageInputs,
                     "StreamChain: a stage has 1 output and 1..kStreamMaxStageInputs inputs");
  TF_LITE_ENSURE_MSG(context, IntIn(At(outs, 0), 0, d.num_tensors - 1, &g.output),
                     "StreamChain: a stage's output is not a local tensor");
  g.operand_begin = *operand_next;
  g.operand_count = static_cast<int32_t>(VectorSize(ins));
  g.input = g.filter = g.bias = -1;
  g.per_channel = -1;
  const int32_t first_edge = *edge_next;
  int activations = 0;
  for (int32_t k = 0; k < g.operand_count; ++k) {
    int32_t id = 0;
    TF_LITE_ENSURE_MSG(context, IntIn(At(ins, static_cast<size_t>(k)), -1, d.num_tensors - 1, &id),
                       "StreamChain: a stage's input is not a local tensor (or -1)");
    tab.operands[(*operand_next)++] = id;
    if (!contract::IsActivationInput(g.op, k)) {
      const int constant = k - activations;
      if (g.op == StageOp::kConv2d || g.op == StageOp::kDepthwiseConv2d) {
        (constant == 0 ? g.filter : g.bias) = id;
      } else if (g.op == StageOp::kTransposeConv && constant >= 1) {
        (constant == 1 ? g.filter : g.bias) = id;
      } else if ((g.op == StageOp::kPad || g.op == StageOp::kPadv2) && constant == 0) {
        g.filter = id;  // the paddings
      } else if (g.op == StageOp::kPadv2 && constant == 1) {
        g.bias = id;  // PADV2's pad value
      }
      continue;
    }
    ++activations;
    TF_LITE_ENSURE(context, id >= 0);
    if (tab.tensor(id).constant)
      continue;  // ADD/SUB/MUL: a constant broadcast over the rows (checked below)
    TF_LITE_ENSURE_MSG(context, tab.tensor(id).row_bytes > 0,
                       "StreamChain: a stage reads a tensor without rows");
    if (g.input < 0) g.input = id;
    bool seen = false;
    for (int32_t e = first_edge; e < *edge_next; ++e) seen = seen || tab.edges[e].tensor == id;
    if (seen) continue;
    TF_LITE_ENSURE(context, *edge_next < d.num_edges);
    ::tinyseg::ChainEdge& edge = tab.edges[(*edge_next)++];
    edge.stage = index;
    edge.tensor = id;
  }
  TF_LITE_ENSURE(context, g.input >= 0);
  const TensorSlot& in = tab.tensor(g.input);
  TensorSlot& out = tab.tensor(g.output);
  TF_LITE_ENSURE_MSG(context, out.row_bytes > 0 && out.kind != Kind::kNodeInput,
                     "StreamChain: a stage writes a node input or a tensor without rows");

  const flexbuffers::Reference f = st[contract::kKeyFields];
  const flexbuffers::Map fields = f.IsMap() ? f.AsMap() : flexbuffers::Map::EmptyMap();
  // Every integer is range-checked (contract::kFieldLimits) before it becomes an enum.
  int32_t padding_field = 0, activation_field = 0;
  TF_LITE_ENSURE_MSG(
      context,
      Field(fields, contract::kFieldStrideH, 1, &g.stride_h) &&
          Field(fields, contract::kFieldStrideW, 1, &g.stride_w) &&
          Field(fields, contract::kFieldDilationHFactor, 1, &g.dilation_h) &&
          Field(fields, contract::kFieldDilationWFactor, 1, &g.dilation_w) &&
          Field(fields, contract::kFieldPadding, 0, &padding_field) &&
          Field(fields, contract::kFieldFusedActivationFunction, 0, &activation_field),
      "StreamChain: a stage field is out of range (see the message above)");
  const TfLitePadding padding = padding_field == 1 ? kTfLitePaddingValid : kTfLitePaddingSame;
  const auto activation =
      static_cast<TfLiteFusedActivation>(activation_field);  // 0..3: NONE..RELU6

  TfLiteTensor in_q = QuantView(in);
  TfLiteTensor out_q = QuantView(out);
  const TfLiteType in_type = static_cast<TfLiteType>(in.type);
  const TfLiteType out_type = static_cast<TfLiteType>(out.type);
  MicroContext* mc = GetMicroContext(context);
  if (g.op == StageOp::kQuantize) {
    TF_LITE_ENSURE_MSG(context, contract::StreamQuantizeTypes(in_type, out_type),
                       "StreamChain: QUANTIZE types not computed");
    TF_LITE_ENSURE(context,
                   in.width == out.width && in.channels == out.channels && in.height == out.height);
    const double effective = static_cast<double>(in.scale) / static_cast<double>(out.scale);
    QuantizeMultiplier(effective, &g.multiplier, &g.shift);
    g.input_offset = in.zero_point;
    g.output_offset = out.zero_point;
    return kTfLiteOk;
  }
  if (g.op == StageOp::kDequantize) {
    // DEQUANTIZE: DequantizePrepare's parameters for int8 -> float32 (the input's zero point, and
    // its scale widened to double at Eval); Eval calls TFLM's reference_ops::Dequantize on each
    // row. No stage reads float32 rows, so its output is one of the chain's outputs, written whole.
    TF_LITE_ENSURE_MSG(context, contract::StreamDequantizeTypes(in_type, out_type),
                       "StreamChain: DEQUANTIZE types not computed");
    TF_LITE_ENSURE(context,
                   in.width == out.width && in.channels == out.channels && in.height == out.height);
    TF_LITE_ENSURE_MSG(context, out.kind == Kind::kNodeOutput,
                       "StreamChain: a DEQUANTIZE stage writes one of the chain's outputs");
    g.input_offset = in.zero_point;
    return kTfLiteOk;
  }
  TF_LITE_ENSURE_MSG(context, out_type == kTfLiteInt8,
                     "StreamChain: stages other than QUANTIZE and DEQUANTIZE are int8");
  for (int32_t e = first_edge; e < *edge_next; ++e) {
    TF_LITE_ENSURE_MSG(context, tab.tensor(tab.edges[e].tensor).type == kTfLiteInt8,
                       "StreamChain: stages other than QUANTIZE and DEQUANTIZE are int8");
  }
  if (contract::LookupTableStage(g.op)) {
    // ELU: the 256-entry int8 table elu.cc's Prepare fills (its PopulateLookupTable: the same float
    // arithmetic as TFLM's LUTPopulate, called here), kept in the pool; Eval looks each element up.
    TF_LITE_ENSURE(context,
                   in.height == out.height && in.width == out.width && in.channels == out.channels);
    TF_LITE_ENSURE_STATUS(TakePool(context, d, contract::kStreamLookupTableBytes / sizeof(int32_t),
                                   pool_next, &g.per_channel));
    LUTPopulate<int8_t>(in.scale, in.zero_point, out.scale, out.zero_point, EluTransform,
                        reinterpret_cast<int8_t*>(tab.per_channel + g.per_channel));
    return kTfLiteOk;
  }
  TF_LITE_ENSURE_STATUS(PrepareElementwise(context, node, tab, g, fields, activation, first_edge,
                                           *edge_next, &out_q));
  if (g.op == StageOp::kAdd || g.op == StageOp::kSub || g.op == StageOp::kMul ||
      g.op == StageOp::kLogistic || g.op == StageOp::kPrelu ||
      g.op == StageOp::kResizeNearestNeighbor || g.op == StageOp::kRelu ||
      g.op == StageOp::kRelu6 || g.op == StageOp::kPad || g.op == StageOp::kPadv2 ||
      g.op == StageOp::kTanh || g.op == StageOp::kHardSwish || g.op == StageOp::kLeakyRelu) {
    return kTfLiteOk;
  }
  if (g.op == StageOp::kConcatenation) {
    int32_t channels = 0;
    for (int32_t e = first_edge; e < *edge_next; ++e) {
      const TensorSlot& x = tab.tensor(tab.edges[e].tensor);
      TF_LITE_ENSURE(context, x.height == out.height && x.width == out.width);
      TF_LITE_ENSURE_MSG(context, x.scale == out.scale && x.zero_point == out.zero_point,
                         "StreamChain: CONCATENATION requantizes nothing (as TFLM's int8 kernel)");
    }
    for (int32_t k = 0; k < g.operand_count; ++k)
      channels += tab.tensor(tab.operands[g.operand_begin + k]).channels;
    int32_t axis = 0;
    TF_LITE_ENSURE(context, Field(fields, contract::kFieldAxis, 3, &axis));
    TF_LITE_ENSURE_MSG(
        context,
        (axis == 3 || axis == -1) && channels == out.channels && activation == kTfLiteActNone,
        "StreamChain: CONCATENATION along channels only");
    return kTfLiteOk;
  }
  if (g.op == StageOp::kMaxPool2d || g.op == StageOp::kAveragePool2d) {
    TF_LITE_ENSURE_MSG(context,
                       Field(fields, contract::kFieldFilterHeight, 0, &g.filter_h) &&
                           Field(fields, contract::kFieldFilterWidth, 0, &g.filter_w) &&
                           g.filter_h >= 1 && g.filter_w >= 1 && in.channels == out.channels,
                       "StreamChain: a pool stage needs its filter size and the input's channels");
    int oh = 0, ow = 0;
    const TfLitePaddingValues pad =
        ComputePaddingHeightWidth(g.stride_h, g.stride_w, 1, 1, in.height, in.width, g.filter_h,
                                  g.filter_w, padding, &oh, &ow);
    TF_LITE_ENSURE_MSG(context, oh == out.height && ow == out.width,
                       "StreamChain: a pool stage's output size does not match its tensors");
    g.pad_h = pad.height;
    g.pad_w = pad.width;
    return CalculateActivationRangeQuantized(context, activation, &out_q, &g.act_min, &g.act_max);
  }
  // CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV: int8 filter, optional int32 bias, per-channel
  // requantization.
  TF_LITE_ENSURE(context, g.filter >= 0 && g.filter < NumInputs(node));
  TF_LITE_ENSURE(context, g.bias < NumInputs(node));
  TfLiteTensor* filter = mc->AllocateTempInputTensor(node, g.filter);
  TF_LITE_ENSURE(context, filter != nullptr);
  TfLiteTensor* bias = g.bias >= 0 ? mc->AllocateTempInputTensor(node, g.bias) : nullptr;
  const bool depthwise = g.op == StageOp::kDepthwiseConv2d;  // filter [1, kh, kw, C_out]
  const bool types_ok =
      filter->type == kTfLiteInt8 && filter->dims->size == 4 &&
      filter->dims->data[depthwise ? 3 : 0] == out.channels &&
      (!depthwise || (filter->dims->data[0] == 1 && out.channels % in.channels == 0)) &&
      (bias == nullptr || (bias->type == kTfLiteInt32 && NumElements(bias) == out.channels));
  g.filter_h = filter->dims->data[1];
  g.filter_w = filter->dims->data[2];
  TfLiteStatus status = types_ok ? kTfLiteOk : kTfLiteError;
  if (!types_ok)
    MicroPrintf("StreamChain: a convolution stage needs an int8 filter and int32 bias");
  if (status == kTfLiteOk) {
    int oh = 0, ow = 0;
    if (g.op == StageOp::kConv2d || depthwise) {
      const TfLitePaddingValues pad =
          ComputePaddingHeightWidth(g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, in.height,
                                    in.width, g.filter_h, g.filter_w, padding, &oh, &ow);
      status = (oh == out.height && ow == out.width &&
                (depthwise || filter->dims->data[3] == in.channels))
                   ? kTfLiteOk
                   : kTfLiteError;
      g.pad_h = pad.height;
      g.pad_w = pad.width;
    } else {
      // As TFLM's TRANSPOSE_CONV: padding from the output's size; rows stream only when
      // stride >= kernel height (each output row then comes from one input row).
      const TfLitePaddingValues pad =
          ComputePaddingHeightWidth(g.stride_h, g.stride_w, 1, 1, out.height, out.width, g.filter_h,
                                    g.filter_w, padding, &oh, &ow);
      status = (g.stride_h >= g.filter_h && pad.height == 0 &&
                out.height == in.height * g.stride_h && filter->dims->data[3] == in.channels)
                   ? kTfLiteOk
                   : kTfLiteError;
      g.pad_h = pad.height;
      g.pad_w = pad.width;
      if (status == kTfLiteOk &&
          d.op_scratch < static_cast<int64_t>(out.width) * out.channels * 4) {
        MicroPrintf("StreamChain: op_scratch is smaller than one TRANSPOSE_CONV output row");
        status = kTfLiteError;
      }
    }
    if (status != kTfLiteOk)
      MicroPrintf("StreamChain: stage %d's geometry does not match", static_cast<int>(index));
  }
  if (status == kTfLiteOk) {
    status =
        TakePool(context, d, 2 * static_cast<int64_t>(out.channels), pool_next, &g.per_channel);
  }
  if (status == kTfLiteOk) {
    int32_t unused_multiplier = 0;
    int unused_shift = 0;
    static_assert(sizeof(int) == sizeof(int32_t), "shift arrays are int32");
    status = PopulateConvolutionQuantizationParams(
        context, &in_q, filter, bias, &out_q, activation, &unused_multiplier, &unused_shift,
        &g.act_min, &g.act_max, tab.per_channel + g.per_channel,
        tab.per_channel + g.per_channel + out.channels, out.channels);
    g.input_offset = -in.zero_point;
    g.output_offset = out.zero_point;
  }
  mc->DeallocateTempTfLiteTensor(filter);
  if (bias != nullptr) mc->DeallocateTempTfLiteTensor(bias);
  return status;
}

// The output channels of a per-channel stage (its output's last dimension), in 1..kMaxDim, read
// without narrowing: the pool Count sizes from them must not overflow.
TfLiteStatus StageChannels(TfLiteContext* context, TfLiteNode* node, int32_t num_tensors,
                           const flexbuffers::Reference& body, const flexbuffers::Reference& output,
                           int64_t* channels) {
  MicroContext* mc = GetMicroContext(context);
  const int n_in = NumInputs(node);
  const int n_out = NumOutputs(node);
  const int64_t out = output.IsIntOrUint() ? output.AsInt64() : -1;
  *channels = 0;
  if (out >= 0 && out < n_in + n_out) {
    const int index = static_cast<int>(out);
    TfLiteTensor* t = index < n_in ? mc->AllocateTempInputTensor(node, index)
                                   : mc->AllocateTempOutputTensor(node, index - n_in);
    TF_LITE_ENSURE(context, t != nullptr);
    *channels = t->dims->size == 4 ? t->dims->data[3] : 0;
    mc->DeallocateTempTfLiteTensor(t);
  } else if (out >= n_in + n_out && out < num_tensors) {
    const flexbuffers::Reference e = At(body, static_cast<size_t>(out - n_in - n_out));
    const flexbuffers::Reference shape =
        e.IsMap() ? e.AsMap()[contract::kKeyShape] : flexbuffers::Reference();
    const flexbuffers::Reference last =
        VectorSize(shape) == 4 ? At(shape, 3) : flexbuffers::Reference();
    *channels = last.IsIntOrUint() ? last.AsInt64() : 0;
  }
  TF_LITE_ENSURE_MSG(context, *channels >= 1 && *channels <= contract::kMaxDim,
                     "StreamChain: a convolution stage's output channels are outside 1..kMaxDim");
  return kTfLiteOk;
}

// Counts what the persistent block holds (as customops.stream_chain_body_bytes).
TfLiteStatus Count(TfLiteContext* context, TfLiteNode* node, StreamOpData* d,
                   const flexbuffers::Map& m) {
  MicroContext* mc = GetMicroContext(context);
  const int n_in = NumInputs(node);
  const int n_out = NumOutputs(node);
  const flexbuffers::Reference stages = m[contract::kKeyStages];
  const flexbuffers::Reference body = m[contract::kKeyTensors];
  d->num_tensors = n_in + n_out + static_cast<int32_t>(VectorSize(body));
  d->num_stages = static_cast<int32_t>(VectorSize(stages));
  d->num_spill = static_cast<int32_t>(VectorSize(m[contract::kKeySpill]));
  d->num_order = n_out + d->num_spill;
  d->num_edges = d->num_operands = d->per_channel = 0;
  int64_t per_channel = 0;  // summed in 64 bits: a body may declare 2^31-1 channels
  TF_LITE_ENSURE_MSG(context,
                     d->num_spill == d->spilled &&
                         static_cast<int32_t>(VectorSize(m[contract::kKeyFetch])) == d->fetched,
                     "StreamChain: spilled/fetched disagree with the spill/fetch lists");
  for (int32_t s = 0; s < d->num_stages; ++s) {
    const flexbuffers::Reference e = At(stages, static_cast<size_t>(s));
    TF_LITE_ENSURE_MSG(context, e.IsMap(), "StreamChain: a stage is not a map");
    const flexbuffers::Map st = e.AsMap();
    const flexbuffers::Reference name = st[contract::kKeyOp];
    const StageOp op =
        name.IsString() ? contract::ParseStageOp(name.AsString().c_str()) : StageOp::kUnknown;
    const flexbuffers::Reference ins = st[contract::kKeyInputs];
    const flexbuffers::Reference outs = st[contract::kKeyOutputs];
    TF_LITE_ENSURE_MSG(
        context,
        IsVector(ins) && IsVector(outs) && VectorSize(outs) == 1 &&
            VectorSize(ins) <= contract::kStreamMaxStageInputs,
        "StreamChain: a stage has 1 output and at most kStreamMaxStageInputs inputs");
    int32_t seen[contract::kStreamMaxStageInputs];
    int32_t distinct = 0;
    for (size_t k = 0; k < VectorSize(ins); ++k) {
      const int32_t id = static_cast<int32_t>(At(ins, k).AsInt64());
      if (id < 0 || !contract::IsActivationInput(op, static_cast<int>(k))) continue;
      if (id <
          n_in) {  // a constant node input is no schedule edge (an ADD/SUB/MUL broadcast operand)
        TfLiteTensor* t = mc->AllocateTempInputTensor(node, id);
        TF_LITE_ENSURE(context, t != nullptr);
        const bool constant = IsConstantTensor(t);
        mc->DeallocateTempTfLiteTensor(t);
        if (constant) continue;
      }
      bool dup = false;
      for (int32_t j = 0; j < distinct; ++j) dup = dup || seen[j] == id;
      if (!dup) seen[distinct++] = id;
    }
    d->num_edges += distinct;
    d->num_operands += static_cast<int32_t>(VectorSize(ins));
    if (contract::PerChannelStage(op)) {
      int64_t channels = 0;
      if (StageChannels(context, node, d->num_tensors, body, At(outs, 0), &channels) != kTfLiteOk) {
        return kTfLiteError;
      }
      per_channel += 2 * channels;
    }
    if (contract::LookupTableStage(op)) {
      per_channel += static_cast<int64_t>(contract::kStreamLookupTableBytes / sizeof(int32_t));
    }
    TF_LITE_ENSURE_MSG(
        context, per_channel <= contract::kStreamMaxBodyBytes / 4,
        "StreamChain: the stages' per-channel arrays exceed the largest persistent block");
  }
  d->per_channel = static_cast<int32_t>(per_channel);
  TF_LITE_ENSURE_MSG(context, BodyBytes(*d) <= static_cast<uint64_t>(contract::kStreamMaxBodyBytes),
                     "StreamChain: the body's tables exceed the largest persistent block");
  return kTfLiteOk;
}

TfLiteStatus StreamPrepare(TfLiteContext* context, TfLiteNode* node) {
  TF_LITE_ENSURE_MSG(context, node->user_data != nullptr,
                     "StreamChain: bad custom options (see the message above)");
  auto* d = static_cast<StreamOpData*>(node->user_data);
  const flexbuffers::Map m = flexbuffers::GetRoot(d->options, d->options_bytes).AsMap();
  TF_LITE_ENSURE_STATUS(Count(context, node, d, m));
  const size_t bytes = static_cast<size_t>(BodyBytes(*d));  // <= kStreamMaxBodyBytes (Count)
  d->tables = static_cast<uint8_t*>(context->AllocatePersistentBuffer(context, bytes));
  TF_LITE_ENSURE(context, d->tables != nullptr);
  std::memset(d->tables, 0, bytes);
  const Tables tab = Layout(*d);
  TF_LITE_ENSURE_STATUS(PrepareTensors(context, node, *d, tab, m));
  TF_LITE_ENSURE_STATUS(PreparePairs(context, *d, tab, m));
  const flexbuffers::Reference stages = m[contract::kKeyStages];
  int32_t operand_next = 0, edge_next = 0, pool_next = 0;
  for (int32_t k = 0; k < d->num_stages; ++k) {
    TF_LITE_ENSURE_STATUS(PrepareStage(context, node, *d, tab, k,
                                       At(stages, static_cast<size_t>(k)).AsMap(), &operand_next,
                                       &edge_next, &pool_next));
  }
  TF_LITE_ENSURE(context, edge_next == d->num_edges && pool_next == d->per_channel);

  // The schedule: every tensor's rows, producer and ring; each stage's output; each edge's window.
  for (int32_t i = 0; i < d->num_tensors; ++i) {
    const TensorSlot& s = tab.tensor(i);
    ::tinyseg::ChainTensor& c = tab.schedule[i];
    c.height = s.height;
    c.producer = -1;
    c.streamed = s.fetch_slot >= 0;
    c.ring_rows = s.ring_rows;
  }
  for (int32_t s = 0; s < d->num_stages; ++s) {
    const StageSlot& g = tab.stage(s);
    ::tinyseg::ChainTensor& c = tab.schedule[g.output];
    TF_LITE_ENSURE_MSG(context, c.producer < 0 && tab.tensor(g.output).fetch_slot < 0,
                       "StreamChain: two stages write one tensor");
    c.producer = s;
    c.streamed = true;
    tab.chain_stages[s].output = g.output;
    TF_LITE_ENSURE_MSG(context, tab.tensor(g.output).kind == Kind::kNodeOutput || c.ring_rows > 0,
                       "StreamChain: a body tensor a stage writes needs a ring");
  }
  for (int32_t e = 0; e < d->num_edges; ++e) {
    ::tinyseg::ChainEdge& edge = tab.edges[e];
    const StageSlot& g = tab.stage(edge.stage);
    ::tinyseg::RowMap& map = edge.map;
    map = ::tinyseg::RowMap();  // identity unless the stage resamples
    map.in_h = tab.tensor(edge.tensor).height;
    map.out_h = tab.tensor(g.output).height;
    if (g.op == StageOp::kConv2d || g.op == StageOp::kMaxPool2d ||
        g.op == StageOp::kDepthwiseConv2d || g.op == StageOp::kAveragePool2d) {
      const int32_t eff = (g.filter_h - 1) * g.dilation_h + 1;
      map.num = g.stride_h;
      map.before = g.pad_h;
      map.after = eff - 1 - g.pad_h;
    } else if (g.op == StageOp::kTransposeConv) {
      map.den = g.stride_h;
    } else if (g.op == StageOp::kResizeNearestNeighbor) {
      map.den = map.out_h / map.in_h;
    } else if (g.op == StageOp::kPad || g.op == StageOp::kPadv2) {
      map.before =
          g.pad_h;  // output row y reads input row y - top; none in the top and bottom padding
      map.after = -g.pad_h;
    }
    TF_LITE_ENSURE_MSG(context,
                       g.op == StageOp::kConv2d || g.op == StageOp::kMaxPool2d ||
                           g.op == StageOp::kDepthwiseConv2d || g.op == StageOp::kAveragePool2d ||
                           g.op == StageOp::kTransposeConv || g.op == StageOp::kPad ||
                           g.op == StageOp::kPadv2 || g.op == StageOp::kResizeNearestNeighbor ||
                           map.in_h == map.out_h,
                       "StreamChain: an elementwise stage's inputs have the output's height");
    // Stages run in the order written (the lowering and the Python schedule do): a tensor a stage
    // reads is fetched, or made by an earlier stage.
    if (tab.tensor(edge.tensor).kind != Kind::kNodeInput) {
      const ::tinyseg::ChainTensor& c = tab.schedule[edge.tensor];
      TF_LITE_ENSURE_MSG(
          context,
          tab.tensor(edge.tensor).fetch_slot >= 0 || (c.producer >= 0 && c.producer < edge.stage),
          "StreamChain: a stage reads a tensor no earlier stage or fetch makes");
    }
  }
  for (int32_t k = 0; k < NumOutputs(node); ++k) tab.order[k] = NumInputs(node) + k;
  ::tinyseg::ChainSchedule check;
  const ::tinyseg::ChainState state{tab.done, tab.held};
  if (!::tinyseg::Ok(check.Init(tab.schedule, d->num_tensors, tab.chain_stages, d->num_stages,
                                tab.edges, d->num_edges, tab.order, d->num_order, state))) {
    MicroPrintf("StreamChain: the body is not a valid schedule");
    return kTfLiteError;
  }
  // A dry run of the schedule (bookkeeping only, no row is computed): a ring shorter than the rows
  // its readers hold at once, or a cycle, is refused here rather than in the middle of an
  // inference.
  if (!::tinyseg::Ok(check.Run([](int32_t, int32_t) { return ::tinyseg::Status::kOk; }))) {
    MicroPrintf("StreamChain: a ring holds fewer rows than its readers' windows need");
    return kTfLiteError;
  }
  const int64_t scratch =
      static_cast<int64_t>(d->ring_bytes) + static_cast<int64_t>(d->spilled) * d->block;
  TF_LITE_ENSURE(context, scratch <= INT32_MAX);
  if (scratch > 0) {
    TF_LITE_ENSURE_STATUS(context->RequestScratchBufferInArena(
        context, static_cast<size_t>(scratch), &d->ring_index));
  }
  if (d->op_scratch > 0) {
    TF_LITE_ENSURE_STATUS(
        context->RequestScratchBufferInArena(context, d->op_scratch, &d->op_scratch_index));
  }
  return kTfLiteOk;
}

// ------------------------------------------------------------ stage arithmetic

// The convolutions' TFLM reference arithmetic, called through pointers the compiler may not read
// at compile time (volatile), so that it never inlines them here. Each has one call site in this
// file, so GCC inlines it (into ComputeRow, or into any wrapper of it) and its six nested loops
// then share the register allocation of the surrounding function: the innermost loop (one
// multiply-accumulate) reloads the input offset, the filter row and the trip count from the stack,
// 10 or 11 instructions instead of the 8 of TFLM's own out-of-line copy (conv.cc), +19% on a
// streamed Tiny U-Net. Called through the pointer, the function is compiled on its own, as TFLM's
// kernels compile it; one indirect call per output row costs nothing next to its loops.
using ConvFn = void (*)(const ConvParams&, const int32_t*, const int32_t*, const RuntimeShape&,
                        const int8_t*, const RuntimeShape&, const int8_t*, const RuntimeShape&,
                        const int32_t*, const RuntimeShape&, int8_t*);
using DepthwiseFn = void (*)(const DepthwiseParams&, const int32_t*, const int32_t*,
                             const RuntimeShape&, const int8_t*, const RuntimeShape&, const int8_t*,
                             const RuntimeShape&, const int32_t*, const RuntimeShape&, int8_t*);
using TransposeConvFn = void (*)(const ConvParams&, const int32_t*, const int32_t*,
                                 const RuntimeShape&, const int8_t*, const RuntimeShape&,
                                 const int8_t*, const RuntimeShape&, const int32_t*,
                                 const RuntimeShape&, int8_t*, const RuntimeShape&, int8_t*,
                                 int32_t*);
const volatile ConvFn kConvPerChannel = &reference_integer_ops::ConvPerChannel;
const volatile DepthwiseFn kDepthwiseConvPerChannel =
    &reference_integer_ops::DepthwiseConvPerChannel;
const volatile TransposeConvFn kTransposeConv = &reference_integer_ops::TransposeConv;

// ------------------------------------------------------------ Eval

struct EvalState {
  TfLiteContext* context;
  TfLiteNode* node;
  const StreamOpData* d;
  Tables tab;
  ::tinyseg::Runtime* rt;
  ::tinyseg::ChainSchedule* schedule;
  int32_t* op_scratch;
  ::tinyseg::RuntimeStats* stats;  // nullptr: no runtime attached (a chain without row streams)
};

uint8_t* NodeData(const EvalState& v, const TensorSlot& s) {
  const TfLiteEvalTensor* t = s.kind == Kind::kNodeInput
                                  ? micro::GetEvalInput(v.context, v.node, s.node_index)
                                  : micro::GetEvalOutput(v.context, v.node, s.node_index);
  return t == nullptr ? nullptr : static_cast<uint8_t*>(t->data.data);
}

// Rows [lo, hi] of a local tensor as one contiguous block (a band view).
::tinyseg::Status Band(const EvalState& v, int32_t id, int32_t lo, int32_t hi,
                       const uint8_t** out) {
  const TensorSlot& s = v.tab.tensor(id);
  if (lo > hi) {  // the window reads only padding: any valid pointer, zero rows
    *out = reinterpret_cast<const uint8_t*>(&s);
    return ::tinyseg::Status::kOk;
  }
  if (s.kind != Kind::kBody) {
    const uint8_t* base = NodeData(v, s);
    if (base == nullptr || lo < 0 || hi >= s.height) return ::tinyseg::Status::kOutOfRange;
    *out = base + static_cast<size_t>(lo) * static_cast<size_t>(s.row_bytes);
    return ::tinyseg::Status::kOk;
  }
  return s.ring.Rows(lo, hi, out);
}

::tinyseg::Status Window(const EvalState& v, int32_t stage, int32_t id, int32_t y, int32_t* lo,
                         int32_t* hi) {
  for (int32_t e = 0; e < v.d->num_edges; ++e) {
    const ::tinyseg::ChainEdge& edge = v.tab.edges[e];
    if (edge.stage == stage && edge.tensor == id) {
      ::tinyseg::RowWindow(edge.map, y, lo, hi);
      return ::tinyseg::Status::kOk;
    }
  }
  return ::tinyseg::Status::kInvalidArgument;
}

// A convolution stage's row as tinyseg_stream_cmsis.h takes it (the band: `rows` input rows from
// `src`, with its own top padding `pad_top`).
tinyseg_ops::BandConv BandConvOf(const EvalState& v, const StageSlot& g, const TensorSlot& in,
                                 const TensorSlot& out, int32_t rows, int32_t pad_top,
                                 const uint8_t* src, const TfLiteEvalTensor* filter,
                                 const TfLiteEvalTensor* bias, uint8_t* dst) {
  tinyseg_ops::BandConv c = {};
  c.input = reinterpret_cast<const int8_t*>(src);
  c.in_h = rows;
  c.in_w = in.width;
  c.in_c = in.channels;
  c.filter = micro::GetTensorData<int8_t>(filter);
  c.filter_h = g.filter_h;
  c.filter_w = g.filter_w;
  c.filter_c = filter->dims->data[3];
  c.bias = micro::GetOptionalTensorData<int32_t>(bias);
  c.output = reinterpret_cast<int8_t*>(dst);
  c.out_w = out.width;
  c.out_c = out.channels;
  c.stride_h = g.stride_h;
  c.stride_w = g.stride_w;
  c.dilation_h = g.dilation_h;
  c.dilation_w = g.dilation_w;
  c.pad_h = pad_top;
  c.pad_w = g.pad_w;
  c.input_offset = g.input_offset;
  c.output_offset = g.output_offset;
  c.act_min = g.act_min;
  c.act_max = g.act_max;
  c.multiplier = v.tab.per_channel + g.per_channel;
  c.shift = v.tab.per_channel + g.per_channel + out.channels;
  return c;
}

// RuntimeStats::optimized_rows, when the application attached a tinyseg::Runtime.
void CountOptimizedRow(const EvalState& v) {
  if (v.stats != nullptr) ++v.stats->optimized_rows;
}

::tinyseg::Status ComputeRow(const EvalState& v, int32_t stage, int32_t y) {
  const StageSlot& g = v.tab.stage(stage);
  TensorSlot& out = v.tab.tensor(g.output);
  uint8_t* dst = nullptr;
  if (out.kind == Kind::kNodeOutput) {
    uint8_t* base = NodeData(v, out);
    if (base == nullptr) return ::tinyseg::Status::kInvalidArgument;
    dst = base + static_cast<size_t>(y) * static_cast<size_t>(out.row_bytes);
  } else {
    int32_t keep = v.schedule->lowest_needed(g.output);
    if (keep > y) keep = y;
    TINYSEG_RETURN_IF_ERROR(out.ring.Reserve(y, keep, &dst));
  }
  const TensorSlot& in = v.tab.tensor(g.input);
  int32_t lo = 0, hi = 0;
  TINYSEG_RETURN_IF_ERROR(Window(v, stage, g.input, y, &lo, &hi));
  const uint8_t* src = nullptr;
  TINYSEG_RETURN_IF_ERROR(Band(v, g.input, lo, hi, &src));
  const int32_t rows = hi >= lo ? hi - lo + 1 : 0;
  const int32_t in_dims[4] = {1, rows, in.width, in.channels};
  const int32_t out_dims[4] = {1, 1, out.width, out.channels};
  const RuntimeShape in_shape(4, in_dims);
  const RuntimeShape out_shape(4, out_dims);
  switch (g.op) {
    case StageOp::kQuantize: {
      const int32_t n = in.width * in.channels;
      const TfLiteType it = static_cast<TfLiteType>(in.type);
      const TfLiteType ot = static_cast<TfLiteType>(out.type);
      if (it == kTfLiteUInt8 && ot == kTfLiteInt8) {
        reference_ops::Requantize(src, n, g.multiplier, g.shift, g.input_offset, g.output_offset,
                                  reinterpret_cast<int8_t*>(dst));
      } else if (it == kTfLiteInt8 && ot == kTfLiteUInt8) {
        reference_ops::Requantize(reinterpret_cast<const int8_t*>(src), n, g.multiplier, g.shift,
                                  g.input_offset, g.output_offset, dst);
      } else {
        reference_ops::Requantize(reinterpret_cast<const int8_t*>(src), n, g.multiplier, g.shift,
                                  g.input_offset, g.output_offset, reinterpret_cast<int8_t*>(dst));
      }
      break;
    }
    case StageOp::kDequantize: {
      // As dequantize.cc's Eval for int8: the row's elements, float32 rows of 4-byte elements.
      DequantizationParams p;
      p.zero_point = g.input_offset;
      p.scale = static_cast<double>(in.scale);
      reference_ops::Dequantize(p, in_shape, reinterpret_cast<const int8_t*>(src), out_shape,
                                reinterpret_cast<float*>(dst));
      break;
    }
    case StageOp::kConv2d: {
      ConvParams p = {};
      p.padding_type = PaddingType::kSame;
      p.padding_values.width = static_cast<int16_t>(g.pad_w);
      // The band starts at input row lo: its own top padding.
      p.padding_values.height = static_cast<int16_t>(lo - (y * g.stride_h - g.pad_h));
      p.stride_width = static_cast<int16_t>(g.stride_w);
      p.stride_height = static_cast<int16_t>(g.stride_h);
      p.dilation_width_factor = static_cast<int16_t>(g.dilation_w);
      p.dilation_height_factor = static_cast<int16_t>(g.dilation_h);
      p.input_offset = g.input_offset;
      p.output_offset = g.output_offset;
      p.quantized_activation_min = g.act_min;
      p.quantized_activation_max = g.act_max;
      const TfLiteEvalTensor* filter = micro::GetEvalInput(v.context, v.node, g.filter);
      const TfLiteEvalTensor* bias =
          g.bias >= 0 ? micro::GetEvalInput(v.context, v.node, g.bias) : nullptr;
      if (tinyseg_ops::CmsisConvRow(
              BandConvOf(v, g, in, out, rows, p.padding_values.height, src, filter, bias, dst),
              v.op_scratch, v.d->op_scratch)) {
        CountOptimizedRow(v);
        break;
      }
      kConvPerChannel(
          p, v.tab.per_channel + g.per_channel, v.tab.per_channel + g.per_channel + out.channels,
          in_shape, reinterpret_cast<const int8_t*>(src), micro::GetTensorShape(filter),
          micro::GetTensorData<int8_t>(filter), micro::GetTensorShape(bias),
          micro::GetOptionalTensorData<int32_t>(bias), out_shape, reinterpret_cast<int8_t*>(dst));
      break;
    }
    case StageOp::kDepthwiseConv2d: {
      DepthwiseParams p = {};
      p.padding_type = PaddingType::kSame;
      p.padding_values.width = static_cast<int16_t>(g.pad_w);
      p.padding_values.height = static_cast<int16_t>(lo - (y * g.stride_h - g.pad_h));
      p.stride_width = static_cast<int16_t>(g.stride_w);
      p.stride_height = static_cast<int16_t>(g.stride_h);
      p.dilation_width_factor = static_cast<int16_t>(g.dilation_w);
      p.dilation_height_factor = static_cast<int16_t>(g.dilation_h);
      p.depth_multiplier = static_cast<int16_t>(out.channels / in.channels);
      p.input_offset = g.input_offset;
      p.weights_offset = 0;
      p.output_offset = g.output_offset;
      p.quantized_activation_min = g.act_min;
      p.quantized_activation_max = g.act_max;
      const TfLiteEvalTensor* filter = micro::GetEvalInput(v.context, v.node, g.filter);
      const TfLiteEvalTensor* bias =
          g.bias >= 0 ? micro::GetEvalInput(v.context, v.node, g.bias) : nullptr;
      tinyseg_ops::BandConv c =
          BandConvOf(v, g, in, out, rows, p.padding_values.height, src, filter, bias, dst);
      c.depth_multiplier = p.depth_multiplier;
      if (tinyseg_ops::CmsisDepthwiseConvRow(c, v.op_scratch, v.d->op_scratch)) {
        CountOptimizedRow(v);
        break;
      }
      kDepthwiseConvPerChannel(
          p, v.tab.per_channel + g.per_channel, v.tab.per_channel + g.per_channel + out.channels,
          in_shape, reinterpret_cast<const int8_t*>(src), micro::GetTensorShape(filter),
          micro::GetTensorData<int8_t>(filter), micro::GetTensorShape(bias),
          micro::GetOptionalTensorData<int32_t>(bias), out_shape, reinterpret_cast<int8_t*>(dst));
      break;
    }
    case StageOp::kAveragePool2d:
    case StageOp::kMaxPool2d: {
      PoolParams p = {};
      p.stride_height = g.stride_h;
      p.stride_width = g.stride_w;
      p.filter_height = g.filter_h;
      p.filter_width = g.filter_w;
      p.padding_values.height = static_cast<int16_t>(lo - (y * g.stride_h - g.pad_h));
      p.padding_values.width = static_cast<int16_t>(g.pad_w);
      p.quantized_activation_min = g.act_min;
      p.quantized_activation_max = g.act_max;
      tinyseg_ops::BandPool b = {};
      b.input = reinterpret_cast<const int8_t*>(src);
      b.in_h = rows;
      b.in_w = in.width;
      b.channels = in.channels;
      b.output = reinterpret_cast<int8_t*>(dst);
      b.out_w = out.width;
      b.filter_h = g.filter_h;
      b.filter_w = g.filter_w;
      b.stride_h = g.stride_h;
      b.stride_w = g.stride_w;
      b.pad_h = p.padding_values.height;
      b.pad_w = g.pad_w;
      b.act_min = g.act_min;
      b.act_max = g.act_max;
      if (g.op == StageOp::kMaxPool2d
              ? tinyseg_ops::CmsisMaxPoolRow(b)
              : tinyseg_ops::CmsisAveragePoolRow(b, v.op_scratch, v.d->op_scratch)) {
        CountOptimizedRow(v);
        break;
      }
      if (g.op == StageOp::kMaxPool2d) {
        reference_integer_ops::MaxPool(p, in_shape, reinterpret_cast<const int8_t*>(src), out_shape,
                                       reinterpret_cast<int8_t*>(dst));
      } else if (!reference_integer_ops::AveragePool(p, in_shape,
                                                     reinterpret_cast<const int8_t*>(src),
                                                     out_shape, reinterpret_cast<int8_t*>(dst))) {
        return ::tinyseg::Status::kInvalidArgument;  // a window with no input (TFLM's kernel fails
                                                     // too)
      }
      break;
    }
    case StageOp::kTransposeConv: {
      // Output row y comes from input row lo = y / stride alone (stride >= kernel): the band is
      // that row, and the shifted padding selects filter row y - lo * stride.
      ConvParams p = {};
      p.padding_type = PaddingType::kSame;
      p.padding_values.width = static_cast<int16_t>(g.pad_w);
      p.padding_values.height = static_cast<int16_t>(y - lo * g.stride_h + g.pad_h);
      p.stride_width = static_cast<int16_t>(g.stride_w);
      p.stride_height = static_cast<int16_t>(g.stride_h);
      p.dilation_width_factor = 1;
      p.dilation_height_factor = 1;
      p.input_offset = g.input_offset;
      p.output_offset = g.output_offset;
      p.quantized_activation_min = g.act_min;
      p.quantized_activation_max = g.act_max;
      const TfLiteEvalTensor* filter = micro::GetEvalInput(v.context, v.node, g.filter);
      const TfLiteEvalTensor* bias =
          g.bias >= 0 ? micro::GetEvalInput(v.context, v.node, g.bias) : nullptr;
      if (rows == 1) {  // CMSIS-NN in a CMSIS-NN build, when op_scratch holds its buffer
        tinyseg_ops::BandTransposeConv t = {};
        t.input = reinterpret_cast<const int8_t*>(src);
        t.in_w = in.width;
        t.in_c = in.channels;
        t.filter = micro::GetTensorData<int8_t>(filter);
        t.filter_h = g.filter_h;
        t.filter_w = g.filter_w;
        t.filter_row = p.padding_values.height;
        t.bias = micro::GetOptionalTensorData<int32_t>(bias);
        t.output = reinterpret_cast<int8_t*>(dst);
        t.out_w = out.width;
        t.out_c = out.channels;
        t.stride_w = g.stride_w;
        t.pad_w = g.pad_w;
        t.input_offset = g.input_offset;
        t.output_offset = g.output_offset;
        t.act_min = g.act_min;
        t.act_max = g.act_max;
        t.multiplier = v.tab.per_channel + g.per_channel;
        t.shift = v.tab.per_channel + g.per_channel + out.channels;
        if (tinyseg_ops::CmsisTransposeConvRow(t, v.op_scratch, v.d->op_scratch)) {
          CountOptimizedRow(v);
          if (v.stats != nullptr) ++v.stats->optimized_transpose_conv_rows;
          break;
        }
      }
      kTransposeConv(p, v.tab.per_channel + g.per_channel,
                     v.tab.per_channel + g.per_channel + out.channels, in_shape,
                     reinterpret_cast<const int8_t*>(src), micro::GetTensorShape(filter),
                     micro::GetTensorData<int8_t>(filter), micro::GetTensorShape(bias),
                     micro::GetOptionalTensorData<int32_t>(bias), out_shape,
                     reinterpret_cast<int8_t*>(dst), RuntimeShape(), nullptr, v.op_scratch);
      break;
    }
    case StageOp::kAdd:
    case StageOp::kSub:
    case StageOp::kMul: {
      // Each operand: row y of an activation (1 x 1 x W x C), or a constant whole (one row for
      // all).
      const uint8_t* data[2] = {nullptr, nullptr};
      RuntimeShape shapes[2];
      bool same = true;
      for (int32_t k = 0; k < 2; ++k) {
        const int32_t id = v.tab.operands[g.operand_begin + k];
        const TensorSlot& x = v.tab.tensor(id);
        if (x.constant) {
          const TfLiteEvalTensor* t = micro::GetEvalInput(v.context, v.node, x.node_index);
          data[k] = static_cast<const uint8_t*>(t->data.data);
          int32_t dims[4] = {1, 1, 1, 1};
          const int rank = t->dims->size < 4 ? t->dims->size : 4;
          for (int j = 0; j < rank; ++j) dims[j] = t->dims->data[j];
          shapes[k].ReplaceWith(rank, dims);
          same = false;
        } else {
          TINYSEG_RETURN_IF_ERROR(Band(v, id, y, y, &data[k]));
          const int32_t dims[4] = {1, 1, x.width, x.channels};
          shapes[k].ReplaceWith(4, dims);
          same = same && x.width == out.width && x.channels == out.channels;
        }
      }
      ArithmeticParams p = {};
      p.input1_offset = g.input_offset;
      p.input2_offset = g.input2_offset;
      p.output_offset = g.output_offset;
      p.output_multiplier = g.multiplier;
      p.output_shift = g.shift;
      p.quantized_activation_min = g.act_min;
      p.quantized_activation_max = g.act_max;
      const auto* a = reinterpret_cast<const int8_t*>(data[0]);
      const auto* b = reinterpret_cast<const int8_t*>(data[1]);
      auto* o = reinterpret_cast<int8_t*>(dst);
      if (same && g.op != StageOp::kSub) {  // no broadcast: CMSIS-NN's elementwise functions in a
                                            // CMSIS-NN build
        tinyseg_ops::ElementwiseRow e = {};
        e.input1 = a;
        e.input2 = b;
        e.output = o;
        e.size = out.width * out.channels;
        e.input1_offset = g.input_offset;
        e.input1_multiplier = g.multiplier1;
        e.input1_shift = g.shift1;
        e.input2_offset = g.input2_offset;
        e.input2_multiplier = g.multiplier2;
        e.input2_shift = g.shift2;
        e.left_shift = g.left_shift;
        e.output_offset = g.output_offset;
        e.output_multiplier = g.multiplier;
        e.output_shift = g.shift;
        e.act_min = g.act_min;
        e.act_max = g.act_max;
        if (g.op == StageOp::kAdd ? tinyseg_ops::CmsisAddRow(e) : tinyseg_ops::CmsisMulRow(e)) {
          CountOptimizedRow(v);
          break;
        }
      }
      if (g.op == StageOp::kAdd) {
        p.left_shift = g.left_shift;
        p.input1_multiplier = g.multiplier1;
        p.input1_shift = g.shift1;
        p.input2_multiplier = g.multiplier2;
        p.input2_shift = g.shift2;
        if (same) {
          reference_integer_ops::Add(p, out_shape, a, out_shape, b, out_shape, o);
        } else {
          reference_integer_ops::BroadcastAdd4DSlow(p, shapes[0], a, shapes[1], b, out_shape, o);
        }
      } else if (g.op == StageOp::kSub) {
        // As sub.cc's EvalSubQuantized (TFLM has no CMSIS-NN SUB): the reference int8 arithmetic.
        p.left_shift = g.left_shift;
        p.input1_multiplier = g.multiplier1;
        p.input1_shift = g.shift1;
        p.input2_multiplier = g.multiplier2;
        p.input2_shift = g.shift2;
        if (same) {
          reference_ops::Sub(p, out_shape, a, out_shape, b, out_shape, o);
        } else {
          reference_ops::BroadcastQuantSubSlow(p, shapes[0], a, shapes[1], b, out_shape, o);
        }
      } else if (same) {
        reference_integer_ops::Mul(p, out_shape, a, out_shape, b, out_shape, o);
      } else {
        reference_integer_ops::BroadcastMul4DSlow(p, shapes[0], a, shapes[1], b, out_shape, o);
      }
      break;
    }
    case StageOp::kLogistic:
      reference_integer_ops::Logistic(
          g.input_offset, g.radius, g.multiplier, g.shift, out.width * out.channels,
          reinterpret_cast<const int8_t*>(src), reinterpret_cast<int8_t*>(dst));
      break;
    case StageOp::kTanh:
      reference_integer_ops::Tanh(g.input_offset, g.radius, g.multiplier, g.shift, in_shape,
                                  reinterpret_cast<const int8_t*>(src), out_shape,
                                  reinterpret_cast<int8_t*>(dst));
      break;
    case StageOp::kElu: {
      // As elu.cc's EvalUsingLookupTable: each element through the table Prepare filled.
      const auto* table = reinterpret_cast<const int8_t*>(v.tab.per_channel + g.per_channel);
      const auto* x = reinterpret_cast<const int8_t*>(src);
      auto* o = reinterpret_cast<int8_t*>(dst);
      const int32_t n = out.width * out.channels;
      for (int32_t i = 0; i < n; ++i) o[i] = LUTLookup(x[i], table);
      break;
    }
    case StageOp::kHardSwish: {
      HardSwishParams p = {};
      p.input_zero_point = static_cast<int16_t>(g.input_offset);
      p.output_zero_point = static_cast<int16_t>(g.output_offset);
      p.output_multiplier_fixedpoint_int16 = static_cast<int16_t>(g.multiplier1);
      p.output_multiplier_exponent = g.shift1;
      p.reluish_multiplier_fixedpoint_int16 = static_cast<int16_t>(g.multiplier2);
      p.reluish_multiplier_exponent = g.shift2;
      reference_ops::HardSwish(p, in_shape, reinterpret_cast<const int8_t*>(src), out_shape,
                               reinterpret_cast<int8_t*>(dst));
      break;
    }
    case StageOp::kLeakyRelu: {
      LeakyReluParams p = {};
      p.input_offset = g.input_offset;
      p.output_offset = g.output_offset;
      p.output_multiplier_alpha = g.multiplier1;
      p.output_shift_alpha = g.shift1;
      p.output_multiplier_identity = g.multiplier2;
      p.output_shift_identity = g.shift2;
      reference_ops::QuantizeLeakyRelu(p, in_shape, reinterpret_cast<const int8_t*>(src), out_shape,
                                       reinterpret_cast<int8_t*>(dst));
      break;
    }
    case StageOp::kRelu: {
      ReluOpData data{};
      data.params.input_offset = g.input_offset;
      data.params.output_offset = g.output_offset;
      data.params.output_multiplier = g.multiplier;
      data.params.output_shift = g.shift;
      data.params.quantized_activation_min = g.act_min;
      data.params.quantized_activation_max = g.act_max;
      // No explicit template argument: TFLM's are templates, the Arduino library's older TFLM has
      // int8 overloads of the same name and order.
      ReluQuantized(data, in_shape, out_shape, reinterpret_cast<const int8_t*>(src),
                    reinterpret_cast<int8_t*>(dst));
      break;
    }
    case StageOp::kRelu6:
      Relu6Quantized(static_cast<int8_t>(g.act_min), static_cast<int8_t>(g.act_max), in_shape,
                     reinterpret_cast<const int8_t*>(src), out_shape,
                     reinterpret_cast<int8_t*>(dst));
      break;
    case StageOp::kPad:
    case StageOp::kPadv2: {
      // One output row: the input row with its left and right padding, or (no input row: the
      // top or bottom padding) a row of the pad value, as a padding row above an empty input.
      tinyseg_ops::PadRow row;
      row.input = reinterpret_cast<const int8_t*>(src);
      row.output = reinterpret_cast<int8_t*>(dst);
      row.in_rows = rows == 0 ? 0 : 1;
      row.in_w = in.width;
      row.channels = in.channels;
      row.left = g.pad_w;
      row.right = g.filter_w;
      row.pad_value = static_cast<int8_t>(g.output_offset);
      if (tinyseg_ops::CmsisPadRow(row)) {
        CountOptimizedRow(v);
        break;
      }
      PadParams p = {};
      p.left_padding_count = 4;
      p.right_padding_count = 4;
      p.left_padding[1] = rows == 0 ? 1 : 0;
      p.left_padding[2] = g.pad_w;
      p.right_padding[2] = g.filter_w;
      p.resizing_category = ResizingCategory::kGenericResize;
      const int8_t pad_value = static_cast<int8_t>(g.output_offset);
      reference_ops::Pad(p, in_shape, reinterpret_cast<const int8_t*>(src), &pad_value, out_shape,
                         reinterpret_cast<int8_t*>(dst));
      break;
    }
    case StageOp::kPrelu: {
      const TfLiteEvalTensor* alpha = micro::GetEvalInput(v.context, v.node, g.input2);
      PreluParams p = {};
      p.input_offset = g.input_offset;
      p.alpha_offset = g.input2_offset;
      p.output_offset = g.output_offset;
      p.output_multiplier_1 = g.multiplier1;
      p.output_shift_1 = g.shift1;
      p.output_multiplier_2 = g.multiplier2;
      p.output_shift_2 = g.shift2;
      reference_ops::BroadcastPrelu4DSlow(
          p, out_shape, reinterpret_cast<const int8_t*>(src), micro::GetTensorShape(alpha),
          micro::GetTensorData<int8_t>(alpha), out_shape, reinterpret_cast<int8_t*>(dst));
      break;
    }
    case StageOp::kResizeNearestNeighbor: {
      // One input row (y / factor) widened as TFLM's kernel widens it: an input band of one row.
      ResizeNearestNeighborParams p;
      p.align_corners = (g.flags & 1) != 0;
      p.half_pixel_centers = (g.flags & 2) != 0;
      const int32_t size[2] = {1, out.width};
      const int32_t size_dims[1] = {2};
      reference_ops::ResizeNearestNeighbor(p, in_shape, reinterpret_cast<const int8_t*>(src),
                                           RuntimeShape(1, size_dims), size, out_shape,
                                           reinterpret_cast<int8_t*>(dst));
      break;
    }
    case StageOp::kConcatenation: {
      // Channel concatenation of one row: per pixel, each operand's channels in turn.
      size_t offset = 0;
      for (int32_t k = 0; k < g.operand_count; ++k) {
        const int32_t id = v.tab.operands[g.operand_begin + k];
        const TensorSlot& x = v.tab.tensor(id);
        const uint8_t* row = nullptr;
        TINYSEG_RETURN_IF_ERROR(Band(v, id, y, y, &row));
        const size_t run = static_cast<size_t>(x.channels);
        for (int32_t px = 0; px < out.width; ++px) {
          std::memcpy(dst + static_cast<size_t>(px) * static_cast<size_t>(out.channels) + offset,
                      row + static_cast<size_t>(px) * run, run);
        }
        offset += run;
      }
      break;
    }
    default:
      return ::tinyseg::Status::kInvalidArgument;
  }
  if (out.stream >= 0) {
    TINYSEG_RETURN_IF_ERROR(
        v.rt->spill->Append(&v.tab.stream(out.stream), dst, static_cast<size_t>(out.row_bytes)));
  }
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status FetchRow(const EvalState& v, int32_t id, int32_t row) {
  TensorSlot& s = v.tab.tensor(id);
  if (s.fetch_slot < 0) return ::tinyseg::Status::kInvalidArgument;
  int32_t keep = v.schedule->lowest_needed(id);
  if (keep > row) keep = row;
  uint8_t* dst = nullptr;
  TINYSEG_RETURN_IF_ERROR(s.ring.Reserve(row, keep, &dst));
  const size_t bytes = static_cast<size_t>(s.row_bytes);
  const ::tinyseg::Status st = v.rt->spill->FetchRange(
      static_cast<uint32_t>(s.fetch_slot), static_cast<size_t>(row) * bytes, bytes, dst);
  if (!::tinyseg::Ok(st)) {
    MicroPrintf("StreamChain: fetching row %d of slot %u failed: %s%s", static_cast<int>(row),
                static_cast<unsigned>(s.fetch_slot), ::tinyseg::StatusName(st),
                tinyseg_ops::StorageFaultHint(st));
    return st;
  }
  ++v.rt->stats.fetches;
  v.rt->stats.fetched_bytes += bytes;
  return ::tinyseg::Status::kOk;
}

TfLiteStatus StreamEval(TfLiteContext* context, TfLiteNode* node) {
  const auto* d = static_cast<const StreamOpData*>(node->user_data);
  EvalState v;
  v.context = context;
  v.node = node;
  v.d = d;
  v.tab = Layout(*d);
  v.rt = nullptr;
  if (d->spilled > 0 || d->fetched > 0) {
    v.rt = tinyseg_ops::GetRuntime(context, kOp);
    if (v.rt == nullptr) return kTfLiteError;
  }
  uint8_t* rings = d->ring_index >= 0
                       ? static_cast<uint8_t*>(context->GetScratchBuffer(context, d->ring_index))
                       : nullptr;
  TF_LITE_ENSURE(context, rings != nullptr || (d->ring_bytes == 0 && d->spilled == 0));
  v.op_scratch =
      d->op_scratch > 0
          ? static_cast<int32_t*>(context->GetScratchBuffer(context, d->op_scratch_index))
          : nullptr;
  ::tinyseg::Runtime* attached = tinyseg_ops::PeekRuntime(context);
  v.stats = attached != nullptr ? &attached->stats : nullptr;
  for (int32_t i = 0; i < d->num_tensors; ++i) {
    TensorSlot& ts = v.tab.tensor(i);
    if (ts.ring_rows > 0) {
      TF_LITE_ENSURE(context, ::tinyseg::Ok(ts.ring.Init(rings + ts.ring_offset, ts.ring_rows,
                                                         static_cast<size_t>(ts.row_bytes))));
    }
    if (ts.fetch_slot >= 0) {
      const size_t raw = static_cast<size_t>(ts.height) * static_cast<size_t>(ts.row_bytes);
      TF_LITE_ENSURE_STATUS(
          tinyseg_ops::CheckSlot(*v.rt, static_cast<uint32_t>(ts.fetch_slot), raw, kOp));
    }
  }
  const flexbuffers::Map m = flexbuffers::GetRoot(d->options, d->options_bytes).AsMap();
  for (int32_t k = 0; k < d->num_spill; ++k) {
    const int32_t id = v.tab.order[d->num_order - d->num_spill + k];
    const TensorSlot& s = v.tab.tensor(id);
    uint8_t* accumulator =
        rings + d->ring_bytes + static_cast<size_t>(k) * static_cast<size_t>(d->block);
    const ::tinyseg::Status st = v.rt->spill->BeginStream(
        SpillSlot(m, k), static_cast<size_t>(s.height) * static_cast<size_t>(s.row_bytes), 1,
        accumulator, new (&v.tab.stream(k))::tinyseg::SpillStream(),
        static_cast<uint32_t>(d->block));
    if (!::tinyseg::Ok(st)) {
      MicroPrintf("StreamChain: opening the row stream of slot %u failed: %s",
                  static_cast<unsigned>(SpillSlot(m, k)), ::tinyseg::StatusName(st));
      return kTfLiteError;
    }
  }
  ::tinyseg::ChainSchedule schedule;
  v.schedule = &schedule;
  ::tinyseg::Status st = schedule.Init(v.tab.schedule, d->num_tensors, v.tab.chain_stages,
                                       d->num_stages, v.tab.edges, d->num_edges, v.tab.order,
                                       d->num_order, ::tinyseg::ChainState{v.tab.done, v.tab.held});
  if (::tinyseg::Ok(st)) {
    st = schedule.Run([&v](int32_t s, int32_t y) { return ComputeRow(v, s, y); },
                      [&v](int32_t t, int32_t row) { return FetchRow(v, t, row); });
  }
  if (!::tinyseg::Ok(st)) {
    MicroPrintf("StreamChain: running the chain failed: %s%s", ::tinyseg::StatusName(st),
                tinyseg_ops::StorageFaultHint(st));
    return kTfLiteError;
  }
  for (int32_t k = 0; k < d->num_spill; ++k) {
    ::tinyseg::SpillStream& stream = v.tab.stream(k);
    const ::tinyseg::Status end = v.rt->spill->EndStream(&stream);
    if (!::tinyseg::Ok(end)) {
      MicroPrintf("StreamChain: closing the row stream of slot %u failed: %s%s",
                  static_cast<unsigned>(stream.slot), ::tinyseg::StatusName(end),
                  tinyseg_ops::StorageFaultHint(end));
      return kTfLiteError;
    }
    ++v.rt->stats.spills;
    v.rt->stats.spilled_bytes += stream.total;
  }
  return kTfLiteOk;
}

}  // namespace

TFLMRegistration Register_STREAM_CHAIN() {
  return micro::RegisterOp(StreamInit, StreamPrepare, StreamEval);
}

}  // namespace tflite
