// StreamChain's int16 (16x8) LOGISTIC, TANH, LEAKY_RELU and PRELU stages
// (tinyseg_stream_internal.h, Rows::kInt16): the functions TFLM's int16 kernels call (the
// lookup-table reference_integer_ops::Logistic and Tanh, reference_ops::QuantizeLeakyRelu<int16_t>,
// reference_ops::BroadcastPrelu4DSlow<int16_t, int8_t>; every TFLM build calls these: its CMSIS-NN
// kernels have none of the four), with the parameters their Prepare computes. Each output element
// depends on its input element (and PRELU's alpha of its column and channel) only, so a row is the
// function over that row's elements.
#include <type_traits>
#include <utility>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/quantization_util.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/logistic.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/tanh.h"
#include "tensorflow/lite/kernels/internal/reference/leaky_relu.h"
#include "tensorflow/lite/kernels/internal/reference/prelu.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"

namespace tflite {
namespace tinyseg_stream {

// ------------------------------------------------------------ LOGISTIC, TANH

// logistic_common.cc's and tanh.cc's int16 Prepare: zero points 0 and an output scale of 2^-15
// (TFLM refuses others); a power-of-two input scale that needs no shift (TANH: or a shift of 1)
// takes multiplier 0, any other one a multiplier onto the lookup's 1/(3*4096) scale.
TfLiteStatus PrepareSigmoidInt16(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireSameShapeRows(a, g, kTfLiteInt16));
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_MSG(
      context, in.zero_point == 0 && out.zero_point == 0,
      "StreamChain: an int16 LOGISTIC or TANH stage needs zero points 0 (as TFLM's)");
  int out_log2 = 0;
  TF_LITE_ENSURE_MSG(context, CheckedLog2(out.scale, &out_log2) && out_log2 == -15,
                     "StreamChain: an int16 LOGISTIC or TANH stage writes scale 2^-15 (as TFLM's)");
  constexpr int kInputIntegerBits = 3;
  SigmoidStage& sv = g.sigmoid;
  int in_log2 = 0;
  const bool pot = CheckedLog2(in.scale, &in_log2);
  sv.input_left_shift = (15 - kInputIntegerBits) + in_log2;
  const bool shift_ok =
      sv.input_left_shift == 0 || (g.op == StageOp::kTanh && sv.input_left_shift == 1);
  if (pot && shift_ok) {
    sv.input_multiplier = 0;
    return kTfLiteOk;
  }
  double multiplier = static_cast<double>(in.scale) * 4096.0 * 3.0;
  sv.input_left_shift = 0;
  while (multiplier <= 32767.0 / 2.0 && sv.input_left_shift <= 30) {
    ++sv.input_left_shift;
    multiplier *= 2.0;
  }
  sv.input_multiplier = static_cast<int32_t>(multiplier);
  return kTfLiteOk;
}

::tinyseg::Status LogisticInt16Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  reference_integer_ops::Logistic(
      g.sigmoid.input_multiplier, g.sigmoid.input_left_shift, r.out->width * r.out->channels,
      reinterpret_cast<const int16_t*>(r.src), reinterpret_cast<int16_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status TanhInt16Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  reference_integer_ops::Tanh(g.sigmoid.input_multiplier, g.sigmoid.input_left_shift, r.in_shape,
                              reinterpret_cast<const int16_t*>(r.src), r.out_shape,
                              reinterpret_cast<int16_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

// ------------------------------------------------------------ LEAKY_RELU

// leaky_relu_common.cc computes the int16 parameters as the int8 ones (_activation.cc).
TfLiteStatus PrepareLeakyReluInt16(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kTfLiteInt16));
  return PrepareLeakyReluQuantized(a, g);
}

::tinyseg::Status LeakyReluInt16Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  return MapRow<int16_t>(reference_ops::QuantizeLeakyRelu, g.leaky_relu, r);
}

// ------------------------------------------------------------ PRELU

namespace {

// Whether this TFLM's BroadcastPrelu4DSlow takes int16 rows with an int8 alpha: two type
// parameters in TFLM since 2023; one (rows and alpha of the same type) in the Arduino library's
// older TFLM, whose PRELU has no int16 kernel either: there, Prepare refuses an int16 PRELU stage.
template <typename T, typename A, typename = void>
struct HasPreluOf : std::false_type {};
template <typename T, typename A>
struct HasPreluOf<T, A,
                  decltype(void(reference_ops::BroadcastPrelu4DSlow(
                      std::declval<const PreluParams&>(), std::declval<const RuntimeShape&>(),
                      std::declval<const T*>(), std::declval<const RuntimeShape&>(),
                      std::declval<const A*>(), std::declval<const RuntimeShape&>(),
                      std::declval<T*>())))> : std::true_type {};

template <typename T, typename A>
void PreluRowOf(std::true_type, const PreluParams& p, const RuntimeShape& shape, const T* src,
                const RuntimeShape& alpha_shape, const A* alpha, T* dst) {
  reference_ops::BroadcastPrelu4DSlow(p, shape, src, alpha_shape, alpha, shape, dst);
}
template <typename T, typename A>
void PreluRowOf(std::false_type, const PreluParams&, const RuntimeShape&, const T*,
                const RuntimeShape&, const A*, T*) {}

}  // namespace

// prelu_common.cc's int16 Prepare: the int8 parameters, an int8 alpha (TFLM refuses another for
// int16 rows; PreparePreluQuantized checks it and its one row). Int16 rows have zero point 0 here,
// as for every int16 stage (stream.stage_problem refuses others).
TfLiteStatus PreparePreluInt16(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireRows(a, out, kTfLiteInt16));
  TF_LITE_ENSURE_MSG(context, (HasPreluOf<int16_t, int8_t>::value),
                     "StreamChain: this TFLM has no int16 PRELU, so no int16 PRELU stage");
  TF_LITE_ENSURE_MSG(context, in.zero_point == 0 && out.zero_point == 0,
                     "StreamChain: an int16 PRELU stage needs zero points 0");
  return PreparePreluQuantized(a, g);
}

// prelu.cc's int16 case on the row: alpha (one row) broadcast over it as over the whole tensor.
::tinyseg::Status PreluInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const TfLiteEvalTensor* alpha = micro::GetEvalInput(v.context, v.node, g.prelu.alpha);
  PreluRowOf<int16_t, int8_t>(HasPreluOf<int16_t, int8_t>{}, g.prelu.params, r.out_shape,
                              reinterpret_cast<const int16_t*>(r.src), micro::GetTensorShape(alpha),
                              micro::GetTensorData<int8_t>(alpha),
                              reinterpret_cast<int16_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
