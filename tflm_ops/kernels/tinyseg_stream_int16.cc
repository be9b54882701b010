// StreamChain's int16 stages (tinyseg_stream_internal.h, Rows::kInt16): int16 activations with
// int8 weights, TFLM's "16x8" quantization. CONV_2D (int64 or int32 bias), DEPTHWISE_CONV_2D
// (int64 bias), MAX_POOL_2D, AVERAGE_POOL_2D, ADD, SUB, MUL, RELU, RELU6, QUANTIZE (int8 -> int16,
// int16 -> int8, int16 -> int16) and DEQUANTIZE int16 -> float32 (PAD, RESIZE_NEAREST_NEIGHBOR
// and CONCATENATION: tinyseg_stream_layout.cc; LOGISTIC, TANH, LEAKY_RELU and PRELU:
// tinyseg_stream_int16_more.cc).
// Prepare computes what TFLM's own Prepare computes for int16; a row runs the reference int16
// function TFLM's kernel calls, on the band view, so every output element comes from the same
// products in the same order. In a CMSIS-NN build, CONV_2D, DEPTHWISE_CONV_2D, the pools, and ADD
// and MUL without broadcast call the s16 function TFLM's CMSIS-NN kernel calls, on the band view
// (tinyseg_stream_cmsis.h), and fall back to the reference code where that returns false.
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/common.h"
#include "tensorflow/lite/kernels/internal/quantization_util.h"
#include "tensorflow/lite/kernels/internal/reference/add.h"
#include "tensorflow/lite/kernels/internal/reference/dequantize.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/conv.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/depthwise_conv.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/mul.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/pooling.h"
#include "tensorflow/lite/kernels/internal/reference/requantize.h"
#include "tensorflow/lite/kernels/internal/reference/sub.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/activations.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/micro_log.h"
// TFLM's FloatToQuantizedType (RELU6's six) rounds a float quotient with ::round; clang's
// -Wdouble-promotion flags that line of TFLM's header where it is instantiated.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#include "tensorflow/lite/micro/micro_utils.h"
#pragma GCC diagnostic pop

