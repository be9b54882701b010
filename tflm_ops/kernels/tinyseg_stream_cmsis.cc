// CMSIS-NN arithmetic for StreamChain's stages, int8 and int16 (16x8); see tinyseg_stream_cmsis.h.
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"

#include <cstring>

#if defined(CMSIS_NN)
#include "Include/arm_nnfunctions.h"
#include "Include/arm_nnsupportfunctions.h"  // the TRANSPOSE_CONV row: arm_nn_transpose_conv_row_s8_s32
// arm_convolve_wrapper_s16 takes its bias as cmsis_nn_bias_data (int32 or int64) since the
// CMSIS-NN that TFLM 90b983c pins; a fork that defines CMSIS_NN with an older CMSIS-NN defines
// TINYSEG_NO_CMSIS_NN_S16, and its int16 stages keep the reference arithmetic (the same bytes).
#if !defined(TINYSEG_NO_CMSIS_NN_S16)
#define TINYSEG_STREAM_CMSIS_S16 1
#endif
#endif

namespace tflite {
namespace tinyseg_ops {

int32_t CmsisTransposeConvRowBytes(int32_t in_w, int32_t filter_w, int32_t out_c,
                                   int32_t stride_w) {
  const int64_t columns =
      static_cast<int64_t>(in_w - 1) * stride_w + (filter_w > stride_w ? filter_w : stride_w);
  const int64_t bytes = columns * out_c * 4;
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

// CMSIS-NN's buffer of `need` bytes at `scratch` (none when it needs none).
cmsis_nn_context Buffer(void* scratch, int32_t need) {
  cmsis_nn_context ctx;
  ctx.buf = need > 0 ? scratch : nullptr;
  ctx.size = need;
  return ctx;
}

// The per-channel multipliers and shifts are read only; CMSIS-NN's struct is not const.
template <typename Band>
cmsis_nn_per_channel_quant_params Quant(const Band& c) {
  cmsis_nn_per_channel_quant_params q;
  q.multiplier = const_cast<int32_t*>(c.multiplier);
  q.shift = const_cast<int32_t*>(c.shift);
  return q;
}

// The fields cmsis_nn_conv_params and cmsis_nn_dw_conv_params share, from the band.
template <typename Params, typename Band>
Params ConvParams(const Band& c) {
  Params p;
  p.input_offset = c.input_offset;
  p.output_offset = c.output_offset;
  p.stride = {c.stride_w, c.stride_h};  // cmsis_nn_tile: {w, h}
  p.padding = {c.pad_w, c.pad_h};
  p.dilation = {c.dilation_w, c.dilation_h};
  p.activation = {c.act_min, c.act_max};
  return p;
}

// The input, filter, bias and output dims of a convolution band (filter_c: the filter's last
// dimension).
template <typename Band>
struct ConvDims {
  explicit ConvDims(const Band& c, int32_t filter_c)
      : in(Dims(1, c.in_h, c.in_w, c.in_c)),
        filter(Dims(1, c.filter_h, c.filter_w, filter_c)),
        bias(Dims(1, 1, 1, c.out_c)),
        out(Dims(1, 1, c.out_w, c.out_c)) {}
  cmsis_nn_dims in, filter, bias, out;
};

template <typename T>
cmsis_nn_pool_params PoolParams(const BandPoolOf<T>& b) {
  cmsis_nn_pool_params p;
  p.stride = {b.stride_w, b.stride_h};  // cmsis_nn_tile: {w, h}
  p.padding = {b.pad_w, b.pad_h};
  p.activation = {b.act_min, b.act_max};
  return p;
}

// A pool row through CMSIS-NN's `pool` (arm_max_pool_s8/s16, arm_avgpool_s8/s16) with a buffer of
// `need` bytes from `scratch`.
template <typename T, typename PoolFn>
bool PoolRow(const BandPoolOf<T>& b, PoolFn pool, int32_t need, void* scratch,
             int32_t scratch_bytes) {
  if (b.in_h <= 0) return false;  // a window of padding rows only: the reference code's case
  if (need < 0 || need > scratch_bytes) return false;
  const cmsis_nn_pool_params p = PoolParams(b);
  const cmsis_nn_dims in = Dims(1, b.in_h, b.in_w, b.channels);
  const cmsis_nn_dims filter = Dims(1, b.filter_h, b.filter_w, 1);
  const cmsis_nn_dims out = Dims(1, 1, b.out_w, b.channels);
  const cmsis_nn_context ctx = Buffer(scratch, need);
  return pool(&ctx, &p, &in, b.input, &filter, &out, b.output) == ARM_CMSIS_NN_SUCCESS;
}

// ADD through CMSIS-NN's arm_elementwise_add_s8/s16 (the same arguments).
template <typename T, typename AddFn>
bool AddRow(const ElementwiseRowOf<T>& e, AddFn add) {
  return add(e.input1, e.input2, e.input1_offset, e.input1_multiplier, e.input1_shift,
             e.input2_offset, e.input2_multiplier, e.input2_shift, e.left_shift, e.output,
             e.output_offset, e.output_multiplier, e.output_shift, e.act_min, e.act_max,
             e.size) == ARM_CMSIS_NN_SUCCESS;
}

template <typename T, typename MulFn>
bool MulRow(const ElementwiseRowOf<T>& e, MulFn mul) {
  return mul(e.input1, e.input2, e.input1_offset, e.input2_offset, e.output, e.output_offset,
             e.output_multiplier, e.output_shift, e.act_min, e.act_max,
             e.size) == ARM_CMSIS_NN_SUCCESS;
}

}  // namespace

bool StreamStagesUseCmsisNn() { return true; }

bool CmsisConvRow(const BandConv& c, void* scratch, int32_t scratch_bytes) {
  if (c.in_h <= 0) return false;  // a window of padding rows only: the reference code's case
  const cmsis_nn_conv_params p = ConvParams<cmsis_nn_conv_params>(c);
  const ConvDims<BandConv> d(c, c.filter_c);
  const int32_t need = arm_convolve_wrapper_s8_get_buffer_size(&p, &d.in, &d.filter, &d.out);
  if (need < 0 || need > scratch_bytes) return false;
  const cmsis_nn_context ctx = Buffer(scratch, need);
  const cmsis_nn_per_channel_quant_params q = Quant(c);
  return arm_convolve_wrapper_s8(&ctx, &p, &q, &d.in, c.input, &d.filter, c.filter, &d.bias, c.bias,
                                 &d.out, c.output) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisDepthwiseConvRow(const BandConv& c, void* scratch, int32_t scratch_bytes) {
  if (c.in_h <= 0) return false;
  cmsis_nn_dw_conv_params p = ConvParams<cmsis_nn_dw_conv_params>(c);
  p.ch_mult = c.depth_multiplier;
  const ConvDims<BandConv> d(c, c.out_c);
  const int32_t need = arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &d.in, &d.filter, &d.out);
  if (need < 0 || need > scratch_bytes) return false;
  const cmsis_nn_context ctx = Buffer(scratch, need);
  const cmsis_nn_per_channel_quant_params q = Quant(c);
  return arm_depthwise_conv_wrapper_s8(&ctx, &p, &q, &d.in, c.input, &d.filter, c.filter, &d.bias,
                                       c.bias, &d.out, c.output) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisMaxPoolRow(const BandPool& b) { return PoolRow(b, arm_max_pool_s8, 0, nullptr, 0); }

bool CmsisAveragePoolRow(const BandPool& b, void* scratch, int32_t scratch_bytes) {
  return PoolRow(b, arm_avgpool_s8, arm_avgpool_s8_get_buffer_size(b.out_w, b.channels), scratch,
                 scratch_bytes);
}

// arm_nn_transpose_conv_row_s8_s32 is a CMSIS-NN support function, not its documented API: it
// exists with this signature in the CMSIS-NN that TFLM 90b983c pins. A fork that defines CMSIS_NN
// with an older CMSIS-NN defines TINYSEG_NO_CMSIS_NN_TRANSPOSE_CONV: its TRANSPOSE_CONV stages then
// keep the reference arithmetic (the same bytes, the planner's scratch still enough).
#if defined(TINYSEG_NO_CMSIS_NN_TRANSPOSE_CONV)
bool CmsisTransposeConvRow(const BandTransposeConv&, void*, int32_t) { return false; }
#else
namespace {

// Band row j's filter row (the one that reaches the output row); outside [0, filter_h): none.
int32_t BandFilterRow(const BandTransposeConv& t, int32_t j) {
  return t.filter_row - j * t.stride_h;
}

bool ReachesRow(const BandTransposeConv& t) {
  for (int32_t j = 0; j < t.in_h; ++j) {
    const int32_t fr = BandFilterRow(t, j);
    if (fr >= 0 && fr < t.filter_h) return true;
  }
  return false;
}

}  // namespace

bool CmsisTransposeConvRow(const BandTransposeConv& t, void* scratch, int32_t scratch_bytes) {
  if (!ReachesRow(t)) return false;  // a bias-only row
  const int32_t need = CmsisTransposeConvRowBytes(t.in_w, t.filter_w, t.out_c, t.stride_w);
  if (need < 0 || need > scratch_bytes) return false;
  // need >= 0: the row's bytes fit int32 (counted in 64 bits), so its columns do too.
  const int32_t columns =
      (t.in_w - 1) * t.stride_w + (t.filter_w > t.stride_w ? t.filter_w : t.stride_w);
  // The output row is columns pad_w .. pad_w + out_w - 1 of the accumulator row.
  if (t.pad_w < 0 || static_cast<int64_t>(t.pad_w) + t.out_w > columns) return false;
  int32_t* acc = static_cast<int32_t*>(scratch);
  // As arm_transpose_conv_s8 starts its rolling buffer: the bias in every column, or zeros.
  for (int32_t x = 0; x < columns; ++x) {
    if (t.bias != nullptr) {
      std::memcpy(acc + static_cast<size_t>(x) * t.out_c, t.bias, static_cast<size_t>(t.out_c) * 4);
    } else {
      std::memset(acc + static_cast<size_t>(x) * t.out_c, 0, static_cast<size_t>(t.out_c) * 4);
    }
  }
  // arm_transpose_conv_s8's row function on each band row, with the filter rows before and after
  // the one that reaches this output row skipped (the skips arm_transpose_conv_s8 itself passes
  // at the output's top and bottom edges): the products of exactly this output row, added into
  // the accumulator (integer sums: their order does not matter).
  const int32_t row = columns * t.out_c;
  for (int32_t j = 0; j < t.in_h; ++j) {
    const int32_t fr = BandFilterRow(t, j);
    if (fr < 0 || fr >= t.filter_h) continue;
    const int8_t* input = t.input + static_cast<size_t>(j) * t.in_w * t.in_c;
    if (arm_nn_transpose_conv_row_s8_s32(input, t.filter, acc, 0, row, t.filter_h, t.filter_w,
                                         t.in_c, t.out_c, t.input_offset, row, t.in_w, t.stride_w,
                                         fr, t.filter_h - 1 - fr) != ARM_CMSIS_NN_SUCCESS) {
      return false;
    }
  }
  // Then its requantization of an output row (the loop of its non-Helium build).
  const int32_t* sum = acc + static_cast<size_t>(t.pad_w) * t.out_c;
  int8_t* out = t.output;
  for (int32_t x = 0; x < t.out_w; ++x) {
    for (int32_t c = 0; c < t.out_c; ++c) {
      int32_t r = arm_nn_requantize(*sum++, t.multiplier[c], t.shift[c]);
      r += t.output_offset;
      r = r < t.act_min ? t.act_min : r;
      r = r > t.act_max ? t.act_max : r;
      *out++ = static_cast<int8_t>(r);
    }
  }
  return true;
}
#endif  // TINYSEG_NO_CMSIS_NN_TRANSPOSE_CONV

bool CmsisAddRow(const ElementwiseRow& e) { return AddRow(e, arm_elementwise_add_s8); }
bool CmsisMulRow(const ElementwiseRow& e) { return MulRow(e, arm_elementwise_mul_s8); }

// arm_pad_s8 came into CMSIS-NN with TFLM's CMSIS-NN PAD kernel: a fork that defines CMSIS_NN
// with an older CMSIS-NN defines TINYSEG_NO_CMSIS_NN_PAD, and its PAD stages keep the reference
// arithmetic (the same bytes).
#if defined(TINYSEG_NO_CMSIS_NN_PAD)
bool CmsisPadRow(const PadRow&) { return false; }
#else
bool CmsisPadRow(const PadRow& p) {
  if (p.in_rows < 0 || p.in_rows > 1 || p.left < 0 || p.right < 0 || p.front < 0 || p.back < 0) {
    return false;
  }
  const cmsis_nn_dims in = Dims(1, p.in_rows, p.in_w, p.channels);
  const cmsis_nn_dims pre = Dims(0, p.in_rows == 0 ? 1 : 0, p.left, p.front);
  const cmsis_nn_dims post = Dims(0, 0, p.right, p.back);
  return arm_pad_s8(p.input, p.output, p.pad_value, &in, &pre, &post) == ARM_CMSIS_NN_SUCCESS;
}
#endif  // TINYSEG_NO_CMSIS_NN_PAD

#else  // no CMSIS-NN in this build: the stages run the reference arithmetic

bool StreamStagesUseCmsisNn() { return false; }
bool CmsisConvRow(const BandConv&, void*, int32_t) { return false; }
bool CmsisDepthwiseConvRow(const BandConv&, void*, int32_t) { return false; }
bool CmsisMaxPoolRow(const BandPool&) { return false; }
bool CmsisAveragePoolRow(const BandPool&, void*, int32_t) { return false; }
bool CmsisTransposeConvRow(const BandTransposeConv&, void*, int32_t) { return false; }
bool CmsisAddRow(const ElementwiseRow&) { return false; }
bool CmsisMulRow(const ElementwiseRow&) { return false; }
bool CmsisPadRow(const PadRow&) { return false; }

#endif  // CMSIS_NN

#if defined(TINYSEG_STREAM_CMSIS_S16)

namespace {

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
  const cmsis_nn_conv_params p = ConvParams<cmsis_nn_conv_params>(c);
  const ConvDims<BandConvS16> d(c, c.filter_c);
  const int32_t need = arm_convolve_wrapper_s16_get_buffer_size(&p, &d.in, &d.filter, &d.out);
  // arm_convolve_s16 refuses a null buffer, so it needs one even when the size is 0.
  if (need < 0 || need > scratch_bytes || scratch == nullptr) return false;
  cmsis_nn_context ctx = Buffer(scratch, need);
  ctx.buf = scratch;
  const cmsis_nn_per_channel_quant_params q = Quant(c);
  const cmsis_nn_bias_data b = {c.bias, c.bias_is_int32};
  return arm_convolve_wrapper_s16(&ctx, &p, &q, &d.in, c.input, &d.filter, c.filter, &d.bias, &b,
                                  &d.out, c.output) == ARM_CMSIS_NN_SUCCESS;
}

// As cmsis_nn/depthwise_conv.cc for int16: arm_depthwise_conv_s16 (not the wrapper), no buffer,
// an int64 bias.
bool CmsisDepthwiseConvRowS16(const BandConvS16& c) {
  if (!Usable(c) || c.bias_is_int32) return false;
  cmsis_nn_dw_conv_params p = ConvParams<cmsis_nn_dw_conv_params>(c);
  p.ch_mult = c.depth_multiplier;
  const ConvDims<BandConvS16> d(c, c.out_c);
  const cmsis_nn_context ctx = Buffer(nullptr, 0);
  const cmsis_nn_per_channel_quant_params q = Quant(c);
  return arm_depthwise_conv_s16(&ctx, &p, &q, &d.in, c.input, &d.filter, c.filter, &d.bias,
                                static_cast<const int64_t*>(c.bias), &d.out,
                                c.output) == ARM_CMSIS_NN_SUCCESS;
}

bool CmsisMaxPoolRowS16(const BandPoolS16& b) {
  return PoolRow(b, arm_max_pool_s16, 0, nullptr, 0);
}

bool CmsisAveragePoolRowS16(const BandPoolS16& b, void* scratch, int32_t scratch_bytes) {
  return PoolRow(b, arm_avgpool_s16, arm_avgpool_s16_get_buffer_size(b.out_w, b.channels), scratch,
                 scratch_bytes);
}

bool CmsisAddRowS16(const ElementwiseRowS16& e) { return AddRow(e, arm_elementwise_add_s16); }
bool CmsisMulRowS16(const ElementwiseRowS16& e) { return MulRow(e, arm_elementwise_mul_s16); }

#else  // no (recent) CMSIS-NN in this build: the int16 stages run the reference arithmetic

bool StreamInt16StagesUseCmsisNn() { return false; }
bool CmsisConvRowS16(const BandConvS16&, void*, int32_t) { return false; }
bool CmsisDepthwiseConvRowS16(const BandConvS16&) { return false; }
bool CmsisMaxPoolRowS16(const BandPoolS16&) { return false; }
bool CmsisAveragePoolRowS16(const BandPoolS16&, void*, int32_t) { return false; }
bool CmsisAddRowS16(const ElementwiseRowS16&) { return false; }
bool CmsisMulRowS16(const ElementwiseRowS16&) { return false; }

#endif  // TINYSEG_STREAM_CMSIS_S16

}  // namespace tinyseg_ops
}  // namespace tflite
