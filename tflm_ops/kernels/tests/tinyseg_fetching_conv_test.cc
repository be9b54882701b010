// FetchingConv2D against TFLM's own CONV_2D on the real concatenation: the
// outputs must be bit-identical for every padding, stride, dilation, band
// height, operand order and activation tried, in int8, int16x8 and float32.
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/micro/kernels/conv.h"
#include "tensorflow/lite/micro/kernels/kernel_runner.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tests/tinyseg_test_support.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/test_helpers.h"
#include "tensorflow/lite/micro/testing/micro_test.h"

namespace tflite {
namespace testing {
namespace {

using tinyseg_testing::AsChars;
using tinyseg_testing::ConvSpec;
using tinyseg_testing::FetchedSpec;
using tinyseg_testing::Random;

constexpr int kH = 9, kW = 7, kCa = 3, kCb = 2, kCin = kCa + kCb, kCout = 4, kK = 3;
constexpr int kSlot = 6;

// Spills as the Spill kernel would, through a staging buffer of block + 8.
::tinyseg::Status SpillDirect(::tinyseg::Runtime& rt, uint32_t slot, const void* data, size_t bytes,
                              uint32_t elem_size) {
  return rt.spill->Spill(slot, data, bytes, elem_size, tinyseg_testing::Storage().Staging());
}

struct Case {
  const char* padding;
  int stride;
  int dilation;
  const char* activation;
  int band_rows;
  int fetched_position;  // 0: [fetched, in-RAM], 1: [in-RAM, fetched]
};

const Case kCases[] = {
    {"SAME", 1, 1, "NONE", 1, 0},  {"SAME", 1, 1, "RELU", 2, 1},
    {"SAME", 2, 1, "NONE", 1, 1},  {"SAME", 2, 1, "RELU6", 3, 0},
    {"VALID", 1, 1, "NONE", 1, 1}, {"VALID", 2, 1, "NONE", 2, 0},
    {"SAME", 1, 2, "NONE", 1, 0},  {"VALID", 1, 2, "RELU", 1, 1},
    {"SAME", 1, 1, "NONE", kH, 1}, {"SAME", 3, 1, "RELU_N1_TO_1", 1, 0},
};

// The dims of operand a, of the concatenation, of the filter and of the bias (IntArrayFromInts
// views them in place).
int a_dims[] = {4, 1, kH, kW, kCa};
int cat_dims[] = {4, 1, kH, kW, kCin};
int f_dims[] = {4, kCout, kK, kK, kCin};
int b_dims[] = {1, kCout};

TfLitePadding Padding(const char* p) {
  return std::strcmp(p, "SAME") == 0 ? kTfLitePaddingSame : kTfLitePaddingValid;
}
TfLiteFusedActivation Activation(const char* a) {
  if (std::strcmp(a, "RELU") == 0) return kTfLiteActRelu;
  if (std::strcmp(a, "RELU6") == 0) return kTfLiteActRelu6;
  if (std::strcmp(a, "RELU_N1_TO_1") == 0) return kTfLiteActReluN1To1;
  return kTfLiteActNone;
}
int OutSize(int in, const Case& c) {
  const int eff = (kK - 1) * c.dilation + 1;
  return std::strcmp(c.padding, "SAME") == 0 ? (in + c.stride - 1) / c.stride
                                             : (in - eff + c.stride) / c.stride;
}

// Concatenates per pixel: first `c0` channels from x0, then `c1` from x1.
template <typename T>
void ConcatChannels(const T* x0, int c0, const T* x1, int c1, int pixels, T* out) {
  for (int p = 0; p < pixels; ++p) {
    std::memcpy(out + p * (c0 + c1), x0 + p * c0, c0 * sizeof(T));
    std::memcpy(out + p * (c0 + c1) + c0, x1 + p * c1, c1 * sizeof(T));
  }
}

// Runs CONV_2D on tensors {input, filter, bias, output}.
TfLiteStatus RunConv(TfLiteTensor* tensors, const Case& c) {
  int inputs_data[] = {3, 0, 1, 2};
  int outputs_data[] = {1, 3};
  TfLiteConvParams params = {Padding(c.padding), c.stride,   c.stride,     Activation(c.activation),
                             c.dilation,         c.dilation, kTfLiteNoType};
  const TFLMRegistration reg = Register_CONV_2D();
  micro::KernelRunner runner(reg, tensors, 4, IntArrayFromInts(inputs_data),
                             IntArrayFromInts(outputs_data), &params);
  TF_LITE_ENSURE_STATUS(runner.InitAndPrepare());
  return runner.Invoke();
}

// Runs FetchingConv2D on tensors {in-RAM operands..., filter, bias, output}.
TfLiteStatus RunFetchingConv(::tinyseg::Runtime& rt, TfLiteTensor* tensors, int n_in,
                             const std::vector<FetchedSpec>& fetched, const Case& c) {
  int inputs_data[8] = {n_in + 2};
  for (int i = 0; i < n_in + 2; ++i) inputs_data[i + 1] = i;
  int outputs_data[] = {1, n_in + 2};
  ConvSpec spec;
  spec.padding = c.padding;
  spec.stride_h = spec.stride_w = c.stride;
  spec.dilation_h = spec.dilation_w = c.dilation;
  spec.activation = c.activation;
  spec.band_rows = c.band_rows;
  const std::vector<uint8_t> options =
      tinyseg_testing::FetchingConvOptions(n_in + static_cast<int>(fetched.size()), fetched, spec);
  const TFLMRegistration reg = Register_FETCHING_CONV_2D();
  micro::KernelRunner runner(reg, tensors, n_in + 3, IntArrayFromInts(inputs_data),
                             IntArrayFromInts(outputs_data), nullptr);
  runner.GetFakeMicroContext()->set_external_context(&rt);
  TF_LITE_ENSURE_STATUS(runner.InitAndPrepare(AsChars(options), options.size()));
  return runner.Invoke();
}

// Quantized case (int8 or int16 activations, int8 filters, bias BiasT).
template <typename T, typename BiasT>
bool QuantizedCaseMatches(const Case& c, uint32_t seed, int zero_point) {
  ::tinyseg::Runtime& rt = tinyseg_testing::Storage().Reset();
  Random rng(seed);
  static T a[kH * kW * kCa], b[kH * kW * kCb], cat[kH * kW * kCin];
  static T want[kH * kW * kCout], got[kH * kW * kCout];
  static int8_t filter[kCout * kK * kK * kCin];
  static BiasT bias[kCout];
  const int32_t lo = sizeof(T) == 1 ? -128 : -4000, hi = sizeof(T) == 1 ? 127 : 4000;
  rng.Fill<T>(a, sizeof(a) / sizeof(T), lo, hi, 40, static_cast<T>(zero_point));
  rng.Fill<T>(b, sizeof(b) / sizeof(T), lo, hi, 40, static_cast<T>(zero_point));
  rng.Fill<int8_t>(filter, sizeof(filter), -127, 127, 10, 0);
  for (int i = 0; i < kCout; ++i) bias[i] = static_cast<BiasT>(rng.Int(-3000, 3000));
  if (c.fetched_position == 0) {
    ConcatChannels(b, kCb, a, kCa, kH * kW, cat);
  } else {
    ConcatChannels(a, kCa, b, kCb, kH * kW, cat);
  }
  const float in_scale = 0.05f, out_scale = 0.2f;
  const int out_h = OutSize(kH, c), out_w = OutSize(kW, c);
  int o_dims[] = {4, 1, out_h, out_w, kCout};
  // FloatArrayFromFloats rewrites its argument in place: a fresh array per call.
  float f_scales[] = {kCout, 0.011f, 0.02f, 0.017f, 0.031f};
  static int f_zps[] = {kCout, 0, 0, 0, 0};
  float bias_scales_data[kCout + 1] = {kCout};
  int bias_zps_data[kCout + 1] = {kCout};
  TfLiteAffineQuantization f_quant, bias_quant;
  TfLiteFloatArray* f_scale_array = FloatArrayFromFloats(f_scales);
  TfLiteTensor filter_t = CreatePerChannelQuantizedTensor(
      filter, IntArrayFromInts(f_dims), f_scale_array, IntArrayFromInts(f_zps), &f_quant, 0);
  TfLiteTensor bias_t = CreatePerChannelQuantizedBiasTensor(
      bias, IntArrayFromInts(b_dims), in_scale, f_scale_array,
      FloatArrayFromFloats(bias_scales_data), IntArrayFromInts(bias_zps_data), &bias_quant, 0);
  TfLiteIntArray* out_shape = IntArrayFromInts(o_dims);
  const int out_elems = out_h * out_w * kCout;

  TfLiteTensor ref[] = {
      CreateQuantizedTensor(cat, IntArrayFromInts(cat_dims), in_scale, zero_point), filter_t,
      bias_t, CreateQuantizedTensor(want, out_shape, out_scale, zero_point / 2)};
  if (RunConv(ref, c) != kTfLiteOk) return false;

  if (!::tinyseg::Ok(SpillDirect(rt, kSlot, b, sizeof(b), sizeof(T)))) return false;
  std::memset(got, 0x5a, sizeof(got));
  TfLiteTensor fused[] = {CreateQuantizedTensor(a, IntArrayFromInts(a_dims), in_scale, zero_point),
                          filter_t, bias_t,
                          CreateQuantizedTensor(got, out_shape, out_scale, zero_point / 2)};
  if (RunFetchingConv(rt, fused, 1, {FetchedSpec{c.fetched_position, kSlot, {1, kH, kW, kCb}}},
                      c) != kTfLiteOk) {
    return false;
  }
  return std::memcmp(want, got, out_elems * sizeof(T)) == 0 && !rt.spill->slot(kSlot)->live;
}

bool FloatCaseMatches(const Case& c, uint32_t seed, bool all_fetched) {
  ::tinyseg::Runtime& rt = tinyseg_testing::Storage().Reset();
  Random rng(seed);
  static float a[kH * kW * kCa], b[kH * kW * kCb], cat[kH * kW * kCin];
  static float want[kH * kW * kCout], got[kH * kW * kCout];
  static float filter[kCout * kK * kK * kCin], bias[kCout];
  rng.FillFloat(a, kH * kW * kCa, 40);
  rng.FillFloat(b, kH * kW * kCb, 40);
  rng.FillFloat(filter, kCout * kK * kK * kCin, 5);
  rng.FillFloat(bias, kCout, 0);
  if (c.fetched_position == 0) {
    ConcatChannels(b, kCb, a, kCa, kH * kW, cat);
  } else {
    ConcatChannels(a, kCa, b, kCb, kH * kW, cat);
  }
  const int out_h = OutSize(kH, c), out_w = OutSize(kW, c);
  int o_dims[] = {4, 1, out_h, out_w, kCout};
  TfLiteIntArray* out_shape = IntArrayFromInts(o_dims);
  TfLiteTensor filter_t = CreateTensor(filter, IntArrayFromInts(f_dims));
  TfLiteTensor bias_t = CreateTensor(bias, IntArrayFromInts(b_dims));
  TfLiteTensor ref[] = {CreateTensor(cat, IntArrayFromInts(cat_dims)), filter_t, bias_t,
                        CreateTensor(want, out_shape)};
  if (RunConv(ref, c) != kTfLiteOk) return false;

  if (!::tinyseg::Ok(SpillDirect(rt, kSlot, b, sizeof(b), 4))) return false;
  std::memset(got, 0, sizeof(got));
  TfLiteStatus s;
  if (all_fetched) {
    if (!::tinyseg::Ok(SpillDirect(rt, kSlot + 1, a, sizeof(a), 4))) return false;
    TfLiteTensor fused[] = {filter_t, bias_t, CreateTensor(got, out_shape)};
    const int a_pos = 1 - c.fetched_position;
    s = RunFetchingConv(rt, fused, 0,
                        {FetchedSpec{c.fetched_position, kSlot, {1, kH, kW, kCb}},
                         FetchedSpec{a_pos, kSlot + 1, {1, kH, kW, kCa}}},
                        c);
  } else {
    TfLiteTensor fused[] = {CreateTensor(a, IntArrayFromInts(a_dims)), filter_t, bias_t,
                            CreateTensor(got, out_shape)};
    s = RunFetchingConv(rt, fused, 1, {FetchedSpec{c.fetched_position, kSlot, {1, kH, kW, kCb}}},
                        c);
  }
  return s == kTfLiteOk && std::memcmp(want, got, out_h * out_w * kCout * sizeof(float)) == 0;
}

}  // namespace
}  // namespace testing
}  // namespace tflite