namespace tflite {
namespace tinyseg_stream {
namespace {

// Whether this TFLM's ReluQuantized takes int16 rows: a template in TFLM since 2023, int8 only in
// the Arduino library's older TFLM (whose RELU has no int16 kernel either: there, Prepare refuses
// an int16 RELU stage).
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

template <typename T>
void Relu6RowOf(std::true_type, T lower, T upper, const RuntimeShape& in_shape, const T* src,
                const RuntimeShape& out_shape, T* dst) {
  Relu6Quantized(lower, upper, in_shape, src, out_shape, dst);
}
template <typename T>
void Relu6RowOf(std::false_type, T, T, const RuntimeShape&, const T*, const RuntimeShape&, T*) {}

template <typename T>
void ReluRowOf(std::true_type, const ReluOpData& data, const RuntimeShape& in_shape,
               const RuntimeShape& out_shape, const T* src, T* dst) {
  ReluQuantized(data, in_shape, out_shape, src, dst);
}
template <typename T>
void ReluRowOf(std::false_type, const ReluOpData&, const RuntimeShape&, const RuntimeShape&,
               const T*, T*) {}

}  // namespace

// int16 stages read and write int16 rows only.
TfLiteStatus RequireInt16(const StageArgs& a, const TensorSlot& out) {
  TfLiteContext* context = a.context;
  TF_LITE_ENSURE_MSG(context, out.type == kTfLiteInt16,
                     "StreamChain: an int16 stage writes int16 rows");
  for (int32_t e = a.first_edge; e < a.end_edge; ++e) {
    TF_LITE_ENSURE_MSG(context, a.tab->tensor(a.tab->edges[e].tensor).type == kTfLiteInt16,
                       "StreamChain: an int16 stage reads int16 rows");
  }
  return kTfLiteOk;
}

namespace {

// The int8 filter and the bias TFLM's int16 kernels take (CONV_2D: int64 or int32, which selects
// the accumulator; DEPTHWISE_CONV_2D: int64, as TFLM reads it; neither without one), the geometry,
// and TFLM's per-channel requantization into the pool.
TfLiteStatus PrepareInt16With(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                              const TensorSlot& out, TfLiteTensor* filter, TfLiteTensor* bias) {
  ConvStage& c = g.conv;
  const bool depthwise = g.op == StageOp::kDepthwiseConv2d;
  const bool bias_ok =
      bias != nullptr && (bias->type == kTfLiteInt64 || (!depthwise && bias->type == kTfLiteInt32));
  const bool types_ok =
      filter->type == kTfLiteInt8 && filter->dims->size == 4 &&
      filter->dims->data[depthwise ? 3 : 0] == out.channels &&
      (!depthwise || (filter->dims->data[0] == 1 && out.channels % in.channels == 0)) && bias_ok &&
      (bias == nullptr || NumElements(bias) == out.channels);
  if (!types_ok) {
    MicroPrintf(
        "StreamChain: an int16 convolution stage needs an int8 filter and an int64 bias "
        "(CONV_2D: or int32)");
    return kTfLiteError;
  }
  c.filter_h = filter->dims->data[1];
  c.filter_w = filter->dims->data[2];
  if (!ConvGeometry(a, g, in, out, filter)) {
    MicroPrintf("StreamChain: stage %d's geometry does not match", static_cast<int>(a.index));
    return kTfLiteError;
  }
  return Requantization(a, g, in, out, filter, bias);
}

const TfLiteEvalTensor* BiasOf(const EvalState& v, const ConvStage& c) {
  return c.bias >= 0 ? micro::GetEvalInput(v.context, v.node, c.bias) : nullptr;
}

// A 16x8 convolution stage's row as tinyseg_stream_cmsis.h takes it (the band: `rows` input rows
// from `src`, with its own top padding `pad_top`).
tinyseg_ops::BandConvS16 BandConvS16Of(const EvalState& v, const ConvStage& c, const StageRow& r,
                                       int32_t pad_top, const TfLiteEvalTensor* filter,
                                       const TfLiteEvalTensor* bias) {
  tinyseg_ops::BandConvS16 b = {};
  b.input = reinterpret_cast<const int16_t*>(r.src);
  b.in_h = r.rows;
  b.in_w = r.in->width;
  b.in_c = r.in->channels;
  b.filter = micro::GetTensorData<int8_t>(filter);
  b.filter_h = c.filter_h;
  b.filter_w = c.filter_w;
  b.filter_c = filter->dims->data[3];
  b.bias = bias->data.data;
  b.bias_is_int32 = bias->type == kTfLiteInt32;
  b.output = reinterpret_cast<int16_t*>(r.dst);
  b.out_w = r.out->width;
  b.out_c = r.out->channels;
  b.stride_h = c.stride_h;
  b.stride_w = c.stride_w;
  b.dilation_h = c.dilation_h;
  b.dilation_w = c.dilation_w;
  b.pad_h = pad_top;
  b.pad_w = c.pad_w;
  b.input_offset = c.input_offset;
  b.output_offset = c.output_offset;
  b.act_min = c.act_min;
  b.act_max = c.act_max;
  b.multiplier = Multipliers(v, c);
  b.shift = Multipliers(v, c) + r.out->channels;
  return b;
}

}  // namespace

TfLiteStatus PrepareConvInt16(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireInt16(a, a.tab->tensor(g.output)));
  return PrepareConvOf(a, g, PrepareInt16With);
}

// conv.cc's int16 case: the int32 accumulator for an int32 bias, int64 for an int64 bias.
::tinyseg::Status ConvInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  ConvParams p = {};
  p.padding_type = PaddingType::kSame;
  p.padding_values.width = static_cast<int16_t>(c.pad_w);
  p.padding_values.height = static_cast<int16_t>(r.lo - (r.y * c.stride_h - c.pad_h));
  p.stride_width = static_cast<int16_t>(c.stride_w);
  p.stride_height = static_cast<int16_t>(c.stride_h);
  p.dilation_width_factor = static_cast<int16_t>(c.dilation_w);
  p.dilation_height_factor = static_cast<int16_t>(c.dilation_h);
  p.input_offset = c.input_offset;
  p.output_offset = c.output_offset;
  p.quantized_activation_min = c.act_min;
  p.quantized_activation_max = c.act_max;
  const TfLiteEvalTensor* filter = micro::GetEvalInput(v.context, v.node, c.filter);
  const TfLiteEvalTensor* bias = BiasOf(v, c);
  if (bias == nullptr) return ::tinyseg::Status::kInvalidArgument;  // Prepare refuses it
  if (tinyseg_ops::CmsisConvRowS16(BandConvS16Of(v, c, r, p.padding_values.height, filter, bias),
                                   v.op_scratch, MemberScratchBytes(*v.d))) {
    CountOptimizedRow(v);
    return ::tinyseg::Status::kOk;
  }
  const int32_t* pool = Multipliers(v, c);
  const auto* src = reinterpret_cast<const int16_t*>(r.src);
  auto* dst = reinterpret_cast<int16_t*>(r.dst);
  if (bias->type == kTfLiteInt32) {
    reference_integer_ops::ConvPerChannel(
        p, pool, pool + r.out->channels, r.in_shape, src, micro::GetTensorShape(filter),
        micro::GetTensorData<int8_t>(filter), micro::GetTensorShape(bias),
        micro::GetTensorData<int32_t>(bias), r.out_shape, dst);
  } else {
    reference_integer_ops::ConvPerChannel(
        p, pool, pool + r.out->channels, r.in_shape, src, micro::GetTensorShape(filter),
        micro::GetTensorData<int8_t>(filter), micro::GetTensorShape(bias),
        micro::GetTensorData<int64_t>(bias), r.out_shape, dst);
  }
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status DepthwiseConvInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  DepthwiseParams p = {};
  p.padding_type = PaddingType::kSame;
  p.padding_values.width = static_cast<int16_t>(c.pad_w);
  p.padding_values.height = static_cast<int16_t>(r.lo - (r.y * c.stride_h - c.pad_h));
  p.stride_width = static_cast<int16_t>(c.stride_w);
  p.stride_height = static_cast<int16_t>(c.stride_h);
  p.dilation_width_factor = static_cast<int16_t>(c.dilation_w);
  p.dilation_height_factor = static_cast<int16_t>(c.dilation_h);
  p.depth_multiplier = static_cast<int16_t>(r.out->channels / r.in->channels);
  p.input_offset = c.input_offset;
  p.weights_offset = 0;
  p.output_offset = c.output_offset;
  p.quantized_activation_min = c.act_min;
  p.quantized_activation_max = c.act_max;
  const TfLiteEvalTensor* filter = micro::GetEvalInput(v.context, v.node, c.filter);
  const TfLiteEvalTensor* bias = BiasOf(v, c);
  if (bias == nullptr) return ::tinyseg::Status::kInvalidArgument;  // Prepare refuses it
  tinyseg_ops::BandConvS16 b = BandConvS16Of(v, c, r, p.padding_values.height, filter, bias);
  b.depth_multiplier = p.depth_multiplier;
  if (tinyseg_ops::CmsisDepthwiseConvRowS16(b)) {
    CountOptimizedRow(v);
    return ::tinyseg::Status::kOk;
  }
  const int32_t* pool = Multipliers(v, c);
  reference_integer_ops::DepthwiseConvPerChannel(
      p, pool, pool + r.out->channels, r.in_shape, reinterpret_cast<const int16_t*>(r.src),
      micro::GetTensorShape(filter), micro::GetTensorData<int8_t>(filter),
      micro::GetTensorShape(bias), micro::GetTensorData<int64_t>(bias), r.out_shape,
      reinterpret_cast<int16_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

// ------------------------------------------------------------ pools

TfLiteStatus PreparePoolInt16(const StageArgs& a, StageSlot& g) {
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireInt16(a, out));
  TF_LITE_ENSURE_STATUS(PoolGeometry(a, g));
  TfLiteTensor out_q = QuantView(out);
  return CalculateActivationRangeQuantized(a.context, a.f.activation, &out_q, &g.pool.act_min,
                                           &g.pool.act_max);
}

namespace {

PoolParams Int16PoolParams(const PoolStage& ps, const StageRow& r) {
  PoolParams p = {};
  p.stride_height = ps.stride_h;
  p.stride_width = ps.stride_w;
  p.filter_height = ps.filter_h;
  p.filter_width = ps.filter_w;
  p.padding_values.height = static_cast<int16_t>(r.lo - (r.y * ps.stride_h - ps.pad_h));
  p.padding_values.width = static_cast<int16_t>(ps.pad_w);
  p.quantized_activation_min = ps.act_min;
  p.quantized_activation_max = ps.act_max;
  return p;
}

tinyseg_ops::BandPoolS16 BandPoolS16Of(const PoolStage& ps, const StageRow& r, int32_t pad_top) {
  tinyseg_ops::BandPoolS16 b = {};
  b.input = reinterpret_cast<const int16_t*>(r.src);
  b.in_h = r.rows;
  b.in_w = r.in->width;
  b.channels = r.in->channels;
  b.output = reinterpret_cast<int16_t*>(r.dst);
  b.out_w = r.out->width;
  b.filter_h = ps.filter_h;
  b.filter_w = ps.filter_w;
  b.stride_h = ps.stride_h;
  b.stride_w = ps.stride_w;
  b.pad_h = pad_top;
  b.pad_w = ps.pad_w;
  b.act_min = ps.act_min;
  b.act_max = ps.act_max;
  return b;
}

}  // namespace

::tinyseg::Status MaxPoolInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const PoolParams p = Int16PoolParams(g.pool, r);
  if (tinyseg_ops::CmsisMaxPoolRowS16(BandPoolS16Of(g.pool, r, p.padding_values.height))) {
    CountOptimizedRow(v);
    return ::tinyseg::Status::kOk;
  }
  reference_integer_ops::MaxPool(p, r.in_shape, reinterpret_cast<const int16_t*>(r.src),
                                 r.out_shape, reinterpret_cast<int16_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status AveragePoolInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const PoolParams p = Int16PoolParams(g.pool, r);
  if (tinyseg_ops::CmsisAveragePoolRowS16(BandPoolS16Of(g.pool, r, p.padding_values.height),
                                          v.op_scratch, MemberScratchBytes(*v.d))) {
    CountOptimizedRow(v);
    return ::tinyseg::Status::kOk;
  }
  if (!reference_integer_ops::AveragePool(p, r.in_shape, reinterpret_cast<const int16_t*>(r.src),
                                          r.out_shape, reinterpret_cast<int16_t*>(r.dst))) {
    return ::tinyseg::Status::kInvalidArgument;  // a window with no input (TFLM's kernel fails too)
  }
  return ::tinyseg::Status::kOk;
}

// ------------------------------------------------------------ ADD, SUB, MUL

namespace {

// The multipliers TFLM's int16 Prepare computes: ADD's as add_common.cc (left shift 15, quotients
// in double); SUB's as sub_common.cc (left shift 15, quotients in float, only then widened); MUL's
// one as mul_common.cc.
bool Int16Multipliers(StageOp op, const TensorSlot& in1, const TensorSlot& in2,
                      const TensorSlot& out, ArithmeticStage& ar) {
  ar.left_shift = op == StageOp::kMul ? 0 : 15;
  if (op == StageOp::kMul) {
    QuantizeMultiplier(static_cast<double>(in1.scale) * static_cast<double>(in2.scale) /
                           static_cast<double>(out.scale),
                       &ar.output_multiplier, &ar.output_shift);
    return true;
  }
  double m[3];
  if (op == StageOp::kAdd) {
    const double twice_max = 2 * static_cast<double>(in1.scale > in2.scale ? in1.scale : in2.scale);
    m[0] = static_cast<double>(in1.scale) / twice_max;
    m[1] = static_cast<double>(in2.scale) / twice_max;
    m[2] = twice_max / ((1 << ar.left_shift) * static_cast<double>(out.scale));
  } else {
    const float twice_max = 2 * (in1.scale > in2.scale ? in1.scale : in2.scale);
    m[0] = static_cast<double>(in1.scale / twice_max);
    m[1] = static_cast<double>(in2.scale / twice_max);
    m[2] = static_cast<double>(twice_max / ((1 << ar.left_shift) * out.scale));
  }
  return AddSubMultipliers(m, ar);
}

}  // namespace

// TFLM's int16 ADD, SUB and MUL Prepare: the multipliers, the activation's range; operands
// broadcast across width and channels (a constant, or a MUL's one-pixel gate read whole: one int16
// row, CheckOperands). MUL needs zero points 0, as
// mul_common.cc checks for int16.
TfLiteStatus PrepareArithmeticInt16(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireInt16(a, out));
  TF_LITE_ENSURE_MSG(context, g.operand_count == 2,
                     "StreamChain: ADD, SUB and MUL take two inputs");
  ArithmeticStage& ar = g.arith;
  ar.input2 = a.tab->operands[g.operand_begin + 1];
  TF_LITE_ENSURE_STATUS(CheckOperands(a, g, out, kTfLiteInt16));
  const TensorSlot& in1 = a.tab->tensor(a.tab->operands[g.operand_begin]);
  const TensorSlot& in2 = a.tab->tensor(ar.input2);
  TF_LITE_ENSURE_MSG(
      context,
      g.op != StageOp::kMul || (in1.zero_point == 0 && in2.zero_point == 0 && out.zero_point == 0),
      "StreamChain: an int16 MUL stage needs zero points 0 (as TFLM's MUL)");
  ar.input1_offset = -in1.zero_point;
  ar.input2_offset = -in2.zero_point;
  ar.output_offset = out.zero_point;
  TF_LITE_ENSURE_MSG(context, Int16Multipliers(g.op, in1, in2, out, ar), TINYSEG_ADD_SUB_SCALES);
  TfLiteTensor out_q = QuantView(out);
  return CalculateActivationRangeQuantized(context, a.f.activation, &out_q, &ar.act_min,
                                           &ar.act_max);
}

