// TRANSPOSE_CONV scratch narrowing (see tinyseg_transpose_conv.h).
//
// The scatter below is reference_integer_ops::TransposeConv's: for every input
// element and filter tap, (input + input_offset) * filter is added to the
// accumulator of the output element it lands on; then each accumulator gets
// the bias, TFLM's per-channel requantization, the output offset and the
// activation clamp. Integer addition is exact in any order, so restricting
// the scatter to one band of output rows at a time (int32) or storing the
// accumulator in int16 when no partial sum can leave int16 gives the same
// bits as the int32 accumulator over the whole output.
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_transpose_conv.h"

#include <algorithm>
#include <cstring>

#include "tensorflow/lite/kernels/internal/common.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"

namespace tflite {
namespace tinyseg_ops {

TfLiteStatus ReadTransposeConvMarker(TfLiteContext* context, TfLiteNode* node,
                                     TfLiteType input_type, TransposeConvMarker* marker) {
  *marker = TransposeConvMarker();
  if (node->intermediates == nullptr || node->intermediates->size != 1) {
    return kTfLiteOk;
  }
  MicroContext* micro_context = GetMicroContext(context);
  TfLiteTensor* t = micro_context->AllocateTempIntermediateTensor(node, 0);
  if (t == nullptr) return kTfLiteOk;
  const bool rank2_empty = t->dims != nullptr && t->dims->size == 2 && t->dims->data[0] == 0;
  if (rank2_empty && t->type == kTfLiteInt16) {
    marker->accumulator = TransposeConvAccumulator::kInt16;
  } else if (rank2_empty && t->type == kTfLiteInt32) {
    marker->accumulator = TransposeConvAccumulator::kInt32Bands;
    marker->band_rows = std::max(t->dims->data[1], 1);
  }
  micro_context->DeallocateTempTfLiteTensor(t);
  if (marker->marked() && input_type != kTfLiteInt8) {
    MicroPrintf(
        "TRANSPOSE_CONV: TinySeg scratch marker on a %s operator "
        "(only int8 is narrowed)",
        TfLiteTypeGetName(input_type));
    return kTfLiteError;
  }
  return kTfLiteOk;
}

size_t TransposeConvScratchBytes(const TransposeConvMarker& marker,
                                 const RuntimeShape& output_shape) {
  const size_t elements = static_cast<size_t>(output_shape.FlatSize());
  switch (marker.accumulator) {
    case TransposeConvAccumulator::kInt16:
      return elements * sizeof(int16_t);
    case TransposeConvAccumulator::kInt32Bands: {
      const int rows = std::min(marker.band_rows, static_cast<int>(output_shape.Dims(1)));
      return static_cast<size_t>(rows) * output_shape.Dims(2) * output_shape.Dims(3) *
             sizeof(int32_t);
    }
    case TransposeConvAccumulator::kNone:
    default:
      return elements * sizeof(int32_t);
  }
}

namespace {

struct Geometry {
  int batches, in_h, in_w, in_c, k_h, k_w, out_h, out_w, out_c;
  int stride_h, stride_w, pad_h, pad_w;
  int32_t input_offset;
};

// Scatters input rows [y0, y1] of batch b into acc, which holds output rows
// [r0, r1) (row r0 at acc[0]); taps landing outside those rows are skipped.
template <typename Acc>
void Scatter(const Geometry& g, int b, int y0, int y1, int r0, int r1,
             const RuntimeShape& input_shape, const int8_t* input, const RuntimeShape& filter_shape,
             const int8_t* filter, Acc* acc) {
  for (int in_y = y0; in_y <= y1; ++in_y) {
    for (int in_x = 0; in_x < g.in_w; ++in_x) {
      for (int in_c = 0; in_c < g.in_c; ++in_c) {
        const int out_x_origin = in_x * g.stride_w - g.pad_w;
        const int out_y_origin = in_y * g.stride_h - g.pad_h;
        const int32_t in_value = input[Offset(input_shape, b, in_y, in_x, in_c)] + g.input_offset;
        for (int f_y = 0; f_y < g.k_h; ++f_y) {
          const int out_y = out_y_origin + f_y;
          if (out_y < r0 || out_y >= r1) continue;
          for (int f_x = 0; f_x < g.k_w; ++f_x) {
            const int out_x = out_x_origin + f_x;
            if (out_x < 0 || out_x >= g.out_w) continue;
            Acc* row = acc + (static_cast<size_t>(out_y - r0) * g.out_w + out_x) * g.out_c;
            for (int oc = 0; oc < g.out_c; ++oc) {
              const int32_t product = in_value * filter[Offset(filter_shape, oc, f_y, f_x, in_c)];
              row[oc] = static_cast<Acc>(row[oc] + product);
            }
          }
        }
      }
    }
  }
}

// Bias, requantization, offset and clamp of output rows [r0, r1) of batch b.
template <typename Acc>
void Finish(const Geometry& g, const ConvParams& params, const int32_t* multiplier,
            const int32_t* shift, const int32_t* bias, int b, int r0, int r1, const Acc* acc,
            int8_t* output) {
  for (int out_y = r0; out_y < r1; ++out_y) {
    for (int out_x = 0; out_x < g.out_w; ++out_x) {
      const Acc* row = acc + (static_cast<size_t>(out_y - r0) * g.out_w + out_x) * g.out_c;
      int8_t* dst =
          output + ((static_cast<size_t>(b) * g.out_h + out_y) * g.out_w + out_x) * g.out_c;
      for (int oc = 0; oc < g.out_c; ++oc) {
        int32_t v = static_cast<int32_t>(row[oc]);
        if (bias != nullptr) v += bias[oc];
        v = MultiplyByQuantizedMultiplier(v, multiplier[oc], shift[oc]);
        v += params.output_offset;
        v = std::max(v, params.quantized_activation_min);
        v = std::min(v, params.quantized_activation_max);
        dst[oc] = static_cast<int8_t>(v);
      }
    }
  }
}

}  // namespace

void TransposeConvNarrowed(const TransposeConvMarker& marker, const ConvParams& params,
                           const int32_t* output_multiplier, const int32_t* output_shift,
                           const RuntimeShape& input_shape, const int8_t* input_data,
                           const RuntimeShape& filter_shape, const int8_t* filter_data,
                           const RuntimeShape& bias_shape, const int32_t* bias_data,
                           const RuntimeShape& output_shape, int8_t* output_data, void* scratch) {
  TFLITE_DCHECK_EQ(input_shape.DimensionsCount(), 4);
  TFLITE_DCHECK_EQ(filter_shape.DimensionsCount(), 4);
  TFLITE_DCHECK_EQ(output_shape.DimensionsCount(), 4);
  Geometry g;
  g.batches = MatchingDim(input_shape, 0, output_shape, 0);
  g.in_h = input_shape.Dims(1);
  g.in_w = input_shape.Dims(2);
  g.in_c = MatchingDim(input_shape, 3, filter_shape, 3);
  g.k_h = filter_shape.Dims(1);
  g.k_w = filter_shape.Dims(2);
  g.out_h = output_shape.Dims(1);
  g.out_w = output_shape.Dims(2);
  g.out_c = MatchingDim(filter_shape, 0, output_shape, 3);
  g.stride_h = params.stride_height;
  g.stride_w = params.stride_width;
  g.pad_h = params.padding_values.height;
  g.pad_w = params.padding_values.width;
  g.input_offset = params.input_offset;
  if (bias_data != nullptr) {
    TFLITE_DCHECK_EQ(bias_shape.FlatSize(), g.out_c);
  }
  (void)bias_shape;
  const size_t row_elements = static_cast<size_t>(g.out_w) * g.out_c;

  if (marker.accumulator == TransposeConvAccumulator::kInt16) {
    auto* acc = static_cast<int16_t*>(scratch);
    for (int b = 0; b < g.batches; ++b) {
      std::memset(acc, 0, row_elements * g.out_h * sizeof(int16_t));
      Scatter(g, b, 0, g.in_h - 1, 0, g.out_h, input_shape, input_data, filter_shape, filter_data,
              acc);
      Finish(g, params, output_multiplier, output_shift, bias_data, b, 0, g.out_h, acc,
             output_data);
    }
    return;
  }

  // int32 in bands: only input rows whose taps reach [r0, r1) are scattered.
  auto* acc = static_cast<int32_t*>(scratch);
  const int rows = std::max(std::min(marker.band_rows, g.out_h), 1);
  for (int b = 0; b < g.batches; ++b) {
    for (int r0 = 0; r0 < g.out_h; r0 += rows) {
      const int r1 = std::min(r0 + rows, g.out_h);
      std::memset(acc, 0, row_elements * (r1 - r0) * sizeof(int32_t));
      // out_y = in_y * stride - pad + f_y lands in [r0, r1) for some f_y.
      const int lo = r0 + g.pad_h - (g.k_h - 1);
      const int y0 = lo <= 0 ? 0 : (lo + g.stride_h - 1) / g.stride_h;
      const int y1 = std::min(g.in_h - 1, (r1 - 1 + g.pad_h) / g.stride_h);
      Scatter(g, b, y0, y1, r0, r1, input_shape, input_data, filter_shape, filter_data, acc);
      Finish(g, params, output_multiplier, output_shift, bias_data, b, r0, r1, acc, output_data);
    }
  }
}

TfLiteStatus EvalTransposeConvNarrowed(TfLiteContext* context, TfLiteNode* node,
                                       const TransposeConvMarker& marker, const ConvParams& params,
                                       const int32_t* output_multiplier,
                                       const int32_t* output_shift, int scratch_index) {
#ifdef USE_TFLM_COMPRESSION
  MicroContext* micro_context = GetMicroContext(context);
  if (micro_context->GetTensorCompressionData(node, 1) != nullptr ||
      micro_context->GetTensorCompressionData(node, 3) != nullptr) {
    MicroPrintf(
        "TRANSPOSE_CONV: compressed weights are not supported with "
        "TinySeg's narrowed scratch");
    return kTfLiteError;
  }
#endif  // USE_TFLM_COMPRESSION
  const TfLiteEvalTensor* filter = micro::GetEvalInput(context, node, 1);
  const TfLiteEvalTensor* input = micro::GetEvalInput(context, node, 2);
  const TfLiteEvalTensor* bias =
      NumInputs(node) == 4 ? micro::GetEvalInput(context, node, 3) : nullptr;
  TfLiteEvalTensor* output = micro::GetEvalOutput(context, node, 0);
  void* scratch = context->GetScratchBuffer(context, scratch_index);
  TF_LITE_ENSURE(context, scratch != nullptr);
  TF_LITE_ENSURE_EQ(context, input->type, kTfLiteInt8);
  TransposeConvNarrowed(marker, params, output_multiplier, output_shift,
                        micro::GetTensorShape(input), micro::GetTensorData<int8_t>(input),
                        micro::GetTensorShape(filter), micro::GetTensorData<int8_t>(filter),
                        micro::GetTensorShape(bias), micro::GetOptionalTensorData<int32_t>(bias),
                        micro::GetTensorShape(output), micro::GetTensorData<int8_t>(output),
                        scratch);
  return kTfLiteOk;
}

}  // namespace tinyseg_ops
}  // namespace tflite