TF_LITE_MICRO_TESTS_BEGIN

TF_LITE_MICRO_TEST(Int8MatchesConcatenationPlusConv2D) {
  using namespace tflite::testing;
  TF_LITE_MICRO_EXPECT_EQ(
      0, tflite::tinyseg_testing::FailingCases(kCases, "int8", [](const Case& c, int i) {
        return QuantizedCaseMatches<int8_t, int32_t>(c, 100 + i, -3);
      }));
}

TF_LITE_MICRO_TEST(Int16MatchesConcatenationPlusConv2D) {
  using namespace tflite::testing;
  TF_LITE_MICRO_EXPECT_EQ(
      0, tflite::tinyseg_testing::FailingCases(kCases, "int16", [](const Case& c, int i) {
        const bool ok64 = QuantizedCaseMatches<int16_t, int64_t>(c, 200 + i, 0);
        const bool ok32 = QuantizedCaseMatches<int16_t, int32_t>(c, 300 + i, 0);
        return ok64 && ok32;
      }));
}

TF_LITE_MICRO_TEST(FloatMatchesConcatenationPlusConv2D) {
  using namespace tflite::testing;
  TF_LITE_MICRO_EXPECT_EQ(
      0, tflite::tinyseg_testing::FailingCases(kCases, "float", [](const Case& c, int i) {
        const bool ok = FloatCaseMatches(c, 400 + i, false);
        const bool all = FloatCaseMatches(c, 500 + i, true);
        return ok && all;
      }));
}