namespace {

// Operand k of this row: row y of an activation (1 x 1 x W x C), or a constant or a MUL's one-pixel
// gate read whole (ReadWhole: one row for all, broadcast by BroadcastMul4DSlow).
::tinyseg::Status Int16Operand(const EvalState& v, const StageSlot& g, const StageRow& r, int32_t k,
                               const int16_t** data, RuntimeShape* shape, bool* same) {
  const int32_t id = v.tab.operands[g.operand_begin + k];
  const TensorSlot& x = v.tab.tensor(id);
  if (x.constant || ReadWhole(v.tab, g, k)) {
    const TfLiteEvalTensor* t = micro::GetEvalInput(v.context, v.node, NodeIndex(v.node, id));
    *data = static_cast<const int16_t*>(t->data.data);
    int32_t dims[4] = {1, 1, 1, 1};
    const int rank = t->dims->size < 4 ? t->dims->size : 4;
    for (int j = 0; j < rank; ++j) dims[j] = t->dims->data[j];
    shape->ReplaceWith(rank, dims);
    *same = false;
    return ::tinyseg::Status::kOk;
  }
  const uint8_t* row = nullptr;
  TINYSEG_RETURN_IF_ERROR(Band(v, id, r.y, r.y, &row));
  *data = reinterpret_cast<const int16_t*>(row);
  const int32_t dims[4] = {1, 1, x.width, x.channels};
  shape->ReplaceWith(4, dims);
  *same = *same && x.width == r.out->width && x.channels == r.out->channels;
  return ::tinyseg::Status::kOk;
}

ArithmeticParams Int16Params(const ArithmeticStage& ar) {
  ArithmeticParams p = {};
  p.input1_offset = ar.input1_offset;
  p.input2_offset = ar.input2_offset;
  p.output_offset = ar.output_offset;
  p.output_multiplier = ar.output_multiplier;
  p.output_shift = ar.output_shift;
  p.left_shift = ar.left_shift;
  p.input1_multiplier = ar.input1_multiplier;
  p.input1_shift = ar.input1_shift;
  p.input2_multiplier = ar.input2_multiplier;
  p.input2_shift = ar.input2_shift;
  p.quantized_activation_min = ar.act_min;
  p.quantized_activation_max = ar.act_max;
  return p;
}

// ADD or MUL without broadcast through CMSIS-NN's s16 elementwise functions (a CMSIS-NN build).
bool CmsisInt16Row(StageOp op, const ArithmeticStage& ar, const int16_t* a, const int16_t* b,
                   int16_t* o, int32_t size) {
  tinyseg_ops::ElementwiseRowS16 e = {};
  e.input1 = a;
  e.input2 = b;
  e.output = o;
  e.size = size;
  e.input1_offset = ar.input1_offset;
  e.input1_multiplier = ar.input1_multiplier;
  e.input1_shift = ar.input1_shift;
  e.input2_offset = ar.input2_offset;
  e.input2_multiplier = ar.input2_multiplier;
  e.input2_shift = ar.input2_shift;
  e.left_shift = ar.left_shift;
  e.output_offset = ar.output_offset;
  e.output_multiplier = ar.output_multiplier;
  e.output_shift = ar.output_shift;
  e.act_min = ar.act_min;
  e.act_max = ar.act_max;
  return op == StageOp::kAdd ? tinyseg_ops::CmsisAddRowS16(e) : tinyseg_ops::CmsisMulRowS16(e);
}

}  // namespace

