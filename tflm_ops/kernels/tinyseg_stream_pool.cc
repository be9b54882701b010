// StreamChain's pooling family: MAX_POOL_2D and AVERAGE_POOL_2D stages
// (tinyseg_stream_internal.h), int8 and int16 (one template: TFLM's reference arithmetic on the
// band of input rows, or CMSIS-NN's s8 or s16 function in a CMSIS-NN build,
// tinyseg_stream_cmsis.h); float32, TFLM's reference float arithmetic in every build
// (pooling_common.cc's AveragePoolingEvalFloat, MaxPoolingEvalFloat).
#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/pooling.h"
#include "tensorflow/lite/kernels/internal/reference/pooling.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/kernels/padding.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_params.h"

namespace tflite {
namespace tinyseg_stream {

// The filter size, the output size from the geometry, and the activation's range; the row rule
// reads a window of filter_h rows (widened by the stage's dilation field, as the schedule always
// has) every stride rows.
TfLiteStatus PoolGeometry(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  PoolStage& p = g.pool;
  p.stride_h = a.f.stride_h;
  p.stride_w = a.f.stride_w;
  TF_LITE_ENSURE_MSG(context,
                     Field(*a.fields, contract::kFieldFilterHeight, 0, &p.filter_h) &&
                         Field(*a.fields, contract::kFieldFilterWidth, 0, &p.filter_w) &&
                         p.filter_h >= 1 && p.filter_w >= 1 && in.channels == out.channels,
                     "StreamChain: a pool stage needs its filter size and the input's channels");
  int oh = 0, ow = 0;
  const TfLitePaddingValues pad =
      ComputePaddingHeightWidth(p.stride_h, p.stride_w, 1, 1, in.height, in.width, p.filter_h,
                                p.filter_w, a.f.padding, &oh, &ow);
  TF_LITE_ENSURE_MSG(context, oh == out.height && ow == out.width,
                     "StreamChain: a pool stage's output size does not match its tensors");
  p.pad_h = pad.height;
  p.pad_w = pad.width;
  g.resamples = 1;
  g.rule.num = p.stride_h;
  g.rule.before = p.pad_h;
  g.rule.after = (p.filter_h - 1) * a.f.dilation_h - p.pad_h;
  return kTfLiteOk;
}

namespace {

// The int8 and int16 forms: the geometry and the quantized activation range.
TfLiteStatus PrepareQuantizedPool(const StageArgs& a, StageSlot& g, TfLiteType type) {
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireRows(a, out, type));
  TF_LITE_ENSURE_STATUS(PoolGeometry(a, g));
  TfLiteTensor out_q = QuantView(out);
  return CalculateActivationRangeQuantized(a.context, a.f.activation, &out_q, &g.pool.act_min,
                                           &g.pool.act_max);
}

// TFLM's int8 and int16 pool functions (reference_integer_ops::MaxPool, AveragePool) and
// CMSIS-NN's (arm_max_pool_s8/s16, arm_avgpool_s8/s16) by type.
bool CmsisMaxPool(const tinyseg_ops::BandPool& b) { return tinyseg_ops::CmsisMaxPoolRow(b); }
bool CmsisMaxPool(const tinyseg_ops::BandPoolS16& b) { return tinyseg_ops::CmsisMaxPoolRowS16(b); }
bool CmsisAveragePool(const tinyseg_ops::BandPool& b, void* scratch, int32_t bytes) {
  return tinyseg_ops::CmsisAveragePoolRow(b, scratch, bytes);
}
bool CmsisAveragePool(const tinyseg_ops::BandPoolS16& b, void* scratch, int32_t bytes) {
  return tinyseg_ops::CmsisAveragePoolRowS16(b, scratch, bytes);
}

template <typename T>
::tinyseg::Status QuantizedMaxPoolRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const PoolParams p = PoolParamsOf(g.pool, r);
  const tinyseg_ops::BandPoolOf<T> b = BandPoolRow<T>(g.pool, r, p.padding_values.height);
  if (OptimizedRow(v, CmsisMaxPool(b))) return ::tinyseg::Status::kOk;
  reference_integer_ops::MaxPool(p, r.in_shape, b.input, r.out_shape, b.output);
  return ::tinyseg::Status::kOk;
}

template <typename T>
::tinyseg::Status QuantizedAveragePoolRow(const EvalState& v, const StageSlot& g,
                                          const StageRow& r) {
  const PoolParams p = PoolParamsOf(g.pool, r);
  const tinyseg_ops::BandPoolOf<T> b = BandPoolRow<T>(g.pool, r, p.padding_values.height);
  if (OptimizedRow(v, CmsisAveragePool(b, v.op_scratch, MemberScratchBytes(*v.d)))) {
    return ::tinyseg::Status::kOk;
  }
  if (!reference_integer_ops::AveragePool(p, r.in_shape, b.input, r.out_shape, b.output)) {
    return ::tinyseg::Status::kInvalidArgument;  // a window with no input (TFLM's kernel fails too)
  }
  return ::tinyseg::Status::kOk;
}

}  // namespace

TfLiteStatus PreparePool(const StageArgs& a, StageSlot& g) {
  return PrepareQuantizedPool(a, g, kTfLiteInt8);
}

TfLiteStatus PreparePoolInt16(const StageArgs& a, StageSlot& g) {
  return PrepareQuantizedPool(a, g, kTfLiteInt16);
}

TfLiteStatus PreparePoolFloat(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kTfLiteFloat32));
  TF_LITE_ENSURE_STATUS(PoolGeometry(a, g));
  CalculateActivationRange(a.f.activation, &g.pool.float_min, &g.pool.float_max);
  return kTfLiteOk;
}

::tinyseg::Status MaxPoolRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedMaxPoolRow<int8_t>(v, g, r);
}

::tinyseg::Status MaxPoolInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedMaxPoolRow<int16_t>(v, g, r);
}

::tinyseg::Status AveragePoolRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedAveragePoolRow<int8_t>(v, g, r);
}

::tinyseg::Status AveragePoolInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedAveragePoolRow<int16_t>(v, g, r);
}

::tinyseg::Status MaxPoolFloatRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  return MapRow<float>(reference_ops::MaxPool, PoolParamsOf(g.pool, r), r);
}

::tinyseg::Status AveragePoolFloatRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  const PoolParams p = PoolParamsOf(g.pool, r);
  if (!reference_ops::AveragePool(p, r.in_shape, reinterpret_cast<const float*>(r.src), r.out_shape,
                                  reinterpret_cast<float*>(r.dst))) {
    return ::tinyseg::Status::kInvalidArgument;  // a window with no input (TFLM's kernel fails too)
  }
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
