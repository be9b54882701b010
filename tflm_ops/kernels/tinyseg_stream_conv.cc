// StreamChain's convolution family: CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV stages
// (tinyseg_stream_internal.h). Prepare computes what TFLM's own Prepare does for an int8 filter,
// an optional int32 bias and per-channel requantization (the multipliers and shifts in the pool);
// a row runs TFLM's reference arithmetic on the band of input rows, or CMSIS-NN's in a CMSIS-NN
// build (tinyseg_stream_cmsis.h). Float32 stages (a float32 filter and bias) run TFLM's reference
// float arithmetic in every build, as TFLM's own kernels do.
#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/common.h"
#include "tensorflow/lite/kernels/internal/quantization_util.h"
#include "tensorflow/lite/kernels/internal/reference/conv.h"
#include "tensorflow/lite/kernels/internal/reference/depthwiseconv_float.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/conv.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/depthwise_conv.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/transpose_conv.h"
#include "tensorflow/lite/kernels/internal/reference/transpose_conv.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/kernels/padding.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_params.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"

namespace tflite {
namespace tinyseg_stream {
namespace {

// TFLM's reference arithmetic, called through pointers the compiler may not read at compile time
// (volatile), so that it never inlines them here. Each has one call site, so GCC would inline it
// and its six nested loops would then share the register allocation of the surrounding function:
// the innermost loop (one multiply-accumulate) reloads the input offset, the filter row and the
// trip count from the stack, 10 or 11 instructions instead of the 8 of TFLM's own out-of-line copy
// (conv.cc), +19% on a streamed Tiny U-Net. Called through the pointer, the function is compiled on
// its own, as TFLM's kernels compile it; one indirect call per output row costs nothing next to
// its loops.
using ConvFn = void (*)(const ConvParams&, const int32_t*, const int32_t*, const RuntimeShape&,
                        const int8_t*, const RuntimeShape&, const int8_t*, const RuntimeShape&,
                        const int32_t*, const RuntimeShape&, int8_t*);
using DepthwiseFn = void (*)(const DepthwiseParams&, const int32_t*, const int32_t*,
                             const RuntimeShape&, const int8_t*, const RuntimeShape&, const int8_t*,
                             const RuntimeShape&, const int32_t*, const RuntimeShape&, int8_t*);
using TransposeConvFn = void (*)(const ConvParams&, const int32_t*, const int32_t*,
                                 const RuntimeShape&, const int8_t*, const RuntimeShape&,
                                 const int8_t*, const RuntimeShape&, const int32_t*,
                                 const RuntimeShape&, int8_t*, const RuntimeShape&, int8_t*,
                                 int32_t*);
const volatile ConvFn kConvPerChannel = &reference_integer_ops::ConvPerChannel;
const volatile DepthwiseFn kDepthwiseConvPerChannel =
    &reference_integer_ops::DepthwiseConvPerChannel;
const volatile TransposeConvFn kTransposeConv = &reference_integer_ops::TransposeConv;

// ------------------------------------------------------------ Prepare

}  // namespace

// The output size from the geometry, and the row rule: CONV_2D and DEPTHWISE_CONV_2D read a window
// of (filter_h - 1) * dilation + 1 rows every stride rows. TRANSPOSE_CONV takes its padding from
// the output's size, as TFLM's does; input row i adds to output rows i * stride - pad_h + [0,
// filter_h), so output row y reads input rows up to (y + pad_h) / stride and down to
// ceil((y + pad_h - filter_h + 1) / stride): inside y / stride - (filter_h - 1 - pad_h) / stride ..
// y / stride + ceil(pad_h / stride) (contract/stages/conv.py transpose_conv_window).
bool ConvGeometry(const StageArgs& a, StageSlot& g, const TensorSlot& in, const TensorSlot& out,
                  const TfLiteTensor* filter) {
  ConvStage& c = g.conv;
  int oh = 0, ow = 0;
  g.resamples = 1;
  if (g.op != StageOp::kTransposeConv) {
    const TfLitePaddingValues pad =
        ComputePaddingHeightWidth(c.stride_h, c.stride_w, c.dilation_h, c.dilation_w, in.height,
                                  in.width, c.filter_h, c.filter_w, a.f.padding, &oh, &ow);
    c.pad_h = pad.height;
    c.pad_w = pad.width;
    g.rule.num = c.stride_h;
    g.rule.before = c.pad_h;
    g.rule.after = (c.filter_h - 1) * c.dilation_h - c.pad_h;
    return oh == out.height && ow == out.width &&
           (g.op == StageOp::kDepthwiseConv2d || filter->dims->data[3] == in.channels);
  }
  const TfLitePaddingValues pad =
      ComputePaddingHeightWidth(c.stride_h, c.stride_w, 1, 1, out.height, out.width, c.filter_h,
                                c.filter_w, a.f.padding, &oh, &ow);
  c.pad_h = pad.height;
  c.pad_w = pad.width;
  g.rule.den = c.stride_h;
  g.rule.before = (c.filter_h - 1 - c.pad_h) / c.stride_h;
  g.rule.after = (c.pad_h + c.stride_h - 1) / c.stride_h;
  const bool ok =
      oh == in.height && c.pad_h <= c.filter_h - 1 && filter->dims->data[3] == in.channels;
  const int64_t accumulator = out.type == kTfLiteInt16 ? 8 : 4;  // int64 (16x8) or int32
  if (ok &&
      MemberScratchBytes(*a.d) < static_cast<int64_t>(out.width) * out.channels * accumulator) {
    MicroPrintf("StreamChain: op_scratch is smaller than one TRANSPOSE_CONV accumulator row");
    return false;
  }
  return ok;
}

TfLiteStatus FilterAndGeometry(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                               const TensorSlot& out, const TfLiteTensor* filter,
                               TfLiteType filter_type, bool bias_ok, const char* refusal) {
  ConvStage& c = g.conv;
  const bool depthwise = g.op == StageOp::kDepthwiseConv2d;  // filter [1, kh, kw, C_out]
  const bool types_ok =
      filter->type == filter_type && filter->dims->size == 4 &&
      filter->dims->data[depthwise ? 3 : 0] == out.channels &&
      (!depthwise || (filter->dims->data[0] == 1 && out.channels % in.channels == 0)) && bias_ok;
  if (!types_ok) {
    MicroPrintf("StreamChain: %s", refusal);
    return kTfLiteError;
  }
  c.filter_h = filter->dims->data[1];
  c.filter_w = filter->dims->data[2];
  if (!ConvGeometry(a, g, in, out, filter)) {
    MicroPrintf("StreamChain: stage %d's geometry does not match", static_cast<int>(a.index));
    return kTfLiteError;
  }
  return kTfLiteOk;
}

bool BiasFits(const TfLiteTensor* bias, const TensorSlot& out, TfLiteType type, TfLiteType other) {
  return (bias->type == type || bias->type == other) && NumElements(bias) == out.channels;
}

namespace {

// Filter and bias types, the geometry and TFLM's per-channel requantization (Requantization).
TfLiteStatus PrepareWith(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                         const TensorSlot& out, TfLiteTensor* filter, TfLiteTensor* bias) {
  TF_LITE_ENSURE_STATUS(FilterAndGeometry(
      a, g, in, out, filter, kTfLiteInt8, bias == nullptr || BiasFits(bias, out, kTfLiteInt32),
      "a convolution stage needs an int8 filter and int32 bias"));
  return Requantization(a, g, in, out, filter, bias);
}

// The float32 filter and bias, the geometry and the activation's range (conv.cc's
// ConvParamsFloat: CalculateActivationRange). The pool entries are taken as for int8 stages
// without a "quant" table (customops.stream_chain_body_bytes counts them) and left unused.
TfLiteStatus PrepareFloatWith(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                              const TensorSlot& out, TfLiteTensor* filter, TfLiteTensor* bias) {
  TF_LITE_ENSURE_STATUS(FilterAndGeometry(
      a, g, in, out, filter, kTfLiteFloat32, bias == nullptr || BiasFits(bias, out, kTfLiteFloat32),
      "a float32 convolution stage needs a float32 filter and bias"));
  if (!(*a.stage)[contract::kKeyQuant].IsNull()) {
    MicroPrintf("StreamChain: stage %d on float32 rows has a quant table (it requantizes nothing)",
                static_cast<int>(a.index));
    return kTfLiteError;
  }
  TF_LITE_ENSURE_STATUS(TakePool(a.context, *a.d, 2 * static_cast<int64_t>(out.channels),
                                 a.pool_next, &g.conv.per_channel));
  CalculateActivationRange(a.f.activation, &g.conv.float_min, &g.conv.float_max);
  return kTfLiteOk;
}

}  // namespace

namespace {

// A typed vector's first byte and element width (flexbuffers keeps them protected).
struct TypedVectorBytes : flexbuffers::TypedVector {
  explicit TypedVectorBytes(const flexbuffers::TypedVector& v) : flexbuffers::TypedVector(v) {}
  const uint8_t* bytes() const { return data_; }
  uint8_t width() const { return byte_width_; }
};

// Whether the filter's scales are the ones PopulateConvolutionQuantizationParams takes: one, or
// one per output channel along a quantized dimension of that size.
bool FilterScalesOk(const TfLiteTensor* filter, int32_t channels) {
  const auto* q = static_cast<const TfLiteAffineQuantization*>(filter->quantization.params);
  if (filter->quantization.type != kTfLiteAffineQuantization || q == nullptr ||
      q->scale == nullptr) {
    return false;
  }
  if (q->scale->size == 1) return true;
  return q->scale->size == channels && q->quantized_dimension >= 0 &&
         q->quantized_dimension < filter->dims->size &&
         filter->dims->data[q->quantized_dimension] == channels;
}

// The stage's "quant" table, read in place by Eval: 2 * channels int32 in the options, 4-byte
// aligned, each entry what TFLM computes (kernel_util.cc PopulateConvolutionQuantizationParams):
// ~ its byte offset in the options to `*per_channel` (ConvStage::per_channel).
TfLiteStatus TakeTable(const StageArgs& a, const flexbuffers::Reference& q, const TensorSlot& in,
                       const TensorSlot& out, const TfLiteTensor* filter, int32_t* per_channel) {
  const int stage = static_cast<int>(a.index);
  const int32_t channels = out.channels;
  flexbuffers::TypedVector tv = q.AsTypedVector();  // empty unless a typed vector
  const TypedVectorBytes v(tv);
  if (!q.IsTypedVector() || tv.ElementType() != flexbuffers::FBT_INT ||
      v.width() != sizeof(int32_t) || tv.size() != 2 * static_cast<size_t>(channels)) {
    MicroPrintf(
        "StreamChain: stage %d's quant table is not %d int32 (multiplier and shift per "
        "output channel)",
        stage, static_cast<int>(2 * channels));
    return kTfLiteError;
  }
  if (reinterpret_cast<uintptr_t>(v.bytes()) % alignof(int32_t) != 0) {
    MicroPrintf(
        "StreamChain: stage %d's quant table is not 4-byte aligned (load the model at a "
        "4-byte boundary)",
        stage);
    return kTfLiteError;
  }
  if (!FilterScalesOk(filter, channels)) {
    MicroPrintf("StreamChain: stage %d's filter has neither one scale nor one per channel", stage);
    return kTfLiteError;
  }
  const auto* fq = static_cast<const TfLiteAffineQuantization*>(filter->quantization.params);
  const auto* entries = reinterpret_cast<const int32_t*>(v.bytes());
  for (int32_t i = 0; i < channels; ++i) {
    const float s = fq->scale->data[fq->scale->size > 1 ? i : 0];
    int32_t multiplier = 0;
    int shift = 0;
    QuantizeMultiplier(
        static_cast<double>(in.scale) * static_cast<double>(s) / static_cast<double>(out.scale),
        &multiplier, &shift);
    if (entries[i] != multiplier || entries[channels + i] != shift) {
      MicroPrintf("StreamChain: stage %d's quant table is not TFLM's requantization of its scales",
                  stage);
      return kTfLiteError;
    }
  }
  *per_channel = ~static_cast<int32_t>(v.bytes() - a.d->options);
  return kTfLiteOk;
}

}  // namespace

TfLiteStatus Requantization(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                            const TensorSlot& out, TfLiteTensor* filter, TfLiteTensor* bias) {
  TfLiteContext* context = a.context;
  ConvStage& c = g.conv;
  TfLiteTensor in_q = QuantView(in);
  TfLiteTensor out_q = QuantView(out);
  c.input_offset = -in.zero_point;
  c.output_offset = out.zero_point;
  const flexbuffers::Reference q = (*a.stage)[contract::kKeyQuant];
  if (!q.IsNull()) {
    TF_LITE_ENSURE_STATUS(TakeTable(a, q, in, out, filter, &c.per_channel));
    return CalculateActivationRangeQuantized(context, a.f.activation, &out_q, &c.act_min,
                                             &c.act_max);
  }
  TF_LITE_ENSURE_STATUS(
      TakePool(context, *a.d, 2 * static_cast<int64_t>(out.channels), a.pool_next, &c.per_channel));
  int32_t unused_multiplier = 0;
  int unused_shift = 0;
  static_assert(sizeof(int) == sizeof(int32_t), "shift arrays are int32");
  int32_t* pool = a.tab->per_channel + c.per_channel;
  return PopulateConvolutionQuantizationParams(context, &in_q, filter, bias, &out_q, a.f.activation,
                                               &unused_multiplier, &unused_shift, &c.act_min,
                                               &c.act_max, pool, pool + out.channels, out.channels);
}

const int32_t* Multipliers(const EvalState& v, const ConvStage& c) {
  return c.per_channel >= 0 ? v.tab.per_channel + c.per_channel
                            : reinterpret_cast<const int32_t*>(v.d->options + ~c.per_channel);
}

// The rows' type, the options every convolution stage has, then its constants (filter, bias) to
// `with`.
TfLiteStatus PrepareConvOf(const StageArgs& a, StageSlot& g, TfLiteType rows,
                           ConvPrepareWithFn with) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), rows));
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  ConvStage& c = g.conv;
  // Constants: CONV_2D and DEPTHWISE_CONV_2D [filter, bias]; TRANSPOSE_CONV [output shape,
  // filter, bias].
  const int32_t first = g.op == StageOp::kTransposeConv ? 1 : 0;
  c.filter = ConstantOperand(*a.tab, g, first, false);
  c.bias = ConstantOperand(*a.tab, g, first + 1, true);
  c.stride_h = a.f.stride_h;
  c.stride_w = a.f.stride_w;
  c.dilation_h = a.f.dilation_h;
  c.dilation_w = a.f.dilation_w;
  c.per_channel = -1;
  TF_LITE_ENSURE(context, c.filter >= 0 && c.filter < NumInputs(a.node));
  TF_LITE_ENSURE(context, c.bias < NumInputs(a.node));
  MicroContext* mc = GetMicroContext(context);
  TfLiteTensor* filter = mc->AllocateTempInputTensor(a.node, c.filter);
  TF_LITE_ENSURE(context, filter != nullptr);
  TfLiteTensor* bias = c.bias >= 0 ? mc->AllocateTempInputTensor(a.node, c.bias) : nullptr;
  const TfLiteStatus status = with(a, g, in, out, filter, bias);
  mc->DeallocateTempTfLiteTensor(filter);
  if (bias != nullptr) mc->DeallocateTempTfLiteTensor(bias);
  return status;
}

