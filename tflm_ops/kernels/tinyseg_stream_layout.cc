// StreamChain's layout family (tinyseg_stream_internal.h): the stages that move elements -- PAD and
// PADV2 (height, width and channels), RESIZE_NEAREST_NEIGHBOR (by an integer factor),
// RESIZE_BILINEAR (any factor, TFLM's fixed-point blend of two rows; int8 here, float32 in
// tinyseg_stream_float.cc) and CONCATENATION (along channels) -- int8, float32 (PAD with 0.0f, as
// pad.cc without constant values; PADV2 with its float32 scalar) and int16 (PAD with 0,
// RESIZE_NEAREST_NEIGHBOR, CONCATENATION), as TFLM's own kernels compute them.
#include <cstdint>
#include <cstring>

#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"
#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/reference/pad.h"
#include "tensorflow/lite/kernels/internal/reference/resize_nearest_neighbor.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"

namespace tflite {
namespace tinyseg_stream {
namespace {

// PAD's paddings: constant int32 [4, 2] of a 4-D tensor, none negative and none of the batch, into
// `p`.
TfLiteStatus Paddings(const StageArgs& a, const PadStage& ps, int32_t p[8]) {
  TfLiteContext* context = a.context;
  bool typed = false;
  const bool read = ReadNodeInput(a, ps.paddings, [&](const TfLiteTensor& t) {
    typed = t.type == kTfLiteInt32 && IsConstantTensor(&t) && NumDimensions(&t) == 2 &&
            SizeOfDimension(&t, 0) == 4 && SizeOfDimension(&t, 1) == 2;
    if (typed) std::memcpy(p, GetTensorData<int32_t>(&t), 8 * sizeof(int32_t));
  });
  TF_LITE_ENSURE_MSG(context, read, "StreamChain: PAD's paddings");
  TF_LITE_ENSURE_MSG(context, typed,
                     "StreamChain: PAD takes constant int32 paddings [4, 2] of a 4-D tensor");
  bool ok = p[0] == 0 && p[1] == 0;
  for (int k = 0; k < 8; ++k) ok = ok && p[k] >= 0;
  TF_LITE_ENSURE_MSG(
      context, ok, "StreamChain: PAD pads height, width and channels only, by non-negative counts");
  return kTfLiteOk;
}

// The pad value's element as the rows' type holds it.
bool ReadPadValue(const TfLiteTensor* value, const TensorSlot& out, PadStage& ps) {
  switch (out.type) {
    case kTfLiteInt8:  // of the output's quantization, as pad.cc checks
      if (value->params.zero_point != out.zero_point ||
          static_cast<double>(value->params.scale) != static_cast<double>(out.scale)) {
        return false;
      }
      ps.pad_value = GetTensorData<int8_t>(value)[0];
      return true;
    case kTfLiteInt16:  // read as it is: TFLM checks no quantization for int16
      ps.pad_value = GetTensorData<int16_t>(value)[0];
      return true;
    case kTfLiteFloat32:
      ps.float_value = GetTensorData<float>(value)[0];
      return true;
    default:
      return false;
  }
}

}  // namespace

TfLiteStatus PadValue(const StageArgs& a, const TensorSlot& out, PadStage& ps) {
  bool ok = false;
  const bool read = ReadNodeInput(a, ps.value, [&](const TfLiteTensor& t) {
    ok = t.type == out.type && IsConstantTensor(&t) && NumElements(&t) == 1 &&
         ReadPadValue(&t, out, ps);
  });
  TF_LITE_ENSURE_MSG(a.context, read, "StreamChain: PADV2's pad value");
  if (!ok) {
    const bool int16 = out.type == kTfLiteInt16;
    MicroPrintf("StreamChain: %sPADV2 takes a constant %s scalar pad value%s",
                int16 ? "an int16 " : "",
                int16 ? "int16" : (out.type == kTfLiteInt8 ? "int8" : "float32"),
                out.type == kTfLiteInt8 ? " of the output's quantization" : "");
    return kTfLiteError;
  }
  return kTfLiteOk;
}

// TFLM's PadPrepare checks (constant int32 paddings, output = input + paddings; PAD: the output
// zero point as the pad value; PADV2: its scalar), for NHWC padding of height, width and channels.
namespace {

// The paddings (height, width and channels of an NHWC tensor) and the row rule: output row y reads
// input row y - top; none in the top and bottom padding. Channel padding keeps rows 1:1.
TfLiteStatus PadGeometry(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  PadStage& ps = g.pad;
  ps.paddings = ConstantOperand(*a.tab, g, 0, false);
  int32_t p[8] = {};
  TF_LITE_ENSURE_STATUS(Paddings(a, ps, p));
  TF_LITE_ENSURE(context, out.height == in.height + p[2] + p[3] &&
                              out.width == in.width + p[4] + p[5] &&
                              out.channels == in.channels + p[6] + p[7]);
  ps.top = p[2];
  ps.left = p[4];
  ps.right = p[5];
  ps.front = p[6];
  ps.back = p[7];
  g.resamples = 1;
  g.rule.before = ps.top;
  g.rule.after = -ps.top;
  return kTfLiteOk;
}

}  // namespace

// Float32 PAD: TFLM's float PAD without constant values pads with 0.0f.
TfLiteStatus PreparePadFloat(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kTfLiteFloat32));
  g.pad.value = -1;
  g.pad.float_value = 0.0f;
  return PadGeometry(a, g);
}

