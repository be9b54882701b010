// Spill: compresses its input into spill storage (docs/custom_ops.md).
//
// inputs [victim], outputs none or [token] (a tensor of zero elements standing for the edge to
// the slot's readers; never written); options {version, slot, block, region (optional, 0)}.
// Prepare requests one scratch buffer of block + 8 bytes (one encoded block)
// and keeps 16 bytes of OpData. Eval hands the victim and that arena scratch
// to the application's SpillManager, which encodes the victim block by block
// with the core codec and programs it into the slot through the scratch (the
// manager has no staging memory of its own, so the arena bytes the planner
// counts are the ones used). After this operator nothing reads the victim, so
// TFLM's planner reuses its arena bytes. Runtime::verify_spills reads the slot
// back through the same scratch.
#include <cstring>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"
#include "tensorflow/lite/micro/micro_utils.h"

namespace tflite {
namespace {

using tinyseg_ops::SpillOpData;
namespace contract = tinyseg_ops::contract;

constexpr const char* kOp = contract::kSpill;

void* SpillInit(TfLiteContext* context, const char* buffer, size_t length) {
  tinyseg_ops::Options options;
  if (!options.Open(kOp, buffer, length)) return nullptr;
  int64_t slot = 0;
  int64_t block = 0;
  int32_t region = 0;
  if (!options.Int(contract::kKeySlot, &slot) || !options.Int(contract::kKeyBlock, &block) ||
      !tinyseg_ops::ReadRegion(options.map(), kOp, "the Spill", &region)) {
    return nullptr;
  }
  auto* data =
      static_cast<SpillOpData*>(context->AllocatePersistentBuffer(context, sizeof(SpillOpData)));
  if (data == nullptr) return nullptr;
  data->slot = static_cast<uint32_t>(slot);
  data->block = static_cast<int32_t>(block);
  data->staging_index = -1;
  data->elem_size = 0;
  data->region = static_cast<int16_t>(region);
  return data;
}

TfLiteStatus SpillPrepare(TfLiteContext* context, TfLiteNode* node) {
  TF_LITE_ENSURE_MSG(context, node->user_data != nullptr,
                     "Spill: bad custom options (see the message above)");
  auto* data = static_cast<SpillOpData*>(node->user_data);
  TF_LITE_ENSURE_EQ(context, NumInputs(node), 1);
  TF_LITE_ENSURE_MSG(context, NumOutputs(node) <= 1, "Spill: at most one output, a token");
  TF_LITE_ENSURE_STATUS(tinyseg_ops::CheckTokens(context, node, false, 0, NumOutputs(node), kOp));
  MicroContext* micro_context = GetMicroContext(context);
  TfLiteTensor* victim = micro_context->AllocateTempInputTensor(node, 0);
  TF_LITE_ENSURE(context, victim != nullptr);
  const size_t elem = tinyseg_ops::ElementBytes(victim->type);
  const TfLiteType type = victim->type;
  micro_context->DeallocateTempTfLiteTensor(victim);
  if (elem == 0) {
    MicroPrintf("Spill: type %s is not spillable", TfLiteTypeGetName(type));
    return kTfLiteError;
  }
  TF_LITE_ENSURE_MSG(context, data->block % static_cast<int32_t>(elem) == 0,
                     "Spill: block is not a multiple of the element size");
  data->elem_size = static_cast<int16_t>(elem);
  TF_LITE_ENSURE_STATUS(tinyseg_ops::CheckRegion(context, data->region, data->slot, kOp));
  return context->RequestScratchBufferInArena(context, tinyseg_ops::StagingBytes(data->block),
                                              &data->staging_index);
}

// Reads the slot back through the staging buffer and compares it.
TfLiteStatus VerifySpill(::tinyseg::SpillManager& storage, const SpillOpData& data,
                         const uint8_t* victim, size_t bytes, uint8_t* staging) {
  const size_t chunk = tinyseg_ops::StagingBytes(data.block);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = bytes - off < chunk ? bytes - off : chunk;
    const ::tinyseg::Status s = storage.FetchRange(data.slot, off, n, staging);
    if (!::tinyseg::Ok(s) || std::memcmp(staging, victim + off, n) != 0) {
      MicroPrintf("Spill: slot %u does not read back (%s)%s", static_cast<unsigned>(data.slot),
                  ::tinyseg::StatusName(s), tinyseg_ops::StorageFaultHint(s));
      return kTfLiteError;
    }
  }
  return kTfLiteOk;
}

TfLiteStatus SpillEval(TfLiteContext* context, TfLiteNode* node) {
  const auto& data = *static_cast<const SpillOpData*>(node->user_data);
  ::tinyseg::Runtime* rt = tinyseg_ops::GetRuntime(context, kOp);
  if (rt == nullptr) return kTfLiteError;
  ::tinyseg::SpillManager* storage = tinyseg_ops::RegionStorage(*rt, data.region, data.slot, kOp);
  if (storage == nullptr) return kTfLiteError;
  const TfLiteEvalTensor* victim = micro::GetEvalInput(context, node, 0);
  TF_LITE_ENSURE(context, victim != nullptr);
  auto* staging = static_cast<uint8_t*>(context->GetScratchBuffer(context, data.staging_index));
  TF_LITE_ENSURE(context, staging != nullptr);
  const ::tinyseg::ByteSpan span{staging, tinyseg_ops::StagingBytes(data.block)};
  const size_t bytes = EvalTensorBytes(victim);
  // The operator's `block` is the codec block (the staging holds one encoded block of it).
  const ::tinyseg::Status s =
      storage->Spill(data.slot, victim->data.raw, bytes, static_cast<uint32_t>(data.elem_size),
                     span, static_cast<uint32_t>(data.block));
  if (s == ::tinyseg::Status::kBufferTooSmall) {
    MicroPrintf(
        "Spill: staging scratch of %u bytes (block %d + 8) is smaller than "
        "the spill device's program unit of %u bytes",
        static_cast<unsigned>(span.size), static_cast<int>(data.block),
        static_cast<unsigned>(storage->MinStagingBytes()));
    return kTfLiteError;
  }
  if (!::tinyseg::Ok(s)) {
    MicroPrintf("Spill: spilling %u bytes to slot %u failed: %s%s", static_cast<unsigned>(bytes),
                static_cast<unsigned>(data.slot), ::tinyseg::StatusName(s),
                tinyseg_ops::StorageFaultHint(s));
    return kTfLiteError;
  }
  ++rt->stats.spills;
  rt->stats.spilled_bytes += bytes;
  if (rt->verify_spills) {
    return VerifySpill(*storage, data, static_cast<const uint8_t*>(victim->data.data), bytes,
                       staging);
  }
  return kTfLiteOk;
}

}  // namespace

TFLMRegistration Register_SPILL() { return micro::RegisterOp(SpillInit, SpillPrepare, SpillEval); }

}  // namespace tflite