TfLiteStatus PrepareConv(const StageArgs& a, StageSlot& g) {
  return PrepareConvOf(a, g, kTfLiteInt8, PrepareWith);
}

TfLiteStatus PrepareConvFloat(const StageArgs& a, StageSlot& g) {
  return PrepareConvOf(a, g, kTfLiteFloat32, PrepareFloatWith);
}

// ------------------------------------------------------------ rows

::tinyseg::Status ConvRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  // The band starts at input row lo: its own top padding.
  const int32_t pad_top = BandPadTop(r, c.stride_h, c.pad_h);
  const ConvParams p = ConvParamsOf<ConvParams>(c, pad_top);
  const ConvConstants k = ConvConstantsOf(v, c);
  tinyseg_ops::BandConv b = BandConvRow<int8_t, int32_t>(v, c, r, pad_top, k.filter);
  b.bias = micro::GetOptionalTensorData<int32_t>(k.bias);
  if (OptimizedRow(v, tinyseg_ops::CmsisConvRow(b, v.op_scratch, MemberScratchBytes(*v.d)))) {
    return ::tinyseg::Status::kOk;
  }
  kConvPerChannel(p, b.multiplier, b.shift, r.in_shape, b.input, micro::GetTensorShape(k.filter),
                  b.filter, micro::GetTensorShape(k.bias), b.bias, r.out_shape, b.output);
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status DepthwiseConvRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  const int32_t pad_top = BandPadTop(r, c.stride_h, c.pad_h);
  const DepthwiseParams p = WithDepthMultiplier(ConvParamsOf<DepthwiseParams>(c, pad_top), r);
  const ConvConstants k = ConvConstantsOf(v, c);
  tinyseg_ops::BandConv b = BandConvRow<int8_t, int32_t>(v, c, r, pad_top, k.filter);
  b.bias = micro::GetOptionalTensorData<int32_t>(k.bias);
  b.depth_multiplier = p.depth_multiplier;
  if (OptimizedRow(v,
                   tinyseg_ops::CmsisDepthwiseConvRow(b, v.op_scratch, MemberScratchBytes(*v.d)))) {
    return ::tinyseg::Status::kOk;
  }
  kDepthwiseConvPerChannel(p, b.multiplier, b.shift, r.in_shape, b.input,
                           micro::GetTensorShape(k.filter), b.filter, micro::GetTensorShape(k.bias),
                           b.bias, r.out_shape, b.output);
  return ::tinyseg::Status::kOk;
}