// Float32 PADV2: its pad value, a constant float32 scalar (as pad.cc reads constant_values).
TfLiteStatus PreparePadv2Float(const StageArgs& a, StageSlot& g) {
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireRows(a, out, kTfLiteFloat32));
  g.pad.value = ConstantOperand(*a.tab, g, 1, false);
  TF_LITE_ENSURE_STATUS(PadGeometry(a, g));
  return PadValue(a, out, g.pad);
}

namespace {

// TFLM's PadParams of one output row: the row's left and right padding, and (no input row: the
// top or bottom padding) one pre-pad row above an empty input.
PadParams PadParamsOf(const PadStage& ps, const StageRow& r) {
  PadParams p = {};
  p.left_padding_count = 4;
  p.right_padding_count = 4;
  p.left_padding[1] = r.rows == 0 ? 1 : 0;
  p.left_padding[2] = ps.left;
  p.right_padding[2] = ps.right;
  p.left_padding[3] = ps.front;
  p.right_padding[3] = ps.back;
  p.resizing_category = ResizingCategory::kGenericResize;
  return p;
}

// reference_ops::Pad of one output row, padding with `pad_value`.
template <typename T>
::tinyseg::Status ReferencePadRow(const PadStage& ps, const StageRow& r, T pad_value) {
  reference_ops::Pad(PadParamsOf(ps, r), r.in_shape, reinterpret_cast<const T*>(r.src), &pad_value,
                     r.out_shape, reinterpret_cast<T*>(r.dst));
  return ::tinyseg::Status::kOk;
}

}  // namespace

::tinyseg::Status PadFloatRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  return ReferencePadRow(g.pad, r, g.pad.float_value);
}

TfLiteStatus PreparePad(const StageArgs& a, StageSlot& g) {
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireRows(a, out, kTfLiteInt8));
  TF_LITE_ENSURE(a.context, out.zero_point >= INT8_MIN && out.zero_point <= INT8_MAX);
  PadStage& ps = g.pad;
  ps.value = g.op == StageOp::kPadv2 ? ConstantOperand(*a.tab, g, 1, false) : -1;
  TF_LITE_ENSURE_STATUS(PadGeometry(a, g));
  ps.pad_value = out.zero_point;  // TFLM's int8 PAD without constant_values
  if (g.op == StageOp::kPadv2) TF_LITE_ENSURE_STATUS(PadValue(a, out, ps));
  return kTfLiteOk;
}

// One output row: the input row with its left and right padding, or (no input row: the top or
// bottom padding) a row of the pad value, as a padding row above an empty input.
::tinyseg::Status PadRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  const PadStage& ps = g.pad;
  tinyseg_ops::PadRow row;
  row.input = reinterpret_cast<const int8_t*>(r.src);
  row.output = reinterpret_cast<int8_t*>(r.dst);
  row.in_rows = r.rows == 0 ? 0 : 1;
  row.in_w = r.in->width;
  row.channels = r.in->channels;
  row.left = ps.left;
  row.right = ps.right;
  row.front = ps.front;
  row.back = ps.back;
  row.pad_value = static_cast<int8_t>(ps.pad_value);
  if (OptimizedRow(v, tinyseg_ops::CmsisPadRow(row))) return ::tinyseg::Status::kOk;
  return ReferencePadRow(ps, r, row.pad_value);
}

