// StreamChain's int16 (16x8) TRANSPOSE_CONV and PADV2 stages (tinyseg_stream_internal.h,
// Rows::kInt16).
//
// TRANSPOSE_CONV: transpose_conv.cc's int16 case calls reference_integer_ops::TransposeConv with
// an int64 bias (or none) and an int64 scratch it zeroes and scatters into (every build: TFLM's
// CMSIS-NN TRANSPOSE_CONV has no int16 kernel); an int16 bias it first widens into a second int64
// scratch buffer (bias_converted). Output row y comes from the band of input rows whose filter
// rows reach it (ConvGeometry's window): with an int64 bias or none the row calls the same
// function on that band with the top padding shifted so that its one output row is row y; with
// an int16 bias the row scatters the same products into the same accumulator and widens each bias
// value where it adds it (no bias buffer), then requantizes as TFLM does. The int64 accumulator is
// one output row (width * channels * 8 bytes) at the start of op_scratch, which the planner sizes
// for it (stream.row_step_scratch). Same integer sums (exact in int64, whatever their order), same
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
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_params.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"

namespace tflite {
namespace tinyseg_stream {
namespace {

// The int8 filter [C_out, kh, kw, C_in] and an int64 or int16 bias of C_out or none (TFLM's int16
// kernel reads an int64 one as it is, widens an int16 one and skips a missing one; an int32 one it
// would read as int64, so it is refused), the geometry, and TFLM's per-channel requantization.
TfLiteStatus PrepareTransposeInt16With(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                                       const TensorSlot& out, TfLiteTensor* filter,
                                       TfLiteTensor* bias) {
  TF_LITE_ENSURE_STATUS(FilterAndGeometry(
      a, g, in, out, filter, kTfLiteInt8,
      bias == nullptr || BiasFits(bias, out, kTfLiteInt64, kTfLiteInt16),
      "an int16 TRANSPOSE_CONV stage needs an int8 filter of its output channels and an int64 or "
      "int16 bias or none"));
  return Requantization(a, g, in, out, filter, bias);
}

}  // namespace

TfLiteStatus PrepareTransposeConvInt16(const StageArgs& a, StageSlot& g) {
  return PrepareConvOf(a, g, kTfLiteInt16, PrepareTransposeInt16With);
}

namespace {

// Band row j through filter row fy into the accumulator row.
void ScatterInt16BandRow(const ConvStage& c, const StageRow& r, const TfLiteEvalTensor* filter,
                         int32_t j, int32_t fy, int64_t* acc) {
  const int32_t out_w = r.out->width, out_c = r.out->channels;
  const int32_t in_w = r.in_shape.Dims(2), in_c = r.in_shape.Dims(3);
  const int8_t* weights = micro::GetTensorData<int8_t>(filter);
  const auto* in = reinterpret_cast<const int16_t*>(r.src) + static_cast<size_t>(j) * in_w * in_c;
  for (int32_t x = 0; x < in_w; ++x) {
    for (int32_t fx = 0; fx < c.filter_w; ++fx) {
      const int32_t ox = x * c.stride_w - c.pad_w + fx;
      if (ox < 0 || ox >= out_w) continue;
      for (int32_t oc = 0; oc < out_c; ++oc) {
        const int8_t* w = weights + ((oc * c.filter_h + fy) * c.filter_w + fx) * in_c;
        int64_t sum = 0;
        for (int32_t ic = 0; ic < in_c; ++ic) {
          sum += static_cast<int32_t>(in[x * in_c + ic]) * static_cast<int32_t>(w[ic]);
        }
        acc[ox * out_c + oc] += sum;
      }
    }
  }
}

// The int16 bias's row: each band row j (input row r.lo + j) through filter row
// fy = y - (lo + j) * stride + pad_h, where it reaches row y, scattered into the zeroed int64
// accumulator row as TFLM's loop scatters it, each product int16 x int8 in int32 added in int64.
void ScatterInt16Row(const ConvStage& c, const StageRow& r, const TfLiteEvalTensor* filter,
                     int64_t* acc) {
  const int32_t out_w = r.out->width, out_c = r.out->channels;
  for (int32_t i = 0; i < out_w * out_c; ++i) acc[i] = 0;
  for (int32_t j = 0; j < r.rows; ++j) {
    const int32_t fy = TransposePadTop(c, r) - j * c.stride_h;
    if (fy >= 0 && fy < c.filter_h) ScatterInt16BandRow(c, r, filter, j, fy, acc);
  }
}

// The accumulator row plus the int16 bias (widened as it is added), requantized per channel and
// clamped as TFLM's int16 TransposeConv does (int16 rows: no output offset).
void RequantizeInt16Row(const ConvStage& c, const StageRow& r, const int32_t* pool,
                        const int16_t* bias, const int64_t* acc) {
  const int32_t out_w = r.out->width, out_c = r.out->channels;
  auto* out = reinterpret_cast<int16_t*>(r.dst);
  for (int32_t x = 0; x < out_w; ++x) {
    for (int32_t oc = 0; oc < out_c; ++oc) {
      const int64_t sum = acc[x * out_c + oc] + static_cast<int64_t>(bias[oc]);
      int32_t scaled = MultiplyByQuantizedMultiplier(sum, pool[oc], pool[out_c + oc]);
      scaled = scaled < c.act_min ? c.act_min : scaled;
      scaled = scaled > c.act_max ? c.act_max : scaled;
      out[x * out_c + oc] = static_cast<int16_t>(scaled);
    }
  }
}

}  // namespace

// Output row y from the band of input rows lo ..; the int64 accumulator row is op_scratch's
// (ConvGeometry checked its size).
::tinyseg::Status TransposeConvInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  const int64_t need = static_cast<int64_t>(r.out->width) * r.out->channels * 8;
  if (MemberScratchBytes(*v.d) < need) return ::tinyseg::Status::kInvalidArgument;
  const ConvConstants k = ConvConstantsOf(v, c);
  const int32_t* pool = Multipliers(v, c);
  auto* acc = reinterpret_cast<int64_t*>(v.op_scratch);
  if (k.bias != nullptr && k.bias->type == kTfLiteInt16) {
    ScatterInt16Row(c, r, k.filter, acc);
    RequantizeInt16Row(c, r, pool, micro::GetTensorData<int16_t>(k.bias), acc);
    return ::tinyseg::Status::kOk;
  }
  reference_integer_ops::TransposeConv(
      TransposeRowParams(ConvParamsOf<ConvParams>(c, TransposePadTop(c, r))), pool,
      pool + r.out->channels, r.in_shape, reinterpret_cast<const int16_t*>(r.src),
      micro::GetTensorShape(k.filter), micro::GetTensorData<int8_t>(k.filter),
      micro::GetTensorShape(k.bias), micro::GetOptionalTensorData<int64_t>(k.bias), r.out_shape,
      reinterpret_cast<int16_t*>(r.dst), RuntimeShape(), nullptr, acc);
  return ::tinyseg::Status::kOk;
}

// int16 PADV2: the paddings as PAD's, the pad value a constant int16 scalar (pad_common.cc checks
// its type and size only; its bits are the output's).
TfLiteStatus PreparePadv2Int16(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(PreparePadInt16(a, g));
  g.pad.value = ConstantOperand(*a.tab, g, 1, false);  // PreparePadInt16 cleared it (PAD has none)
  return PadValue(a, a.tab->tensor(g.output), g.pad);
}

}  // namespace tinyseg_stream
}  // namespace tflite