namespace {

// CMSIS-NN's TRANSPOSE_CONV row in a CMSIS-NN build, when op_scratch holds its buffer.
bool CmsisTransposeRow(const EvalState& v, const ConvStage& c, const StageRow& r,
                       int32_t filter_row, const TfLiteEvalTensor* filter,
                       const TfLiteEvalTensor* bias) {
  tinyseg_ops::BandTransposeConv t = {};
  static_cast<tinyseg_ops::BandConv&>(t) = BandConvRow<int8_t, int32_t>(v, c, r, 0, filter);
  t.bias = micro::GetOptionalTensorData<int32_t>(bias);
  t.filter_row = filter_row;
  return tinyseg_ops::CmsisTransposeConvRow(t, v.op_scratch, MemberScratchBytes(*v.d));
}

}  // namespace

// Output row y from the band of input rows lo .. (ConvGeometry's window): the shifted top padding
// puts each band row's filter rows where TFLM's scatter puts them, and the band's output is the
// one row y (integer sums: the same whatever their order). A band of one row may take CMSIS-NN's
// row.
::tinyseg::Status TransposeConvRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  const ConvParams p = TransposeRowParams(ConvParamsOf<ConvParams>(c, TransposePadTop(c, r)));
  const ConvConstants k = ConvConstantsOf(v, c);
  if (OptimizedRow(v, CmsisTransposeRow(v, c, r, p.padding_values.height, k.filter, k.bias))) {
    if (v.stats != nullptr) ++v.stats->optimized_transpose_conv_rows;
    return ::tinyseg::Status::kOk;
  }
  const int32_t* pool = Multipliers(v, c);
  kTransposeConv(p, pool, pool + r.out->channels, r.in_shape,
                 reinterpret_cast<const int8_t*>(r.src), micro::GetTensorShape(k.filter),
                 micro::GetTensorData<int8_t>(k.filter), micro::GetTensorShape(k.bias),
                 micro::GetOptionalTensorData<int32_t>(k.bias), r.out_shape,
                 reinterpret_cast<int8_t*>(r.dst), RuntimeShape(), nullptr, v.op_scratch);
  return ::tinyseg::Status::kOk;
}

