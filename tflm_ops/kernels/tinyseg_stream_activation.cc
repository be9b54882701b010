// StreamChain's activation family (tinyseg_stream_internal.h): the stages that map each element of
// a row on its own -- QUANTIZE, DEQUANTIZE, LOGISTIC, TANH, RELU, RELU6, HARD_SWISH, LEAKY_RELU,
// PRELU (alpha broadcast along height) and ELU -- with the parameters TFLM's own Prepare computes
// and TFLM's reference arithmetic on the row; QUANTIZE, DEQUANTIZE, RELU and RELU6 of int8 and
// int16 (16x8) rows share their code, as TFLM's kernels do; float32 RELU, RELU6 and LOGISTIC and
// QUANTIZE float32 -> int8 and float32 -> int16 as TFLM's float paths compute them.
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/common.h"
#include "tensorflow/lite/kernels/internal/cppmath.h"
#include "tensorflow/lite/kernels/internal/quantization_util.h"
#include "tensorflow/lite/kernels/internal/reference/dequantize.h"
#include "tensorflow/lite/kernels/internal/reference/hard_swish.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/logistic.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/tanh.h"
#include "tensorflow/lite/kernels/internal/reference/leaky_relu.h"
#include "tensorflow/lite/kernels/internal/reference/logistic.h"
#include "tensorflow/lite/kernels/internal/reference/prelu.h"
#include "tensorflow/lite/kernels/internal/reference/quantize.h"
#include "tensorflow/lite/kernels/internal/reference/requantize.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/activations.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"
// TFLM's FloatToQuantizedType (RELU6's six, as Relu6Prepare computes it) rounds a float quotient
// with ::round; clang's -Wdouble-promotion flags that line of TFLM's header where it is
// instantiated.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#include "tensorflow/lite/micro/micro_utils.h"
#pragma GCC diagnostic pop

