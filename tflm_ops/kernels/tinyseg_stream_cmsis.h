// CMSIS-NN arithmetic for StreamChain's stages.
//
// In a CMSIS-NN build of TFLM (OPTIMIZED_KERNEL_DIR=cmsis_nn, for which TFLM's Makefile defines
// CMSIS_NN), a CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D or AVERAGE_POOL_2D stage computes its
// output row with the CMSIS-NN function TFLM's own CMSIS-NN kernel calls for the whole tensor, on
// the band view (the window's input rows as a tensor of that height, the top padding shifted);
// an ADD or MUL stage without broadcast calls CMSIS-NN's elementwise function on the row; a PAD or
// PADV2 stage calls arm_pad_s8 on the row, as TFLM's CMSIS-NN PAD does on the tensor; a
// TRANSPOSE_CONV stage computes its output row with CMSIS-NN's transposed-convolution row
// function on each row of its band (see BandTransposeConv). The int16
// (16x8) CONV_2D, DEPTHWISE_CONV_2D, pool, ADD and MUL stages call the s16 functions TFLM's
// CMSIS-NN kernels call for int16 (BandConvS16 and below). The other stages have no CMSIS-NN
// kernel in TFLM either. A build without CMSIS_NN (the Arduino library form
// of TFLM, whose older CMSIS-NN has another API, does not define it) keeps the reference arithmetic
// in the stages. CMSIS-NN gives the reference kernels' bytes, so the streamed model stays
// bit-identical to the unfused one either way; what changes is the speed on the target.
//
// The wrapper's buffer is the chain's member scratch (`op_scratch`, requested in Prepare), which
// the planner sizes for the runtime the model was optimized for. A model optimized for the
// reference kernels has no room for it, so its stages keep the reference arithmetic in a
// CMSIS-NN build: these functions then return false and the caller runs the reference code.
#ifndef TINYSEG_TFLM_OPS_KERNELS_TINYSEG_STREAM_CMSIS_H_
#define TINYSEG_TFLM_OPS_KERNELS_TINYSEG_STREAM_CMSIS_H_

#include <cstdint>

