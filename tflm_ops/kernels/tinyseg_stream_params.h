// The TFLM parameter structs and the CMSIS-NN band views of one StreamChain row, written once for
// the int8, int16 (16x8) and float32 forms of a stage (tinyseg_stream_internal.h): the forms differ
// in their types and in the activation's range (quantized or float), not in the geometry, as
// TFLM's own kernels fill ConvParams, DepthwiseParams and PoolParams once for every type.
#ifndef TINYSEG_TFLM_OPS_KERNELS_TINYSEG_STREAM_PARAMS_H_
#define TINYSEG_TFLM_OPS_KERNELS_TINYSEG_STREAM_PARAMS_H_

#include <cstdint>

#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"

namespace tflite {
namespace tinyseg_stream {

// The top padding of a band that starts at input row r.lo (a window of stride_h rows per output
// row, pad_h above the tensor).
inline int32_t BandPadTop(const StageRow& r, int32_t stride_h, int32_t pad_h) {
  return r.lo - (r.y * stride_h - pad_h);
}

// TRANSPOSE_CONV: the top padding that makes output row y the band's row 0 (band row j, input row
// lo + j, reaches it through filter row y - (lo + j) * stride + pad_h).
inline int32_t TransposePadTop(const ConvStage& c, const StageRow& r) {
  return r.y - r.lo * c.stride_h + c.pad_h;
}

// The ConvParams or DepthwiseParams of one band (its top padding `pad_top`): the geometry, the
// offsets and both activation ranges, as TFLM's structs carry both for every type; each reference
// function reads its own type's fields (the other type's are 0: StageSlot is value-initialized).
template <typename Params>
Params ConvParamsOf(const ConvStage& c, int32_t pad_top) {
  Params p = {};
  p.padding_type = PaddingType::kSame;
  p.padding_values.width = static_cast<int16_t>(c.pad_w);
  p.padding_values.height = static_cast<int16_t>(pad_top);
  p.stride_width = static_cast<int16_t>(c.stride_w);
  p.stride_height = static_cast<int16_t>(c.stride_h);
  p.dilation_width_factor = static_cast<int16_t>(c.dilation_w);
  p.dilation_height_factor = static_cast<int16_t>(c.dilation_h);
  p.input_offset = c.input_offset;
  p.output_offset = c.output_offset;
  p.quantized_activation_min = c.act_min;
  p.quantized_activation_max = c.act_max;
  p.float_activation_min = c.float_min;
  p.float_activation_max = c.float_max;
  return p;
}

// DEPTHWISE_CONV_2D's multiplier: output channels per input channel.
inline DepthwiseParams WithDepthMultiplier(DepthwiseParams p, const StageRow& r) {
  p.depth_multiplier = static_cast<int16_t>(r.out->channels / r.in->channels);
  return p;
}

// TRANSPOSE_CONV's params of output row y: the shifted top padding, no dilation.
template <typename Params>
Params TransposeRowParams(Params p) {
  p.dilation_width_factor = 1;
  p.dilation_height_factor = 1;
  return p;
}

// A convolution stage's constants at Eval: its filter and its bias (nullptr: none).
struct ConvConstants {
  const TfLiteEvalTensor* filter;
  const TfLiteEvalTensor* bias;
};
inline ConvConstants ConvConstantsOf(const EvalState& v, const ConvStage& c) {
  return {micro::GetEvalInput(v.context, v.node, c.filter),
          c.bias >= 0 ? micro::GetEvalInput(v.context, v.node, c.bias) : nullptr};
}

// The window every band view of tinyseg_stream_cmsis.h has (BandConvOf, BandPoolOf): the band's
// input rows from `src`, its one output row, the stage's window (ConvStage or PoolStage) with the
// band's own top padding `pad_top`, and the activation range.
template <typename T, typename Band, typename Stage>
void SetBandWindow(const Stage& s, const StageRow& r, int32_t pad_top, Band* b) {
  b->input = reinterpret_cast<const T*>(r.src);
  b->in_h = r.rows;
  b->in_w = r.in->width;
  b->output = reinterpret_cast<T*>(r.dst);
  b->out_w = r.out->width;
  b->filter_h = s.filter_h;
  b->filter_w = s.filter_w;
  b->stride_h = s.stride_h;
  b->stride_w = s.stride_w;
  b->pad_h = pad_top;
  b->pad_w = s.pad_w;
  b->act_min = s.act_min;
  b->act_max = s.act_max;
}

// A convolution stage's row as tinyseg_stream_cmsis.h takes it; the caller sets the bias.
template <typename T, typename B>
tinyseg_ops::BandConvOf<T, B> BandConvRow(const EvalState& v, const ConvStage& c, const StageRow& r,
                                          int32_t pad_top, const TfLiteEvalTensor* filter) {
  tinyseg_ops::BandConvOf<T, B> b = {};
  SetBandWindow<T>(c, r, pad_top, &b);
  b.in_c = r.in->channels;
  b.filter = micro::GetTensorData<int8_t>(filter);
  b.filter_c = filter->dims->data[3];
  b.out_c = r.out->channels;
  b.dilation_h = c.dilation_h;
  b.dilation_w = c.dilation_w;
  b.input_offset = c.input_offset;
  b.output_offset = c.output_offset;
  b.multiplier = Multipliers(v, c);
  b.shift = Multipliers(v, c) + r.out->channels;
  return b;
}

// PoolParams of one band, with both activation ranges (as ConvParamsOf).
inline PoolParams PoolParamsOf(const PoolStage& ps, const StageRow& r) {
  PoolParams p = {};
  p.stride_height = ps.stride_h;
  p.stride_width = ps.stride_w;
  p.filter_height = ps.filter_h;
  p.filter_width = ps.filter_w;
  p.padding_values.height = static_cast<int16_t>(BandPadTop(r, ps.stride_h, ps.pad_h));
  p.padding_values.width = static_cast<int16_t>(ps.pad_w);
  p.quantized_activation_min = ps.act_min;
  p.quantized_activation_max = ps.act_max;
  p.float_activation_min = ps.float_min;
  p.float_activation_max = ps.float_max;
  return p;
}

template <typename T>
tinyseg_ops::BandPoolOf<T> BandPoolRow(const PoolStage& ps, const StageRow& r, int32_t pad_top) {
  tinyseg_ops::BandPoolOf<T> b = {};
  SetBandWindow<T>(ps, r, pad_top, &b);
  b.channels = r.in->channels;
  return b;
}

// An ADD or MUL row without broadcast as tinyseg_stream_cmsis.h takes it.
template <typename T>
tinyseg_ops::ElementwiseRowOf<T> ElementwiseRowOf(const ArithmeticStage& ar, const T* a, const T* b,
                                                  T* o, int32_t size) {
  tinyseg_ops::ElementwiseRowOf<T> e = {};
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
  return e;
}

}  // namespace tinyseg_stream
}  // namespace tflite

#endif  // TINYSEG_TFLM_OPS_KERNELS_TINYSEG_STREAM_PARAMS_H_
