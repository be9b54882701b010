// TRANSPOSE_CONV scratch narrowing (docs/custom_ops.md, paper section 5.3).
//
// TFLM's int8 TRANSPOSE_CONV scatters into an int32 accumulator as large as its
// output. The optimizer marks an operator with one zero-size tensor in its
// `intermediates`:
//   INT16, shape [0, 0]     int16 accumulator over the whole output (written
//                           only when the optimizer proved no partial sum
//                           leaves int16)       scratch: out_elements * 2
//   INT32, shape [0, rows]  int32 accumulator over bands of `rows` output
//                           rows, exact for any weights
//                           scratch: min(rows, H_out) * W_out * C_out * 4
// The patched TRANSPOSE_CONV kernels (reference and CMSIS-NN) call the
// functions below: in Prepare to read the marker and size the scratch, in Eval
// to run reference_integer_ops::TransposeConv's arithmetic with the narrowed
// accumulator. Outputs are bit-identical to the unmarked kernel.
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_TRANSPOSE_CONV_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_TRANSPOSE_CONV_H_

#include <cstddef>
#include <cstdint>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_tflm_compat.h"
#include "tensorflow/lite/kernels/internal/runtime_shape.h"
#include "tensorflow/lite/kernels/internal/types.h"

namespace tflite {
namespace tinyseg_ops {

enum class TransposeConvAccumulator : int32_t {
  kNone = 0,       // unmarked: TFLM's own scratch and arithmetic
  kInt16 = 1,      // int16 accumulator over the whole output
  kInt32Bands = 2  // int32 accumulator over bands of band_rows output rows
};

struct TransposeConvMarker {
  TransposeConvAccumulator accumulator = TransposeConvAccumulator::kNone;
  int band_rows = 0;
  bool marked() const { return accumulator != TransposeConvAccumulator::kNone; }
};

// Prepare only: reads the marker from node->intermediates (size 1, a
// zero-size INT16 or INT32 tensor of rank 2). An operator without one is
// unmarked. A marker on a non-int8 operator is an error.
TfLiteStatus ReadTransposeConvMarker(TfLiteContext* context, TfLiteNode* node,
                                     TfLiteType input_type, TransposeConvMarker* marker);

// Scratch bytes for the int8 accumulator: TFLM's out_elements * 4 when
// unmarked, the narrowed figure above when marked.
size_t TransposeConvScratchBytes(const TransposeConvMarker& marker,
                                 const RuntimeShape& output_shape);

// reference_integer_ops::TransposeConv's int8 arithmetic with the marker's
// accumulator; `scratch` holds TransposeConvScratchBytes(marker, ...) bytes.
void TransposeConvNarrowed(const TransposeConvMarker& marker, const ConvParams& params,
                           const int32_t* output_multiplier, const int32_t* output_shift,
                           const RuntimeShape& input_shape, const int8_t* input_data,
                           const RuntimeShape& filter_shape, const int8_t* filter_data,
                           const RuntimeShape& bias_shape, const int32_t* bias_data,
                           const RuntimeShape& output_shape, int8_t* output_data, void* scratch);

// Eval of a marked int8 TRANSPOSE_CONV node (inputs: 0 output shape,
// 1 filter, 2 input, 3 optional bias; output 0), as both patched kernels need.
TfLiteStatus EvalTransposeConvNarrowed(TfLiteContext* context, TfLiteNode* node,
                                       const TransposeConvMarker& marker, const ConvParams& params,
                                       const int32_t* output_multiplier,
                                       const int32_t* output_shift, int scratch_index);

}  // namespace tinyseg_ops
}  // namespace tflite

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_TRANSPOSE_CONV_H_
