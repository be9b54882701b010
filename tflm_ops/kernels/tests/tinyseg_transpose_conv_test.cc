// TRANSPOSE_CONV with a TinySeg scratch marker: int8 outputs bit-identical to
// TFLM's reference arithmetic (reference_integer_ops::TransposeConv, called
// here directly) for the int16 accumulator and for int32 accumulators over
// bands of any height, and exactly the scratch sizes of docs/custom_ops.md.
// Runs against whichever TRANSPOSE_CONV the build links: the reference kernel,
// or CMSIS-NN's with OPTIMIZED_KERNEL_DIR=cmsis_nn (a marked operator leaves
// CMSIS-NN for the portable arithmetic). Where the linked kernel's unmarked
// output differs from the reference arithmetic (CMSIS-NN's
// arm_transpose_conv_s8 does for some shapes) the test says so and goes on.
#include <cstdint>
#include <cstring>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/transpose_conv.h"
#include "tensorflow/lite/kernels/internal/tensor_ctypes.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/kernels/padding.h"
#include "tensorflow/lite/micro/kernels/kernel_runner.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tests/tinyseg_test_support.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_transpose_conv.h"
#include "tensorflow/lite/micro/kernels/transpose_conv.h"
#include "tensorflow/lite/micro/test_helpers.h"
#include "tensorflow/lite/micro/testing/micro_test.h"

