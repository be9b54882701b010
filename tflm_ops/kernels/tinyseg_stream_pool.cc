// StreamChain's pooling family: MAX_POOL_2D and AVERAGE_POOL_2D stages
// (tinyseg_stream_internal.h), int8, TFLM's reference arithmetic on the band of input rows or
// CMSIS-NN's in a CMSIS-NN build (tinyseg_stream_cmsis.h); float32, TFLM's reference float
// arithmetic in every build (pooling_common.cc's AveragePoolingEvalFloat, MaxPoolingEvalFloat).
#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/pooling.h"
#include "tensorflow/lite/kernels/internal/reference/pooling.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/kernels/padding.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"

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
  g.rule.resamples = 1;
  g.rule.num = p.stride_h;
  g.rule.before = p.pad_h;
  g.rule.after = (p.filter_h - 1) * a.f.dilation_h - p.pad_h;
  return kTfLiteOk;
}

TfLiteStatus PreparePool(const StageArgs& a, StageSlot& g) {
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireInt8(a, out));
  TF_LITE_ENSURE_STATUS(PoolGeometry(a, g));
  TfLiteTensor out_q = QuantView(out);
  return CalculateActivationRangeQuantized(a.context, a.f.activation, &out_q, &g.pool.act_min,
                                           &g.pool.act_max);
}

TfLiteStatus PreparePoolFloat(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireFloat32(a, a.tab->tensor(g.output)));
  TF_LITE_ENSURE_STATUS(PoolGeometry(a, g));
  CalculateActivationRange(a.f.activation, &g.pool.float_min, &g.pool.float_max);
  return kTfLiteOk;
}

namespace {

PoolParams PoolParamsOf(const PoolStage& ps, const StageRow& r) {
  PoolParams p = {};
  p.stride_height = ps.stride_h;
  p.stride_width = ps.stride_w;
  p.filter_height = ps.filter_h;
  p.filter_width = ps.filter_w;
  p.padding_values.height = static_cast<int16_t>(r.lo - (r.y * ps.stride_h - ps.pad_h));
  p.padding_values.width = static_cast<int16_t>(ps.pad_w);
  p.quantized_activation_min = ps.act_min;
  p.quantized_activation_max = ps.act_max;
  return p;
}

tinyseg_ops::BandPool BandPoolOf(const PoolStage& ps, const StageRow& r, int32_t pad_top) {
  tinyseg_ops::BandPool b = {};
  b.input = reinterpret_cast<const int8_t*>(r.src);
  b.in_h = r.rows;
  b.in_w = r.in->width;
  b.channels = r.in->channels;
  b.output = reinterpret_cast<int8_t*>(r.dst);
  b.out_w = r.out->width;
  b.filter_h = ps.filter_h;
  b.filter_w = ps.filter_w;
  b.stride_h = ps.stride_h;
  b.stride_w = ps.stride_w;
  b.pad_h = pad_top;
  b.pad_w = ps.pad_w;
  b.act_min = ps.act_min;
  b.act_max = ps.act_max;
  return b;
}

}  // namespace

::tinyseg::Status MaxPoolRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const PoolParams p = PoolParamsOf(g.pool, r);
  if (tinyseg_ops::CmsisMaxPoolRow(BandPoolOf(g.pool, r, p.padding_values.height))) {
    CountOptimizedRow(v);
    return ::tinyseg::Status::kOk;
  }
  reference_integer_ops::MaxPool(p, r.in_shape, reinterpret_cast<const int8_t*>(r.src), r.out_shape,
                                 reinterpret_cast<int8_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status AveragePoolRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const PoolParams p = PoolParamsOf(g.pool, r);
  if (tinyseg_ops::CmsisAveragePoolRow(BandPoolOf(g.pool, r, p.padding_values.height), v.op_scratch,
                                       MemberScratchBytes(*v.d))) {
    CountOptimizedRow(v);
    return ::tinyseg::Status::kOk;
  }
  if (!reference_integer_ops::AveragePool(p, r.in_shape, reinterpret_cast<const int8_t*>(r.src),
                                          r.out_shape, reinterpret_cast<int8_t*>(r.dst))) {
    return ::tinyseg::Status::kInvalidArgument;  // a window with no input (TFLM's kernel fails too)
  }
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status MaxPoolFloatRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  PoolParams p = PoolParamsOf(g.pool, r);
  p.float_activation_min = g.pool.float_min;
  p.float_activation_max = g.pool.float_max;
  reference_ops::MaxPool(p, r.in_shape, reinterpret_cast<const float*>(r.src), r.out_shape,
                         reinterpret_cast<float*>(r.dst));
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status AveragePoolFloatRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  PoolParams p = PoolParamsOf(g.pool, r);
  p.float_activation_min = g.pool.float_min;
  p.float_activation_max = g.pool.float_max;
  if (!reference_ops::AveragePool(p, r.in_shape, reinterpret_cast<const float*>(r.src), r.out_shape,
                                  reinterpret_cast<float*>(r.dst))) {
    return ::tinyseg::Status::kInvalidArgument;  // a window with no input (TFLM's kernel fails too)
  }
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