// Consecutive bands share input rows; they stay in the band buffer.
TF_LITE_MICRO_TEST(BandsReuseSharedRows) {
  using namespace tflite::testing;
  const Case c = {"SAME", 1, 1, "NONE", 1, 0};
  TF_LITE_MICRO_EXPECT((QuantizedCaseMatches<int8_t, int32_t>(c, 42, 0)));
  const ::tinyseg::RuntimeStats& stats = tflite::tinyseg_testing::Storage().runtime().stats;
  // 9 bands of 1 row, 3x3 SAME: 3 rows read per band, 2 of them kept from the
  // band before (bands 1..8), so every input row is fetched once.
  TF_LITE_MICRO_EXPECT_EQ(9u, static_cast<unsigned>(stats.bands));
  TF_LITE_MICRO_EXPECT_EQ(16u, static_cast<unsigned>(stats.reused_rows));
  TF_LITE_MICRO_EXPECT_EQ(static_cast<unsigned>(kH * kW * kCb),
                          static_cast<unsigned>(stats.fetched_bytes));
}

// A quantized FetchingConv2D needs one in-RAM operand for its input
// quantization; with none, Prepare fails instead of guessing.
TF_LITE_MICRO_TEST(QuantizedWithoutInRamOperandIsRejected) {
  using namespace tflite::testing;
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  static int8_t b[kH * kW * kCb], out[kH * kW * kCout], filter[kCout * kK * kK * kCb];
  static int32_t bias[kCout];
  static int fb_dims[] = {4, kCout, kK, kK, kCb};  // a filter over b's channels alone
  static int o_dims[] = {4, 1, kH, kW, kCout};
  float f_scales[] = {kCout, 0.01f, 0.01f, 0.01f, 0.01f};
  static int f_zps[] = {kCout, 0, 0, 0, 0};
  TfLiteAffineQuantization f_quant;
  TF_LITE_MICRO_EXPECT(::tinyseg::Ok(SpillDirect(rt, kSlot, b, sizeof(b), 1)));
  TfLiteTensor tensors[] = {CreatePerChannelQuantizedTensor(filter, IntArrayFromInts(fb_dims),
                                                            FloatArrayFromFloats(f_scales),
                                                            IntArrayFromInts(f_zps), &f_quant, 0),
                            CreateQuantizedTensor(bias, IntArrayFromInts(b_dims), 0.0005f, 0),
                            CreateQuantizedTensor(out, IntArrayFromInts(o_dims), 0.1f, 0)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError,
                          RunFetchingConv(rt, tensors, 0, {FetchedSpec{0, kSlot, {1, kH, kW, kCb}}},
                                          Case{"SAME", 1, 1, "NONE", 1, 0}));
}

