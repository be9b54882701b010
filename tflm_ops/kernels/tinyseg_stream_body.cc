// StreamChain's body tables (tinyseg_stream_internal.h): what Prepare reads from the options before
// any stage family runs -- the counts that size the persistent block (checked in 64 bits before it
// is allocated), the chain-local tensors, the rings, spills and fetches, each stage's operands and
// common fields -- and the schedule it checks once every stage is prepared.
#include <cmath>
#include <cstring>
#include <new>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"
#include "tinyseg/chain_schedule.h"

namespace tflite {
namespace tinyseg_stream {

static_assert(sizeof(::tinyseg::ChainTensor) == contract::kStreamScheduleTensorBytes,
              "contract: schedule tensor");
static_assert(sizeof(::tinyseg::ChainEdge) == contract::kStreamEdgeBytes,
              "contract: schedule edge");
static_assert(sizeof(::tinyseg::ChainStage) == 4 * contract::kStreamInt32PerStage,
              "contract: schedule stage");
static_assert(sizeof(::tinyseg::SpillStream) <= contract::kSpillStreamBytes,
              "contract: SpillStream");

// In 64 bits whatever the target's size_t (every count is a non-negative int32, so no term
// overflows); Count refuses a block above contract::kStreamMaxBodyBytes before anything is
// allocated.
uint64_t BodyBytes(const StreamOpData& d) {
  const uint64_t t = static_cast<uint64_t>(d.num_tensors);
  const uint64_t int32s = contract::kStreamInt32PerTensor * t +
                          contract::kStreamInt32PerStage * static_cast<uint64_t>(d.num_stages) +
                          static_cast<uint64_t>(d.num_operands) +
                          static_cast<uint64_t>(d.num_order) + static_cast<uint64_t>(d.per_channel);
  return contract::kSpillStreamBytes * static_cast<uint64_t>(d.spilled) +
         contract::kStreamTensorBytes * static_cast<uint64_t>(d.num_slots) +
         contract::kStreamScheduleTensorBytes * t +
         contract::kStreamStageBytes * static_cast<uint64_t>(d.num_stages) +
         contract::kStreamEdgeBytes * static_cast<uint64_t>(d.num_edges) + 4 * int32s;
}

Tables Layout(const StreamOpData& d) {
  Tables t;
  uint8_t* p = d.tables;
  t.streams = p;
  p += contract::kSpillStreamBytes * static_cast<size_t>(d.spilled);
  t.tensors = p;
  p += contract::kStreamTensorBytes * static_cast<size_t>(d.num_slots);
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
  t.slots = q;
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

// A local id (tokens included) as its record: false for an id out of range or a token.
bool RecordIn(const TfLiteNode* node, const StreamOpData& d, const flexbuffers::Reference& r,
              int32_t* record) {
  int32_t id = 0;
  if (!IntIn(r, 0, static_cast<int64_t>(d.num_tensors) + d.in_tokens + d.out_tokens - 1, &id)) {
    return false;
  }
  *record = RecordOf(node, d, id);
  return *record >= 0;
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

namespace {

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

}  // namespace

// ------------------------------------------------------------ tensors and pairs

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

namespace {

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

// A node input or output's geometry and quantization (an omitted optional input: no type).
void NodeTensor(MicroContext* mc, TfLiteNode* node, int32_t i, int n_in, TensorSlot* s,
                int32_t dims[4], int* rank) {
  s->kind = i < n_in ? Kind::kNodeInput : Kind::kNodeOutput;
  TfLiteTensor* t = i < n_in ? mc->AllocateTempInputTensor(node, i)
                             : mc->AllocateTempOutputTensor(node, i - n_in);
  if (t == nullptr) {  // an omitted optional input
    s->type = static_cast<int8_t>(kTfLiteNoType);
    return;
  }
  *rank = t->dims->size;
  for (int k = 0; k < *rank && k < 4; ++k) dims[k] = t->dims->data[k];
  s->type = static_cast<int8_t>(t->type);
  s->scale = t->params.scale;
  s->zero_point = t->params.zero_point;
  s->constant = i < n_in && IsConstantTensor(t) ? 1 : 0;
  mc->DeallocateTempTfLiteTensor(t);
}

// A body tensor (entry `index` of the options' tensors): type, rank-4 shape, scale, zero point.
TfLiteStatus BodyTensor(TfLiteContext* context, const flexbuffers::Reference& e, int32_t index,
                        TensorSlot* s, int32_t dims[4]) {
  s->kind = Kind::kBody;
  if (!e.IsMap()) {
    MicroPrintf("StreamChain: tensors[%d] is not a map", static_cast<int>(index));
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
        static_cast<int>(index));
    return kTfLiteError;
  }
  for (size_t k = 0; k < 4; ++k) {
    if (!IntIn(At(shape, k), 1, contract::kMaxDim, &dims[k])) {
      MicroPrintf("StreamChain: tensors[%d] has a bad shape", static_cast<int>(index));
      return kTfLiteError;
    }
  }
  s->type = static_cast<int8_t>(type);
  return BodyQuantization(context, index, type, At(scale, 0), At(zp, 0), s);
}

// The record every plain constant shares: no rows, no ring, never fetched, spilled, sourced or
// sunk, so each check that names a record to write refuses it.
constexpr TensorSlot PlainConstantRecord() {
  TensorSlot s{};
  s.ring_offset = s.fetch_slot = -1;
  s.stream = -1;
  s.type = static_cast<int8_t>(kTfLiteNoType);
  s.kind = Kind::kNodeInput;
  s.constant = 1;
  s.source = s.sink = -1;
  return s;
}

}  // namespace

const TensorSlot kPlainConstant = PlainConstantRecord();

namespace {

// Record `i`, a node input, is a constant no stage reads as an activation (a filter, a bias,
// paddings, an alpha): its stages read it through the node, and it takes kPlainConstant's record
// rather than a TensorSlot of its own (customops.stream_plain_constants).
bool PlainConstant(MicroContext* mc, TfLiteNode* node, const StreamOpData& d,
                   const flexbuffers::Reference& stages, int32_t i) {
  if (i >= NumInputs(node) - d.in_tokens) return false;
  TfLiteTensor* t = mc->AllocateTempInputTensor(node, i);
  if (t == nullptr) return false;
  const bool constant = IsConstantTensor(t);
  mc->DeallocateTempTfLiteTensor(t);
  for (size_t s = 0; constant && s < VectorSize(stages); ++s) {
    const flexbuffers::Map st = At(stages, s).AsMap();
    const flexbuffers::Reference name = st[contract::kKeyOp];
    const StageOp op =
        name.IsString() ? contract::ParseStageOp(name.AsString().c_str()) : StageOp::kUnknown;
    const flexbuffers::Reference ins = st[contract::kKeyInputs];
    for (size_t k = 0; k < VectorSize(ins); ++k) {
      if (At(ins, k).AsInt64() == i && contract::IsActivationInput(op, static_cast<int>(k))) {
        return false;
      }
    }
  }
  return constant;
}

// How many records have a TensorSlot: all but the plain constants.
int32_t CountSlots(MicroContext* mc, TfLiteNode* node, const StreamOpData& d,
                   const flexbuffers::Reference& stages) {
  int32_t slots = 0;
  for (int32_t i = 0; i < d.num_tensors; ++i)
    slots += PlainConstant(mc, node, d, stages, i) ? 0 : 1;
  return slots;
}

// Which records have a TensorSlot (Tables::slots), as Count counted them.
TfLiteStatus PrepareSlots(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                          const Tables& tab, const flexbuffers::Map& m) {
  MicroContext* mc = GetMicroContext(context);
  const flexbuffers::Reference stages = m[contract::kKeyStages];
  int32_t next = 0;
  for (int32_t i = 0; i < d.num_tensors; ++i) {
    tab.slots[i] = PlainConstant(mc, node, d, stages, i) ? -1 : next++;
  }
  TF_LITE_ENSURE(context, next == d.num_slots);
  return kTfLiteOk;
}

}  // namespace

// Geometry and quantization of every chain-local tensor with a TensorSlot.
TfLiteStatus PrepareTensors(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                            const Tables& tab, const flexbuffers::Map& m) {
  MicroContext* mc = GetMicroContext(context);
  const int n_in = NumInputs(node);
  const int n_out = NumOutputs(node);
  const flexbuffers::Reference body = m[contract::kKeyTensors];
  TF_LITE_ENSURE_STATUS(PrepareSlots(context, node, d, tab, m));
  for (int32_t i = 0; i < d.num_tensors; ++i) {
    TensorSlot* slot = tab.slot(i);
    if (slot == nullptr) continue;  // a plain constant
    TensorSlot& s = *new (slot) TensorSlot();
    s.stream = -1;
    s.fetch_slot = -1;
    s.ring_offset = -1;
    s.source = -1;
    s.sink = -1;
    int32_t dims[4] = {0, 0, 0, 0};
    int rank = 0;
    const int32_t id = LocalOf(node, d, i);
    if (id < n_in + n_out) {
      NodeTensor(mc, node, id, n_in, &s, dims, &rank);
    } else {
      const int32_t index = id - n_in - n_out;
      // (not TF_LITE_ENSURE_STATUS: it declares an `s` of its own)
      if (BodyTensor(context, At(body, static_cast<size_t>(index)), index, &s, dims) != kTfLiteOk)
        return kTfLiteError;
      rank = 4;
    }
    if (rank == 2 && s.kind == Kind::kNodeOutput && dims[0] == 1) {
      dims[3] = dims[1];  // a MEAN's 1 x C (keep_dims false): one row of C values
      dims[1] = dims[2] = 1;
      rank = 4;
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

namespace {

// Whether `slot` is the number of an entry of a [local id, slot] list.
bool Lists(const flexbuffers::Reference& list, int32_t slot) {
  for (size_t j = 0; j < VectorSize(list); ++j) {
    int32_t other = 0;
    if (IntIn(At(At(list, j), 1), 0, contract::kMaxSlot, &other) && other == slot) return true;
  }
  return false;
}

// Entry i of slot_regions is [slot, region] for a slot the chain spills or fetches and no earlier
// entry names (as customops._stream_chain checks it).
bool SlotRegionOk(const flexbuffers::Map& m, const flexbuffers::Reference& v, size_t i) {
  const flexbuffers::Reference pair = At(v, i);
  int32_t slot = 0, region = 0;
  if (!IsVector(pair) || VectorSize(pair) != 2 ||
      !IntIn(At(pair, 0), contract::kMinSlot, contract::kMaxSlot, &slot) ||
      !IntIn(At(pair, 1), contract::kMinRegion, contract::kMaxRegion, &region)) {
    return false;
  }
  for (size_t j = 0; j < i; ++j) {
    int32_t other = 0;
    if (IntIn(At(At(v, j), 0), 0, contract::kMaxSlot, &other) && other == slot) return false;
  }
  return Lists(m[contract::kKeySpill], slot) || Lists(m[contract::kKeyFetch], slot);
}

// slot_regions (optional): a vector of valid entries.
TfLiteStatus CheckSlotRegions(const flexbuffers::Map& m) {
  const flexbuffers::Reference v = m[contract::kKeySlotRegions];
  if (v.IsNull()) return kTfLiteOk;
  if (!IsVector(v)) {
    MicroPrintf("StreamChain: option 'slot_regions' is not a vector of [slot, region] pairs");
    return kTfLiteError;
  }
  for (size_t i = 0; i < VectorSize(v); ++i) {
    if (!SlotRegionOk(m, v, i)) {
      MicroPrintf(
          "StreamChain: slot_regions[%d] must be [slot, region 0..%d] for a distinct slot the "
          "chain spills or fetches",
          static_cast<int>(i), static_cast<int>(contract::kMaxRegion));
      return kTfLiteError;
    }
  }
  return kTfLiteOk;
}

// The storage region of `slot` (slot_regions, checked; absent: 0).
int8_t SlotRegion(const flexbuffers::Map& m, int32_t slot) {
  const flexbuffers::Reference v = m[contract::kKeySlotRegions];
  for (size_t i = 0; i < VectorSize(v); ++i) {
    const flexbuffers::Reference pair = At(v, i);
    if (At(pair, 0).AsInt64() == slot) return static_cast<int8_t>(At(pair, 1).AsInt64());
  }
  return 0;
}

// The storage region of a spilled or fetched slot, refused when the attached Runtime has none.
TfLiteStatus PlaceSlot(TfLiteContext* context, const flexbuffers::Map& m, int32_t slot,
                       int8_t* region) {
  *region = SlotRegion(m, slot);
  return tinyseg_ops::CheckRegion(context, *region, static_cast<uint32_t>(slot), kOp);
}

}  // namespace

// Rings, spills and fetches: (local id, number) pairs; a spilled or fetched slot's storage region.
TfLiteStatus PreparePairs(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                          const Tables& tab, const flexbuffers::Map& m) {
  const char* keys[3] = {contract::kKeyRings, contract::kKeySpill, contract::kKeyFetch};
  int32_t ring_offset = 0;
  int32_t streams = 0;
  TF_LITE_ENSURE_STATUS(CheckSlotRegions(m));
  for (int k = 0; k < 3; ++k) {
    const flexbuffers::Reference v = m[keys[k]];
    for (size_t i = 0; i < VectorSize(v); ++i) {
      const flexbuffers::Reference pair = At(v, i);
      int32_t id = 0, value = 0;
      if (!IsVector(pair) || VectorSize(pair) != 2 || !RecordIn(node, d, At(pair, 0), &id) ||
          !IntIn(At(pair, 1), 0, contract::kMaxSlot, &value)) {
        MicroPrintf("StreamChain: %s[%d] must be [local id, number]", keys[k], static_cast<int>(i));
        return kTfLiteError;
      }
      TF_LITE_ENSURE_MSG(context,
                         tab.tensor(id).kind == Kind::kBody && tab.tensor(id).row_bytes > 0,
                         "StreamChain: rings, spills and fetches name body tensors");
      TensorSlot& s = *tab.slot(id);  // a body tensor: never a plain constant
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
        s.stream = static_cast<int16_t>(streams);  // < spilled <= kMaxSpilled
        tab.order[SpillOrder(d) + streams] = id;
        ++streams;
        if (PlaceSlot(context, m, value, &s.spill_region) != kTfLiteOk) return kTfLiteError;
      } else {
        TF_LITE_ENSURE_MSG(context, s.fetch_slot < 0 && s.ring_rows > 0,
                           "StreamChain: a fetched tensor is fetched once and has a ring");
        s.fetch_slot = value;
        if (PlaceSlot(context, m, value, &s.fetch_region) != kTfLiteOk) return kTfLiteError;
      }
    }
  }
  TF_LITE_ENSURE_MSG(context, ring_offset == d.ring_bytes,
                     "StreamChain: ring_bytes is not the sum of the rings");
  return PrepareRowStreams(context, node, d, tab, m);
}

namespace {

// An entry of "source" or "sink": [local id of a body tensor with a ring, index
// 0..kMaxRowStreams-1] for a tensor neither fetched nor spilled nor already sourced or sunk, and an
// index no earlier entry of the list names.
bool RowStreamOk(const TfLiteNode* node, const StreamOpData& d, const Tables& tab,
                 const flexbuffers::Reference& v, size_t i, int32_t* id, int32_t* index) {
  const flexbuffers::Reference pair = At(v, i);
  if (!IsVector(pair) || VectorSize(pair) != 2 || !RecordIn(node, d, At(pair, 0), id) ||
      !IntIn(At(pair, 1), 0, contract::kMaxRowStreams - 1, index)) {
    return false;
  }
  const TensorSlot& s = tab.tensor(*id);
  if (s.kind != Kind::kBody || s.row_bytes <= 0 || s.ring_rows <= 0 || s.fetch_slot >= 0 ||
      s.stream >= 0 || s.source >= 0 || s.sink >= 0) {
    return false;
  }
  for (size_t j = 0; j < i; ++j) {
    int32_t other = 0;
    if (IntIn(At(At(v, j), 1), 0, contract::kMaxRowStreams - 1, &other) && other == *index) {
      return false;
    }
  }
  return true;
}

// The attached Runtime's source (or sink) `index` is set; refused with the reason otherwise.
TfLiteStatus CheckRowCallback(TfLiteContext* context, bool source, int32_t index) {
  const ::tinyseg::Runtime* rt = tinyseg_ops::PeekRuntime(context);
  const char* what = source ? "reads graph input" : "writes graph output";
  if (rt == nullptr) {
    MicroPrintf("StreamChain: the chain %s %d row by row, but no tinyseg::Runtime is attached",
                what, static_cast<int>(index));
    return kTfLiteError;
  }
  if (source ? rt->sources[index].read == nullptr : rt->sinks[index].write == nullptr) {
    MicroPrintf("StreamChain: the chain %s %d row by row, but the Runtime's %s[%d] is null", what,
                static_cast<int>(index), source ? "sources" : "sinks", static_cast<int>(index));
    return kTfLiteError;
  }
  return kTfLiteOk;
}

}  // namespace

// "source" and "sink" (after PreparePairs: they need the rings and exclude spills and fetches),
// and each entry's Runtime callback present.
TfLiteStatus PrepareRowStreams(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                               const Tables& tab, const flexbuffers::Map& m) {
  const char* keys[2] = {contract::kKeySource, contract::kKeySink};
  int32_t sinks = 0;
  for (int k = 0; k < 2; ++k) {
    const flexbuffers::Reference v = m[keys[k]];
    for (size_t i = 0; i < VectorSize(v); ++i) {
      int32_t id = 0, index = 0;
      if (!RowStreamOk(node, d, tab, v, i, &id, &index)) {
        MicroPrintf(
            "StreamChain: %s[%d] must be [local id, index 0..%d]: a body tensor with a ring, not "
            "fetched, spilled, sourced or sunk, and an index the list names once",
            keys[k], static_cast<int>(i), static_cast<int>(contract::kMaxRowStreams - 1));
        return kTfLiteError;
      }
      TF_LITE_ENSURE_STATUS(CheckRowCallback(context, k == 0, index));
      TensorSlot& s = *tab.slot(id);  // RowStreamOk: a body tensor
      if (k == 0) {
        s.source = static_cast<int8_t>(index);
      } else {
        s.sink = static_cast<int8_t>(index);
        tab.order[d.num_order - d.num_sink + sinks++] = id;
      }
    }
  }
  return kTfLiteOk;
}

// The spill slot of each stream, in stream order (for Eval).
uint32_t SpillSlot(const flexbuffers::Map& m, int32_t stream) {
  const flexbuffers::Reference pair = At(m[contract::kKeySpill], static_cast<size_t>(stream));
  return static_cast<uint32_t>(At(pair, 1).AsInt64());
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

namespace {

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
    // rank 2: a MEAN's 1 x C output (keep_dims false), read as PrepareTensors reads it
    *channels = t->dims->size == 4 || t->dims->size == 2 ? t->dims->data[t->dims->size - 1] : 0;
    mc->DeallocateTempTfLiteTensor(t);
  } else if (out >= n_in + n_out && out < num_tensors) {
    const flexbuffers::Reference e = At(body, static_cast<size_t>(out - n_in - n_out));
    const flexbuffers::Reference shape =
        e.IsMap() ? e.AsMap()[contract::kKeyShape] : flexbuffers::Reference();
    const flexbuffers::Reference last =
        VectorSize(shape) == 4 ? At(shape, 3) : flexbuffers::Reference();
    *channels = last.IsIntOrUint() ? last.AsInt64() : 0;
  }
  TF_LITE_ENSURE_MSG(
      context, *channels >= 1 && *channels <= contract::kMaxDim,
      "StreamChain: a convolution or MEAN stage's output channels are outside 1..kMaxDim");
  return kTfLiteOk;
}

// The operand of a MUL stage read whole (ReadWhole, from the node's tensors before the tables are
// filled), -1: none. Other stages, and operands that are no node input, read rows.
int32_t WholeInput(MicroContext* mc, TfLiteNode* node, StageOp op,
                   const flexbuffers::Reference& ins, int n_in) {
  if (op != StageOp::kMul || !IsVector(ins) || VectorSize(ins) != 2) return -1;
  bool candidate[2] = {false, false};
  bool constant[2] = {true, true};
  for (size_t k = 0; k < 2; ++k) {
    const int64_t id = At(ins, k).AsInt64();
    constant[k] = id < 0;
    if (id < 0 || id >= n_in) continue;
    TfLiteTensor* t = mc->AllocateTempInputTensor(node, static_cast<int>(id));
    if (t == nullptr) continue;
    candidate[k] = WholeCandidate(op, *t);
    constant[k] = IsConstantTensor(t);
    mc->DeallocateTempTfLiteTensor(t);
  }
  return WholeIndex(candidate, constant);
}

}  // namespace

namespace {

// The sources and sinks (at most kMaxRowStreams each), the tokens (optional: distinct node inputs
// and outputs, the node's last inputs and last outputs, which get no record) and what the
// schedule pulls: the node outputs but the tokens, spilled, sunk.
TfLiteStatus CountRowStreams(const flexbuffers::Map& m, int n_in, int n_out, StreamOpData* d) {
  d->num_sink = static_cast<int32_t>(VectorSize(m[contract::kKeySink]));
  d->num_source = static_cast<int32_t>(VectorSize(m[contract::kKeySource]));
  if (d->num_sink > contract::kMaxRowStreams || d->num_source > contract::kMaxRowStreams) {
    MicroPrintf("StreamChain: more than %d sources or sinks", contract::kMaxRowStreams);
    return kTfLiteError;
  }
  const flexbuffers::Reference v = m[contract::kKeyTokens];
  const size_t n = VectorSize(v);
  bool ok = v.IsNull() || (IsVector(v) && n <= static_cast<size_t>(n_in + n_out));
  int32_t outputs = 0;
  for (size_t i = 0; ok && i < n; ++i) {
    int32_t id = 0;
    ok = IntIn(At(v, i), 0, n_in + n_out - 1, &id);
    for (size_t j = 0; ok && j < i; ++j) ok = At(v, j).AsInt64() != id;
    if (ok && id >= n_in) ++outputs;
  }
  const int32_t inputs = static_cast<int32_t>(n) - outputs;
  // Distinct, and each among the last `inputs` inputs or the last `outputs` outputs: exactly those.
  for (size_t i = 0; ok && i < n; ++i) {
    const int64_t id = At(v, i).AsInt64();
    ok = id < n_in ? id >= n_in - inputs : id >= n_in + n_out - outputs;
  }
  if (!ok) {
    MicroPrintf(
        "StreamChain: option 'tokens' must list distinct node inputs and outputs, the node's last");
    return kTfLiteError;
  }
  d->in_tokens = static_cast<int16_t>(inputs);  // n <= n_in + n_out: TFLM's node sizes are int
  d->out_tokens = static_cast<int16_t>(outputs);
  d->num_order = n_out - outputs + d->spilled + d->num_sink;
  return kTfLiteOk;
}

}  // namespace

// Counts what the persistent block holds (as customops.stream_chain_body_bytes).
TfLiteStatus Count(TfLiteContext* context, TfLiteNode* node, StreamOpData* d,
                   const flexbuffers::Map& m) {
  MicroContext* mc = GetMicroContext(context);
  const int n_in = NumInputs(node);
  const int n_out = NumOutputs(node);
  const flexbuffers::Reference stages = m[contract::kKeyStages];
  const flexbuffers::Reference body = m[contract::kKeyTensors];
  const int32_t num_local = n_in + n_out + static_cast<int32_t>(VectorSize(body));
  d->num_stages = static_cast<int32_t>(VectorSize(stages));
  TF_LITE_ENSURE_MSG(context,
                     static_cast<int32_t>(VectorSize(m[contract::kKeySpill])) == d->spilled &&
                         static_cast<int32_t>(VectorSize(m[contract::kKeyFetch])) == d->fetched,
                     "StreamChain: spilled/fetched disagree with the spill/fetch lists");
  TF_LITE_ENSURE_STATUS(CountRowStreams(m, n_in, n_out, d));
  d->num_tensors = num_local - d->in_tokens - d->out_tokens;  // tokens have no record
  d->num_slots = CountSlots(mc, node, *d, stages);
  d->num_edges = d->num_operands = d->per_channel = d->accumulator_bytes = 0;
  int64_t per_channel = 0;  // summed in 64 bits: a body may declare 2^31-1 channels
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
    const int32_t whole = WholeInput(mc, node, op, ins, n_in);
    for (size_t k = 0; k < VectorSize(ins); ++k) {
      const int32_t id = static_cast<int32_t>(At(ins, k).AsInt64());
      if (id < 0 || !contract::IsActivationInput(op, static_cast<int>(k))) continue;
      if (static_cast<int32_t>(k) == whole) continue;  // a MUL's gate read whole (ReadWhole)
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
      if (StageChannels(context, node, num_local, body, At(outs, 0), &channels) != kTfLiteOk) {
        return kTfLiteError;
      }
      if (st[contract::kKeyQuant].IsNull()) per_channel += 2 * channels;  // else in the model
    }
    if (contract::AccumulatingStage(op)) {  // its sums: the last bytes of op_scratch
      int64_t channels = 0;
      TF_LITE_ENSURE_MSG(context, d->accumulator_bytes == 0,
                         "StreamChain: a chain has at most one accumulating stage (MEAN)");
      TF_LITE_ENSURE_STATUS(StageChannels(context, node, num_local, body, At(outs, 0), &channels));
      d->accumulator_bytes = static_cast<int32_t>(channels * contract::kStreamAccumulatorBytes);
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

// ------------------------------------------------------------ stages

TfLiteStatus RequireRows(const StageArgs& a, const TensorSlot& out, TfLiteType type) {
  const TfLiteType want = type == kTfLiteInt16 || type == kTfLiteFloat32 ? type : kTfLiteInt8;
  bool same = out.type == want;
  for (int32_t e = a.first_edge; e < a.end_edge; ++e) {
    same = same && a.tab->tensor(a.tab->edges[e].tensor).type == want;
  }
  if (!same) {
    MicroPrintf("StreamChain: this stage reads and writes %s rows only", TfLiteTypeGetName(want));
    return kTfLiteError;
  }
  return kTfLiteOk;
}

TfLiteStatus RequireSameShape(TfLiteContext* context, const TensorSlot& in, const TensorSlot& out) {
  TF_LITE_ENSURE(context,
                 in.height == out.height && in.width == out.width && in.channels == out.channels);
  return kTfLiteOk;
}

TfLiteStatus RequireSameShapeRows(const StageArgs& a, const StageSlot& g, TfLiteType type) {
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireRows(a, out, type));
  return RequireSameShape(a.context, a.tab->tensor(g.input), out);
}

// The local id of the stage's n-th constant operand (the inputs that are not activations: filter,
// bias, paddings, ...); with `last`, of the last one numbered n or more. -1 when there is none.
int32_t ConstantOperand(const Tables& tab, const StageSlot& g, int32_t n, bool last) {
  int32_t id = -1;
  int32_t constant = 0;
  for (int32_t k = 0; k < g.operand_count; ++k) {
    if (contract::IsActivationInput(g.op, k)) continue;
    if (constant == n || (last && constant > n)) id = tab.operands[g.operand_begin + k];
    ++constant;
  }
  return id;
}

namespace {

// The stage's operands into the pool, and one schedule edge per distinct activation input that is
// not a constant; g.input is the first of them.
TfLiteStatus StageOperands(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                           const Tables& tab, int32_t index, const flexbuffers::Reference& ins,
                           StageSlot& g, int32_t* operand_next, int32_t* edge_next) {
  const int32_t first_edge = *edge_next;
  // Every operand first: ReadWhole looks at both of a MUL's.
  for (int32_t k = 0; k < g.operand_count; ++k) {
    const flexbuffers::Reference r = At(ins, static_cast<size_t>(k));
    int32_t id = -1;
    TF_LITE_ENSURE_MSG(context, (r.IsIntOrUint() && r.AsInt64() == -1) || RecordIn(node, d, r, &id),
                       "StreamChain: a stage's input is not a local tensor (or -1), or is a token "
                       "(a tensor that carries no data)");
    tab.operands[(*operand_next)++] = id;
  }
  for (int32_t k = 0; k < g.operand_count; ++k) {
    const int32_t id = tab.operands[g.operand_begin + k];
    if (!contract::IsActivationInput(g.op, k)) continue;
    TF_LITE_ENSURE(context, id >= 0);
    if (tab.tensor(id).constant || ReadWhole(tab, g, k))
      continue;  // ADD/SUB/MUL: a constant (or MUL: a one-pixel input) broadcast over the rows
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
  return kTfLiteOk;
}

// The fields every stage may carry, each range-checked before it becomes an enum.
TfLiteStatus CommonFields(TfLiteContext* context, const flexbuffers::Map& fields, StageFields* f) {
  int32_t padding_field = 0, activation_field = 0;
  TF_LITE_ENSURE_MSG(
      context,
      Field(fields, contract::kFieldStrideH, 1, &f->stride_h) &&
          Field(fields, contract::kFieldStrideW, 1, &f->stride_w) &&
          Field(fields, contract::kFieldDilationHFactor, 1, &f->dilation_h) &&
          Field(fields, contract::kFieldDilationWFactor, 1, &f->dilation_w) &&
          Field(fields, contract::kFieldPadding, 0, &padding_field) &&
          Field(fields, contract::kFieldFusedActivationFunction, 0, &activation_field),
      "StreamChain: a stage field is out of range (see the message above)");
  f->padding = padding_field == 1 ? kTfLitePaddingValid : kTfLitePaddingSame;
  f->activation = static_cast<TfLiteFusedActivation>(activation_field);  // 0..3: NONE..RELU6
  return kTfLiteOk;
}

}  // namespace

// What every stage has: its operator, operands, schedule edges, output and common fields; `a` is
// then what its family's Prepare reads.
TfLiteStatus PrepareStageCommon(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                                const Tables& tab, int32_t index, const flexbuffers::Map& st,
                                int32_t* operand_next, int32_t* edge_next, StageArgs* a) {
  StageSlot& g = *new (&tab.stage(index)) StageSlot();
  a->stage = &st;
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
  TF_LITE_ENSURE_MSG(context, RecordIn(node, d, At(outs, 0), &g.output),
                     "StreamChain: a stage's output is not a local tensor, or is a token");
  g.operand_begin = *operand_next;
  g.operand_count = static_cast<int32_t>(VectorSize(ins));
  g.input = -1;
  g.rule = RowRule{1, 1, 0, 0, 0};
  g.resamples = 0;
  a->first_edge = *edge_next;
  TF_LITE_ENSURE_STATUS(
      StageOperands(context, node, d, tab, index, ins, g, operand_next, edge_next));
  a->end_edge = *edge_next;
  TF_LITE_ENSURE(context, g.input >= 0);
  const TensorSlot& out = tab.tensor(g.output);
  TF_LITE_ENSURE_MSG(context, out.row_bytes > 0 && out.kind != Kind::kNodeInput,
                     "StreamChain: a stage writes a node input or a tensor without rows");
  a->context = context;
  a->node = node;
  a->d = &d;
  a->tab = &tab;
  a->index = index;
  return CommonFields(context, *a->fields, &a->f);
}

// ------------------------------------------------------------ the schedule

namespace {

// Every tensor's rows, producer and ring; each stage's output.
TfLiteStatus ScheduleTensors(TfLiteContext* context, const StreamOpData& d, const Tables& tab) {
  for (int32_t i = 0; i < d.num_tensors; ++i) {
    const TensorSlot& s = tab.tensor(i);
    ::tinyseg::ChainTensor& c = tab.schedule[i];
    c.height = s.height;
    c.producer = -1;
    c.streamed = s.fetch_slot >= 0 || s.source >= 0;
    c.ring_rows = s.ring_rows;
  }
  for (int32_t s = 0; s < d.num_stages; ++s) {
    const StageSlot& g = tab.stage(s);
    ::tinyseg::ChainTensor& c = tab.schedule[g.output];
    TF_LITE_ENSURE_MSG(
        context,
        c.producer < 0 && tab.tensor(g.output).fetch_slot < 0 && tab.tensor(g.output).source < 0,
        "StreamChain: two stages write one tensor, or a stage writes a fetched or sourced tensor");
    TF_LITE_ENSURE_MSG(context, !contract::AccumulatingStage(g.op) || tab.tensor(g.output).sink < 0,
                       "StreamChain: an accumulating stage's (MEAN's) output is not sunk");
    c.producer = s;
    c.streamed = true;
    // An accumulating stage steps once per input row (its one pixel is written at the last).
    if (contract::AccumulatingStage(g.op)) c.height = tab.tensor(g.input).height;
    tab.chain_stages[s].output = g.output;
    TF_LITE_ENSURE_MSG(context, tab.tensor(g.output).kind == Kind::kNodeOutput || c.ring_rows > 0,
                       "StreamChain: a body tensor a stage writes needs a ring");
  }
  return kTfLiteOk;
}

// Each edge's window: its stage's row rule over the edge's heights.
TfLiteStatus ScheduleEdges(TfLiteContext* context, const StreamOpData& d, const Tables& tab) {
  for (int32_t e = 0; e < d.num_edges; ++e) {
    ::tinyseg::ChainEdge& edge = tab.edges[e];
    const StageSlot& g = tab.stage(edge.stage);
    ::tinyseg::RowMap& map = edge.map;
    map = ::tinyseg::RowMap();
    map.in_h = tab.tensor(edge.tensor).height;
    map.num = g.rule.num;
    map.den = g.rule.den;
    map.offset = g.rule.offset;
    map.before = g.rule.before;
    map.after = g.rule.after;
    // The output's height is an accumulating stage's steps (ScheduleTensors).
    TF_LITE_ENSURE_MSG(context, g.resamples != 0 || map.in_h == tab.schedule[g.output].height,
                       "StreamChain: an elementwise stage's inputs have the output's height");
    // Stages run in the order written (the lowering and the Python schedule do): a tensor a stage
    // reads is fetched, or made by an earlier stage.
    if (tab.tensor(edge.tensor).kind != Kind::kNodeInput) {
      const ::tinyseg::ChainTensor& c = tab.schedule[edge.tensor];
      TF_LITE_ENSURE_MSG(
          context,
          tab.tensor(edge.tensor).fetch_slot >= 0 || tab.tensor(edge.tensor).source >= 0 ||
              (c.producer >= 0 && c.producer < edge.stage),
          "StreamChain: a stage reads a tensor no earlier stage, fetch or source makes");
    }
  }
  return kTfLiteOk;
}

}  // namespace

// The schedule from the prepared stages, checked and dry-run: a ring shorter than the rows its
// readers hold at once, or a cycle, is refused here rather than in the middle of an inference.
TfLiteStatus PrepareSchedule(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                             const Tables& tab) {
  TF_LITE_ENSURE_STATUS(ScheduleTensors(context, d, tab));
  TF_LITE_ENSURE_STATUS(ScheduleEdges(context, d, tab));
  int32_t pulled = 0;  // the node outputs but the tokens (the records after the inputs')
  const int32_t inputs = NumInputs(node) - d.in_tokens;
  for (int32_t k = 0; k < NumOutputs(node) - d.out_tokens; ++k) tab.order[pulled++] = inputs + k;
  TF_LITE_ENSURE(context, pulled == SpillOrder(d));
  for (int32_t k = 0; k < d.num_order; ++k) {
    TF_LITE_ENSURE_MSG(context, tab.schedule[tab.order[k]].producer >= 0,
                       "StreamChain: a node output, spilled or sunk tensor is made by no stage");
  }
  ::tinyseg::ChainSchedule check;
  const ::tinyseg::ChainState state{tab.done, tab.held};
  if (!::tinyseg::Ok(check.Init(tab.schedule, d.num_tensors, tab.chain_stages, d.num_stages,
                                tab.edges, d.num_edges, tab.order, d.num_order, state))) {
    MicroPrintf("StreamChain: the body is not a valid schedule");
    return kTfLiteError;
  }
  // A dry run (bookkeeping only, no row is computed).
  if (!::tinyseg::Ok(check.Run([](int32_t, int32_t) { return ::tinyseg::Status::kOk; }))) {
    MicroPrintf("StreamChain: a ring holds fewer rows than its readers' windows need");
    return kTfLiteError;
  }
  return kTfLiteOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