namespace tflite {
namespace tinyseg_stream {

// ------------------------------------------------------------ QUANTIZE, DEQUANTIZE

namespace {

// The types the contract computes (`types_ok`, else `refusal`) and rows of the input's shape.
TfLiteStatus TypesAndShape(const StageArgs& a, const StageSlot& g,
                           bool (*types_ok)(TfLiteType, TfLiteType), const char* refusal) {
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  if (!types_ok(static_cast<TfLiteType>(in.type), static_cast<TfLiteType>(out.type))) {
    MicroPrintf("StreamChain: %s", refusal);
    return kTfLiteError;
  }
  return RequireSameShape(a.context, in, out);
}

// quantize_common.cc's requantization of a row of n elements from In to Out.
template <typename In, typename Out>
void RequantizeRow(const QuantizeStage& q, const StageRow& r, int32_t n) {
  reference_ops::Requantize(reinterpret_cast<const In*>(r.src), n, q.multiplier, q.shift,
                            q.input_offset, q.output_offset, reinterpret_cast<Out*>(r.dst));
}

}  // namespace

// QUANTIZE between quantized types (quantize_common.cc: the multiplier of the scales' quotient,
// the zero points as offsets).
TfLiteStatus PrepareQuantize(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(
      TypesAndShape(a, g, contract::StreamQuantizeTypes, "QUANTIZE types not computed"));
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  const double effective = static_cast<double>(in.scale) / static_cast<double>(out.scale);
  QuantizeMultiplier(effective, &g.quantize.multiplier, &g.quantize.shift);
  g.quantize.input_offset = in.zero_point;
  g.quantize.output_offset = out.zero_point;
  return kTfLiteOk;
}

// Every pair PrepareQuantize takes: uint8 <-> int8, int8 -> int8, and the int16 (16x8) ones.
::tinyseg::Status QuantizeRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  const QuantizeStage& q = g.quantize;
  const int32_t n = r.in->width * r.in->channels;
  const TfLiteType it = static_cast<TfLiteType>(r.in->type);
  const TfLiteType ot = static_cast<TfLiteType>(r.out->type);
  if (it == kTfLiteUInt8 && ot == kTfLiteInt8) {
    RequantizeRow<uint8_t, int8_t>(q, r, n);
  } else if (it == kTfLiteInt8 && ot == kTfLiteUInt8) {
    RequantizeRow<int8_t, uint8_t>(q, r, n);
  } else if (it == kTfLiteInt8 && ot == kTfLiteInt8) {
    RequantizeRow<int8_t, int8_t>(q, r, n);
  } else if (it == kTfLiteInt8 && ot == kTfLiteInt16) {
    RequantizeRow<int8_t, int16_t>(q, r, n);
  } else if (it == kTfLiteInt16 && ot == kTfLiteInt8) {
    RequantizeRow<int16_t, int8_t>(q, r, n);
  } else if (it == kTfLiteInt16 && ot == kTfLiteInt16) {
    RequantizeRow<int16_t, int16_t>(q, r, n);
  } else {
    return ::tinyseg::Status::kInvalidArgument;  // Prepare refuses other types
  }
  return ::tinyseg::Status::kOk;
}

namespace {

// DEQUANTIZE (int8 or int16 -> float32) and QUANTIZE float32 -> int8 or int16, as DequantizePrepare
// and quantize_common.cc compute them: the zero points (the quantized side's is read), its scale
// widened to double at Eval. Their float32 rows are a chain's input or output or float32 stages'.
TfLiteStatus PrepareAffine(const StageArgs& a, StageSlot& g,
                           bool (*types_ok)(TfLiteType, TfLiteType), const char* refusal) {
  TF_LITE_ENSURE_STATUS(TypesAndShape(a, g, types_ok, refusal));
  g.quantize.input_offset = a.tab->tensor(g.input).zero_point;
  g.quantize.output_offset = a.tab->tensor(g.output).zero_point;
  return kTfLiteOk;
}

// Either's row, as dequantize.cc's and quantize_common.cc's Eval: the quantized side's type picks
// TFLM's function, with its zero point and its scale widened to double (float32 -> int16 starts an
// int16 (16x8) chain).
::tinyseg::Status AffineQuantizationRow(const QuantizeStage& q, const StageRow& r) {
  if (r.in->type != kTfLiteFloat32) {
    DequantizationParams p;
    p.zero_point = q.input_offset;
    p.scale = static_cast<double>(r.in->scale);
    return r.in->type == kTfLiteInt16 ? MapRow<int16_t, float>(reference_ops::Dequantize, p, r)
                                      : MapRow<int8_t, float>(reference_ops::Dequantize, p, r);
  }
  QuantizationParams p;
  p.zero_point = q.output_offset;
  p.scale = static_cast<double>(r.out->scale);
  return r.out->type == kTfLiteInt16 ? MapRow<float, int16_t>(reference_ops::AffineQuantize, p, r)
                                     : MapRow<float, int8_t>(reference_ops::AffineQuantize, p, r);
}

}  // namespace

TfLiteStatus PrepareDequantize(const StageArgs& a, StageSlot& g) {
  return PrepareAffine(a, g, contract::StreamDequantizeTypes, "DEQUANTIZE types not computed");
}

::tinyseg::Status DequantizeRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  return AffineQuantizationRow(g.quantize, r);
}

TfLiteStatus PrepareQuantizeFloat(const StageArgs& a, StageSlot& g) {
  return PrepareAffine(a, g, contract::StreamQuantizeTypes, "QUANTIZE types not computed");
}

::tinyseg::Status QuantizeFloatRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  return AffineQuantizationRow(g.quantize, r);
}

// ------------------------------------------------------------ float32 RELU, RELU6, LOGISTIC

// Float32 rows of the input's shape; nothing to compute ahead (TFLM's float paths take no
// parameters).
TfLiteStatus PrepareSameShapeFloat(const StageArgs& a, StageSlot& g) {
  return RequireSameShapeRows(a, g, kTfLiteFloat32);
}

::tinyseg::Status ReluFloatRow(const EvalState&, const StageSlot&, const StageRow& r) {
  return MapRow<float>(ReluFloat, r);
}

::tinyseg::Status Relu6FloatRow(const EvalState&, const StageSlot&, const StageRow& r) {
  return MapRow<float>(Relu6Float, r);
}

::tinyseg::Status LogisticFloatRow(const EvalState&, const StageSlot&, const StageRow& r) {
  return MapRow<float>(reference_ops::Logistic, r);
}

// ------------------------------------------------------------ LOGISTIC, TANH

