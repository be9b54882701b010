// Shared pieces of the TinySeg kernels (see tinyseg_common.h).
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"

#include <cstring>

#include "tensorflow/lite/kernels/kernel_util.h"

#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"

namespace tflite {
namespace tinyseg_ops {

bool Options::Open(const char* op, const char* buffer, size_t length) {
  op_ = op;
  const uint8_t* data = reinterpret_cast<const uint8_t*>(buffer);
  if (data == nullptr || length == 0 || !flexbuffers::VerifyBuffer(data, length)) {
    MicroPrintf("%s: custom options are not a FlexBuffers map", op);
    return false;
  }
  const flexbuffers::Reference root = flexbuffers::GetRoot(data, length);
  if (!root.IsMap()) {
    MicroPrintf("%s: custom options are not a FlexBuffers map", op);
    return false;
  }
  map_ = root.AsMap();
  int64_t version = 0;
  if (!Int(contract::kKeyVersion, 0, INT32_MAX, &version)) return false;
  if (version != kContractVersion) {
    MicroPrintf("%s: contract version %d, this runtime speaks %d", op, static_cast<int>(version),
                kContractVersion);
    return false;
  }
  return true;
}

bool Options::Int(const char* key, int64_t lo, int64_t hi, int64_t* out) const {
  const flexbuffers::Reference r = map_[key];
  if (!r.IsIntOrUint()) {
    MicroPrintf("%s: option '%s' missing or not an integer", op_, key);
    return false;
  }
  const int64_t v =
      r.IsUInt() && r.AsUInt64() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : r.AsInt64();
  if (v < lo || v > hi) {
    MicroPrintf("%s: option '%s' out of range", op_, key);
    return false;
  }
  *out = v;
  return true;
}

bool Options::Int(const char* key, int64_t* out) const {
  for (const contract::IntLimit& limit : contract::kIntLimits) {
    if (std::strcmp(limit.key, key) == 0) return Int(key, limit.min, limit.max, out);
  }
  MicroPrintf("%s: option '%s' has no limits in the contract", op_, key);
  return false;
}

bool Options::String(const char* key, const char** out) const {
  const flexbuffers::Reference r = map_[key];
  if (!r.IsString()) {
    MicroPrintf("%s: option '%s' missing or not a string", op_, key);
    return false;
  }
  *out = r.AsString().c_str();
  return true;
}

bool CountFetched(const Options& options, int32_t* count) {
  const flexbuffers::Reference r = options.map()[contract::kKeyFetched];
  if (!r.IsUntypedVector() && !r.IsTypedVector()) {
    MicroPrintf("%s: option 'fetched' missing or not a vector", options.op());
    return false;
  }
  const size_t n = r.IsTypedVector() ? r.AsTypedVector().size() : r.AsVector().size();
  if (r.IsTypedVector() && n != 0) {  // maps never form a typed vector
    MicroPrintf("%s: option 'fetched' is not a vector of maps", options.op());
    return false;
  }
  if (n > static_cast<size_t>(contract::kMaxFetched)) {
    MicroPrintf("%s: too many fetched operands", options.op());
    return false;
  }
  *count = static_cast<int32_t>(n);
  return true;
}

bool ReadFetchingOptions(const Options& options, FetchingOptions* o) {
  return options.Int(contract::kKeyAxis, &o->axis) &&
         options.Int(contract::kKeyOperands, &o->operands) &&
         options.Int(contract::kKeyBlock, &o->block) && CountFetched(options, &o->num_fetched);
}

namespace {

bool IntAt(const flexbuffers::Reference& r, int64_t lo, int64_t hi, int64_t* out) {
  if (!r.IsIntOrUint()) return false;
  if (r.IsUInt() && r.AsUInt64() > static_cast<uint64_t>(hi)) return false;
  const int64_t v = r.AsInt64();
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

bool ReadFetched(const Options& options, int32_t i, FetchedOption* out) {
  const char* op = options.op();
  const flexbuffers::Vector v = options.map()[contract::kKeyFetched].AsVector();
  const flexbuffers::Reference e = v[static_cast<size_t>(i)];
  if (!e.IsMap()) {
    MicroPrintf("%s: fetched[%d] is not a map", op, static_cast<int>(i));
    return false;
  }
  const flexbuffers::Map m = e.AsMap();
  int64_t position = 0;
  int64_t slot = 0;
  if (!IntAt(m[contract::kKeyPosition], contract::kMinPosition, contract::kMaxPosition,
             &position) ||
      !IntAt(m[contract::kKeySlot], contract::kMinSlot, contract::kMaxSlot, &slot)) {
    MicroPrintf("%s: fetched[%d] needs integer 'position' and 'slot'", op, static_cast<int>(i));
    return false;
  }
  const flexbuffers::Reference shape = m[contract::kKeyShape];
  size_t rank = 0;
  if (shape.IsTypedVector()) {
    rank = shape.AsTypedVector().size();
  } else if (shape.IsUntypedVector()) {
    rank = shape.AsVector().size();
  } else {
    MicroPrintf("%s: fetched[%d] has no 'shape' vector", op, static_cast<int>(i));
    return false;
  }
  if (rank == 0 || rank > static_cast<size_t>(kMaxDims)) {
    MicroPrintf("%s: fetched[%d] shape has rank %d (1..%d)", op, static_cast<int>(i),
                static_cast<int>(rank), kMaxDims);
    return false;
  }
  size_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    const flexbuffers::Reference dim =
        shape.IsTypedVector() ? shape.AsTypedVector()[d] : shape.AsVector()[d];
    int64_t value = 0;
    if (!IntAt(dim, contract::kMinDim, contract::kMaxDim, &value)) {
      MicroPrintf("%s: fetched[%d] shape has a bad dimension", op, static_cast<int>(i));
      return false;
    }
    out->shape[d] = static_cast<int32_t>(value);
    if (elements > SIZE_MAX / static_cast<size_t>(value)) {
      MicroPrintf("%s: fetched[%d] shape is too large", op, static_cast<int>(i));
      return false;
    }
    elements *= static_cast<size_t>(value);
  }
  if (!ReadRegion(m, op, "a fetched entry", &out->region)) return false;
  out->position = static_cast<int32_t>(position);
  out->slot = static_cast<uint32_t>(slot);
  out->rank = static_cast<int32_t>(rank);
  out->elements = elements;
  return true;
}

bool ReadRegion(const flexbuffers::Map& m, const char* op, const char* what, int32_t* out) {
  const flexbuffers::Reference r = m[contract::kKeyRegion];
  int64_t region = 0;
  if (!r.IsNull() && !IntAt(r, contract::kMinRegion, contract::kMaxRegion, &region)) {
    MicroPrintf("%s: %s has a 'region' that is not an integer in %d..%d", op, what,
                static_cast<int>(contract::kMinRegion), static_cast<int>(contract::kMaxRegion));
    return false;
  }
  *out = static_cast<int32_t>(region);
  return true;
}

::tinyseg::Runtime* PeekRuntime(TfLiteContext* context) {
  auto* rt = static_cast<::tinyseg::Runtime*>(GetMicroContext(context)->external_context());
  return rt != nullptr && rt->magic == ::tinyseg::kRuntimeMagic ? rt : nullptr;
}

::tinyseg::Runtime* GetRuntime(TfLiteContext* context, const char* op) {
  void* payload = GetMicroContext(context)->external_context();
  auto* rt = static_cast<::tinyseg::Runtime*>(payload);
  if (rt == nullptr) {
    MicroPrintf("%s: no tinyseg::Runtime attached (call tinyseg::AttachRuntime)", op);
    return nullptr;
  }
  if (rt->magic != ::tinyseg::kRuntimeMagic) {
    MicroPrintf("%s: the interpreter's external context is not a tinyseg::Runtime", op);
    return nullptr;
  }
  return rt;
}

::tinyseg::SpillManager* RegionStorage(const ::tinyseg::Runtime& rt, int32_t region, uint32_t slot,
                                       const char* op) {
  ::tinyseg::SpillManager* storage = rt.storage(region);
  if (storage != nullptr) return storage;
  if (region == 0) {
    MicroPrintf(
        "%s: slot %u is in storage region 0, and the Runtime has no storage there; attach a "
        "SpillManager with Runtime::spill",
        op, static_cast<unsigned>(slot));
  } else {
    MicroPrintf(
        "%s: slot %u is in storage region %d, and the Runtime has no storage there; attach a "
        "SpillManager with Runtime::regions[%d]",
        op, static_cast<unsigned>(slot), static_cast<int>(region), static_cast<int>(region));
  }
  return nullptr;
}

TfLiteStatus CheckRegion(TfLiteContext* context, int32_t region, uint32_t slot, const char* op) {
  const ::tinyseg::Runtime* rt = PeekRuntime(context);
  if (rt == nullptr) return kTfLiteOk;
  return RegionStorage(*rt, region, slot, op) != nullptr ? kTfLiteOk : kTfLiteError;
}

TfLiteStatus CheckTokens(TfLiteContext* context, TfLiteNode* node, bool inputs, int first,
                         int count, const char* op) {
  MicroContext* mc = GetMicroContext(context);
  for (int i = first; i < first + count; ++i) {
    TfLiteTensor* t =
        inputs ? mc->AllocateTempInputTensor(node, i) : mc->AllocateTempOutputTensor(node, i);
    const bool empty = t != nullptr && NumElements(t) == 0;
    if (t != nullptr) mc->DeallocateTempTfLiteTensor(t);
    if (!empty) {
      MicroPrintf("%s: %s %d is a token and must have zero elements", op,
                  inputs ? "input" : "output", i);
      return kTfLiteError;
    }
  }
  return kTfLiteOk;
}

const char* StorageFaultHint(::tinyseg::Status s) {
  switch (s) {
    case ::tinyseg::Status::kChecksumMismatch:
      return " (the stored bytes fail their CRC-32 check: flash bit error or torn write;"
             " this inference is lost, the next one spills afresh)";
    case ::tinyseg::Status::kIoError:
      return " (the storage device failed; the next inference retries)";
    default:
      return "";
  }
}

TfLiteStatus CheckSlot(::tinyseg::Runtime& rt, int32_t region, uint32_t slot, size_t raw_bytes,
                       const char* op) {
  ::tinyseg::SpillManager* storage = RegionStorage(rt, region, slot, op);
  if (storage == nullptr) return kTfLiteError;
  const ::tinyseg::SpillSlot* s = storage->slot(slot);
  if (s == nullptr) {
    MicroPrintf("%s: slot %u is beyond the SpillManager's slot table", op,
                static_cast<unsigned>(slot));
    return kTfLiteError;
  }
  if (!s->live) {
    MicroPrintf("%s: slot %u holds no spilled tensor", op, static_cast<unsigned>(slot));
    return kTfLiteError;
  }
  if (s->raw_bytes != raw_bytes) {
    MicroPrintf("%s: slot %u holds %u bytes, the operand needs %u", op, static_cast<unsigned>(slot),
                static_cast<unsigned>(s->raw_bytes), static_cast<unsigned>(raw_bytes));
    return kTfLiteError;
  }
  return kTfLiteOk;
}

namespace {

TfLiteStatus Fetch(::tinyseg::Runtime& rt, int32_t region, uint32_t slot, size_t offset,
                   size_t length, uint8_t* dst, const char* op) {
  if (length == 0) return kTfLiteOk;
  ::tinyseg::SpillManager* storage = RegionStorage(rt, region, slot, op);
  if (storage == nullptr) return kTfLiteError;
  const ::tinyseg::Status s = storage->FetchRange(slot, offset, length, dst);
  if (!::tinyseg::Ok(s)) {
    MicroPrintf("%s: fetching %u bytes of slot %u failed: %s%s", op, static_cast<unsigned>(length),
                static_cast<unsigned>(slot), ::tinyseg::StatusName(s), StorageFaultHint(s));
    return kTfLiteError;
  }
  ++rt.stats.fetches;
  rt.stats.fetched_bytes += length;
  return kTfLiteOk;
}

}  // namespace

TfLiteStatus FetchStrided(::tinyseg::Runtime& rt, int32_t region, uint32_t slot, size_t src_offset,
                          size_t runs, size_t run_bytes, uint8_t* dst, size_t dst_stride,
                          uint8_t* staging, size_t staging_bytes, const char* op) {
  if (runs == 0 || run_bytes == 0) return kTfLiteOk;
  if (dst_stride == run_bytes) {  // contiguous: one range, straight into dst
    return Fetch(rt, region, slot, src_offset, runs * run_bytes, dst, op);
  }
  if (run_bytes >= staging_bytes || staging == nullptr) {
    for (size_t i = 0; i < runs; ++i) {
      TF_LITE_ENSURE_STATUS(
          Fetch(rt, region, slot, src_offset + i * run_bytes, run_bytes, dst + i * dst_stride, op));
    }
    return kTfLiteOk;
  }
  const size_t per_chunk = staging_bytes / run_bytes;
  for (size_t first = 0; first < runs; first += per_chunk) {
    const size_t n = runs - first < per_chunk ? runs - first : per_chunk;
    TF_LITE_ENSURE_STATUS(
        Fetch(rt, region, slot, src_offset + first * run_bytes, n * run_bytes, staging, op));
    rt.stats.staged_bytes += n * run_bytes;
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(dst + (first + i) * dst_stride, staging + i * run_bytes, run_bytes);
    }
  }
  return kTfLiteOk;
}

size_t ElementBytes(TfLiteType type) { return contract::ElementBytes(type); }

bool SameQuantization(const TfLiteTensor& a, const TfLiteTensor& b) {
  return a.params.scale == b.params.scale && a.params.zero_point == b.params.zero_point;
}

}  // namespace tinyseg_ops
}  // namespace tflite
