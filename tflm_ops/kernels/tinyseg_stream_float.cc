// StreamChain's float32 stages that complete the int8 set (tinyseg_stream_internal.h): TANH,
// HARD_SWISH, ELU, LEAKY_RELU, PRELU (alpha broadcast along height) and RESIZE_BILINEAR, each with
// TFLM's reference float arithmetic on the row (TFLM's CMSIS-NN build computes float32 with the
// same reference code), so every element is bit-identical to the unfused graph. SUB is in
// tinyseg_stream_arithmetic.cc, PADV2 in tinyseg_stream_layout.cc.
#include <cmath>
#include <cstdint>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/reference/elu.h"
#include "tensorflow/lite/kernels/internal/reference/hard_swish.h"
#include "tensorflow/lite/kernels/internal/reference/leaky_relu.h"
#include "tensorflow/lite/kernels/internal/reference/resize_bilinear.h"
#include "tensorflow/lite/kernels/internal/reference/tanh.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/prelu.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/micro_context.h"

namespace tflite {
namespace tinyseg_stream {

// ------------------------------------------------------------ TANH, HARD_SWISH, ELU

::tinyseg::Status TanhFloatRow(const EvalState&, const StageSlot&, const StageRow& r) {
  return MapRow<float>(reference_ops::Tanh, r);
}

::tinyseg::Status HardSwishFloatRow(const EvalState&, const StageSlot&, const StageRow& r) {
  return MapRow<float>(reference_ops::HardSwish, r);
}

// Float32 rows of the input's shape; the pool entries the body counts for every ELU stage (int8's
// lookup table, customops.STREAM_LOOKUP_TABLE_OPS) are taken and left unused.
TfLiteStatus PrepareEluFloat(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(PrepareSameShapeFloat(a, g));
  return TakePool(a.context, *a.d, contract::kStreamLookupTableBytes / sizeof(int32_t), a.pool_next,
                  &g.lookup.table);
}

::tinyseg::Status EluFloatRow(const EvalState&, const StageSlot&, const StageRow& r) {
  return MapRow<float>(reference_ops::Elu, r);
}

// ------------------------------------------------------------ LEAKY_RELU, PRELU

TfLiteStatus PrepareLeakyReluFloat(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(PrepareSameShapeFloat(a, g));
  return PrepareLeakyReluAlpha(a, g);
}

::tinyseg::Status LeakyReluFloatRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  return MapRow<float>(reference_ops::LeakyRelu, g.leaky_relu, r);
}

// PRELU's alpha: a constant float32 node input of one row (broadcast along height).
TfLiteStatus PreparePreluFloat(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(PrepareSameShapeFloat(a, g));
  bool ok = false;
  TfLiteQuantizationParams alpha = {};
  TF_LITE_ENSURE_STATUS(PreluAlpha(a, g, kTfLiteFloat32, &ok, &alpha));
  TF_LITE_ENSURE_MSG(a.context, ok, "StreamChain: PRELU needs a float32 alpha of one row");
  return kTfLiteOk;
}

::tinyseg::Status PreluFloatRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const TfLiteEvalTensor* alpha = micro::GetEvalInput(v.context, v.node, g.prelu.alpha);
  if (alpha == nullptr) return ::tinyseg::Status::kInvalidArgument;
  BroadcastPrelu4DSlowFloat(r.out_shape, reinterpret_cast<const float*>(r.src),
                            micro::GetTensorShape(alpha), micro::GetTensorData<float>(alpha),
                            r.out_shape, reinterpret_cast<float*>(r.dst));
  return ::tinyseg::Status::kOk;
}

// ------------------------------------------------------------ RESIZE_BILINEAR