// add.cc's int16 case (reference_ops::Add, general scales, or BroadcastAdd4DSlow), sub.cc's
// (reference_ops::Sub or BroadcastQuantSubSlow), mul_common.cc's (reference_integer_ops::Mul or
// BroadcastMul4DSlow): the elementwise function without broadcast, else the broadcasting one.
::tinyseg::Status ArithmeticInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const int16_t* data[2] = {nullptr, nullptr};
  RuntimeShape shapes[2];
  bool same = true;
  for (int32_t k = 0; k < 2; ++k) {
    TINYSEG_RETURN_IF_ERROR(Int16Operand(v, g, r, k, &data[k], &shapes[k], &same));
  }
  auto* o = reinterpret_cast<int16_t*>(r.dst);
  // No broadcast: CMSIS-NN's s16 functions in a CMSIS-NN build (TFLM has no CMSIS-NN SUB).
  if (same && g.op != StageOp::kSub &&
      CmsisInt16Row(g.op, g.arith, data[0], data[1], o, r.out->width * r.out->channels)) {
    CountOptimizedRow(v);
    return ::tinyseg::Status::kOk;
  }
  const ArithmeticParams p = Int16Params(g.arith);
  const RuntimeShape& os = r.out_shape;
  if (g.op == StageOp::kAdd) {
    if (same) {
      reference_ops::Add(p, os, data[0], os, data[1], os, o, false);
    } else {
      reference_ops::BroadcastAdd4DSlow(p, shapes[0], data[0], shapes[1], data[1], os, o);
    }
  } else if (g.op == StageOp::kSub) {
    if (same) {
      reference_ops::Sub(p, os, data[0], os, data[1], os, o);
    } else {
      reference_ops::BroadcastQuantSubSlow(p, shapes[0], data[0], shapes[1], data[1], os, o);
    }
  } else if (same) {
    reference_integer_ops::Mul(p, os, data[0], os, data[1], os, o);
  } else {
    reference_integer_ops::BroadcastMul4DSlow(p, shapes[0], data[0], shapes[1], data[1], os, o);
  }
  return ::tinyseg::Status::kOk;
}