// LOGISTIC as logistic_common.cc, TANH as tanh.cc's CalculateArithmeticOpData for int8 (the same
// input multiplier, left shift and range radius; TANH checks no output quantization).
TfLiteStatus PrepareSigmoid(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireSameShapeRows(a, g, kTfLiteInt8));
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  if (g.op == StageOp::kLogistic)
    TF_LITE_ENSURE_EQ(context, out.zero_point, -128);  // as logistic_common.cc
  SigmoidStage& sv = g.sigmoid;
  constexpr int kInputIntegerBits = 4;
  const double real =
      static_cast<double>(in.scale) * static_cast<double>(1 << (31 - kInputIntegerBits));
  int left_shift = 0;
  const double q = std::frexp(real, &left_shift);
  TF_LITE_ENSURE_MSG(context, left_shift >= 0 && left_shift <= 30,
                     "StreamChain: an int8 LOGISTIC or TANH stage needs an input scale in "
                     "[2^-28, 2^3) (its left shift in 0..30, where TFLM's arithmetic is defined)");
  sv.input_left_shift = left_shift;
  sv.input_multiplier = static_cast<int32_t>(TfLiteRound(q * (1ll << 31)));
  sv.input_range_radius = CalculateInputRadius(kInputIntegerBits, sv.input_left_shift, 31);
  sv.input_zero_point = in.zero_point;
  return kTfLiteOk;
}

