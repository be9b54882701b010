// FetchingConv2D's band logic, checked against TFLM by tests/test_band_exact.py.
//
// Computes an int8 per-channel CONV_2D over the channel concatenation of a
// resident tensor and a spilled ("fetched") tensor without ever building the
// concatenation: the fetched tensor is spilled through the SpillManager
// (compressed, on a RAM block device), and the bands are walked exactly as
// FetchingConv2D's Eval walks them, with the same functions of band.h: the
// band buffer is BandBufferBytes (image rows only, clipped to the input
// height), NextBand says which image rows each band reads and which of the
// previous band's rows stay in the buffer; only the other rows are fetched
// (FetchRange) or copied, and the band is convolved as an input of its own
// rows with the band's top padding, as the kernel hands it to TFLM's
// convolution. The integer arithmetic is TFLM's reference per-channel
// convolution written out from its definition:
//   acc   = bias[oc] + sum filter[oc][ky][kx][ic] * (input - input_zp)
//   out   = clamp(MultiplyByQuantizedMultiplier(acc, M[oc], shift[oc]) + output_zp)
//   M, shift from effective_scale = input_scale * filter_scale[oc] / output_scale
//   (double), as a Q31 mantissa and a power-of-two exponent; the product is a
//   saturating rounding doubling high multiply followed by a rounding
//   arithmetic right shift (round half away from zero).
//
// Usage: band_conv SPEC.bin OUT.bin   (layout: see ReadSpec; all little-endian)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "tinyseg/band.h"
#include "tinyseg/block_device.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/spill_manager.h"

using namespace tinyseg;

namespace {

struct Spec {
  int32_t h, w, c_res, c_fetch, fetched_first, c_out, kh, kw, stride_h, stride_w, dilation, padding,
      relu, band_rows, in_zp, out_zp;
  float in_scale, out_scale;
  std::vector<float> filter_scales;
  std::vector<int8_t> resident, fetched, filter;
  std::vector<int32_t> bias;
};

bool ReadAll(FILE* f, void* dst, size_t n) { return std::fread(dst, 1, n, f) == n; }

// int32 x16 header | float32 in_scale, out_scale | float32 filter_scales[c_out] |
// int8 resident[h*w*c_res] | int8 fetched[h*w*c_fetch] |
// int8 filter[c_out*kh*kw*(c_res+c_fetch)] | int32 bias[c_out]
bool ReadSpec(const char* path, Spec* s) {
  FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  int32_t hdr[16];
  bool ok = ReadAll(f, hdr, sizeof(hdr));
  if (ok) {
    std::memcpy(&s->h, hdr, sizeof(hdr));
    ok = ReadAll(f, &s->in_scale, 4) && ReadAll(f, &s->out_scale, 4);
  }
  const size_t cin = ok ? static_cast<size_t>(s->c_res + s->c_fetch) : 0;
  if (ok) {
    s->filter_scales.resize(s->c_out);
    s->resident.resize(static_cast<size_t>(s->h) * s->w * s->c_res);
    s->fetched.resize(static_cast<size_t>(s->h) * s->w * s->c_fetch);
    s->filter.resize(static_cast<size_t>(s->c_out) * s->kh * s->kw * cin);
    s->bias.resize(s->c_out);
    ok = ReadAll(f, s->filter_scales.data(), 4 * s->filter_scales.size()) &&
         ReadAll(f, s->resident.data(), s->resident.size()) &&
         ReadAll(f, s->fetched.data(), s->fetched.size()) &&
         ReadAll(f, s->filter.data(), s->filter.size()) &&
         ReadAll(f, s->bias.data(), 4 * s->bias.size());
  }
  std::fclose(f);
  return ok;
}

// effective scale -> Q31 multiplier and exponent (x = q * 2^shift, q in [0.5, 1)).
void QuantizeMultiplier(double x, int32_t* multiplier, int* shift) {
  if (x == 0.0) {
    *multiplier = 0;
    *shift = 0;
    return;
  }
  const double q = std::frexp(x, shift);
  int64_t fixed = static_cast<int64_t>(std::round(q * 2147483648.0));
  if (fixed == (int64_t{1} << 31)) {  // q rounded up to 1.0
    fixed /= 2;
    ++*shift;
  }
  if (*shift < -31) {  // too small to represent: zero
    *shift = 0;
    fixed = 0;
  }
  *multiplier = static_cast<int32_t>(fixed);
}

// round(a * b / 2^31), saturating the single overflow case.
int32_t SaturatingRoundingDoublingHighMul(int32_t a, int32_t b) {
  if (a == b && a == std::numeric_limits<int32_t>::min())
    return std::numeric_limits<int32_t>::max();
  const int64_t ab = static_cast<int64_t>(a) * b;
  const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : (1 - (int64_t{1} << 30));
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));
}