namespace tflite {
namespace testing {
namespace {

using tinyseg_ops::TransposeConvAccumulator;
using tinyseg_testing::Random;

constexpr int kInH = 4, kInW = 5, kCin = 3, kCout = 2;

struct Case {
  TfLitePadding padding;
  int stride;
  int kernel;
  bool bias;
};

const Case kCases[] = {
    {kTfLitePaddingSame, 1, 3, true},   {kTfLitePaddingSame, 2, 3, true},
    {kTfLitePaddingValid, 2, 3, true},  {kTfLitePaddingSame, 2, 4, false},
    {kTfLitePaddingValid, 1, 2, true},  {kTfLitePaddingSame, 3, 3, true},
    {kTfLitePaddingValid, 2, 2, false},  // the Tiny U-Net's up-sampling
};

int OutSize(int in, const Case& c) {
  return c.padding == kTfLitePaddingSame ? in * c.stride : (in - 1) * c.stride + c.kernel;
}

// TFLM's reference int8 arithmetic on tensors {shape, filter, input, bias, output}.
TfLiteStatus ReferenceTransposeConv(const Case& c, TfLiteTensor* t, int8_t* output) {
  const int out_h = OutSize(kInH, c), out_w = OutSize(kInW, c);
  int unused_h = 0, unused_w = 0;
  const TfLitePaddingValues pad = ComputePaddingHeightWidth(
      c.stride, c.stride, 1, 1, out_h, out_w, c.kernel, c.kernel, c.padding, &unused_h, &unused_w);
  ConvParams params = {};
  params.padding_values.height = pad.height;
  params.padding_values.width = pad.width;
  params.stride_height = c.stride;
  params.stride_width = c.stride;
  params.input_offset = -t[2].params.zero_point;
  params.output_offset = t[4].params.zero_point;
  int32_t multiplier[kCout], shift[kCout], unused_multiplier = 0;
  int unused_shift = 0;
  TfLiteContext context = {};
  TF_LITE_ENSURE_STATUS(PopulateConvolutionQuantizationParams(
      &context, &t[2], &t[1], c.bias ? &t[3] : nullptr, &t[4], kTfLiteActNone, &unused_multiplier,
      &unused_shift, &params.quantized_activation_min, &params.quantized_activation_max, multiplier,
      shift, kCout));
  static int32_t scratch[kCout * 12 * 15];
  reference_integer_ops::TransposeConv(
      params, multiplier, shift, GetTensorShape(&t[2]), GetTensorData<int8_t>(&t[2]),
      GetTensorShape(&t[1]), GetTensorData<int8_t>(&t[1]), GetTensorShape(&t[3]),
      c.bias ? GetTensorData<int32_t>(&t[3]) : nullptr, GetTensorShape(&t[4]), output,
      RuntimeShape(), nullptr, scratch);
  return kTfLiteOk;
}

// Marker tensor: `type` with shape [0, rows]; kTfLiteNoType for no marker.
// With `reference`, also writes TFLM's reference arithmetic's output there.
TfLiteStatus RunTransposeConv(const Case& c, TfLiteType marker_type, int rows, const int8_t* input,
                              const int8_t* filter, const int32_t* bias, int8_t* output,
                              TfLiteType input_type = kTfLiteInt8, int8_t* reference = nullptr) {
  const int out_h = OutSize(kInH, c), out_w = OutSize(kInW, c);
  static int32_t out_shape_data[4];
  out_shape_data[0] = 1;
  out_shape_data[1] = out_h;
  out_shape_data[2] = out_w;
  out_shape_data[3] = kCout;
  static int shape_dims[] = {1, 4};
  static int in_dims[] = {4, 1, kInH, kInW, kCin};
  int f_dims[] = {4, kCout, c.kernel, c.kernel, kCin};
  static int b_dims[] = {1, kCout};
  int o_dims[] = {4, 1, out_h, out_w, kCout};
  int marker_dims[] = {2, 0, rows};
  // FloatArrayFromFloats rewrites its argument in place: fresh arrays per call.
  float f_scales[] = {kCout, 0.02f, 0.03f};
  int f_zps[] = {kCout, 0, 0};
  float bias_scales[kCout + 1] = {kCout};
  int bias_zps[kCout + 1] = {kCout};
  const float in_scale = 0.1f;
  TfLiteAffineQuantization f_quant, b_quant;
  TfLiteFloatArray* f_scale_array = FloatArrayFromFloats(f_scales);
  TfLiteTensor tensors[] = {
      CreateTensor(out_shape_data, IntArrayFromInts(shape_dims)),
      CreatePerChannelQuantizedTensor(filter, IntArrayFromInts(f_dims), f_scale_array,
                                      IntArrayFromInts(f_zps), &f_quant, 0),
      CreateQuantizedTensor(input, IntArrayFromInts(in_dims), in_scale, -5),
      CreatePerChannelQuantizedBiasTensor(bias, IntArrayFromInts(b_dims), in_scale, f_scale_array,
                                          FloatArrayFromFloats(bias_scales),
                                          IntArrayFromInts(bias_zps), &b_quant, 0),
      CreateQuantizedTensor(output, IntArrayFromInts(o_dims), 0.25f, 7),
      CreateTensor(static_cast<const int16_t*>(nullptr), IntArrayFromInts(marker_dims)),
  };
  tensors[5].type = marker_type;
  if (input_type == kTfLiteFloat32) {
    tensors[1].type = tensors[2].type = tensors[3].type = tensors[4].type = kTfLiteFloat32;
  }
  int inputs_with_bias[] = {4, 0, 1, 2, 3};
  int inputs_without_bias[] = {3, 0, 1, 2};
  int outputs_data[] = {1, 4};
  int marker_data[] = {1, 5};
  if (reference != nullptr) {
    TF_LITE_ENSURE_STATUS(ReferenceTransposeConv(c, tensors, reference));
  }
  TfLiteTransposeConvParams params = {c.padding, c.stride, c.stride, kTfLiteActNone, kTfLiteNoType};
  const TFLMRegistration reg = Register_TRANSPOSE_CONV();
  micro::KernelRunner runner(
      reg, tensors, 6, IntArrayFromInts(c.bias ? inputs_with_bias : inputs_without_bias),
      IntArrayFromInts(outputs_data), &params,
      marker_type == kTfLiteNoType ? nullptr : IntArrayFromInts(marker_data));
  TF_LITE_ENSURE_STATUS(runner.InitAndPrepare(reinterpret_cast<const char*>(&params)));
  return runner.Invoke();
}

// Marked output equals the reference arithmetic (and, usually, the unmarked kernel).
bool MarkedMatches(const Case& c, TfLiteType marker_type, int rows, uint32_t seed,
                   int8_t max_weight) {
  Random rng(seed);
  static int8_t input[kInH * kInW * kCin];
  static int8_t filter[kCout * 4 * 4 * kCin];
  static int32_t bias[kCout];
  static int8_t want[kCout * 12 * 15], got[kCout * 12 * 15], unmarked[kCout * 12 * 15];
  rng.Fill<int8_t>(input, sizeof(input), -128, 127, 20, -5);
  rng.Fill<int8_t>(filter, sizeof(filter), -max_weight, max_weight, 10, 0);
  for (int i = 0; i < kCout; ++i) bias[i] = rng.Int(-500, 500);
  const size_t n = static_cast<size_t>(OutSize(kInH, c)) * OutSize(kInW, c) * kCout;
  std::memset(want, 1, sizeof(want));
  std::memset(got, 2, sizeof(got));
  std::memset(unmarked, 3, sizeof(unmarked));
  if (RunTransposeConv(c, kTfLiteNoType, 0, input, filter, bias, unmarked, kTfLiteInt8, want) !=
      kTfLiteOk) {
    return false;
  }
  if (std::memcmp(want, unmarked, n) != 0) {
    MicroPrintf(
        "note: the linked TRANSPOSE_CONV differs from TFLM's reference "
        "arithmetic (kernel %d, stride %d, %s)",
        c.kernel, c.stride, c.padding == kTfLitePaddingSame ? "SAME" : "VALID");
  }
  if (RunTransposeConv(c, marker_type, rows, input, filter, bias, got) != kTfLiteOk) {
    return false;
  }
  return std::memcmp(want, got, n) == 0;
}

}  // namespace
}  // namespace testing
}  // namespace tflite