// ------------------------------------------------------------ RELU

// activations_common.cc's ReluPrepare for int16: zero points 0, CalculateReluOpData<int16_t>.
TfLiteStatus PrepareReluInt16(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireInt16(a, out));
  TF_LITE_ENSURE_STATUS(RequireSameShape(context, in, out));
  TF_LITE_ENSURE_MSG(context, HasReluOf<int16_t>::value,
                     "StreamChain: this TFLM has no int16 RELU, so no int16 RELU stage");
  TF_LITE_ENSURE_MSG(context, in.zero_point == 0 && out.zero_point == 0,
                     "StreamChain: an int16 RELU stage needs zero points 0 (as TFLM's RELU)");
  ReluStage& sv = g.relu;
  QuantizeMultiplier(static_cast<double>(in.scale / out.scale), &sv.multiplier, &sv.shift);
  const int32_t zero = out.zero_point + static_cast<int32_t>(roundf(0.0f / out.scale));
  sv.act_min = zero > INT16_MIN ? zero : static_cast<int32_t>(INT16_MIN);
  sv.act_max = INT16_MAX;
  sv.input_offset = in.zero_point;
  sv.output_offset = out.zero_point;
  return kTfLiteOk;
}

::tinyseg::Status ReluInt16Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  const ReluStage& sv = g.relu;
  ReluOpData data{};
  data.params.input_offset = sv.input_offset;
  data.params.output_offset = sv.output_offset;
  data.params.output_multiplier = sv.multiplier;
  data.params.output_shift = sv.shift;
  data.params.quantized_activation_min = sv.act_min;
  data.params.quantized_activation_max = sv.act_max;
  ReluRowOf<int16_t>(HasReluOf<int16_t>{}, data, r.in_shape, r.out_shape,
                     reinterpret_cast<const int16_t*>(r.src), reinterpret_cast<int16_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

// activations_common.cc's Relu6Prepare for int16: the input's zero point and six in the input's
// quantization (FloatToQuantizedType: clamped into int16), any zero point; Eval calls
// Relu6Quantized<int16_t>. A scale whose six leaves int32 (where TFLM's rounding is undefined) is
// refused.
TfLiteStatus PrepareRelu6Int16(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireInt16(a, out));
  TF_LITE_ENSURE_STATUS(RequireSameShape(context, in, out));
  TF_LITE_ENSURE_MSG(context, HasRelu6Of<int16_t>::value,
                     "StreamChain: this TFLM has no int16 RELU6, so no int16 RELU6 stage");
  const double six = 6.0 / static_cast<double>(in.scale);
  TF_LITE_ENSURE_MSG(context, in.scale > 0.0f && std::isfinite(six) && six < 2147483647.0 - 65536.0,
                     "StreamChain: an int16 RELU6 stage needs an input scale above 6 / 2^31");
  g.relu.act_min = in.zero_point;
  g.relu.act_max = FloatToQuantizedType<int16_t>(6.0f, in.scale, in.zero_point);
  return kTfLiteOk;
}