// x / 2^exponent rounded half away from zero.
int32_t RoundingDivideByPOT(int32_t x, int exponent) {
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

int32_t MultiplyByQuantizedMultiplier(int32_t x, int32_t multiplier, int shift) {
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  return RoundingDivideByPOT(
      SaturatingRoundingDoublingHighMul(static_cast<int32_t>(x * (int64_t{1} << left)), multiplier),
      right);
}

int Run(const Spec& s, std::vector<int8_t>* out, int32_t* out_h_ret, int32_t* out_w_ret,
        int32_t* bands_ret) {
  const Padding pad = s.padding == 0 ? Padding::kSame : Padding::kValid;
  const ConvRows rows{s.h, s.kh, s.stride_h, s.dilation, pad};
  const ConvRows cols{s.w, s.kw, s.stride_w, s.dilation, pad};  // same rules across columns
  const int32_t out_h = ComputeOutputHeight(rows), out_w = ComputeOutputHeight(cols);
  PaddingRows pad_cols;
  if (out_h <= 0 || out_w <= 0 || !Ok(ComputePaddingRows(cols, out_w, &pad_cols))) return 1;
  const int32_t cin = s.c_res + s.c_fetch;
  int32_t band = s.band_rows;
  if (band <= 0) band = MaxBandRows(rows, out_h, s.w, cin, 1, static_cast<size_t>(-band));
  if (band <= 0) return 1;

  // Spill the fetched operand (compressed) on a RAM "flash".
  const size_t fetched_bytes = s.fetched.size();
  Geometry g;
  g.erase_size = 4096;
  g.total_size = ((fetched_bytes * 2 + 65536) / 4096 + 1) * 4096;
  std::vector<uint8_t> flash(g.total_size);
  RamBlockDevice dev(g, flash.data());
  if (!Ok(dev.Init())) return 1;
  SyncEraseQueue eq(dev);
  std::vector<SectorInfo> sectors(g.num_sectors());
  SpillSlot slot[1];
  uint8_t staging[256];
  SpillMemory mem{slot, 1, sectors.data(), sectors.size()};
  SpillConfig cfg;
  cfg.region_size = g.total_size;
  cfg.codec_block_bytes = 512;
  cfg.assume_erased = true;
  SpillManager spill(dev, eq, cfg, mem);
  if (!Ok(spill.Init()) ||
      !Ok(spill.Spill(0, s.fetched.data(), fetched_bytes, 1, ByteSpan{staging, sizeof(staging)})))
    return 1;

  std::vector<int32_t> mult(s.c_out);
  std::vector<int> shift(s.c_out);
  for (int32_t oc = 0; oc < s.c_out; ++oc) {
    const double eff = static_cast<double>(s.in_scale) * static_cast<double>(s.filter_scales[oc]) /
                       static_cast<double>(s.out_scale);
    QuantizeMultiplier(eff, &mult[oc], &shift[oc]);
  }
  const int32_t act_min = s.relu ? std::max<int32_t>(-128, s.out_zp) : -128;
  const int32_t act_max = 127;

  out->assign(static_cast<size_t>(out_h) * out_w * s.c_out, 0);
  const size_t row_fetch = static_cast<size_t>(s.w) * s.c_fetch;
  const size_t row_all = static_cast<size_t>(s.w) * cin;
  // The band buffer exactly as FetchingConv2D's Prepare requests it; image rows only.
  std::vector<int8_t> buf(BandBufferBytes(rows, band, s.w, cin, 1));
  if (buf.empty()) return 1;
  std::vector<int8_t> fetched_rows;
  int32_t bands = 0;
  BandStep step;
  // FetchingConv2D's Eval loop: the same NextBand walk, the same kept rows.
  for (int32_t r0 = 0; r0 < out_h; r0 = step.r1) {
    if (!Ok(NextBand(rows, out_h, band, r0 == 0 ? nullptr : &step, &step))) return 1;
    const int32_t begin = step.rows.in_begin;
    const int32_t img = step.rows.in_end - begin;
    if (static_cast<size_t>(img) * row_all > buf.size()) return 3;  // the buffer is too small
    if (step.kept > 0) {
      std::memmove(buf.data(), buf.data() + static_cast<size_t>(step.keep_from) * row_all,
                   static_cast<size_t>(step.kept) * row_all);
    }
    // Fetch only the rows not kept, and only the band's rows of the spilled tensor.
    const int32_t fresh = begin + step.kept;
    const int32_t n_fresh = step.rows.in_end - fresh;
    fetched_rows.resize(static_cast<size_t>(n_fresh) * row_fetch);
    if (n_fresh > 0 &&
        !Ok(spill.FetchRange(0, fresh * row_fetch, fetched_rows.size(), fetched_rows.data()))) {
      return 1;
    }
    for (int32_t r = 0; r < n_fresh; ++r) {
      for (int32_t x = 0; x < s.w; ++x) {
        int8_t* dst = &buf[(static_cast<size_t>(step.kept + r) * s.w + x) * cin];
        const int8_t* res = &s.resident[(static_cast<size_t>(fresh + r) * s.w + x) * s.c_res];
        const int8_t* fet = &fetched_rows[(static_cast<size_t>(r) * s.w + x) * s.c_fetch];
        if (s.fetched_first) {
          std::memcpy(dst, fet, s.c_fetch);
          std::memcpy(dst + s.c_fetch, res, s.c_res);
        } else {
          std::memcpy(dst, res, s.c_res);
          std::memcpy(dst + s.c_res, fet, s.c_fetch);
        }
      }
    }
    // Convolve the band as TFLM's loop does on an input of `img` rows with
    // step.rows.pad_top rows of top padding: band row by = (oy - r0) * stride -
    // pad_top + ky * dilation, rows outside [0, img) are padding (contribute 0).
    for (int32_t oy = r0; oy < step.r1; ++oy) {
      for (int32_t ox = 0; ox < out_w; ++ox) {
        const int32_t x0 = ox * s.stride_w - pad_cols.top;
        for (int32_t oc = 0; oc < s.c_out; ++oc) {
          int32_t acc = 0;
          for (int32_t ky = 0; ky < s.kh; ++ky) {
            const int32_t by = (oy - r0) * s.stride_h - step.rows.pad_top + ky * s.dilation;
            if (by < 0 || by >= img) continue;  // row padding contributes zero
            for (int32_t kx = 0; kx < s.kw; ++kx) {
              const int32_t ix = x0 + kx * s.dilation;
              if (ix < 0 || ix >= s.w) continue;  // column padding contributes zero
              const int8_t* in = &buf[(static_cast<size_t>(by) * s.w + ix) * cin];
              const int8_t* f =
                  &s.filter[((static_cast<size_t>(oc) * s.kh + ky) * s.kw + kx) * cin];
              for (int32_t ic = 0; ic < cin; ++ic) acc += f[ic] * (in[ic] - s.in_zp);
            }
          }
          acc += s.bias[oc];
          acc = MultiplyByQuantizedMultiplier(acc, mult[oc], shift[oc]) + s.out_zp;
          acc = std::max(act_min, std::min(act_max, acc));
          (*out)[(static_cast<size_t>(oy) * out_w + ox) * s.c_out + oc] = static_cast<int8_t>(acc);
        }
      }
    }
    ++bands;
  }
  *out_h_ret = out_h;
  *out_w_ret = out_w;
  *bands_ret = bands;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: band_conv SPEC.bin OUT.bin\n");
    return 2;
  }
  Spec s;
  if (!ReadSpec(argv[1], &s)) {
    std::fprintf(stderr, "band_conv: error: cannot read spec %s\n", argv[1]);
    return 2;
  }
  std::vector<int8_t> out;
  int32_t oh = 0, ow = 0, bands = 0;
  if (Run(s, &out, &oh, &ow, &bands) != 0) {
    std::fprintf(stderr, "band_conv: error: invalid parameters or spill failure\n");
    return 1;
  }
  FILE* f = std::fopen(argv[2], "wb");
  if (!f || std::fwrite(out.data(), 1, out.size(), f) != out.size()) {
    std::fprintf(stderr, "band_conv: error: cannot write %s\n", argv[2]);
    return 2;
  }
  std::fclose(f);
  std::printf("band_conv: out %dx%dx%d in %d bands\n", oh, ow, s.c_out, bands);
  return 0;
}