TF_LITE_MICRO_TESTS_BEGIN

TF_LITE_MICRO_TEST(Int32BandsMatchReference) {
  using namespace tflite::testing;
  TF_LITE_MICRO_EXPECT_EQ(
      0, tflite::tinyseg_testing::FailingCases(kCases, "int32", [](const Case& c, int i) {
        bool ok = true;
        for (int rows : {1, 2, 3, 100}) {
          if (MarkedMatches(c, kTfLiteInt32, rows, 10 + i, 127)) continue;
          MicroPrintf("case %d, bands of %d rows differ", i, rows);
          ok = false;
        }
        return ok;
      }));
}

// Weights small enough that every partial sum fits int16 (|x - zp| <= 255,
// 3 input channels, at most 16 taps, |w| <= 2: 24480 < 32767).
TF_LITE_MICRO_TEST(Int16AccumulatorMatchesReference) {
  using namespace tflite::testing;
  TF_LITE_MICRO_EXPECT_EQ(0, tflite::tinyseg_testing::FailingCases(
                                 kCases, "int16 accumulator", [](const Case& c, int i) {
                                   return MarkedMatches(c, kTfLiteInt16, 0, 20 + i, 2);
                                 }));
}

TF_LITE_MICRO_TEST(ScratchBytesFollowTheContract) {
  using namespace tflite;
  using tinyseg_ops::TransposeConvAccumulator;
  using tinyseg_ops::TransposeConvMarker;
  const int32_t dims[] = {1, 12, 15, 8};
  const RuntimeShape out(4, dims);
  TransposeConvMarker m;
  TF_LITE_MICRO_EXPECT_EQ(12u * 15u * 8u * 4u,
                          static_cast<unsigned>(tinyseg_ops::TransposeConvScratchBytes(m, out)));
  m.accumulator = TransposeConvAccumulator::kInt16;
  TF_LITE_MICRO_EXPECT_EQ(12u * 15u * 8u * 2u,
                          static_cast<unsigned>(tinyseg_ops::TransposeConvScratchBytes(m, out)));
  m.accumulator = TransposeConvAccumulator::kInt32Bands;
  m.band_rows = 2;
  TF_LITE_MICRO_EXPECT_EQ(2u * 15u * 8u * 4u,
                          static_cast<unsigned>(tinyseg_ops::TransposeConvScratchBytes(m, out)));
  m.band_rows = 50;
  TF_LITE_MICRO_EXPECT_EQ(12u * 15u * 8u * 4u,
                          static_cast<unsigned>(tinyseg_ops::TransposeConvScratchBytes(m, out)));
}

// Only int8 operators are narrowed; a marker elsewhere is a model error.
TF_LITE_MICRO_TEST(MarkerOnFloatIsRejected) {
  using namespace tflite::testing;
  static float input[kInH * kInW * kCin], filter[kCout * 3 * 3 * kCin], bias[kCout];
  static float output[kCout * kInH * kInW];
  const Case c = {kTfLitePaddingSame, 1, 3, true};
  TF_LITE_MICRO_EXPECT_EQ(
      kTfLiteError, RunTransposeConv(c, kTfLiteInt32, 1, reinterpret_cast<const int8_t*>(input),
                                     reinterpret_cast<const int8_t*>(filter),
                                     reinterpret_cast<const int32_t*>(bias),
                                     reinterpret_cast<int8_t*>(output), kTfLiteFloat32));
}

TF_LITE_MICRO_TESTS_END
