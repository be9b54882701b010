// StreamChain's int16 convolution stages (tinyseg_stream_internal.h, Rows::kInt16): int16
// activations with int8 weights, TFLM's "16x8" quantization. CONV_2D (int64 or int32 bias) and
// DEPTHWISE_CONV_2D (int64 bias); the other int16 stages share the int8 forms' code in their
// family's file (pools: tinyseg_stream_pool.cc; ADD, SUB and MUL: tinyseg_stream_arithmetic.cc;
// RELU, RELU6, QUANTIZE and DEQUANTIZE: tinyseg_stream_activation.cc; PAD, RESIZE_NEAREST_NEIGHBOR
// and CONCATENATION: tinyseg_stream_layout.cc; LOGISTIC, TANH, LEAKY_RELU and PRELU:
// tinyseg_stream_int16_more.cc; TRANSPOSE_CONV and PADV2: tinyseg_stream_int16_tconv.cc).
// Prepare computes what TFLM's own Prepare computes for int16; a row runs the reference int16
// function TFLM's kernel calls, on the band view, so every output element comes from the same
// products in the same order. In a CMSIS-NN build, CONV_2D and DEPTHWISE_CONV_2D call the s16
// function TFLM's CMSIS-NN kernel calls, on the band view (tinyseg_stream_cmsis.h), and fall back
// to the reference code where that returns false.
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/conv.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/depthwise_conv.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_params.h"

namespace tflite {
namespace tinyseg_stream {

namespace {

// The int8 filter and the bias TFLM's int16 kernels take (CONV_2D: int64 or int32, which selects
// the accumulator; DEPTHWISE_CONV_2D: int64, as TFLM reads it; neither without one), the geometry,
// and TFLM's per-channel requantization into the pool.
TfLiteStatus PrepareInt16With(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                              const TensorSlot& out, TfLiteTensor* filter, TfLiteTensor* bias) {
  const bool depthwise = g.op == StageOp::kDepthwiseConv2d;
  const bool bias_ok =
      bias != nullptr && BiasFits(bias, out, kTfLiteInt64, depthwise ? kTfLiteInt64 : kTfLiteInt32);
  TF_LITE_ENSURE_STATUS(FilterAndGeometry(a, g, in, out, filter, kTfLiteInt8, bias_ok,
                                          "an int16 convolution stage needs an int8 filter and an "
                                          "int64 bias (CONV_2D: or int32)"));
  return Requantization(a, g, in, out, filter, bias);
}

// A 16x8 convolution stage's row as tinyseg_stream_cmsis.h takes it, with its bias.
tinyseg_ops::BandConvS16 BandConvS16Row(const EvalState& v, const ConvStage& c, const StageRow& r,
                                        int32_t pad_top, const TfLiteEvalTensor* filter,
                                        const TfLiteEvalTensor* bias) {
  tinyseg_ops::BandConvS16 b = BandConvRow<int16_t, void>(v, c, r, pad_top, filter);
  b.bias = bias->data.data;
  b.bias_is_int32 = bias->type == kTfLiteInt32;
  return b;
}

}  // namespace

TfLiteStatus PrepareConvInt16(const StageArgs& a, StageSlot& g) {
  return PrepareConvOf(a, g, kTfLiteInt16, PrepareInt16With);
}

// conv.cc's int16 case: the int32 accumulator for an int32 bias, int64 for an int64 bias.
::tinyseg::Status ConvInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  const int32_t pad_top = BandPadTop(r, c.stride_h, c.pad_h);
  const ConvConstants k = ConvConstantsOf(v, c);
  if (k.bias == nullptr) return ::tinyseg::Status::kInvalidArgument;  // Prepare refuses it
  const tinyseg_ops::BandConvS16 b = BandConvS16Row(v, c, r, pad_top, k.filter, k.bias);
  if (OptimizedRow(v, tinyseg_ops::CmsisConvRowS16(b, v.op_scratch, MemberScratchBytes(*v.d)))) {
    return ::tinyseg::Status::kOk;
  }
  const ConvParams p = ConvParamsOf<ConvParams>(c, pad_top);
  if (k.bias->type == kTfLiteInt32) {
    reference_integer_ops::ConvPerChannel(
        p, b.multiplier, b.shift, r.in_shape, b.input, micro::GetTensorShape(k.filter), b.filter,
        micro::GetTensorShape(k.bias), micro::GetTensorData<int32_t>(k.bias), r.out_shape,
        b.output);
  } else {
    reference_integer_ops::ConvPerChannel(
        p, b.multiplier, b.shift, r.in_shape, b.input, micro::GetTensorShape(k.filter), b.filter,
        micro::GetTensorShape(k.bias), micro::GetTensorData<int64_t>(k.bias), r.out_shape,
        b.output);
  }
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status DepthwiseConvInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  const int32_t pad_top = BandPadTop(r, c.stride_h, c.pad_h);
  const DepthwiseParams p = WithDepthMultiplier(ConvParamsOf<DepthwiseParams>(c, pad_top), r);
  const ConvConstants k = ConvConstantsOf(v, c);
  if (k.bias == nullptr) return ::tinyseg::Status::kInvalidArgument;  // Prepare refuses it
  tinyseg_ops::BandConvS16 b = BandConvS16Row(v, c, r, pad_top, k.filter, k.bias);
  b.depth_multiplier = p.depth_multiplier;
  if (OptimizedRow(v, tinyseg_ops::CmsisDepthwiseConvRowS16(b))) return ::tinyseg::Status::kOk;
  reference_integer_ops::DepthwiseConvPerChannel(
      p, b.multiplier, b.shift, r.in_shape, b.input, micro::GetTensorShape(k.filter), b.filter,
      micro::GetTensorShape(k.bias), micro::GetTensorData<int64_t>(k.bias), r.out_shape, b.output);
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