::tinyseg::Status LogisticRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  const SigmoidStage& sv = g.sigmoid;
  reference_integer_ops::Logistic(sv.input_zero_point, sv.input_range_radius, sv.input_multiplier,
                                  sv.input_left_shift, r.out->width * r.out->channels,
                                  reinterpret_cast<const int8_t*>(r.src),
                                  reinterpret_cast<int8_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status TanhRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  const SigmoidStage& sv = g.sigmoid;
  reference_integer_ops::Tanh(sv.input_zero_point, sv.input_range_radius, sv.input_multiplier,
                              sv.input_left_shift, r.in_shape,
                              reinterpret_cast<const int8_t*>(r.src), r.out_shape,
                              reinterpret_cast<int8_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

// ------------------------------------------------------------ RELU, RELU6

namespace {

// Whether this TFLM's ReluQuantized takes T rows: a template in TFLM since 2023, int8 only in the
// Arduino library's older TFLM (whose RELU has no int16 kernel either: there, Prepare refuses an
// int16 RELU stage).
template <typename T, typename = void>
struct HasReluOf : std::false_type {};
template <typename T>
struct HasReluOf<T, decltype(void(ReluQuantized(
                        std::declval<const ReluOpData&>(), std::declval<const RuntimeShape&>(),
                        std::declval<const RuntimeShape&>(), std::declval<const T*>(),
                        std::declval<T*>())))> : std::true_type {};

// The same for Relu6Quantized (a template in TFLM; int8 only in the Arduino library's TFLM).
template <typename T, typename = void>
struct HasRelu6Of : std::false_type {};
template <typename T>
struct HasRelu6Of<T, decltype(void(Relu6Quantized(
                         std::declval<T>(), std::declval<T>(), std::declval<const RuntimeShape&>(),
                         std::declval<const T*>(), std::declval<const RuntimeShape&>(),
                         std::declval<T*>())))> : std::true_type {};

// No explicit template argument: TFLM's are templates, the Arduino library's older TFLM has int8
// overloads of the same name and order.
template <typename T>
void ReluRowOf(std::true_type, const ReluOpData& data, const RuntimeShape& in_shape,
               const RuntimeShape& out_shape, const T* src, T* dst) {
  ReluQuantized(data, in_shape, out_shape, src, dst);
}
template <typename T>
void ReluRowOf(std::false_type, const ReluOpData&, const RuntimeShape&, const RuntimeShape&,
               const T*, T*) {}

template <typename T>
void Relu6RowOf(std::true_type, T lower, T upper, const RuntimeShape& in_shape, const T* src,
                const RuntimeShape& out_shape, T* dst) {
  Relu6Quantized(lower, upper, in_shape, src, out_shape, dst);
}
template <typename T>
void Relu6RowOf(std::false_type, T, T, const RuntimeShape&, const T*, const RuntimeShape&, T*) {}

// int8 or int16 rows of the input's shape, the type's RELU in this TFLM.
template <typename T>
TfLiteStatus QuantizedSameShape(const StageArgs& a, const StageSlot& g, bool has_op,
                                const char* missing) {
  TF_LITE_ENSURE_STATUS(RequireSameShapeRows(a, g, sizeof(T) == 2 ? kTfLiteInt16 : kTfLiteInt8));
  if (!has_op) {
    MicroPrintf("%s", missing);
    return kTfLiteError;
  }
  return kTfLiteOk;
}

// The ReluOpData activations_common.cc's ReluPrepare computes for int8 and int16 (its
// CalculateReluOpData<T>: the real multiplier from the float quotient of the scales, the range
// [max(T's lowest, output zero point + round(0 / scale)), T's highest]); int16 needs zero points 0.
// Eval calls TFLM's ReluQuantized.
template <typename T>
TfLiteStatus PrepareQuantizedRelu(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(
      QuantizedSameShape<T>(a, g, HasReluOf<T>::value,
                            "StreamChain: this TFLM has no int16 RELU, so no int16 RELU stage"));
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_MSG(a.context, sizeof(T) == 1 || (in.zero_point == 0 && out.zero_point == 0),
                     "StreamChain: an int16 RELU stage needs zero points 0 (as TFLM's RELU)");
  ReluStage& sv = g.relu;
  QuantizeMultiplier(static_cast<double>(in.scale / out.scale), &sv.output_multiplier,
                     &sv.output_shift);
  const int32_t zero = out.zero_point + static_cast<int32_t>(roundf(0.0f / out.scale));
  const int32_t lowest = std::numeric_limits<T>::min();
  sv.quantized_activation_min = zero > lowest ? zero : lowest;
  sv.quantized_activation_max = std::numeric_limits<T>::max();
  sv.input_offset = in.zero_point;
  sv.output_offset = out.zero_point;
  return kTfLiteOk;
}

template <typename T>
::tinyseg::Status QuantizedReluRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  ReluOpData data{};
  data.params = g.relu;
  ReluRowOf<T>(HasReluOf<T>{}, data, r.in_shape, r.out_shape, reinterpret_cast<const T*>(r.src),
               reinterpret_cast<T*>(r.dst));
  return ::tinyseg::Status::kOk;
}

// Relu6OpData as Relu6Prepare computes it for int8 and int16 (the input's zero point and six in
// the input's quantization, TFLM's FloatToQuantizedType: clamped into T), any zero point; Eval
// calls TFLM's Relu6Quantized. An int16 scale whose six leaves int32 (where TFLM's rounding is
// undefined) is refused.
template <typename T>
TfLiteStatus PrepareQuantizedRelu6(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(
      QuantizedSameShape<T>(a, g, HasRelu6Of<T>::value,
                            "StreamChain: this TFLM has no int16 RELU6, so no int16 RELU6 stage"));
  const TensorSlot& in = a.tab->tensor(g.input);
  const double six = 6.0 / static_cast<double>(in.scale);
  TF_LITE_ENSURE_MSG(
      a.context,
      sizeof(T) == 1 || (in.scale > 0.0f && std::isfinite(six) && six < 2147483647.0 - 65536.0),
      "StreamChain: an int16 RELU6 stage needs an input scale above 6 / 2^31");
  ReluStage& sv = g.relu;
  sv.quantized_activation_min = in.zero_point;
  sv.quantized_activation_max = FloatToQuantizedType<T>(6.0f, in.scale, in.zero_point);
  TF_LITE_ENSURE(a.context, sv.quantized_activation_max >= std::numeric_limits<T>::min() &&
                                sv.quantized_activation_max <= std::numeric_limits<T>::max());
  return kTfLiteOk;
}

template <typename T>
::tinyseg::Status QuantizedRelu6Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  Relu6RowOf<T>(HasRelu6Of<T>{}, static_cast<T>(g.relu.quantized_activation_min),
                static_cast<T>(g.relu.quantized_activation_max), r.in_shape,
                reinterpret_cast<const T*>(r.src), r.out_shape, reinterpret_cast<T*>(r.dst));
  return ::tinyseg::Status::kOk;
}

}  // namespace

