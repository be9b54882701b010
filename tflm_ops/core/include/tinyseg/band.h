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
Status InputRowsForBand(const ConvRows& p, int32_t output_h, int32_t r0, int32_t r1, BandRows* out);

// Image rows the band buffer holds for bands of `rows` output rows: the rows
// a band of that height reads, effective_kernel + stride * (rows - 1), but
// never more than the image has (input_h); padding rows are not stored.
// 0 if the parameters are invalid.
int32_t BandBufferRows(const ConvRows& p, int32_t rows);

// Band buffer for `rows` output rows:
//   BandBufferRows(p, rows) * width * channels * elem_size
// (FetchingConv2D's band scratch buffer).
size_t BandBufferBytes(const ConvRows& p, int32_t rows, int32_t width, int32_t channels,
                       int32_t elem_size = 1);

// Largest band height (<= output_h) whose band buffer fits budget_bytes;
// 0 if even one row does not fit or the parameters are invalid.
int32_t MaxBandRows(const ConvRows& p, int32_t output_h, int32_t width, int32_t channels,
                    int32_t elem_size, size_t budget_bytes);

// One band of FetchingConv2D's walk over the output rows, top to bottom, in
// bands of band_rows (the last one may be shorter). The band buffer holds
// image rows [rows.in_begin, rows.in_end) of the band; before the band is
// assembled, the previous band's buffer rows [keep_from, keep_from + kept)
// are moved to buffer rows [0, kept) (they are image rows
// [in_begin, in_begin + kept)), and only image rows
// [in_begin + kept, in_end) are copied or fetched. The band's convolution
// then runs on an input of in_end - in_begin rows with rows.pad_top rows of
// top padding (rows below in_end are padding or past the image).
struct BandStep {
  int32_t r0 = 0;  // output rows [r0, r1)
  int32_t r1 = 0;
  BandRows rows;
  int32_t keep_from = 0;
  int32_t kept = 0;
};

// The band that follows `prev` (nullptr: the first band, r0 = 0) of a walk
// with bands of band_rows output rows. prev may alias out. kOutOfRange when
// prev was the last band; kInvalidArgument for bad parameters.
Status NextBand(const ConvRows& p, int32_t output_h, int32_t band_rows, const BandStep* prev,
                BandStep* out);

}  // namespace tinyseg

#endif  // TINYSEG_BAND_H_
