// Band logic against a brute-force replay of TFLM's convolution row loop.
#include <initializer_list>

#include "tinyseg/band.h"
#include "tinytest.h"

using namespace tinyseg;

namespace {

// TFLM reference: out = ComputeOutSize, padding = ComputePaddingWithOffset.
void ReferencePadding(const ConvRows& p, int32_t* out_h, int32_t* top, int32_t* bottom) {
  const int eff = (p.kernel_h - 1) * p.dilation_h + 1;
  int out = p.padding == Padding::kSame ? (p.input_h + p.stride_h - 1) / p.stride_h
                                        : (p.input_h + p.stride_h - eff) / p.stride_h;
  if (out < 0) out = 0;
  int total = (out - 1) * p.stride_h + eff - p.input_h;
  total = total > 0 ? total : 0;
  *out_h = out;
  *top = total / 2;
  *bottom = total / 2 + total % 2;
}

// `visit` of every ConvRows of input height 1..max_in_h, kernel 1..5, stride 1..3, dilation 1..3,
// SAME and VALID.
template <typename Visit>
void ForEachConvRows(int max_in_h, Visit visit) {
  for (int in_h = 1; in_h <= max_in_h; ++in_h) {
    for (int kh = 1; kh <= 5; ++kh) {
      for (int s = 1; s <= 3; ++s) {
        for (int d = 1; d <= 3; ++d) {
          for (Padding pad : {Padding::kSame, Padding::kValid})
            visit(ConvRows{in_h, kh, s, d, pad});
        }
      }
    }
  }
}

}  // namespace

TEST(KnownPaddings) {
  PaddingRows pr;
  ConvRows p{80, 3, 1, 1, Padding::kSame};
  CHECK_EQ(ComputeOutputHeight(p), 80);
  CHECK_OK(ComputePaddingRows(p, 80, &pr));
  CHECK_EQ(pr.top, 1);
  CHECK_EQ(pr.bottom, 1);
  p = ConvRows{80, 3, 2, 1, Padding::kSame};  // odd total padding goes below
  CHECK_EQ(ComputeOutputHeight(p), 40);
  CHECK_OK(ComputePaddingRows(p, 40, &pr));
  CHECK_EQ(pr.top, 0);
  CHECK_EQ(pr.bottom, 1);
  p = ConvRows{80, 3, 1, 1, Padding::kValid};
  CHECK_EQ(ComputeOutputHeight(p), 78);
  CHECK_OK(ComputePaddingRows(p, 78, &pr));
  CHECK_EQ(pr.top + pr.bottom, 0);
  p = ConvRows{80, 3, 1, 2, Padding::kSame};  // dilated: effective kernel 5
  CHECK_EQ(EffectiveKernelH(p), 5);
  CHECK_OK(ComputePaddingRows(p, 80, &pr));
  CHECK_EQ(pr.top, 2);
  CHECK_STATUS(ComputePaddingRows(p, 79, &pr), Status::kInvalidArgument);
  CHECK_EQ(ComputeOutputHeight(ConvRows{0, 3, 1, 1, Padding::kSame}), 0);
}

TEST(BandRowsMatchBruteForce) {
  int cases = 0;
  ForEachConvRows(20, [&](const ConvRows& p) {
    const int in_h = p.input_h, kh = p.kernel_h, s = p.stride_h, d = p.dilation_h;
    int32_t out_h, top, bottom;
    ReferencePadding(p, &out_h, &top, &bottom);
    CHECK_EQ(ComputeOutputHeight(p), out_h);
    if (out_h <= 0) return;
    PaddingRows pr;
    CHECK_OK(ComputePaddingRows(p, out_h, &pr));
    CHECK_EQ(pr.top, top);
    CHECK_EQ(pr.bottom, bottom);
    for (int r0 = 0; r0 < out_h; ++r0) {
      for (int r1 = r0 + 1; r1 <= out_h; ++r1) {
        // Replay TFLM's loop: which virtual rows are touched.
        int vmin = 1 << 30, vmax = -(1 << 30);
        int used_min = 1 << 30, used_max = -(1 << 30);
        for (int r = r0; r < r1; ++r) {
          const int origin = r * s - top;
          for (int k = 0; k < kh; ++k) {
            const int y = origin + k * d;
            if (y < vmin) vmin = y;
            if (y > vmax) vmax = y;
            if (y >= 0 && y < in_h) {
              if (y < used_min) used_min = y;
              if (y > used_max) used_max = y;
            }
          }
        }
        BandRows b;
        CHECK_OK(InputRowsForBand(p, out_h, r0, r1, &b));
        // The band buffer holds virtual rows [vmin, vmax]; its
        // in-image part is the fetched range.
        const int lo = vmin < 0 ? 0 : (vmin > in_h ? in_h : vmin);
        int hi = vmax + 1 > in_h ? in_h : vmax + 1;
        if (hi < lo) hi = lo;
        CHECK_EQ(b.in_begin, lo);
        CHECK_EQ(b.in_end, hi);
        if (used_max >= used_min) {  // every row a tap reads is fetched
          CHECK(used_min >= b.in_begin);
          CHECK(used_max < b.in_end);
        }
        const int span = vmax - vmin + 1;
        CHECK_EQ(b.pad_top, vmin < 0 ? (-vmin < span ? -vmin : span) : 0);
        CHECK_EQ(b.pad_bottom,
                 vmax >= in_h ? (vmax - in_h + 1 < span ? vmax - in_h + 1 : span) : 0);
        // Band buffer rows = padding + input rows = formula.
        const int rows = b.pad_top + (b.in_end - b.in_begin) + b.pad_bottom;
        CHECK_EQ(rows, (vmax - vmin + 1));
        // The buffer holds the image rows only: every band fits.
        const int stored = rows < in_h ? rows : in_h;
        CHECK_EQ(BandBufferRows(p, r1 - r0), stored);
        CHECK_EQ(BandBufferBytes(p, r1 - r0, 7, 3, 2), static_cast<size_t>(stored) * 7 * 3 * 2);
        CHECK(b.in_end - b.in_begin <= stored);
        ++cases;
      }
    }
  });
  CHECK(cases > 10000);
  BandRows b;
  const ConvRows p{10, 3, 1, 1, Padding::kSame};
  CHECK_STATUS(InputRowsForBand(p, 10, 3, 3, &b), Status::kOutOfRange);
  CHECK_STATUS(InputRowsForBand(p, 10, 0, 11, &b), Status::kOutOfRange);
}