// int16 PAD: pad.cc pads int16 with 0 without constant values (int16 rows have zero point 0).
TfLiteStatus PreparePadInt16(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kTfLiteInt16));
  g.pad.value = -1;
  g.pad.pad_value = 0;
  return PadGeometry(a, g);
}

::tinyseg::Status PadInt16Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  return ReferencePadRow(g.pad, r, static_cast<int16_t>(g.pad.pad_value));
}

// By an integer factor, without align_corners: row y reads row y / factor, checked against TFLM's
// own row arithmetic (float) for every y.
TfLiteStatus ResizeGeometry(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  int32_t align_field = 0, half_field = 0;
  TF_LITE_ENSURE(context, Field(*a.fields, contract::kFieldAlignCorners, 0, &align_field) &&
                              Field(*a.fields, contract::kFieldHalfPixelCenters, 0, &half_field));
  const bool align = align_field != 0;
  const bool half = half_field != 0;
  g.resize.align_corners = align ? 1 : 0;
  g.resize.half_pixel_centers = half ? 1 : 0;
  TF_LITE_ENSURE_MSG(
      context, !align && in.channels == out.channels && out.height % in.height == 0,
      "StreamChain: RESIZE_NEAREST_NEIGHBOR by an integer factor, without align_corners");
  const int32_t factor = out.height / in.height;
  for (int32_t y = 0; y < out.height; ++y) {
    TF_LITE_ENSURE_MSG(
        context,
        reference_ops::GetNearestNeighbor(y, in.height, out.height, align, half) == y / factor,
        "StreamChain: RESIZE_NEAREST_NEIGHBOR's rows are not y / factor");
  }
  g.resamples = 1;
  g.rule.den = factor;
  return kTfLiteOk;
}

namespace {

// One input row (y / factor) widened as TFLM's kernel widens it: an input band of one row.
template <typename T>
void ResizeRowOf(const StageSlot& g, const StageRow& r) {
  ResizeNearestNeighborParams p;
  p.align_corners = g.resize.align_corners != 0;
  p.half_pixel_centers = g.resize.half_pixel_centers != 0;
  const int32_t size[2] = {1, r.out->width};
  const int32_t size_dims[1] = {2};
  reference_ops::ResizeNearestNeighbor(p, r.in_shape, reinterpret_cast<const T*>(r.src),
                                       RuntimeShape(1, size_dims), size, r.out_shape,
                                       reinterpret_cast<T*>(r.dst));
}

}  // namespace

::tinyseg::Status ResizeFloatRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  ResizeRowOf<float>(g, r);
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status ResizeRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  ResizeRowOf<int8_t>(g, r);
  return ::tinyseg::Status::kOk;
}

::tinyseg::Status ResizeInt16Row(const EvalState&, const StageSlot& g, const StageRow& r) {
  ResizeRowOf<int16_t>(g, r);
  return ::tinyseg::Status::kOk;
}

