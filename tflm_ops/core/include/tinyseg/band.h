// Row-band logic of fused fetching (paper section 4.2.2): a fused
// Fetching+Conv2D computes its output in bands of rows and fetches, for each
// band, only the input rows that band reads.
//
// Padding follows TFLM (tensorflow/lite/kernels/padding.h semantics):
//   effective_kernel = (kernel_h - 1) * dilation + 1
//   SAME : out = ceil(in / stride)
//   VALID: out = (in + stride - effective_kernel) / stride
//   total = max(0, (out - 1) * stride + effective_kernel - in)
//   top = total / 2, bottom = total - top   (odd padding goes to the bottom)
// and TFLM's convolution loop: output row r reads input rows
//   r * stride - top + k * dilation, k in [0, kernel_h),
// skipping rows outside [0, in) (zero / zero-point padding).
#ifndef TINYSEG_BAND_H_
#define TINYSEG_BAND_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/status.h"

namespace tinyseg {

enum class Padding : uint8_t { kSame = 0, kValid = 1 };

struct ConvRows {
  int32_t input_h = 0;
  int32_t kernel_h = 1;
  int32_t stride_h = 1;
  int32_t dilation_h = 1;
  Padding padding = Padding::kSame;
};

struct PaddingRows {
  int32_t top = 0;
  int32_t bottom = 0;
};

// Rows of the band buffer of output rows [r0, r1): the virtual input rows
// [r0 * stride - top, (r1 - 1) * stride - top + effective_kernel), split into
// padding rows above the image (pad_top), image rows [in_begin, in_end) to
// fetch, and padding rows below it (pad_bottom); so pad_top +
// (in_end - in_begin) + pad_bottom == effective_kernel + stride * (rows - 1).
// Every image row a tap of the band reads lies in [in_begin, in_end); with
// dilation > stride some rows in between are not read by any tap.
struct BandRows {
  int32_t in_begin = 0;
  int32_t in_end = 0;
  int32_t pad_top = 0;
  int32_t pad_bottom = 0;
};

int32_t EffectiveKernelH(const ConvRows& p);

// TFLM output height for the parameters (0 if they are invalid).
int32_t ComputeOutputHeight(const ConvRows& p);

// TFLM padding; output_h must equal ComputeOutputHeight(p).
Status ComputePaddingRows(const ConvRows& p, int32_t output_h, PaddingRows* out);

// Rows needed by output rows [r0, r1), 0 <= r0 < r1 <= output_h.
Status InputRowsForBand(const ConvRows& p, int32_t output_h, int32_t r0, int32_t r1,
                        BandRows* out);

// Band buffer for `rows` output rows:
//   (effective_kernel + stride * (rows - 1)) * width * channels * elem_size.
size_t BandBufferBytes(const ConvRows& p, int32_t rows, int32_t width,
                       int32_t channels, int32_t elem_size = 1);

// Largest band height (<= output_h) whose band buffer fits budget_bytes;
// 0 if even one row does not fit or the parameters are invalid.
int32_t MaxBandRows(const ConvRows& p, int32_t output_h, int32_t width,
                    int32_t channels, int32_t elem_size, size_t budget_bytes);

}  // namespace tinyseg

#endif  // TINYSEG_BAND_H_