::tinyseg::Status Relu6Int16Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  Relu6RowOf<int16_t>(HasRelu6Of<int16_t>{}, static_cast<int16_t>(g.relu.act_min),
                      static_cast<int16_t>(g.relu.act_max), r.in_shape,
                      reinterpret_cast<const int16_t*>(r.src), r.out_shape,
                      reinterpret_cast<int16_t*>(r.dst));
  return ::tinyseg::Status::kOk;
}

// ------------------------------------------------------------ QUANTIZE, DEQUANTIZE

// quantize_common.cc's requantization between int8 and int16 (PrepareQuantize computes the
// multiplier as TFLM's Prepare does and checks the types against the contract).
::tinyseg::Status QuantizeInt16Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  const QuantizeStage& q = g.quantize;
  const int32_t n = r.in->width * r.in->channels;
  const TfLiteType it = static_cast<TfLiteType>(r.in->type);
  const TfLiteType ot = static_cast<TfLiteType>(r.out->type);
  if (it == kTfLiteInt8 && ot == kTfLiteInt16) {
    reference_ops::Requantize(reinterpret_cast<const int8_t*>(r.src), n, q.multiplier, q.shift,
                              q.input_offset, q.output_offset, reinterpret_cast<int16_t*>(r.dst));
  } else if (it == kTfLiteInt16 && ot == kTfLiteInt8) {
    reference_ops::Requantize(reinterpret_cast<const int16_t*>(r.src), n, q.multiplier, q.shift,
                              q.input_offset, q.output_offset, reinterpret_cast<int8_t*>(r.dst));
  } else if (it == kTfLiteInt16 && ot == kTfLiteInt16) {
    reference_ops::Requantize(reinterpret_cast<const int16_t*>(r.src), n, q.multiplier, q.shift,
                              q.input_offset, q.output_offset, reinterpret_cast<int16_t*>(r.dst));
  } else {
    return ::tinyseg::Status::kInvalidArgument;  // Prepare refuses other types
  }
  return ::tinyseg::Status::kOk;
}

// dequantize.cc's int16 case.
::tinyseg::Status DequantizeInt16Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  DequantizationParams p;
  p.zero_point = g.quantize.input_offset;
  p.scale = static_cast<double>(r.in->scale);
  reference_ops::Dequantize(p, r.in_shape, reinterpret_cast<const int16_t*>(r.src), r.out_shape,
                            reinterpret_cast<float*>(r.dst));
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
