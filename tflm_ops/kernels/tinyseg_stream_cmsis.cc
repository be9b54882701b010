// CMSIS-NN arithmetic for StreamChain's stages; see tinyseg_stream_cmsis.h.
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"

#include <cstring>

#if defined(CMSIS_NN)
#include "Include/arm_nnfunctions.h"
#endif

namespace tflite {
namespace tinyseg_ops {

int32_t CmsisTransposeConvRowBytes(int32_t in_w, int32_t in_c, int32_t filter_w, int32_t out_c, int32_t stride_w) {
  const int64_t columns = static_cast<int64_t>(in_w - 1) * stride_w + (filter_w > stride_w ? filter_w : stride_w);
  const int64_t bytes = columns * out_c * 4 + static_cast<int64_t>(out_c) * filter_w * in_c;
  return bytes > INT32_MAX ? -1 : static_cast<int32_t>(bytes);
}

#if defined(CMSIS_NN)

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
cmsis_nn_per_channel_quant_params Quant(const BandConv& c) {
  cmsis_nn_per_channel_quant_params q;
  q.multiplier = const_cast<int32_t*>(c.multiplier);
  q.shift = const_cast<int32_t*>(c.shift);
  return q;
}

}  // namespace

bool StreamStagesUseCmsisNn() { return true; }

bool CmsisConvRow(const BandConv& c, void* scratch, int32_t scratch_bytes) {
  if (c.in_h <= 0) return false;  // a window of padding rows only: the reference code's case
  cmsis_nn_conv_params p;
  p.input_offset = c.input_offset;
  p.output_offset = c.output_offset;
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
  const int32_t need = arm_convolve_wrapper_s8_get_buffer_size(&p, &in, &filter, &out);
  if (need < 0 || need > scratch_bytes) return false;
  cmsis_nn_context ctx;
  ctx.buf = need > 0 ? scratch : nullptr;
  ctx.size = need;
  const cmsis_nn_per_channel_quant_params q = Quant(c);
  return arm_convolve_wrapper_s8(&ctx, &p, &q, &in, c.input, &filter, c.filter, &bias, c.bias, &out,
                                 c.output) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisDepthwiseConvRow(const BandConv& c, void* scratch, int32_t scratch_bytes) {
  if (c.in_h <= 0) return false;
  cmsis_nn_dw_conv_params p;
  p.input_offset = c.input_offset;
  p.output_offset = c.output_offset;
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
  const int32_t need = arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &in, &filter, &out);
  if (need < 0 || need > scratch_bytes) return false;
  cmsis_nn_context ctx;
  ctx.buf = need > 0 ? scratch : nullptr;
  ctx.size = need;
  const cmsis_nn_per_channel_quant_params q = Quant(c);
  return arm_depthwise_conv_wrapper_s8(&ctx, &p, &q, &in, c.input, &filter, c.filter, &bias, c.bias, &out,
                                       c.output) == ARM_CMSIS_NN_SUCCESS;
}

namespace {

cmsis_nn_pool_params PoolParams(const BandPool& b) {
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

bool CmsisMaxPoolRow(const BandPool& b) {
  if (b.in_h <= 0) return false;
  const cmsis_nn_pool_params p = PoolParams(b);
  const cmsis_nn_dims in = Dims(1, b.in_h, b.in_w, b.channels);
  const cmsis_nn_dims filter = Dims(1, b.filter_h, b.filter_w, 1);
  const cmsis_nn_dims out = Dims(1, 1, b.out_w, b.channels);
  cmsis_nn_context ctx;
  ctx.buf = nullptr;
  ctx.size = 0;
  return arm_max_pool_s8(&ctx, &p, &in, b.input, &filter, &out, b.output) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisAveragePoolRow(const BandPool& b, void* scratch, int32_t scratch_bytes) {
  if (b.in_h <= 0) return false;
  const int32_t need = arm_avgpool_s8_get_buffer_size(b.out_w, b.channels);
  if (need < 0 || need > scratch_bytes) return false;
  const cmsis_nn_pool_params p = PoolParams(b);
  const cmsis_nn_dims in = Dims(1, b.in_h, b.in_w, b.channels);
  const cmsis_nn_dims filter = Dims(1, b.filter_h, b.filter_w, 1);
  const cmsis_nn_dims out = Dims(1, 1, b.out_w, b.channels);
  cmsis_nn_context ctx;
  ctx.buf = need > 0 ? scratch : nullptr;
  ctx.size = need;
  return arm_avgpool_s8(&ctx, &p, &in, b.input, &filter, &out, b.output) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisTransposeConvRow(const BandTransposeConv& t, void* scratch, int32_t scratch_bytes) {
  if (t.filter_row < 0 || t.filter_row >= t.filter_h) return false;  // a bias-only row
  const int32_t need = CmsisTransposeConvRowBytes(t.in_w, t.in_c, t.filter_w, t.out_c, t.stride_w);
  const int32_t columns = (t.in_w - 1) * t.stride_w + (t.filter_w > t.stride_w ? t.filter_w : t.stride_w);
  // arm_transpose_conv_s8 reads output columns pad_w .. pad_w + out_w - 1 of its accumulator row.
  if (need < 0 || need > scratch_bytes || t.pad_w < 0 || t.pad_w + t.out_w > columns) return false;
  const int32_t accumulator_bytes = columns * t.out_c * 4;
  int8_t* filter_row = static_cast<int8_t*>(scratch) + accumulator_bytes;
  const int32_t row_bytes = t.filter_w * t.in_c;
  for (int32_t c = 0; c < t.out_c; ++c) {
    std::memcpy(filter_row + static_cast<size_t>(c) * row_bytes,
                t.filter + (static_cast<size_t>(c) * t.filter_h + t.filter_row) * row_bytes, row_bytes);
  }
  cmsis_nn_transpose_conv_params p;
  p.input_offset = t.input_offset;
  p.output_offset = t.output_offset;
  p.stride.h = 1;
  p.stride.w = t.stride_w;
  p.padding.h = 0;
  p.padding.w = t.pad_w;
  p.padding_offsets.h = 0;
  p.padding_offsets.w = 0;
  p.dilation.h = 1;
  p.dilation.w = 1;
  p.activation.min = t.act_min;
  p.activation.max = t.act_max;
  cmsis_nn_per_channel_quant_params q;
  q.multiplier = const_cast<int32_t*>(t.multiplier);
  q.shift = const_cast<int32_t*>(t.shift);
  const cmsis_nn_dims in = Dims(1, 1, t.in_w, t.in_c);
  const cmsis_nn_dims filter = Dims(t.out_c, 1, t.filter_w, t.in_c);
  const cmsis_nn_dims bias = Dims(1, 1, 1, t.out_c);
  const cmsis_nn_dims out = Dims(1, 1, t.out_w, t.out_c);
  cmsis_nn_context ctx;
  ctx.buf = scratch;
  ctx.size = accumulator_bytes;
  cmsis_nn_context unused;  // the reverse-convolution buffer: arm_transpose_conv_s8 never reads it
  unused.buf = nullptr;
  unused.size = 0;
  // Not arm_transpose_conv_wrapper_s8: for stride <= 2 and more than 16 input channels it runs a
  // convolution over the zero-upsampled input, whose window crosses into the neighbouring input
  // rows; the direct function keeps to the one row (same sums, so the same bytes either way).
  return arm_transpose_conv_s8(&ctx, &unused, &p, &q, &in, t.input, &filter, filter_row, &bias, t.bias, &out,
                               t.output) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisAddRow(const ElementwiseRow& e) {
  return arm_elementwise_add_s8(e.input1, e.input2, e.input1_offset, e.input1_multiplier, e.input1_shift,
                                e.input2_offset, e.input2_multiplier, e.input2_shift, e.left_shift, e.output,
                                e.output_offset, e.output_multiplier, e.output_shift, e.act_min, e.act_max,
                                e.size) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisMulRow(const ElementwiseRow& e) {
  return arm_elementwise_mul_s8(e.input1, e.input2, e.input1_offset, e.input2_offset, e.output, e.output_offset,
                                e.output_multiplier, e.output_shift, e.act_min, e.act_max,
                                e.size) == ARM_CMSIS_NN_SUCCESS;
}

#else  // no CMSIS-NN in this build: the stages run the reference arithmetic

bool StreamStagesUseCmsisNn() { return false; }
bool CmsisConvRow(const BandConv&, void*, int32_t) { return false; }
bool CmsisDepthwiseConvRow(const BandConv&, void*, int32_t) { return false; }
bool CmsisMaxPoolRow(const BandPool&) { return false; }
bool CmsisAveragePoolRow(const BandPool&, void*, int32_t) { return false; }
bool CmsisTransposeConvRow(const BandTransposeConv&, void*, int32_t) { return false; }
bool CmsisAddRow(const ElementwiseRow&) { return false; }
bool CmsisMulRow(const ElementwiseRow&) { return false; }

#endif

}  // namespace tinyseg_ops
}  // namespace tflite