// A band of every output row is one band; band_rows beyond the output is a
// malformed body, refused in Prepare (a model may come over the air).
TF_LITE_MICRO_TEST(BandRowsBeyondTheOutputAreRejected) {
  using namespace tflite::testing;
  static float a[kH * kW * kCa], b[kH * kW * kCb], out[kH * kW * kCout];
  static float filter[kCout * kK * kK * kCin], bias[kCout];
  static int o_dims[] = {4, 1, kH, kW, kCout};
  const std::vector<FetchedSpec> fetched = {FetchedSpec{0, kSlot, {1, kH, kW, kCb}},
                                            FetchedSpec{1, kSlot + 1, {1, kH, kW, kCa}}};
  for (const int rows : {kH, kH + 1, 2147483647}) {
    ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
    TF_LITE_MICRO_EXPECT(::tinyseg::Ok(SpillDirect(rt, kSlot, b, sizeof(b), 4)));
    TF_LITE_MICRO_EXPECT(::tinyseg::Ok(SpillDirect(rt, kSlot + 1, a, sizeof(a), 4)));
    TfLiteTensor tensors[] = {CreateTensor(filter, IntArrayFromInts(f_dims)),
                              CreateTensor(bias, IntArrayFromInts(b_dims)),
                              CreateTensor(out, IntArrayFromInts(o_dims))};
    const TfLiteStatus want = rows <= kH ? kTfLiteOk : kTfLiteError;
    TF_LITE_MICRO_EXPECT_EQ(
        want, RunFetchingConv(rt, tensors, 0, fetched, Case{"SAME", 1, 1, "NONE", rows, 0}));
  }
}

TF_LITE_MICRO_TESTS_END
