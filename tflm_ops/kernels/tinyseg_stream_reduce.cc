// StreamChain's accumulating family (tinyseg_stream_internal.h): a MEAN over height and width
// that ends its chain (a squeeze-and-excitation's squeeze). Its schedule steps are its input's
// rows (tinyseg_stream_body.cc ScheduleTensors); step y adds input row y to per-channel sums held
// at the end of op_scratch (AccumulatorOffset: the other stages take turns with the bytes before
// them), and the last step writes the C means (1 x 1 x 1 x C with keep_dims, 1 x C without: the
// same C values in memory) with TFLM's MEAN arithmetic: int8 and int16, the int32 sum less zero
// point x count, requantized with reduce_common.cc's multiplier (input scale / output scale) with
// 1/count folded in as reference_ops::QuantizedMeanOrSum<T, int32_t> folds it, clamped to T (TFLM
// runs the same function for both, whatever the scales); float32, the sum in TFLM's order
// (height, then width, for each channel) divided by the count (reference_ops::Mean's special case
// with keep_dims and its general Reduce without sum each channel in that order alike).
#include <cstring>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/common.h"
#include "tensorflow/lite/kernels/internal/quantization_util.h"
#include "tensorflow/lite/kernels/internal/tensor_ctypes.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"

namespace tflite {
namespace tinyseg_stream {
namespace {

// The axis operand: a constant int32 tensor naming height and width once each (1 and 2, or -3
// and -2), as TFLM's MEAN reads it.
TfLiteStatus MeanAxes(const StageArgs& a, int32_t axis) {
  TfLiteContext* context = a.context;
  TF_LITE_ENSURE_MSG(context, axis >= 0 && axis < NumInputs(a.node), "StreamChain: MEAN's axis");
  MicroContext* mc = GetMicroContext(context);
  TfLiteTensor* t = mc->AllocateTempInputTensor(a.node, axis);
  TF_LITE_ENSURE(context, t != nullptr);
  bool ok = t->type == kTfLiteInt32 && IsConstantTensor(t) && NumElements(t) == 2;
  if (ok) {
    const int32_t* v = GetTensorData<int32_t>(t);
    const int32_t h = v[0] < 0 ? v[0] + 4 : v[0];
    const int32_t w = v[1] < 0 ? v[1] + 4 : v[1];
    ok = v[0] >= -4 && v[1] >= -4 && ((h == 1 && w == 2) || (h == 2 && w == 1));
  }
  mc->DeallocateTempTfLiteTensor(t);
  TF_LITE_ENSURE_MSG(context, ok,
                     "StreamChain: a MEAN stage averages over height and width (axes 1 and 2)");
  return kTfLiteOk;
}

// The rank of the node output a MEAN stage writes (0: not a node output): 4 with keep_dims, 2
// without (PrepareTensors reads a 1 x C node output as one row of C values).
int OutputRank(const StageArgs& a, const StageSlot& g) {
  const TensorSlot& out = a.tab->tensor(g.output);
  if (out.kind != Kind::kNodeOutput) return 0;
  MicroContext* mc = GetMicroContext(a.context);
  TfLiteTensor* t = mc->AllocateTempOutputTensor(a.node, NodeIndex(a.node, *a.d, g.output));
  if (t == nullptr) return 0;
  const int rank = t->dims->size;
  mc->DeallocateTempTfLiteTensor(t);
  return rank;
}

// What every MEAN stage checks: the axes, keep_dims and a node output of 1 x 1 x 1 x C with it or
// 1 x C without, and room for the sums after the other stages' scratch (the schedule runs one
// step per input row).
TfLiteStatus MeanGeometry(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(MeanAxes(a, ConstantOperand(*a.tab, g, 0, false)));
  int32_t keep = 0;
  TF_LITE_ENSURE_MSG(context,
                     Field(*a.fields, contract::kFieldKeepDims, 0, &keep) && keep >= 0 && keep <= 1,
                     "StreamChain: a MEAN stage's keep_dims is 0 or 1");
  TF_LITE_ENSURE_MSG(context,
                     out.kind == Kind::kNodeOutput && out.height == 1 && out.width == 1 &&
                         out.channels == in.channels && OutputRank(a, g) == (keep ? 4 : 2),
                     "StreamChain: a MEAN stage writes a StreamChain output of 1 x 1 x 1 x C "
                     "with keep_dims, 1 x C without");
  const int64_t held = static_cast<int64_t>(in.channels) * contract::kStreamAccumulatorBytes;
  TF_LITE_ENSURE_MSG(context,
                     held == a.d->accumulator_bytes && a.d->op_scratch >= held &&
                         (a.d->op_scratch - held) % 4 == 0,
                     "StreamChain: op_scratch has no room for a MEAN stage's per-channel sums");
  const int64_t count = static_cast<int64_t>(in.height) * in.width;
  TF_LITE_ENSURE(context, count >= 1 && count <= INT32_MAX);
  MeanStage& m = g.mean;
  m.count = static_cast<int32_t>(count);
  m.accumulator = MemberScratchBytes(*a.d) / 4;
  g.rule = RowRule{1, 1, 0, 0, 0};  // step y reads row y (ScheduleTensors: steps = input rows)
  return kTfLiteOk;
}

// floor(log2(n)) for n >= 1 (63 - CountLeadingZeros(n) in TFLM).
int FloorLog2(uint64_t n) {
  int k = -1;
  while (n != 0) {
    n >>= 1;
    ++k;
  }
  return k;
}

}  // namespace

namespace {

// The int8 and int16 MEAN: TFLM's multiplier with 1/count folded in (PrepareMean*'s shared part).
TfLiteStatus PrepareQuantizedMean(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(MeanGeometry(a, g));
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  MeanStage& m = g.mean;
  int shift = 0;
  QuantizeMultiplier(static_cast<double>(in.scale) / static_cast<double>(out.scale), &m.multiplier,
                     &shift);
  // 1/count folded into the multiplier, clamped as QuantizedMeanOrSum clamps it.
  int extra = FloorLog2(static_cast<uint64_t>(m.count));
  if (extra > 32) extra = 32;
  if (extra > 31 + shift) extra = 31 + shift;
  TF_LITE_ENSURE(a.context, extra >= 0);
  m.multiplier = static_cast<int32_t>((static_cast<int64_t>(m.multiplier) << extra) / m.count);
  m.shift = shift - extra;
  m.input_offset = in.zero_point;
  m.output_offset = out.zero_point;
  return kTfLiteOk;
}

// Step y: row y into the int32 sums (wrapping, as TFLM's AddTensorValuesWithExpectedOverflow);
// the last step writes the means, clamped to T as QuantizedMeanOrSum<T, int32_t> clamps them.
template <typename T, int32_t kMin, int32_t kMax>
::tinyseg::Status QuantizedMeanRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const MeanStage& m = g.mean;
  const int32_t c = r.in->channels;
  if (v.op_scratch == nullptr || r.rows != 1) return ::tinyseg::Status::kInvalidArgument;
  uint32_t* sum = reinterpret_cast<uint32_t*>(v.op_scratch + m.accumulator);
  if (r.y == 0) std::memset(sum, 0, static_cast<size_t>(c) * sizeof(uint32_t));
  const T* x = reinterpret_cast<const T*>(r.src);
  for (int32_t w = 0; w < r.in->width; ++w) {
    for (int32_t k = 0; k < c; ++k) sum[k] += static_cast<uint32_t>(static_cast<int32_t>(*x++));
  }
  if (r.y != r.in->height - 1) return ::tinyseg::Status::kOk;
  T* dst = reinterpret_cast<T*>(r.dst);
  const int64_t zero = static_cast<int64_t>(m.input_offset) * m.count;
  for (int32_t k = 0; k < c; ++k) {
    const int32_t shifted = static_cast<int32_t>(static_cast<int32_t>(sum[k]) - zero);
    int32_t q = MultiplyByQuantizedMultiplier(shifted, m.multiplier, m.shift) + m.output_offset;
    q = q < kMin ? kMin : (q > kMax ? kMax : q);
    dst[k] = static_cast<T>(q);
  }
  return ::tinyseg::Status::kOk;
}

}  // namespace

TfLiteStatus PrepareMean(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kTfLiteInt8));
  return PrepareQuantizedMean(a, g);
}