namespace {

constexpr int64_t kFloatBilinearMaxSize = int64_t{1} << 15;
constexpr int64_t kFloatBilinearUnit = int64_t{1} << 20;  // the slack's denominator

bool PowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

int64_t Gcd(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int64_t FloorDiv(int64_t n, int64_t d) { return n >= 0 ? n / d : -((-n + d - 1) / d); }
int64_t CeilDiv(int64_t n, int64_t d) { return -FloorDiv(-n, d); }

}  // namespace

// The float32 RESIZE_BILINEAR row rule (customops.bilinear_float_row_rule): with TFLM's scale as
// the fraction num / den, the exact position of row y is (2 * y * num + offset) / (2 * den),
// offset = num - den with half-pixel centres, and its floor is the anchor; TFLM's float position of
// row y lies within `slack` of the exact one (0 when the scale is dyadic and every value fits
// float32's mantissa, else (in + 1) / 2^20, four times float32's error bound), so the rows it reads
// lie in [floor(p - slack), ceil(p + slack)] clipped to the input; before and after cover them for
// every output row. False for sizes the rule does not cover (an empty axis, past 2^15,
// align_corners onto one input row) or where a position's lower row could lie past the input.
bool BilinearFloatRule(int32_t in_h, int32_t out_h, bool align, bool half, RowRule* rule) {
  if (in_h < 1 || out_h < 1 || in_h > kFloatBilinearMaxSize || out_h > kFloatBilinearMaxSize ||
      (align && half)) {
    return false;
  }
  const bool corners = align && out_h > 1;
  const int64_t num = corners ? in_h - 1 : in_h;
  const int64_t den = corners ? out_h - 1 : out_h;
  if (num < 1) return false;
  const int64_t g = Gcd(num, den);
  const int64_t top = (num / g > den / g ? num / g : den / g);
  const bool exact = PowerOfTwo(den / g) && 4 * (int64_t{out_h} + 1) * top < (int64_t{1} << 24);
  const int64_t q = 2 * den * kFloatBilinearUnit;
  const int64_t slack = exact ? 0 : 2 * den * (int64_t{in_h} + 1);
  const int64_t offset = half ? num - den : 0;
  int64_t before = INT32_MIN, after = INT32_MIN;
  for (int64_t y = 0; y < out_h; ++y) {
    const int64_t p = (2 * y * num + offset) * kFloatBilinearUnit;
    if (FloorDiv(p + slack, q) > in_h - 1) return false;
    const int64_t lo_raw = FloorDiv(p - slack, q);
    const int64_t hi_raw = CeilDiv(p + slack, q);
    const int64_t lo = lo_raw > 0 ? lo_raw : 0;
    const int64_t hi = hi_raw < in_h - 1 ? hi_raw : in_h - 1;
    const int64_t anchor = FloorDiv(2 * y * num + offset, 2 * den);
    if (anchor - lo > before) before = anchor - lo;
    if (hi - anchor > after) after = hi - anchor;
  }
  rule->num = static_cast<int32_t>(2 * num);
  rule->den = static_cast<int32_t>(2 * den);
  rule->offset = static_cast<int32_t>(offset);
  rule->before = static_cast<int32_t>(before);
  rule->after = static_cast<int32_t>(after);
  return true;
}

// Float32, any factor, as TFLM's reference_ops::ResizeBilinear: the row rule above, the flags.
TfLiteStatus PrepareResizeBilinearFloat(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  bool align = false, half = false;
  TF_LITE_ENSURE_STATUS(BilinearFlags(a, g, kTfLiteFloat32, &align, &half));
  TF_LITE_ENSURE_MSG(context, in.channels == out.channels && in.width > 0 && out.width > 0,
                     "StreamChain: RESIZE_BILINEAR keeps the channels");
  TF_LITE_ENSURE_MSG(context, BilinearFloatRule(in.height, out.height, align, half, &g.rule),
                     "StreamChain: float32 RESIZE_BILINEAR's rows have no row rule");
  g.resamples = 1;
  g.resize.align_corners = align ? 1 : 0;
  g.resize.half_pixel_centers = half ? 1 : 0;
  return kTfLiteOk;
}

namespace {

// TFLM's float scale along one axis (reference_ops::ResizeBilinear).
float FloatScale(int32_t in_size, int32_t out_size, bool align) {
  float scale = static_cast<float>(in_size) / out_size;
  if (align && out_size > 1) scale = static_cast<float>(in_size - 1) / (out_size - 1);
  return scale;
}

}  // namespace

// One output row: TFLM's position of row y and its two rows (inside the band the rule gave), each
// output element the expression TFLM's float kernel evaluates, in its order.
::tinyseg::Status ResizeBilinearFloatRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  const bool align = g.resize.align_corners != 0;
  const bool half = g.resize.half_pixel_centers != 0;
  const float height_scale = FloatScale(r.in->height, r.out->height, align);
  const float width_scale = FloatScale(r.in->width, r.out->width, align);
  float input_y = 0.0f;
  int32_t y0 = 0, y1 = 0;
  reference_ops::ComputeInterpolationValues(static_cast<float>(r.y), height_scale, half,
                                            r.in->height, &input_y, &y0, &y1);
  if (y0 < r.lo || y1 < y0 || y1 >= r.lo + r.rows) return ::tinyseg::Status::kOutOfRange;
  const size_t channels = static_cast<size_t>(r.in->channels);
  const size_t stride = static_cast<size_t>(r.in->width) * channels;
  const float* row0 =
      reinterpret_cast<const float*>(r.src) + static_cast<size_t>(y0 - r.lo) * stride;
  const float* row1 =
      reinterpret_cast<const float*>(r.src) + static_cast<size_t>(y1 - r.lo) * stride;
  float* dst = reinterpret_cast<float*>(r.dst);
  for (int32_t x = 0; x < r.out->width; ++x) {
    float input_x = 0.0f;
    int32_t x0 = 0, x1 = 0;
    reference_ops::ComputeInterpolationValues(static_cast<float>(x), width_scale, half, r.in->width,
                                              &input_x, &x0, &x1);
    if (x0 < 0 || x0 >= r.in->width || x1 < x0) return ::tinyseg::Status::kOutOfRange;
    const size_t c0 = static_cast<size_t>(x0) * channels;
    const size_t c1 = static_cast<size_t>(x1) * channels;
    float* out = dst + static_cast<size_t>(x) * channels;
    for (size_t c = 0; c < channels; ++c) {
      out[c] = static_cast<float>(row0[c0 + c] * (1 - (input_y - y0)) * (1 - (input_x - x0)) +
                                  row1[c0 + c] * (input_y - y0) * (1 - (input_x - x0)) +
                                  row0[c1 + c] * (1 - (input_y - y0)) * (input_x - x0) +
                                  row1[c1 + c] * (input_y - y0) * (input_x - x0) + 0.0f);
    }
  }
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
