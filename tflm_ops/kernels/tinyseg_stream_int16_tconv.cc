// StreamChain's int16 (16x8) TRANSPOSE_CONV and PADV2 stages (tinyseg_stream_internal.h,
// Rows::kInt16).
//
// TRANSPOSE_CONV: transpose_conv.cc's int16 case calls reference_integer_ops::TransposeConv with
// an int64 bias (or none) and an int64 scratch it zeroes and scatters into (every build: TFLM's
// CMSIS-NN TRANSPOSE_CONV has no int16 kernel). A stage streams only when stride >= kernel height
// (ConvGeometry), so output row y comes from input row y / stride alone: the row calls the same
// function on that one input row with the top padding shifted to select the filter rows, and its
// int64 accumulator is one output row (width * channels * 8 bytes) at the start of op_scratch,
// which the planner sizes for it (stream.row_step_scratch). Same products, same order, same
// requantization: bit-identical.
//
// PADV2: pad.cc pads int16 with its constant int16 scalar, read as it is (TFLM checks no
// quantization for int16; int16 rows have zero point 0); the row is PadInt16Row's.
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/common.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/transpose_conv.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"

namespace tflite {
namespace tinyseg_stream {
namespace {

// The int8 filter [C_out, kh, kw, C_in] and an int64 bias of C_out or none (TFLM's int16 kernel
// reads an int64 one as it is and skips a missing one; an int16 one it widens into a scratch
// buffer of its own: not a stage), the geometry, and TFLM's per-channel requantization.
TfLiteStatus PrepareTransposeInt16With(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                                       const TensorSlot& out, TfLiteTensor* filter,
                                       TfLiteTensor* bias) {
  TfLiteContext* context = a.context;
  ConvStage& c = g.conv;
  const bool types_ok =
      filter->type == kTfLiteInt8 && filter->dims->size == 4 &&
      filter->dims->data[0] == out.channels &&
      (bias == nullptr || (bias->type == kTfLiteInt64 && NumElements(bias) == out.channels));
  if (!types_ok) {
    MicroPrintf(
        "StreamChain: an int16 TRANSPOSE_CONV stage needs an int8 filter of its output channels "
        "and an int64 bias or none");
    return kTfLiteError;
  }
  c.filter_h = filter->dims->data[1];
  c.filter_w = filter->dims->data[2];
  if (!ConvGeometry(a, g, in, out, filter)) {
    MicroPrintf("StreamChain: stage %d's geometry does not match", static_cast<int>(a.index));
    return kTfLiteError;
  }
  TF_LITE_ENSURE_STATUS(
      TakePool(context, *a.d, 2 * static_cast<int64_t>(out.channels), a.pool_next, &c.per_channel));
  TfLiteTensor in_q = QuantView(in);
  TfLiteTensor out_q = QuantView(out);
  int32_t unused_multiplier = 0;
  int unused_shift = 0;
  int32_t* pool = a.tab->per_channel + c.per_channel;
  const TfLiteStatus status = PopulateConvolutionQuantizationParams(
      context, &in_q, filter, bias, &out_q, a.f.activation, &unused_multiplier, &unused_shift,
      &c.act_min, &c.act_max, pool, pool + out.channels, out.channels);
  c.input_offset = -in.zero_point;
  c.output_offset = out.zero_point;
  return status;
}

}  // namespace

TfLiteStatus PrepareTransposeConvInt16(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireInt16(a, a.tab->tensor(g.output)));
  return PrepareConvOf(a, g, PrepareTransposeInt16With);
}

// Output row y from input row lo = y / stride: the shifted top padding selects filter row
// y - lo * stride; the int64 accumulator row is op_scratch's (ConvGeometry checked its size).
::tinyseg::Status TransposeConvInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  const int64_t need = static_cast<int64_t>(r.out->width) * r.out->channels * 8;
  if (MemberScratchBytes(*v.d) < need) return ::tinyseg::Status::kInvalidArgument;
  ConvParams p = {};
  p.padding_type = PaddingType::kSame;
  p.padding_values.width = static_cast<int16_t>(c.pad_w);
  p.padding_values.height = static_cast<int16_t>(r.y - r.lo * c.stride_h + c.pad_h);
  p.stride_width = static_cast<int16_t>(c.stride_w);
  p.stride_height = static_cast<int16_t>(c.stride_h);
  p.dilation_width_factor = 1;
  p.dilation_height_factor = 1;
  p.input_offset = c.input_offset;
  p.output_offset = c.output_offset;
  p.quantized_activation_min = c.act_min;
  p.quantized_activation_max = c.act_max;
  const TfLiteEvalTensor* filter = micro::GetEvalInput(v.context, v.node, c.filter);
  const TfLiteEvalTensor* bias =
      c.bias >= 0 ? micro::GetEvalInput(v.context, v.node, c.bias) : nullptr;
  const int32_t* pool = v.tab.per_channel + c.per_channel;
  reference_integer_ops::TransposeConv(
      p, pool, pool + r.out->channels, r.in_shape, reinterpret_cast<const int16_t*>(r.src),
      micro::GetTensorShape(filter), micro::GetTensorData<int8_t>(filter),
      micro::GetTensorShape(bias), micro::GetOptionalTensorData<int64_t>(bias), r.out_shape,
      reinterpret_cast<int16_t*>(r.dst), RuntimeShape(), nullptr,
      reinterpret_cast<int64_t*>(v.op_scratch));
  return ::tinyseg::Status::kOk;
}

// int16 PADV2: the paddings as PAD's, the pad value a constant int16 scalar (pad_common.cc checks
// its type and size only; its bits are the output's).
TfLiteStatus PreparePadv2Int16(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  TF_LITE_ENSURE_STATUS(RequireInt16(a, a.tab->tensor(g.output)));
  TF_LITE_ENSURE_STATUS(PreparePadInt16(a, g));
  PadStage& ps = g.pad;
  ps.value = ConstantOperand(*a.tab, g, 1, false);  // PreparePadInt16 cleared it (PAD has none)
  TF_LITE_ENSURE_MSG(context, ps.value >= 0 && ps.value < NumInputs(a.node),
                     "StreamChain: PADV2's pad value");
  MicroContext* mc = GetMicroContext(context);
  TfLiteTensor* value = mc->AllocateTempInputTensor(a.node, ps.value);
  TF_LITE_ENSURE(context, value != nullptr);
  const bool scalar =
      value->type == kTfLiteInt16 && IsConstantTensor(value) && NumElements(value) == 1;
  if (scalar) ps.pad_value = GetTensorData<int16_t>(value)[0];
  mc->DeallocateTempTfLiteTensor(value);
  TF_LITE_ENSURE_MSG(context, scalar,
                     "StreamChain: an int16 PADV2 takes a constant int16 scalar pad value");
  return kTfLiteOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
