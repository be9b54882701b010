// CMSIS-NN s16 arithmetic for StreamChain's int16 (16x8) stages; see tinyseg_stream_cmsis.h.
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"

// arm_convolve_wrapper_s16 takes its bias as cmsis_nn_bias_data (int32 or int64) since the
// CMSIS-NN that TFLM 90b983c pins; a fork that defines CMSIS_NN with an older CMSIS-NN defines
// TINYSEG_NO_CMSIS_NN_S16, and its int16 stages keep the reference arithmetic (the same bytes).
#if defined(CMSIS_NN) && !defined(TINYSEG_NO_CMSIS_NN_S16)
#define TINYSEG_STREAM_CMSIS_S16 1
#include "Include/arm_nnfunctions.h"
#endif

namespace tflite {
namespace tinyseg_ops {

#if defined(TINYSEG_STREAM_CMSIS_S16)

namespace {

cmsis_nn_dims Dims(int32_t n, int32_t h, int32_t w, int32_t c) {
  cmsis_nn_dims d;
  d.n = n;
  d.h = h;
  d.w = w;
  d.c = c;
  return d;
}

// The per-channel multipliers and shifts are read only; CMSIS-NN's struct is not const.
cmsis_nn_per_channel_quant_params Quant(const BandConvS16& c) {
  cmsis_nn_per_channel_quant_params q;
  q.multiplier = const_cast<int32_t*>(c.multiplier);
  q.shift = const_cast<int32_t*>(c.shift);
  return q;
}

// CMSIS-NN's s16 convolutions ignore the offsets: zero points 0 only (TFLM's int16 Prepare checks
// them), and a window with input rows (padding rows only: the reference code's case).
bool Usable(const BandConvS16& c) {
  return c.in_h > 0 && c.input_offset == 0 && c.output_offset == 0;
}

}  // namespace

bool StreamInt16StagesUseCmsisNn() { return true; }

// As cmsis_nn/conv.cc for int16: arm_convolve_wrapper_s16 with the bias as it is typed. Grouped
// filters (filter_c < in_c) keep the reference code: arm_convolve_s16 has no groups.
bool CmsisConvRowS16(const BandConvS16& c, void* scratch, int32_t scratch_bytes) {
  if (!Usable(c) || c.filter_c != c.in_c) return false;
  cmsis_nn_conv_params p;
  p.input_offset = 0;
  p.output_offset = 0;
  p.stride.h = c.stride_h;
  p.stride.w = c.stride_w;
  p.padding.h = c.pad_h;
  p.padding.w = c.pad_w;
  p.dilation.h = c.dilation_h;
  p.dilation.w = c.dilation_w;
  p.activation.min = c.act_min;
  p.activation.max = c.act_max;
  const cmsis_nn_dims in = Dims(1, c.in_h, c.in_w, c.in_c);
  const cmsis_nn_dims filter = Dims(1, c.filter_h, c.filter_w, c.filter_c);
  const cmsis_nn_dims bias = Dims(1, 1, 1, c.out_c);
  const cmsis_nn_dims out = Dims(1, 1, c.out_w, c.out_c);
  const int32_t need = arm_convolve_wrapper_s16_get_buffer_size(&p, &in, &filter, &out);
  // arm_convolve_s16 refuses a null buffer, so it needs one even when the size is 0.
  if (need < 0 || need > scratch_bytes || scratch == nullptr) return false;
  cmsis_nn_context ctx;
  ctx.buf = scratch;
  ctx.size = need;
  const cmsis_nn_per_channel_quant_params q = Quant(c);
  const cmsis_nn_bias_data b = {c.bias, c.bias_is_int32};
  return arm_convolve_wrapper_s16(&ctx, &p, &q, &in, c.input, &filter, c.filter, &bias, &b, &out,
                                  c.output) == ARM_CMSIS_NN_SUCCESS;
}

// As cmsis_nn/depthwise_conv.cc for int16: arm_depthwise_conv_s16 (not the wrapper), no buffer,
// an int64 bias.
bool CmsisDepthwiseConvRowS16(const BandConvS16& c) {
  if (!Usable(c) || c.bias_is_int32) return false;
  cmsis_nn_dw_conv_params p;
  p.input_offset = 0;
  p.output_offset = 0;
  p.ch_mult = c.depth_multiplier;
  p.stride.h = c.stride_h;
  p.stride.w = c.stride_w;
  p.padding.h = c.pad_h;
  p.padding.w = c.pad_w;
  p.dilation.h = c.dilation_h;
  p.dilation.w = c.dilation_w;
  p.activation.min = c.act_min;
  p.activation.max = c.act_max;
  const cmsis_nn_dims in = Dims(1, c.in_h, c.in_w, c.in_c);
  const cmsis_nn_dims filter = Dims(1, c.filter_h, c.filter_w, c.out_c);
  const cmsis_nn_dims bias = Dims(1, 1, 1, c.out_c);
  const cmsis_nn_dims out = Dims(1, 1, c.out_w, c.out_c);
  cmsis_nn_context ctx;
  ctx.buf = nullptr;
  ctx.size = 0;
  const cmsis_nn_per_channel_quant_params q = Quant(c);
  return arm_depthwise_conv_s16(&ctx, &p, &q, &in, c.input, &filter, c.filter, &bias,
                                static_cast<const int64_t*>(c.bias), &out,
                                c.output) == ARM_CMSIS_NN_SUCCESS;
}

namespace {

cmsis_nn_pool_params PoolParams(const BandPoolS16& b) {
  cmsis_nn_pool_params p;
  p.stride.h = b.stride_h;
  p.stride.w = b.stride_w;
  p.padding.h = b.pad_h;
  p.padding.w = b.pad_w;
  p.activation.min = b.act_min;
  p.activation.max = b.act_max;
  return p;
}

}  // namespace

bool CmsisMaxPoolRowS16(const BandPoolS16& b) {
  if (b.in_h <= 0) return false;
  const cmsis_nn_pool_params p = PoolParams(b);
  const cmsis_nn_dims in = Dims(1, b.in_h, b.in_w, b.channels);
  const cmsis_nn_dims filter = Dims(1, b.filter_h, b.filter_w, 1);
  const cmsis_nn_dims out = Dims(1, 1, b.out_w, b.channels);
  cmsis_nn_context ctx;
  ctx.buf = nullptr;
  ctx.size = 0;
  return arm_max_pool_s16(&ctx, &p, &in, b.input, &filter, &out, b.output) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisAveragePoolRowS16(const BandPoolS16& b, void* scratch, int32_t scratch_bytes) {
  if (b.in_h <= 0) return false;
  const int32_t need = arm_avgpool_s16_get_buffer_size(b.out_w, b.channels);
  if (need < 0 || need > scratch_bytes) return false;
  const cmsis_nn_pool_params p = PoolParams(b);
  const cmsis_nn_dims in = Dims(1, b.in_h, b.in_w, b.channels);
  const cmsis_nn_dims filter = Dims(1, b.filter_h, b.filter_w, 1);
  const cmsis_nn_dims out = Dims(1, 1, b.out_w, b.channels);
  cmsis_nn_context ctx;
  ctx.buf = need > 0 ? scratch : nullptr;
  ctx.size = need;
  return arm_avgpool_s16(&ctx, &p, &in, b.input, &filter, &out, b.output) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisAddRowS16(const ElementwiseRowS16& e) {
  return arm_elementwise_add_s16(e.input1, e.input2, e.input1_offset, e.input1_multiplier,
                                 e.input1_shift, e.input2_offset, e.input2_multiplier,
                                 e.input2_shift, e.left_shift, e.output, e.output_offset,
                                 e.output_multiplier, e.output_shift, e.act_min, e.act_max,
                                 e.size) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisMulRowS16(const ElementwiseRowS16& e) {
  return arm_elementwise_mul_s16(e.input1, e.input2, e.input1_offset, e.input2_offset, e.output,
                                 e.output_offset, e.output_multiplier, e.output_shift, e.act_min,
                                 e.act_max, e.size) == ARM_CMSIS_NN_SUCCESS;
}

#else  // no (recent) CMSIS-NN in this build: the int16 stages run the reference arithmetic

bool StreamInt16StagesUseCmsisNn() { return false; }
bool CmsisConvRowS16(const BandConvS16&, void*, int32_t) { return false; }
bool CmsisDepthwiseConvRowS16(const BandConvS16&) { return false; }
bool CmsisMaxPoolRowS16(const BandPoolS16&) { return false; }
bool CmsisAveragePoolRowS16(const BandPoolS16&, void*, int32_t) { return false; }
bool CmsisAddRowS16(const ElementwiseRowS16&) { return false; }
bool CmsisMulRowS16(const ElementwiseRowS16&) { return false; }

#endif

}  // namespace tinyseg_ops
}  // namespace tflite
