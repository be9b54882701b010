// Fetching: CONCATENATION whose operands may come from spill storage
// (docs/custom_ops.md).
//
// inputs [in-RAM operands..., tokens...], outputs [out] (tokens: tensors of zero elements standing
// for the edges from the fetched slots' writers; never read); options {version, axis,
// operands, fetched: [{position, slot, shape, region (optional, 0)}], block}. Operand k is the
// fetched tensor whose position is k, otherwise the next in-RAM input.
//
// For a concatenation along `axis` every operand contributes, for each of the
// `outer` = prod(dims[:axis]) indices, one contiguous run of
// dim_k * prod(dims[axis+1:]) elements to the output, at a fixed offset in an
// output run of dims[axis] * prod(dims[axis+1:]) elements. In-RAM operands are
// copied run by run; a fetched operand is decoded straight into its runs of
// the output (one range when they are contiguous, run by run when a run is at
// least a staging buffer long) or, for short runs, a staging buffer of runs at
// a time and scattered from there -- never through a full-size copy.
//
// Prepare requests one scratch buffer of block + 8 bytes; OpData is
// 32 + (16 + 2 * pointer) bytes per fetched operand.
#include <cstring>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"

namespace tflite {
namespace {

using tinyseg_ops::FetchedConcatOperand;
using tinyseg_ops::FetchingHeader;
namespace contract = tinyseg_ops::contract;

constexpr const char* kOp = contract::kFetching;

void* FetchingInit(TfLiteContext* context, const char* buffer, size_t length) {
  tinyseg_ops::Options options;
  tinyseg_ops::FetchingOptions o;
  if (!options.Open(kOp, buffer, length) || !tinyseg_ops::ReadFetchingOptions(options, &o)) {
    return nullptr;
  }
  if (o.num_fetched > o.operands) {
    MicroPrintf("Fetching: %d fetched operands but only %d operands",
                static_cast<int>(o.num_fetched), static_cast<int>(o.operands));
    return nullptr;
  }
  const size_t bytes = tinyseg_ops::kFetchingHeaderBytes +
                       static_cast<size_t>(o.num_fetched) * sizeof(FetchedConcatOperand);
  auto* h = static_cast<FetchingHeader*>(context->AllocatePersistentBuffer(context, bytes));
  if (h == nullptr) return nullptr;
  h->axis = static_cast<int32_t>(o.axis);
  h->operands = static_cast<int32_t>(o.operands);
  h->num_fetched = o.num_fetched;
  h->block = static_cast<int32_t>(o.block);
  h->staging_index = -1;
  h->elem_size = 0;
  h->reserved[0] = h->reserved[1] = 0;
  const bool read = tinyseg_ops::ReadFetchedOperands(
      options, o.num_fetched, tinyseg_ops::ConcatOperands(h),
      [&o](int32_t i, const tinyseg_ops::FetchedOption& e, FetchedConcatOperand* f) {
        if (e.position >= o.operands || e.rank <= o.axis) {
          MicroPrintf("Fetching: fetched[%d] has position %d / rank %d for %d operands, axis %d",
                      static_cast<int>(i), static_cast<int>(e.position), static_cast<int>(e.rank),
                      static_cast<int>(o.operands), static_cast<int>(o.axis));
          return false;
        }
        f->position = e.position;
        f->slot = e.slot;
        f->axis_dim = e.shape[o.axis];
        f->region = e.region;
        f->elements = e.elements;
        f->run_bytes = 0;
        return true;
      });
  return read ? h : nullptr;
}

// One output; the inputs: the in-RAM operands, then tokens (zero elements, never read).
TfLiteStatus CheckWiring(TfLiteContext* context, TfLiteNode* node, const FetchingHeader* h) {
  TF_LITE_ENSURE_EQ(context, NumOutputs(node), 1);
  const int n_ram = h->operands - h->num_fetched;
  TF_LITE_ENSURE_MSG(context, NumInputs(node) >= n_ram,
                     "Fetching: fewer inputs than in-RAM operands");
  return tinyseg_ops::CheckTokens(context, node, true, n_ram, NumInputs(node) - n_ram, kOp);
}

TfLiteStatus FetchingPrepare(TfLiteContext* context, TfLiteNode* node) {
  TF_LITE_ENSURE_MSG(context, node->user_data != nullptr,
                     "Fetching: bad custom options (see the message above)");
  auto* h = static_cast<FetchingHeader*>(node->user_data);
  TF_LITE_ENSURE_STATUS(CheckWiring(context, node, h));
  MicroContext* micro_context = GetMicroContext(context);
  TfLiteTensor* out = micro_context->AllocateTempOutputTensor(node, 0);
  TF_LITE_ENSURE(context, out != nullptr);
  const int rank = out->dims->size;
  const int axis = h->axis;
  const size_t elem = tinyseg_ops::ElementBytes(out->type);
  TfLiteStatus status = kTfLiteOk;
  if (elem == 0 || axis >= rank || rank > tinyseg_ops::kMaxDims) {
    MicroPrintf("Fetching: output of type %s, rank %d cannot take axis %d",
                TfLiteTypeGetName(out->type), rank, axis);
    status = kTfLiteError;
  }
  size_t outer = 1;
  size_t inner = 1;
  for (int d = 0; status == kTfLiteOk && d < rank; ++d) {
    if (d < axis) outer *= static_cast<size_t>(out->dims->data[d]);
    if (d > axis) inner *= static_cast<size_t>(out->dims->data[d]);
  }
  const bool quantized = out->type != kTfLiteFloat32 && out->type != kTfLiteInt32;
  int64_t axis_total = 0;  // 64 bits: up to kMaxOperands extents of up to 2^31-1 each
  FetchedConcatOperand* fetched = tinyseg_ops::ConcatOperands(h);
  tinyseg_ops::OperandWalk<FetchedConcatOperand> walk(fetched, h->num_fetched);
  for (int32_t k = 0; status == kTfLiteOk && k < h->operands; ++k) {
    int input = -1;
    const FetchedConcatOperand* f = walk.Next(k, &input);
    if (f != nullptr) {
      // In 64 bits: on a 32-bit target a product that wraps could match `elements` by accident.
      const uint64_t want = static_cast<uint64_t>(outer) * static_cast<uint64_t>(f->axis_dim) *
                            static_cast<uint64_t>(inner);
      if (static_cast<uint64_t>(f->elements) != want) {
        MicroPrintf("Fetching: fetched operand %d has %u elements, the output needs %u",
                    static_cast<int>(k), static_cast<unsigned>(f->elements),
                    static_cast<unsigned>(want));
        status = kTfLiteError;
      }
      axis_total += f->axis_dim;
      continue;
    }
    TfLiteTensor* in = micro_context->AllocateTempInputTensor(node, input);
    if (in == nullptr) {
      status = kTfLiteError;
      break;
    }
    bool ok = in->type == out->type && in->dims->size == rank &&
              (!quantized || tinyseg_ops::SameQuantization(*in, *out));
    for (int d = 0; ok && d < rank; ++d) {
      if (d != axis && in->dims->data[d] != out->dims->data[d]) ok = false;
    }
    if (ok) axis_total += in->dims->data[axis];
    micro_context->DeallocateTempTfLiteTensor(in);
    if (!ok) {
      MicroPrintf(
          "Fetching: in-RAM operand %d differs from the output in type, "
          "shape or quantization",
          static_cast<int>(k));
      status = kTfLiteError;
    }
  }
  if (status == kTfLiteOk && axis_total != out->dims->data[axis]) {
    MicroPrintf("Fetching: operands add up to %d along axis %d, the output has %d",
                static_cast<int>(axis_total), axis, out->dims->data[axis]);
    status = kTfLiteError;
  }
  micro_context->DeallocateTempTfLiteTensor(out);
  TF_LITE_ENSURE_STATUS(status);
  for (int32_t i = 0; i < h->num_fetched; ++i) {
    fetched[i].run_bytes = static_cast<size_t>(fetched[i].axis_dim) * inner * elem;
    TF_LITE_ENSURE_STATUS(
        tinyseg_ops::CheckRegion(context, fetched[i].region, fetched[i].slot, kOp));
  }
  h->elem_size = static_cast<int32_t>(elem);
  return context->RequestScratchBufferInArena(context, tinyseg_ops::StagingBytes(h->block),
                                              &h->staging_index);
}

// Frees a fetched slot (Runtime::release_after_fetch); CheckSlot found its storage.
TfLiteStatus Release(::tinyseg::Runtime& rt, const FetchedConcatOperand& f) {
  const ::tinyseg::Status s = rt.storage(f.region)->Release(f.slot);
  if (!::tinyseg::Ok(s)) {
    MicroPrintf("Fetching: releasing slot %u failed: %s", static_cast<unsigned>(f.slot),
                ::tinyseg::StatusName(s));
    return kTfLiteError;
  }
  return kTfLiteOk;
}

TfLiteStatus FetchingEval(TfLiteContext* context, TfLiteNode* node) {
  auto* h = static_cast<FetchingHeader*>(node->user_data);
  ::tinyseg::Runtime* rt = nullptr;
  if (h->num_fetched > 0) {
    rt = tinyseg_ops::GetRuntime(context, kOp);
    if (rt == nullptr) return kTfLiteError;
  }
  TfLiteEvalTensor* out = micro::GetEvalOutput(context, node, 0);
  const int axis = h->axis;
  size_t outer = 1;
  size_t inner = static_cast<size_t>(h->elem_size);
  for (int d = 0; d < out->dims->size; ++d) {
    if (d < axis) outer *= static_cast<size_t>(out->dims->data[d]);
    if (d > axis) inner *= static_cast<size_t>(out->dims->data[d]);
  }
  const size_t out_run = static_cast<size_t>(out->dims->data[axis]) * inner;
  uint8_t* dst = reinterpret_cast<uint8_t*>(out->data.raw);
  auto* staging = static_cast<uint8_t*>(context->GetScratchBuffer(context, h->staging_index));
  const size_t staging_bytes = tinyseg_ops::StagingBytes(h->block);
  size_t offset = 0;  // bytes into each output run
  tinyseg_ops::OperandWalk<FetchedConcatOperand> walk(tinyseg_ops::ConcatOperands(h),
                                                      h->num_fetched);
  for (int32_t k = 0; k < h->operands; ++k) {
    int input = -1;
    const FetchedConcatOperand* f = walk.Next(k, &input);
    if (f != nullptr) {
      TF_LITE_ENSURE_STATUS(
          tinyseg_ops::CheckSlot(*rt, f->region, f->slot, outer * f->run_bytes, kOp));
      TF_LITE_ENSURE_STATUS(tinyseg_ops::FetchStrided(*rt, f->region, f->slot, 0, outer,
                                                      f->run_bytes, dst + offset, out_run, staging,
                                                      staging_bytes, kOp));
      if (rt->release_after_fetch) TF_LITE_ENSURE_STATUS(Release(*rt, *f));
      offset += f->run_bytes;
      continue;
    }
    const TfLiteEvalTensor* in = micro::GetEvalInput(context, node, input);
    TF_LITE_ENSURE(context, in != nullptr);
    const size_t run = static_cast<size_t>(in->dims->data[axis]) * inner;
    const uint8_t* src = reinterpret_cast<const uint8_t*>(in->data.raw);
    for (size_t i = 0; i < outer; ++i) {
      std::memcpy(dst + i * out_run + offset, src + i * run, run);
    }
    offset += run;
  }
  return kTfLiteOk;
}

}  // namespace

TFLMRegistration Register_FETCHING() {
  return micro::RegisterOp(FetchingInit, FetchingPrepare, FetchingEval);
}

}  // namespace tflite