namespace tflite {
namespace tinyseg_ops {

// One output row of a convolution over a band of input rows (NHWC, batch 1): T the activations'
// type (int8, or int16 with int8 weights), B the bias's (int32 for int8; for int16 void, the type
// in bias_is_int32).
template <typename T, typename B>
struct BandConvOf {
  const T* input;
  int32_t in_h, in_w, in_c;  // in_h: the band's rows
  const int8_t* filter;
  int32_t filter_h, filter_w,
      filter_c;        // filter_c: CONV_2D input channels per group; depthwise: out_c
  const B* bias;       // nullptr: none
  bool bias_is_int32;  // int16: an int32 bias (else int64)
  T* output;           // one row: out_w x out_c
  int32_t out_w, out_c;
  int32_t stride_h, stride_w, dilation_h, dilation_w;
  int32_t pad_h, pad_w;   // pad_h: the band's own top padding
  int32_t input_offset;   // -input zero point (TFLM's and CMSIS-NN's convention)
  int32_t output_offset;  // output zero point
  int32_t act_min, act_max;
  const int32_t* multiplier;  // per output channel
  const int32_t* shift;
  int32_t depth_multiplier;  // DEPTHWISE_CONV_2D only
};

// One output row of a MAX_POOL_2D or AVERAGE_POOL_2D over a band of input rows.
template <typename T>
struct BandPoolOf {
  const T* input;
  int32_t in_h, in_w, channels;
  T* output;  // one row: out_w x channels
  int32_t out_w;
  int32_t filter_h, filter_w, stride_h, stride_w;
  int32_t pad_h, pad_w;  // pad_h: the band's own top padding
  int32_t act_min, act_max;
};

// One row of an ADD or MUL whose operands are rows of the output's shape (no broadcast: TFLM's
// CMSIS-NN kernels call CMSIS-NN only then, too). MUL uses the offsets and the output's
// multiplier and shift only.
template <typename T>
struct ElementwiseRowOf {
  const T* input1;
  const T* input2;
  T* output;
  int32_t size;
  int32_t input1_offset, input1_multiplier, input1_shift;
  int32_t input2_offset, input2_multiplier, input2_shift;
  int32_t left_shift;
  int32_t output_offset, output_multiplier, output_shift;
  int32_t act_min, act_max;
};

using BandConv = BandConvOf<int8_t, int32_t>;
using BandPool = BandPoolOf<int8_t>;
using ElementwiseRow = ElementwiseRowOf<int8_t>;

// One output row y of an int8 TRANSPOSE_CONV from its band of input rows (the rows whose filter
// rows reach y): band row j passes through filter row `filter_row` - j * stride_h (a row whose
// filter row lies outside the kernel adds nothing; a band none of whose rows reaches y holds the
// bias only: the reference code's case). It is computed as arm_transpose_conv_s8 computes an
// output row: an int32 accumulator row over the width holding the bias, CMSIS-NN's row function
// (arm_nn_transpose_conv_row_s8_s32) on each band row with the filter rows other than its own
// skipped, then arm_nn_requantize, the output offset and the activation clamp.
// (arm_transpose_conv_s8 itself, on the input row with the whole filter, writes `stride` output
// rows at once, and with a top padding it skips output rows; its wrapper may run a convolution
// over the zero-upsampled input, which reads neighbouring input rows.)
// The band is a convolution's (BandConv: in_h the band's rows, `filter` the whole filter; its
// dilation, filter_c, pad_h and depth_multiplier are not read).
struct BandTransposeConv : BandConv {
  int32_t filter_row;
};

// One output row of an int8 PAD or PADV2 of height and width: the input row (`in_rows` 1) with
// `left` and `right` columns of `pad_value`, or (`in_rows` 0: the top or bottom padding) a row of
// `pad_value`. It is computed as TFLM's CMSIS-NN PAD computes the whole tensor: arm_pad_s8, here
// on a tensor of at most one row (a padding row is a pre-pad row above an empty input).
struct PadRow {
  const int8_t* input;  // one row: in_w x channels (unused when in_rows is 0)
  int8_t* output;       // one row: (left + in_w + right) x (front + channels + back)
  int32_t in_rows, in_w, channels, left, right;
  int32_t front, back;  // channels of the pad value before and after the input's
  int8_t pad_value;
};

// The 16x8 (int16 activations, int8 weights) forms of BandConv, BandPool and ElementwiseRow, for
// the int16 stages (tinyseg_stream_int16.cc), computed with the s16 functions TFLM's CMSIS-NN
// kernels call for int16: CONV_2D arm_convolve_wrapper_s16 (an int32 or int64 bias),
// DEPTHWISE_CONV_2D arm_depthwise_conv_s16 (int64 bias, no buffer), MAX_POOL_2D arm_max_pool_s16,
// AVERAGE_POOL_2D arm_avgpool_s16, ADD arm_elementwise_add_s16 and MUL arm_elementwise_mul_s16 (no
// broadcast). CMSIS-NN's int16 functions take no zero points: a row whose offsets are not 0
// (TFLM's int16 Prepare refuses those) keeps the reference code.
using BandConvS16 = BandConvOf<int16_t, void>;
using BandPoolS16 = BandPoolOf<int16_t>;
using ElementwiseRowS16 = ElementwiseRowOf<int16_t>;

// Scratch bytes CmsisTransposeConvRow needs: its int32 accumulator row,
// ((in_w - 1) * stride_w + max(filter_w, stride_w)) * out_c int32 (arm_transpose_conv_s8's row
// width). The planner's figure is the same (stream.transpose_conv_row_scratch); it equals the
// reference stage's one output row of int32 when stride_w >= filter_w and out_w = in_w * stride_w.
int32_t CmsisTransposeConvRowBytes(int32_t in_w, int32_t filter_w, int32_t out_c, int32_t stride_w);

// True in a build whose StreamChain stages can run CMSIS-NN arithmetic.
bool StreamStagesUseCmsisNn();

// Computes the row with CMSIS-NN and returns true, or returns false without touching the output
// (no CMSIS-NN in this build, `scratch_bytes` smaller than the function's buffer, or a window of
// padding rows only, which the reference code handles).
bool CmsisConvRow(const BandConv& c, void* scratch, int32_t scratch_bytes);
bool CmsisDepthwiseConvRow(const BandConv& c, void* scratch, int32_t scratch_bytes);
bool CmsisMaxPoolRow(const BandPool& p);
bool CmsisAveragePoolRow(const BandPool& p, void* scratch, int32_t scratch_bytes);
bool CmsisTransposeConvRow(const BandTransposeConv& t, void* scratch, int32_t scratch_bytes);
bool CmsisAddRow(const ElementwiseRow& e);
bool CmsisMulRow(const ElementwiseRow& e);
bool CmsisPadRow(const PadRow& p);
// The s16 forms, with the same contract; StreamInt16StagesUseCmsisNn:
// true in a build whose int16 stages can run them.
bool StreamInt16StagesUseCmsisNn();
bool CmsisConvRowS16(const BandConvS16& c, void* scratch, int32_t scratch_bytes);
bool CmsisDepthwiseConvRowS16(const BandConvS16& c);
bool CmsisMaxPoolRowS16(const BandPoolS16& p);
bool CmsisAveragePoolRowS16(const BandPoolS16& p, void* scratch, int32_t scratch_bytes);
bool CmsisAddRowS16(const ElementwiseRowS16& e);
bool CmsisMulRowS16(const ElementwiseRowS16& e);

}  // namespace tinyseg_ops
}  // namespace tflite

#endif  // TINYSEG_TFLM_OPS_KERNELS_TINYSEG_STREAM_CMSIS_H_