namespace {

constexpr int32_t kBilinearOne = 1 << 10;  // source positions in 1/1024ths of a row or column

// TFLM's int8 RESIZE_BILINEAR scale along one axis (input per output, times 1024, rounded), or 0
// where its int32 positions are 0 for every output or overflow, or the last output's lower input
// lies past the input (a scale rounded up: TFLM would read past the tensor there)
// (customops.bilinear_row_rule).
int32_t BilinearScale(int32_t in_size, int32_t out_size, bool align, bool half) {
  int64_t scale = (int64_t{kBilinearOne} * in_size + out_size / 2) / out_size;
  if (align && out_size > 1) {
    scale = (int64_t{kBilinearOne} * (in_size - 1) + (out_size - 1) / 2) / (out_size - 1);
  }
  const int64_t offset = half ? scale / 2 - kBilinearOne / 2 : 0;
  const int64_t last = (int64_t{out_size} - 1) * scale + (offset > 0 ? offset : 0) + kBilinearOne;
  const int64_t end = (int64_t{out_size} - 1) * scale + offset;
  const bool past = end >= int64_t{kBilinearOne} * in_size;
  return scale < 1 || last > INT32_MAX || past ? 0 : static_cast<int32_t>(scale);
}

// One output coordinate's source: its position in 1/1024ths and the two inputs it blends.
struct BilinearTap {
  int32_t pos, lo, hi;
};

BilinearTap Tap(int32_t i, int32_t scale, bool half, int32_t in_size) {
  BilinearTap t;
  t.pos = i * scale + (half ? scale / 2 - kBilinearOne / 2 : 0);
  t.lo = t.pos / kBilinearOne > 0 ? t.pos / kBilinearOne : 0;
  const int32_t up = (t.pos + kBilinearOne - 1) / kBilinearOne;
  t.hi = up < in_size - 1 ? up : in_size - 1;
  return t;
}

// One output element from its four inputs, rounded as TFLM's build rounds.
int8_t Blend(int64_t v00, int64_t v10, int64_t v01, int64_t v11, int64_t fy, int64_t fx) {
  const int64_t gy = kBilinearOne - fy;
  const int64_t gx = kBilinearOne - fx;
  const int64_t sum = v00 * gy * gx + v10 * fy * gx + v01 * gy * fx + v11 * fy * fx;
#if TFLITE_SINGLE_ROUNDING
  return static_cast<int8_t>((sum + (int64_t{1} << 19)) >> 20);
#else
  const int64_t round = sum > 0 ? (int64_t{1} << 19) : -(int64_t{1} << 19);
  return static_cast<int8_t>((sum + round) / (int64_t{1} << 20));
#endif
}

}  // namespace

TfLiteStatus BilinearFlags(const StageArgs& a, const StageSlot& g, TfLiteType type, bool* align,
                           bool* half) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), type));
  int32_t align_field = 0, half_field = 0;
  TF_LITE_ENSURE(a.context, Field(*a.fields, contract::kFieldAlignCorners, 0, &align_field) &&
                                Field(*a.fields, contract::kFieldHalfPixelCenters, 0, &half_field));
  *align = align_field != 0;
  *half = half_field != 0;
  TF_LITE_ENSURE_MSG(a.context, !(*align && *half),
                     "StreamChain: RESIZE_BILINEAR with align_corners and half_pixel_centers");
  return kTfLiteOk;
}

// Int8, any factor, as TFLM's ResizeBilinearInteger: output row y blends two input rows of the
// fixed-point position y * scale (+ scale / 2 - 512 with half_pixel_centers), both inside the
// window the planner's row map gives.
TfLiteStatus PrepareResizeBilinear(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& in = a.tab->tensor(g.input);
  const TensorSlot& out = a.tab->tensor(g.output);
  bool align = false, half = false;
  TF_LITE_ENSURE_STATUS(BilinearFlags(a, g, kTfLiteInt8, &align, &half));
  TF_LITE_ENSURE_MSG(context, in.channels == out.channels && in.height > 0 && in.width > 0,
                     "StreamChain: RESIZE_BILINEAR keeps the channels");
  BilinearStage& b = g.bilinear;
  b.scale_y = BilinearScale(in.height, out.height, align, half);
  b.scale_x = BilinearScale(in.width, out.width, align, half);
  b.half_pixel_centers = half ? 1 : 0;
  TF_LITE_ENSURE_MSG(context, b.scale_y > 0 && b.scale_x > 0,
                     "StreamChain: RESIZE_BILINEAR's fixed-point scale is 0 or past int32");
  // Rows [a, a + 1], a = (y * scale + offset) / 1024 floored, are the two rows TFLM blends at
  // position y * scale + offset (customops.bilinear_row_rule; offset >= -512, clipped at row 0).
  g.resamples = 1;
  g.rule.num = b.scale_y;
  g.rule.den = kBilinearOne;
  g.rule.offset = half ? b.scale_y / 2 - kBilinearOne / 2 : 0;
  g.rule.before = 0;
  g.rule.after = 1;
  return kTfLiteOk;
}