// int16 rows (16x8): TFLM's int16 MEAN is the int8 one on int16 values (int32 sums, the same
// kStreamAccumulatorBytes a channel).
TfLiteStatus PrepareMeanInt16(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kTfLiteInt16));
  return PrepareQuantizedMean(a, g);
}

::tinyseg::Status MeanRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedMeanRow<int8_t, -128, 127>(v, g, r);
}

::tinyseg::Status MeanInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedMeanRow<int16_t, -32768, 32767>(v, g, r);
}

TfLiteStatus PrepareMeanFloat(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kTfLiteFloat32));
  return MeanGeometry(a, g);
}

// Float32: each channel's sum in TFLM's order (rows, then columns), divided by the count.
::tinyseg::Status MeanFloatRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const MeanStage& m = g.mean;
  const int32_t c = r.in->channels;
  if (v.op_scratch == nullptr || r.rows != 1) return ::tinyseg::Status::kInvalidArgument;
  float* sum = reinterpret_cast<float*>(v.op_scratch + m.accumulator);
  if (r.y == 0) {
    for (int32_t k = 0; k < c; ++k) sum[k] = 0.0f;
  }
  const float* x = reinterpret_cast<const float*>(r.src);
  for (int32_t w = 0; w < r.in->width; ++w) {
    for (int32_t k = 0; k < c; ++k) sum[k] += *x++;
  }
  if (r.y != r.in->height - 1) return ::tinyseg::Status::kOk;
  float* dst = reinterpret_cast<float*>(r.dst);
  for (int32_t k = 0; k < c; ++k) dst[k] = sum[k] / static_cast<float>(m.count);
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
