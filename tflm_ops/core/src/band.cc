// Band logic of fused fetching (see band.h).
#include "tinyseg/band.h"

namespace tinyseg {
namespace {

bool Valid(const ConvRows& p) {
  return p.input_h > 0 && p.kernel_h > 0 && p.stride_h > 0 && p.dilation_h > 0 &&
         (p.padding == Padding::kSame || p.padding == Padding::kValid);
}

}  // namespace

int32_t EffectiveKernelH(const ConvRows& p) {
  if (!Valid(p)) return 0;
  const int64_t e = static_cast<int64_t>(p.kernel_h - 1) * p.dilation_h + 1;
  return e > INT32_MAX ? 0 : static_cast<int32_t>(e);
}

int32_t ComputeOutputHeight(const ConvRows& p) {
  const int32_t eff = EffectiveKernelH(p);
  if (eff == 0) return 0;
  int64_t out;
  if (p.padding == Padding::kSame) {
    out = (static_cast<int64_t>(p.input_h) + p.stride_h - 1) / p.stride_h;
  } else {
    const int64_t num = static_cast<int64_t>(p.input_h) + p.stride_h - eff;
    out = num > 0 ? num / p.stride_h : 0;
  }
  return static_cast<int32_t>(out);
}

Status ComputePaddingRows(const ConvRows& p, int32_t output_h, PaddingRows* out) {
  if (out == nullptr || !Valid(p)) return Status::kInvalidArgument;
  if (output_h <= 0 || output_h != ComputeOutputHeight(p)) return Status::kInvalidArgument;
  const int64_t eff = EffectiveKernelH(p);
  int64_t total = static_cast<int64_t>(output_h - 1) * p.stride_h + eff - p.input_h;
  if (total < 0) total = 0;
  out->top = static_cast<int32_t>(total / 2);
  out->bottom = static_cast<int32_t>(total - total / 2);
  return Status::kOk;
}

Status InputRowsForBand(const ConvRows& p, int32_t output_h, int32_t r0, int32_t r1,
                        BandRows* out) {
  if (out == nullptr) return Status::kInvalidArgument;
  PaddingRows pad;
  TINYSEG_RETURN_IF_ERROR(ComputePaddingRows(p, output_h, &pad));
  if (r0 < 0 || r1 <= r0 || r1 > output_h) return Status::kOutOfRange;
  const int64_t start = static_cast<int64_t>(r0) * p.stride_h - pad.top;
  const int64_t end =
      static_cast<int64_t>(r1 - 1) * p.stride_h - pad.top + EffectiveKernelH(p);  // exclusive
  const int64_t span = end - start;
  int64_t top = -start;
  if (top < 0) top = 0;
  if (top > span) top = span;
  int64_t bottom = end - p.input_h;
  if (bottom < 0) bottom = 0;
  if (bottom > span) bottom = span;
  int64_t b = start < 0 ? 0 : start;
  int64_t e = end > p.input_h ? p.input_h : end;
  if (e < b) e = b;
  out->in_begin = static_cast<int32_t>(b);
  out->in_end = static_cast<int32_t>(e);
  out->pad_top = static_cast<int32_t>(top);
  out->pad_bottom = static_cast<int32_t>(bottom);
  return Status::kOk;
}

int32_t BandBufferRows(const ConvRows& p, int32_t rows) {
  const int32_t eff = EffectiveKernelH(p);
  if (eff == 0 || rows <= 0) return 0;
  const int64_t n = static_cast<int64_t>(eff) + static_cast<int64_t>(p.stride_h) * (rows - 1);
  return n < p.input_h ? static_cast<int32_t>(n) : p.input_h;
}

size_t BandBufferBytes(const ConvRows& p, int32_t rows, int32_t width, int32_t channels,
                       int32_t elem_size) {
  const int32_t band_rows = BandBufferRows(p, rows);
  if (band_rows == 0 || width <= 0 || channels <= 0 || elem_size <= 0) return 0;
  const uint64_t bytes = static_cast<uint64_t>(band_rows) * static_cast<uint64_t>(width) *
                         static_cast<uint64_t>(channels) * static_cast<uint64_t>(elem_size);
  return bytes > static_cast<uint64_t>(SIZE_MAX) ? SIZE_MAX : static_cast<size_t>(bytes);
}

int32_t MaxBandRows(const ConvRows& p, int32_t output_h, int32_t width, int32_t channels,
                    int32_t elem_size, size_t budget_bytes) {
  const int32_t eff = EffectiveKernelH(p);
  if (eff == 0 || output_h <= 0 || width <= 0 || channels <= 0 || elem_size <= 0) return 0;
  const uint64_t row_bytes = static_cast<uint64_t>(width) * static_cast<uint64_t>(channels) *
                             static_cast<uint64_t>(elem_size);
  const uint64_t budget_rows = static_cast<uint64_t>(budget_bytes) / row_bytes;
  // The buffer never holds more than the image: with room for all of it, any band fits.
  if (budget_rows >= static_cast<uint64_t>(p.input_h)) return output_h;
  if (budget_rows < static_cast<uint64_t>(eff)) return 0;
  const uint64_t rows = (budget_rows - eff) / static_cast<uint64_t>(p.stride_h) + 1;
  return rows > static_cast<uint64_t>(output_h) ? output_h : static_cast<int32_t>(rows);
}

Status NextBand(const ConvRows& p, int32_t output_h, int32_t band_rows, const BandStep* prev,
                BandStep* out) {
  if (out == nullptr || band_rows <= 0) return Status::kInvalidArgument;
  const bool first = prev == nullptr;
  const BandStep before = first ? BandStep() : *prev;  // prev may alias out
  const int32_t r0 = first ? 0 : before.r1;
  if (!first && (before.r0 < 0 || before.r1 <= before.r0 || before.r1 > output_h)) {
    return Status::kInvalidArgument;
  }
  if (r0 == output_h && !first) return Status::kOutOfRange;
  const int32_t r1 = output_h - r0 < band_rows ? output_h : r0 + band_rows;
  BandStep step;
  TINYSEG_RETURN_IF_ERROR(InputRowsForBand(p, output_h, r0, r1, &step.rows));
  step.r0 = r0;
  step.r1 = r1;
  // Rows of the previous band's buffer that this band reads again: they stay.
  const int32_t begin = step.rows.in_begin, end = step.rows.in_end;
  const int32_t have_begin = before.rows.in_begin, have_end = before.rows.in_end;
  if (!first && have_end > begin && have_begin <= begin) {
    step.keep_from = begin - have_begin;
    step.kept = (have_end < end ? have_end : end) - begin;
  }
  *out = step;
  return Status::kOk;
}

}  // namespace tinyseg