// One output row from the band of its window: the two rows TFLM blends, located in the band.
::tinyseg::Status ResizeBilinearRow(const EvalState&, const StageSlot& g, const StageRow& r) {
  const BilinearStage& b = g.bilinear;
  const bool half = b.half_pixel_centers != 0;
  const BilinearTap ty = Tap(r.y, b.scale_y, half, r.in->height);
  if (ty.lo < r.lo || ty.hi >= r.lo + r.rows) return ::tinyseg::Status::kOutOfRange;
  const size_t channels = static_cast<size_t>(r.in->channels);
  const size_t stride = static_cast<size_t>(r.in->width) * channels;
  const int8_t* row0 = reinterpret_cast<const int8_t*>(r.src) + (ty.lo - r.lo) * stride;
  const int8_t* row1 = reinterpret_cast<const int8_t*>(r.src) + (ty.hi - r.lo) * stride;
  int8_t* dst = reinterpret_cast<int8_t*>(r.dst);
  const int64_t fy = ty.pos - kBilinearOne * ty.lo;
  for (int32_t x = 0; x < r.out->width; ++x) {
    const BilinearTap tx = Tap(x, b.scale_x, half, r.in->width);
    const int64_t fx = tx.pos - kBilinearOne * tx.lo;
    const size_t c0 = static_cast<size_t>(tx.lo) * channels;
    const size_t c1 = static_cast<size_t>(tx.hi) * channels;
    for (size_t c = 0; c < channels; ++c) {
      dst[static_cast<size_t>(x) * channels + c] =
          Blend(row0[c0 + c], row1[c0 + c], row0[c1 + c], row1[c1 + c], fy, fx);
    }
  }
  return ::tinyseg::Status::kOk;
}

// Along channels, requantizing nothing (as TFLM's int8 kernel; float32 has nothing to requantize).
TfLiteStatus ConcatenationGeometry(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& out = a.tab->tensor(g.output);
  for (int32_t e = a.first_edge; e < a.end_edge; ++e) {
    const TensorSlot& x = a.tab->tensor(a.tab->edges[e].tensor);
    TF_LITE_ENSURE(context, x.height == out.height && x.width == out.width);
    // int16: TFLM copies the elements whatever the scales, with every zero point 0.
    const bool same_quantization = out.type == kTfLiteInt16
                                       ? (x.zero_point == 0 && out.zero_point == 0)
                                       : (x.scale == out.scale && x.zero_point == out.zero_point);
    TF_LITE_ENSURE_MSG(context, out.type == kTfLiteFloat32 || same_quantization,
                       "StreamChain: CONCATENATION requantizes nothing (as TFLM's int8 and int16 "
                       "kernels)");
  }
  int32_t channels = 0;
  for (int32_t k = 0; k < g.operand_count; ++k)
    channels += a.tab->tensor(a.tab->operands[g.operand_begin + k]).channels;
  int32_t axis = 0;
  TF_LITE_ENSURE(context, Field(*a.fields, contract::kFieldAxis, 3, &axis));
  TF_LITE_ENSURE_MSG(
      context,
      (axis == 3 || axis == -1) && channels == out.channels && a.f.activation == kTfLiteActNone,
      "StreamChain: CONCATENATION along channels only");
  return kTfLiteOk;
}

// Channel concatenation of one row: per pixel, each operand's channels in turn (int8, int16 or
// float32 elements: bytes moved, nothing computed).
::tinyseg::Status ConcatenationRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  size_t offset = 0;
  const size_t elem = tinyseg_ops::ElementBytes(static_cast<TfLiteType>(r.out->type));
  const size_t out_c = static_cast<size_t>(r.out->channels) * elem;
  for (int32_t k = 0; k < g.operand_count; ++k) {
    const int32_t id = v.tab.operands[g.operand_begin + k];
    const TensorSlot& x = v.tab.tensor(id);
    const uint8_t* row = nullptr;
    TINYSEG_RETURN_IF_ERROR(Band(v, id, r.y, r.y, &row));
    const size_t run = static_cast<size_t>(x.channels) * elem;
    for (int32_t px = 0; px < r.out->width; ++px) {
      std::memcpy(r.dst + static_cast<size_t>(px) * out_c + offset,
                  row + static_cast<size_t>(px) * run, run);
    }
    offset += run;
  }
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