TfLiteStatus PrepareRelu(const StageArgs& a, StageSlot& g) {
  return PrepareQuantizedRelu<int8_t>(a, g);
}
TfLiteStatus PrepareReluInt16(const StageArgs& a, StageSlot& g) {
  return PrepareQuantizedRelu<int16_t>(a, g);
}
::tinyseg::Status ReluRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedReluRow<int8_t>(v, g, r);
}
::tinyseg::Status ReluInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedReluRow<int16_t>(v, g, r);
}
TfLiteStatus PrepareRelu6(const StageArgs& a, StageSlot& g) {
  return PrepareQuantizedRelu6<int8_t>(a, g);
}
TfLiteStatus PrepareRelu6Int16(const StageArgs& a, StageSlot& g) {
  return PrepareQuantizedRelu6<int16_t>(a, g);
}
::tinyseg::Status Relu6Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedRelu6Row<int8_t>(v, g, r);
}
::tinyseg::Status Relu6Int16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedRelu6Row<int16_t>(v, g, r);
}

// ------------------------------------------------------------ HARD_SWISH, LEAKY_RELU

// The HardSwishParams hard_swish_common.cc's HardSwishPrepare computes for int8 (float quotients of
// the high-resolution input scale, 16-bit multipliers); Eval calls TFLM's reference_ops::HardSwish.
TfLiteStatus PrepareHardSwish(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireSameShapeRows(a, g, kTfLiteInt8));
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  HardSwishStage& sv = g.hard_swish;
  const float hires_input_scale = (1.0f / 128.0f) * in.scale;
  const float reluish_scale = 3.0f / 32768.0f;
  int32_t fixedpoint = 0;
  QuantizeMultiplier(static_cast<double>(hires_input_scale / out.scale), &fixedpoint,
                     &sv.output_multiplier_exponent);
  DownScaleInt32ToInt16Multiplier(fixedpoint, &sv.output_multiplier_fixedpoint_int16);
  TF_LITE_ENSURE(context, sv.output_multiplier_exponent <= 0);
  QuantizeMultiplier(static_cast<double>(hires_input_scale / reluish_scale), &fixedpoint,
                     &sv.reluish_multiplier_exponent);
  DownScaleInt32ToInt16Multiplier(fixedpoint, &sv.reluish_multiplier_fixedpoint_int16);
  sv.input_zero_point = static_cast<int16_t>(in.zero_point);
  sv.output_zero_point = static_cast<int16_t>(out.zero_point);
  return kTfLiteOk;
}

::tinyseg::Status HardSwishRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  return MapRow<int8_t>(reference_ops::HardSwish, g.hard_swish, r);
}

TfLiteStatus PrepareLeakyReluAlpha(const StageArgs& a, StageSlot& g) {
  const flexbuffers::Reference alpha = (*a.fields)[contract::kFieldAlpha];
  TF_LITE_ENSURE_MSG(a.context, alpha.IsNumeric(), "StreamChain: LEAKY_RELU needs its alpha");
  g.leaky_relu.alpha = alpha.AsFloat();
  TF_LITE_ENSURE_MSG(a.context, std::isfinite(g.leaky_relu.alpha),
                     "StreamChain: LEAKY_RELU's alpha is not finite");
  return kTfLiteOk;
}

// The LeakyReluOpData leaky_relu_common.cc's int8 and int16 Prepare computes: the alpha and
// identity multipliers from the scales (the products in float, as TFLM), the zero points as
// offsets; Eval calls TFLM's reference_ops::QuantizeLeakyRelu.
TfLiteStatus PrepareLeakyReluQuantized(const StageArgs& a, StageSlot& g) {
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireSameShape(a.context, in, out));
  TF_LITE_ENSURE_STATUS(PrepareLeakyReluAlpha(a, g));
  const float al = g.leaky_relu.alpha;
  LeakyReluStage& sv = g.leaky_relu;
  int alpha_shift = 0;  // int32_t fields: QuantizeMultiplier takes an int
  int identity_shift = 0;
  QuantizeMultiplier(static_cast<double>(in.scale * al / out.scale), &sv.output_multiplier_alpha,
                     &alpha_shift);
  QuantizeMultiplier(static_cast<double>(in.scale / out.scale), &sv.output_multiplier_identity,
                     &identity_shift);
  sv.output_shift_alpha = alpha_shift;
  sv.output_shift_identity = identity_shift;
  sv.input_offset = in.zero_point;
  sv.output_offset = out.zero_point;
  return kTfLiteOk;
}

TfLiteStatus PrepareLeakyRelu(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kTfLiteInt8));
  return PrepareLeakyReluQuantized(a, g);
}

