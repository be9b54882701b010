// TRANSPOSE_CONV as a registration of its own, for the packaged library
// (`tinyseg tflm package`): the TFLM tree is not edited, so the narrowed
// scratch (tinyseg_transpose_conv.h) reaches the interpreter through the op
// resolver instead of through a changed transpose_conv.cc.
//
// An unmarked operator runs TFLM's own TRANSPOSE_CONV: Init keeps that
// kernel's user data beside ours and Prepare/Eval hand it over, so every
// type and every optimized kernel TFLM has stays as it is. A marked int8
// operator is prepared here (padding, per-channel quantization, the narrowed
// scratch request) and runs EvalTransposeConvNarrowed.
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_transpose_conv_op.h"

#include <new>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/kernels/padding.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/micro_ops.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_transpose_conv.h"
#include "tensorflow/lite/micro/micro_context.h"

namespace tflite {
namespace {

struct OpData {
  void* tflm_data = nullptr;  // TFLM's own kernel's user data (unmarked operators)
  tinyseg_ops::TransposeConvMarker marker;
  ConvParams params = {};
  int32_t* per_channel_output_multiplier = nullptr;
  int32_t* per_channel_output_shift = nullptr;
  int scratch_buffer_index = -1;
};

// Runs one of TFLM's own callbacks with its own user data in the node.
template <typename Call>
TfLiteStatus WithTflmData(TfLiteNode* node, Call call) {
  OpData* data = static_cast<OpData*>(node->user_data);
  node->user_data = data->tflm_data;
  const TfLiteStatus status = call();
  node->user_data = data;
  return status;
}

void* Init(TfLiteContext* context, const char* buffer, size_t length) {
  void* raw = context->AllocatePersistentBuffer(context, sizeof(OpData));
  if (raw == nullptr) return nullptr;
  OpData* data = new (raw) OpData();
  const TFLMRegistration tflm = Register_TRANSPOSE_CONV();
  data->tflm_data = tflm.init != nullptr ? tflm.init(context, buffer, length) : nullptr;
  return data;
}

TfLiteStatus PrepareMarked(TfLiteContext* context, TfLiteNode* node, OpData* data,
                           TfLiteTensor* input, TfLiteTensor* filter, TfLiteTensor* bias,
                           TfLiteTensor* output) {
  const auto* params = static_cast<const TfLiteTransposeConvParams*>(node->builtin_data);
  TF_LITE_ENSURE(context, params != nullptr);
  TF_LITE_ENSURE_EQ(context, NumDimensions(output), 4);
  TF_LITE_ENSURE_EQ(context, NumDimensions(filter), 4);
  const int out_h = SizeOfDimension(output, 1);
  const int out_w = SizeOfDimension(output, 2);
  const int channels = SizeOfDimension(filter, 0);
  int unused_h = 0, unused_w = 0;
  const TfLitePaddingValues pad = ComputePaddingHeightWidth(
      params->stride_height, params->stride_width, 1, 1, out_h, out_w, SizeOfDimension(filter, 1),
      SizeOfDimension(filter, 2), params->padding, &unused_h, &unused_w);
  ConvParams& p = data->params;
  p.padding_type = micro::RuntimePaddingType(params->padding);
  p.padding_values.width = pad.width;
  p.padding_values.height = pad.height;
  p.padding_values.width_offset = pad.width_offset;
  p.padding_values.height_offset = pad.height_offset;
  p.stride_width = params->stride_width;
  p.stride_height = params->stride_height;
  p.input_offset = -input->params.zero_point;
  p.weights_offset = -filter->params.zero_point;
  p.output_offset = output->params.zero_point;
  data->per_channel_output_multiplier =
      static_cast<int32_t*>(context->AllocatePersistentBuffer(context, channels * sizeof(int32_t)));
  data->per_channel_output_shift =
      static_cast<int32_t*>(context->AllocatePersistentBuffer(context, channels * sizeof(int32_t)));
  TF_LITE_ENSURE(context, data->per_channel_output_multiplier != nullptr &&
                              data->per_channel_output_shift != nullptr);
  int32_t unused_multiplier = 0;
  int unused_shift = 0;
  TF_LITE_ENSURE_STATUS(PopulateConvolutionQuantizationParams(
      context, input, filter, bias, output, params->activation, &unused_multiplier, &unused_shift,
      &p.quantized_activation_min, &p.quantized_activation_max, data->per_channel_output_multiplier,
      data->per_channel_output_shift, channels));
  return context->RequestScratchBufferInArena(
      context, tinyseg_ops::TransposeConvScratchBytes(data->marker, GetTensorShape(output)),
      &data->scratch_buffer_index);
}

TfLiteStatus Prepare(TfLiteContext* context, TfLiteNode* node) {
  OpData* data = static_cast<OpData*>(node->user_data);
  TF_LITE_ENSURE(context, data != nullptr);
  MicroContext* micro_context = GetMicroContext(context);
  TfLiteTensor* input = micro_context->AllocateTempInputTensor(node, 2);
  TF_LITE_ENSURE(context, input != nullptr);
  TfLiteStatus status =
      tinyseg_ops::ReadTransposeConvMarker(context, node, input->type, &data->marker);
  if (status == kTfLiteOk && data->marker.marked()) {
    TfLiteTensor* filter = micro_context->AllocateTempInputTensor(node, 1);
    TfLiteTensor* bias =
        NumInputs(node) == 4 ? micro_context->AllocateTempInputTensor(node, 3) : nullptr;
    TfLiteTensor* output = micro_context->AllocateTempOutputTensor(node, 0);
    status = filter != nullptr && output != nullptr
                 ? PrepareMarked(context, node, data, input, filter, bias, output)
                 : kTfLiteError;
    if (filter != nullptr) micro_context->DeallocateTempTfLiteTensor(filter);
    if (bias != nullptr) micro_context->DeallocateTempTfLiteTensor(bias);
    if (output != nullptr) micro_context->DeallocateTempTfLiteTensor(output);
  }
  micro_context->DeallocateTempTfLiteTensor(input);
  if (status != kTfLiteOk || data->marker.marked()) return status;
  const TFLMRegistration tflm = Register_TRANSPOSE_CONV();
  return WithTflmData(node, [&] { return tflm.prepare(context, node); });
}

TfLiteStatus Eval(TfLiteContext* context, TfLiteNode* node) {
  const OpData* data = static_cast<const OpData*>(node->user_data);
  if (data->marker.marked()) {
    return tinyseg_ops::EvalTransposeConvNarrowed(
        context, node, data->marker, data->params, data->per_channel_output_multiplier,
        data->per_channel_output_shift, data->scratch_buffer_index);
  }
  const TFLMRegistration tflm = Register_TRANSPOSE_CONV();
  return WithTflmData(node, [&] { return tflm.invoke(context, node); });
}

}  // namespace

TFLMRegistration Register_TINYSEG_TRANSPOSE_CONV() {
  TFLMRegistration r = Register_TRANSPOSE_CONV();
  TFLITE_DCHECK(r.free == nullptr);  // TFLM's kernels keep their data in the arena
  r.init = Init;
  r.prepare = Prepare;
  r.invoke = Eval;
  return r;
}

}  // namespace tflite