// ------------------------------------------------------------ float32 rows

::tinyseg::Status ConvFloatRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  const ConvParams p = ConvParamsOf<ConvParams>(c, BandPadTop(r, c.stride_h, c.pad_h));
  const ConvConstants k = ConvConstantsOf(v, c);
  reference_ops::Conv(p, r.in_shape, reinterpret_cast<const float*>(r.src),
                      micro::GetTensorShape(k.filter), micro::GetTensorData<float>(k.filter),
                      micro::GetTensorShape(k.bias), micro::GetOptionalTensorData<float>(k.bias),
                      r.out_shape, reinterpret_cast<float*>(r.dst), RuntimeShape(), nullptr);
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status DepthwiseConvFloatRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  const DepthwiseParams p =
      WithDepthMultiplier(ConvParamsOf<DepthwiseParams>(c, BandPadTop(r, c.stride_h, c.pad_h)), r);
  const ConvConstants k = ConvConstantsOf(v, c);
  reference_ops::DepthwiseConv(
      p, r.in_shape, reinterpret_cast<const float*>(r.src), micro::GetTensorShape(k.filter),
      micro::GetTensorData<float>(k.filter), micro::GetTensorShape(k.bias),
      micro::GetOptionalTensorData<float>(k.bias), r.out_shape, reinterpret_cast<float*>(r.dst));
  return ::tinyseg::Status::kOk;
}

// As the int8 row, on the band of input rows lo ..; TFLM's float TRANSPOSE_CONV accumulates in the
// output itself (no scratch), input rows in ascending order, then each row's pixels and channels:
// the band's rows are the same rows in the same order, so each output value is the same sum.
::tinyseg::Status TransposeConvFloatRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const ConvStage& c = g.conv;
  const ConvParams p = TransposeRowParams(ConvParamsOf<ConvParams>(c, TransposePadTop(c, r)));
  const ConvConstants k = ConvConstantsOf(v, c);
  reference_ops::TransposeConv(p, r.in_shape, reinterpret_cast<const float*>(r.src),
                               micro::GetTensorShape(k.filter),
                               micro::GetTensorData<float>(k.filter), micro::GetTensorShape(k.bias),
                               micro::GetOptionalTensorData<float>(k.bias), r.out_shape,
                               reinterpret_cast<float*>(r.dst), RuntimeShape(), nullptr);
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