::tinyseg::Status LeakyReluRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  return MapRow<int8_t>(reference_ops::QuantizeLeakyRelu, g.leaky_relu, r);
}

// ------------------------------------------------------------ PRELU, ELU

// As prelu_common.cc for int8 and int16 rows (its two multipliers and shifts, the offsets), alpha
// a constant int8 node input of one row (broadcast along height); the caller checked the rows'
// type.
TfLiteStatus PreparePreluQuantized(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireSameShape(context, in, out));
  bool ok = false;
  TfLiteQuantizationParams alpha = {};
  TF_LITE_ENSURE_STATUS(PreluAlpha(a, g, kTfLiteInt8, &ok, &alpha));
  TF_LITE_ENSURE_MSG(context, ok, "StreamChain: PRELU needs an int8 alpha of one row");
  PreluStage& sv = g.prelu;
  const double m1 = static_cast<double>(in.scale) / static_cast<double>(out.scale);
  const double m2 = static_cast<double>(in.scale) * static_cast<double>(alpha.scale) /
                    static_cast<double>(out.scale);
  sv.params.alpha_offset = -alpha.zero_point;
  QuantizeMultiplier(m1, &sv.params.output_multiplier_1, &sv.params.output_shift_1);
  QuantizeMultiplier(m2, &sv.params.output_multiplier_2, &sv.params.output_shift_2);
  sv.params.input_offset = -in.zero_point;
  sv.params.output_offset = out.zero_point;
  return kTfLiteOk;
}

TfLiteStatus PreluAlpha(const StageArgs& a, StageSlot& g, TfLiteType type, bool* ok,
                        TfLiteQuantizationParams* q) {
  g.prelu.alpha = g.operand_count == 2 ? a.tab->operands[g.operand_begin + 1] : -1;
  const bool read = ReadNodeInput(a, g.prelu.alpha, [&](const TfLiteTensor& t) {
    const int rank = t.dims->size;
    *ok = t.type == type && rank <= 4 && (rank < 3 || t.dims->data[rank - 3] == 1);
    *q = t.params;
  });
  TF_LITE_ENSURE_MSG(a.context, read, "StreamChain: PRELU's alpha is a constant input");
  return kTfLiteOk;
}

TfLiteStatus PreparePrelu(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kTfLiteInt8));
  return PreparePreluQuantized(a, g);
}

::tinyseg::Status PreluRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const TfLiteEvalTensor* alpha = micro::GetEvalInput(v.context, v.node, g.prelu.alpha);
  reference_ops::BroadcastPrelu4DSlow(
      g.prelu.params, r.out_shape, reinterpret_cast<const int8_t*>(r.src),
      micro::GetTensorShape(alpha), micro::GetTensorData<int8_t>(alpha), r.out_shape,
      reinterpret_cast<int8_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

namespace {

// ELU's transform, as elu.cc's Prepare passes it to its table builder: exp(x) - 1 below zero, in
// float.
float EluTransform(float value) { return value < 0.0f ? std::exp(value) - 1.0f : value; }

}  // namespace

// The 256-entry int8 table elu.cc's Prepare fills (its PopulateLookupTable: the same float
// arithmetic as TFLM's LUTPopulate, called here), kept in the pool; Eval looks each element up.
TfLiteStatus PrepareElu(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireSameShapeRows(a, g, kTfLiteInt8));
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(TakePool(context, *a.d, contract::kStreamLookupTableBytes / sizeof(int32_t),
                                 a.pool_next, &g.lookup.table));
  LUTPopulate<int8_t>(in.scale, in.zero_point, out.scale, out.zero_point, EluTransform,
                      reinterpret_cast<int8_t*>(a.tab->per_channel + g.lookup.table));
  return kTfLiteOk;
}

// As elu.cc's EvalUsingLookupTable: each element through the table Prepare filled.
::tinyseg::Status EluRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const auto* table = reinterpret_cast<const int8_t*>(v.tab.per_channel + g.lookup.table);
  const auto* x = reinterpret_cast<const int8_t*>(r.src);
  auto* o = reinterpret_cast<int8_t*>(r.dst);
  const int32_t n = r.out->width * r.out->channels;
  for (int32_t i = 0; i < n; ++i) o[i] = LUTLookup(x[i], table);
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