// FetchingConv2D's walk: a buffer of image-row ids replayed band by band as
// the kernel does (keep rows, assemble the rest), against the rows each band
// must hold; the kept rows are all the previous band's rows it reads again.
TEST(NextBandWalkKeepsAndFetchesTheRightRows) {
  int walks = 0;
  ForEachConvRows(14, [&](const ConvRows& p) {
    const int in_h = p.input_h;
    const int32_t out_h = ComputeOutputHeight(p);
    if (out_h <= 0) return;
    for (int band_rows = 1; band_rows <= out_h + 2; ++band_rows) {
      const int32_t cap = BandBufferRows(p, band_rows);
      int buffer[64];
      for (int& v : buffer) v = -1;
      BandStep step;
      int32_t r0 = 0, fetched = 0;
      for (; r0 < out_h; r0 = step.r1) {
        const BandStep prev = step;
        CHECK_OK(NextBand(p, out_h, band_rows, r0 == 0 ? nullptr : &step, &step));
        CHECK_EQ(step.r0, r0);
        CHECK_EQ(step.r1, r0 + band_rows < out_h ? r0 + band_rows : out_h);
        BandRows want;
        CHECK_OK(InputRowsForBand(p, out_h, step.r0, step.r1, &want));
        CHECK_EQ(step.rows.in_begin, want.in_begin);
        CHECK_EQ(step.rows.in_end, want.in_end);
        CHECK_EQ(step.rows.pad_top, want.pad_top);
        const int n = step.rows.in_end - step.rows.in_begin;
        CHECK(n <= cap);
        CHECK(step.kept >= 0 && step.kept <= n);
        int expect_kept = 0;
        if (r0 > 0) {
          const int lo = step.rows.in_begin;
          const int hi = prev.rows.in_end < step.rows.in_end ? prev.rows.in_end : step.rows.in_end;
          if (prev.rows.in_begin <= lo && hi > lo) expect_kept = hi - lo;
        }
        CHECK_EQ(step.kept, expect_kept);
        for (int i = 0; i < step.kept; ++i) buffer[i] = buffer[step.keep_from + i];
        for (int i = step.kept; i < n; ++i) buffer[i] = step.rows.in_begin + i;
        fetched += n - step.kept;
        for (int i = 0; i < n; ++i) CHECK_EQ(buffer[i], step.rows.in_begin + i);
      }
      CHECK_EQ(r0, out_h);
      CHECK_STATUS(NextBand(p, out_h, band_rows, &step, &step), Status::kOutOfRange);
      CHECK(fetched <= in_h);  // no image row is fetched twice
      ++walks;
    }
  });
  CHECK(walks > 1000);
  BandStep step;
  const ConvRows p{10, 3, 1, 1, Padding::kSame};
  CHECK_STATUS(NextBand(p, 10, 0, nullptr, &step), Status::kInvalidArgument);
  CHECK_STATUS(NextBand(p, 9, 2, nullptr, &step), Status::kInvalidArgument);  // wrong out_h
  CHECK_STATUS(NextBand(p, 10, 2, nullptr, nullptr), Status::kInvalidArgument);
}

TEST(MaxBandRowsMatchesLinearSearch) {
  for (int kh = 1; kh <= 5; ++kh) {
    for (int s = 1; s <= 3; ++s) {
      for (int d = 1; d <= 2; ++d) {
        const ConvRows p{40, kh, s, d, Padding::kSame};
        const int32_t out_h = ComputeOutputHeight(p);
        for (size_t budget = 0; budget < 3000; budget += 37) {
          int32_t expect = 0;
          for (int rows = 1; rows <= out_h; ++rows) {
            if (BandBufferBytes(p, rows, 5, 4, 1) <= budget) expect = rows;
          }
          CHECK_EQ(MaxBandRows(p, out_h, 5, 4, 1, budget), expect);
        }
      }
    }
  }
  // Tiny U-Net first layer: 80x120x3 int8 input, 3x3 SAME conv, 8 KB buffer.
  const ConvRows p{80, 3, 1, 1, Padding::kSame};
  const int32_t rows = MaxBandRows(p, 80, 120, 3, 1, 8192);
  CHECK_EQ(rows, 20);  // (3 + 19) * 360 = 7920 <= 8192 < (3 + 20) * 360
}

TINYTEST_MAIN("band")
