// FetchingConv2D: CONV_2D over the virtual channel concatenation of in-RAM
// and spilled operands, computed in bands of output rows
// (docs/custom_ops.md, paper section 4.2.2).
//
// inputs [in-RAM operands..., tokens..., filter, bias or -1], outputs [out] (tokens: tensors of
// zero elements standing for the edges from the fetched slots' writers; never read); options:
// everything of Fetching with axis 3, plus padding, stride_h/w, dilation_h/w,
// activation, band_rows and (optional) quantized_bias_type.
//
// For each band of `band_rows` output rows the kernel assembles the image rows
// the band reads -- at most (kh - 1) * dh + 1 + stride_h * (band_rows - 1),
// all input channels -- into the band scratch buffer: rows of in-RAM operands
// are copied, rows of fetched operands are decoded from storage with
// SpillManager::FetchRange (through the staging buffer, since an operand's
// channels are interleaved with the others' in the band). Rows shared with
// the previous band stay in the buffer. Then TFLM's own reference arithmetic
// (reference_integer_ops::ConvPerChannel for int8 and int16x8,
// reference_ops::Conv for float32) runs on the band with the band's input
// height and a shifted top padding, so every output element is computed from
// exactly the same products in the same order as CONCATENATION + CONV_2D:
// outputs are bit-identical.
//
// Scratch (Prepare, in order): band buffer min(rows_in, H) * W * C_in *
// itemsize, staging block + 8. Persistent: 64 + (16 + 2 * pointer) bytes per
// fetched operand, plus per-channel multiplier and shift arrays (4 * C_out
// bytes each), as TFLM's CONV_2D keeps them.
#include <cstring>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/reference/conv.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/conv.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/kernels/padding.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tensorflow/lite/micro/micro_log.h"
#include "tinyseg/band.h"

namespace tflite {
namespace {

using tinyseg_ops::FetchedConvOperand;
using tinyseg_ops::FetchingConvHeader;
namespace contract = tinyseg_ops::contract;

constexpr const char* kOp = contract::kFetchingConv2D;

bool ParsePadding(const char* s, TfLitePadding* out) {
  if (std::strcmp(s, "SAME") == 0) {
    *out = kTfLitePaddingSame;
  } else if (std::strcmp(s, "VALID") == 0) {
    *out = kTfLitePaddingValid;
  } else {
    return false;
  }
  return true;
}

bool ParseActivation(const char* s, TfLiteFusedActivation* out) {
  if (std::strcmp(s, "NONE") == 0) {
    *out = kTfLiteActNone;
  } else if (std::strcmp(s, "RELU") == 0) {
    *out = kTfLiteActRelu;
  } else if (std::strcmp(s, "RELU_N1_TO_1") == 0) {
    *out = kTfLiteActReluN1To1;
  } else if (std::strcmp(s, "RELU6") == 0) {
    *out = kTfLiteActRelu6;
  } else {
    return false;
  }
  return true;
}

// The optional quantized_bias_type (absent in older models): like CONV_2D's
// Conv2DOptions.quantized_bias_type, INT32 picks the int32 accumulator for an int16 convolution
// without bias.
bool ParseBiasType(const tinyseg_ops::Options& options, bool* int32_accumulator) {
  *int32_accumulator = false;
  const flexbuffers::Reference bias_type = options.map()[contract::kKeyQuantizedBiasType];
  if (bias_type.IsNull()) return true;
  if (!bias_type.IsString()) {
    MicroPrintf("FetchingConv2D: quantized_bias_type must be a string");
    return false;
  }
  const char* name = bias_type.AsString().c_str();
  if (std::strcmp(name, "INT32") == 0) {
    *int32_accumulator = true;
  } else if (std::strcmp(name, "NONE") != 0 && std::strcmp(name, "INT64") != 0) {
    MicroPrintf("FetchingConv2D: quantized_bias_type must be NONE, INT32 or INT64");
    return false;
  }
  return true;
}

// The fetched entries into the header: rank 4, each at its own position below `operands`.
bool ReadConvFetched(const tinyseg_ops::Options& options, FetchingConvHeader* h) {
  return tinyseg_ops::ReadFetchedOperands(
      options, h->num_fetched, tinyseg_ops::ConvOperands(h),
      [h](int32_t i, const tinyseg_ops::FetchedOption& o, FetchedConvOperand* f) {
        if (o.rank != contract::kConvRank || o.position >= h->operands) {
          MicroPrintf("FetchingConv2D: fetched[%d] must be rank 4 with position < %d",
                      static_cast<int>(i), static_cast<int>(h->operands));
          return false;
        }
        f->position = static_cast<int16_t>(o.position);  // < operands <= kMaxOperands
        f->region = static_cast<int16_t>(o.region);
        f->slot = o.slot;
        f->height = o.shape[1];
        f->width = o.shape[2];
        f->channels = static_cast<size_t>(o.shape[3]);
        f->elements = o.elements;
        return true;
      });
}

// The options every FetchingConv2D has, parsed.
struct ConvOptions : tinyseg_ops::FetchingOptions {
  int64_t sh = 0, sw = 0, dh = 0, dw = 0, rows = 0;
  TfLitePadding padding = kTfLitePaddingUnknown;
  TfLiteFusedActivation activation = kTfLiteActNone;
  bool int32_accumulator = false;
};

bool ReadConvOptions(const tinyseg_ops::Options& options, ConvOptions* o) {
  const char* padding_name = nullptr;
  const char* activation_name = nullptr;
  if (!tinyseg_ops::ReadFetchingOptions(options, o) ||
      !options.Int(contract::kKeyStrideH, &o->sh) || !options.Int(contract::kKeyStrideW, &o->sw) ||
      !options.Int(contract::kKeyDilationH, &o->dh) ||
      !options.Int(contract::kKeyDilationW, &o->dw) ||
      !options.Int(contract::kKeyBandRows, &o->rows) ||
      !options.String(contract::kKeyPadding, &padding_name) ||
      !options.String(contract::kKeyActivation, &activation_name) ||
      !ParseBiasType(options, &o->int32_accumulator)) {
    return false;
  }
  if (o->axis != contract::kConvAxis || !ParsePadding(padding_name, &o->padding) ||
      !ParseActivation(activation_name, &o->activation) || o->num_fetched > o->operands) {
    MicroPrintf(
        "FetchingConv2D: needs axis 3, padding SAME/VALID, a known "
        "activation and at most `operands` fetched operands");
    return false;
  }
  return true;
}

void* FetchingConvInit(TfLiteContext* context, const char* buffer, size_t length) {
  tinyseg_ops::Options options;
  ConvOptions o;
  if (!options.Open(kOp, buffer, length) || !ReadConvOptions(options, &o)) return nullptr;
  const size_t bytes = tinyseg_ops::kFetchingConvHeaderBytes +
                       static_cast<size_t>(o.num_fetched) * sizeof(FetchedConvOperand);
  auto* h = static_cast<FetchingConvHeader*>(context->AllocatePersistentBuffer(context, bytes));
  if (h == nullptr) return nullptr;
  std::memset(h, 0, tinyseg_ops::kFetchingConvHeaderBytes);
  h->num_fetched = static_cast<int16_t>(o.num_fetched);
  h->operands = static_cast<int16_t>(o.operands);
  h->band_rows = static_cast<int32_t>(o.rows);
  h->band_index = -1;
  h->staging_index = -1;
  h->stride_h = static_cast<int16_t>(o.sh);
  h->stride_w = static_cast<int16_t>(o.sw);
  h->dilation_h = static_cast<int16_t>(o.dh);
  h->dilation_w = static_cast<int16_t>(o.dw);
  h->staging_bytes =
      static_cast<uint16_t>(tinyseg_ops::StagingBytes(static_cast<int32_t>(o.block)));
  h->padding = static_cast<uint8_t>(o.padding);
  h->int32_accumulator = o.int32_accumulator ? 1 : 0;
  h->activation = static_cast<uint8_t>(o.activation);
  return ReadConvFetched(options, h) ? h : nullptr;
}

// The rows the band logic (tinyseg/band.h) works on: the kernel's height geometry.
::tinyseg::ConvRows BandGeometry(const FetchingConvHeader* h, int32_t in_h, int32_t kh) {
  ::tinyseg::ConvRows p;
  p.input_h = in_h;
  p.kernel_h = kh;
  p.stride_h = h->stride_h;
  p.dilation_h = h->dilation_h;
  p.padding =
      h->padding == kTfLitePaddingSame ? ::tinyseg::Padding::kSame : ::tinyseg::Padding::kValid;
  return p;
}

// The tensors Prepare looks at, released together.
struct PrepareTensors {
  MicroContext* mc = nullptr;
  TfLiteTensor* out = nullptr;
  TfLiteTensor* filter = nullptr;
  TfLiteTensor* bias = nullptr;
  TfLiteTensor* input = nullptr;  // first in-RAM operand (quantization)
  ~PrepareTensors() {
    if (out) mc->DeallocateTempTfLiteTensor(out);
    if (filter) mc->DeallocateTempTfLiteTensor(filter);
    if (bias) mc->DeallocateTempTfLiteTensor(bias);
    if (input) mc->DeallocateTempTfLiteTensor(input);
  }
};

TfLiteStatus CheckOperands(TfLiteContext* context, TfLiteNode* node, FetchingConvHeader* h,
                           PrepareTensors& t, int32_t operands, int32_t* in_h, int32_t* in_w,
                           int32_t* channels) {
  const int32_t batches = t.out->dims->data[0];
  const bool quantized = t.out->type != kTfLiteFloat32;
  int32_t height = -1, width = -1;
  int64_t total = 0;  // 64 bits: up to kMaxOperands operands of up to 2^31-1 channels
  tinyseg_ops::OperandWalk<FetchedConvOperand> walk(tinyseg_ops::ConvOperands(h), h->num_fetched);
  for (int32_t k = 0; k < operands; ++k) {
    int32_t oh = 0, ow = 0, oc = 0;
    int input = -1;
    const FetchedConvOperand* f = walk.Next(k, &input);
    if (f != nullptr) {
      oh = f->height;
      ow = f->width;
      oc = static_cast<int32_t>(f->channels);
      if (f->elements != static_cast<size_t>(batches) * static_cast<size_t>(oh) *
                             static_cast<size_t>(ow) * f->channels) {
        MicroPrintf("FetchingConv2D: fetched operand %d does not match the batch size",
                    static_cast<int>(k));
        return kTfLiteError;
      }
    } else {
      TfLiteTensor* in = t.mc->AllocateTempInputTensor(node, input);
      TF_LITE_ENSURE(context, in != nullptr);
      const bool ok =
          in->type == t.out->type && in->dims->size == 4 && in->dims->data[0] == batches &&
          (t.input == nullptr || !quantized || tinyseg_ops::SameQuantization(*in, *t.input));
      if (ok) {
        oh = in->dims->data[1];
        ow = in->dims->data[2];
        oc = in->dims->data[3];
      }
      if (t.input == nullptr) {
        t.input = in;
      } else {
        t.mc->DeallocateTempTfLiteTensor(in);
      }
      if (!ok) {
        MicroPrintf(
            "FetchingConv2D: in-RAM operand %d differs in type, batch "
            "or quantization",
            static_cast<int>(k));
        return kTfLiteError;
      }
    }
    if (height < 0) {
      height = oh;
      width = ow;
    }
    if (oh != height || ow != width) {
      MicroPrintf("FetchingConv2D: operand %d is %dx%d, operand 0 is %dx%d", static_cast<int>(k),
                  static_cast<int>(oh), static_cast<int>(ow), static_cast<int>(height),
                  static_cast<int>(width));
      return kTfLiteError;
    }
    total += oc;
  }
  TF_LITE_ENSURE_MSG(context, total <= INT32_MAX,
                     "FetchingConv2D: the operands' channels exceed 2^31-1");
  *in_h = height;
  *in_w = width;
  *channels = static_cast<int32_t>(total);
  return kTfLiteOk;
}

// Every fetched slot's storage region is one the attached Runtime holds.
TfLiteStatus CheckRegions(TfLiteContext* context, FetchingConvHeader* h) {
  const FetchedConvOperand* f = tinyseg_ops::ConvOperands(h);
  for (int32_t i = 0; i < h->num_fetched; ++i) {
    TF_LITE_ENSURE_STATUS(tinyseg_ops::CheckRegion(context, f[i].region, f[i].slot, kOp));
  }
  return kTfLiteOk;
}

// The output, filter and bias types and shapes (contract::ConvTypes, ConvBiasType).
TfLiteStatus CheckFilterAndBias(TfLiteContext* context, const PrepareTensors& t) {
  const TfLiteType type = t.out->type;
  TF_LITE_ENSURE_MSG(context, contract::ConvTypes(type, t.filter->type),
                     "FetchingConv2D: supports float32, int8 and int16x8 (int8 filters)");
  TF_LITE_ENSURE_EQ(context, t.out->dims->size, 4);
  TF_LITE_ENSURE_EQ(context, t.filter->dims->size, 4);
  const int32_t out_c = t.out->dims->data[3];
  TF_LITE_ENSURE_EQ(context, t.filter->dims->data[0], out_c);
  // A float32 or int8 convolution takes its bias (the fusion pass always passes the CONV_2D's);
  // only int16 may go without, its accumulator then chosen by quantized_bias_type.
  TF_LITE_ENSURE_MSG(context, t.bias != nullptr || type == kTfLiteInt16,
                     "FetchingConv2D: a float32 or int8 convolution needs its bias input");
  if (t.bias != nullptr) {
    TF_LITE_ENSURE_MSG(context, contract::ConvBiasType(type, t.bias->type),
                       "FetchingConv2D: unsupported bias type");
    TF_LITE_ENSURE_EQ(context, NumElements(t.bias), out_c);
  }
  return kTfLiteOk;
}

// The padding and the output's size from the image (in_h x in_w) and the filter, checked against
// the output tensor; the padding into the header.
TfLiteStatus PrepareGeometry(TfLiteContext* context, FetchingConvHeader* h, const PrepareTensors& t,
                             int32_t in_h, int32_t in_w, TfLitePaddingValues* pad) {
  const int32_t kh = t.filter->dims->data[1];
  const int32_t kw = t.filter->dims->data[2];
  // The dilated filter spans at most kMaxDilationH rows and columns, so the padding (kept in 16
  // bits) and every window product fit: a larger span would be computed with a truncated padding.
  TF_LITE_ENSURE_MSG(
      context,
      kh >= 1 && kw >= 1 &&
          static_cast<int64_t>(kh - 1) * h->dilation_h + 1 <= contract::kMaxDilationH &&
          static_cast<int64_t>(kw - 1) * h->dilation_w + 1 <= contract::kMaxDilationW,
      "FetchingConv2D: the dilated filter spans more than 32767 rows or columns");
  int out_h = 0, out_w = 0;
  *pad =
      ComputePaddingHeightWidth(h->stride_h, h->stride_w, h->dilation_h, h->dilation_w, in_h, in_w,
                                kh, kw, static_cast<TfLitePadding>(h->padding), &out_h, &out_w);
  TF_LITE_ENSURE_EQ(context, out_h, t.out->dims->data[1]);
  TF_LITE_ENSURE_EQ(context, out_w, t.out->dims->data[2]);
  TF_LITE_ENSURE_MSG(context, h->band_rows <= out_h,
                     "FetchingConv2D: band_rows is more than the output's rows");
  TF_LITE_ENSURE(context, pad->height <= INT16_MAX && pad->width <= INT16_MAX);
  h->pad_h = static_cast<int16_t>(pad->height);
  h->pad_w = static_cast<int16_t>(pad->width);
  return kTfLiteOk;
}

// Per-channel quantization, kept like TFLM's CONV_2D keeps it
// (PopulateConvolutionQuantizationParams), and the offsets; float32 keeps the arrays unused.
TfLiteStatus PrepareQuantization(TfLiteContext* context, FetchingConvHeader* h,
                                 const PrepareTensors& t) {
  const int32_t out_c = t.out->dims->data[3];
  static_assert(contract::kPerChannelBytes == sizeof(int32_t), "contract: int32 per channel");
  h->per_channel_multiplier = static_cast<int32_t*>(
      context->AllocatePersistentBuffer(context, out_c * contract::kPerChannelBytes));
  h->per_channel_shift = static_cast<int32_t*>(
      context->AllocatePersistentBuffer(context, out_c * contract::kPerChannelBytes));
  TF_LITE_ENSURE(context, h->per_channel_multiplier != nullptr && h->per_channel_shift != nullptr);
  h->input_offset = 0;
  h->output_offset = 0;
  if (t.out->type == kTfLiteFloat32) return kTfLiteOk;
  TF_LITE_ENSURE_MSG(context, t.input != nullptr,
                     "FetchingConv2D: a quantized operator needs an in-RAM operand "
                     "to read the input quantization from");
  TF_LITE_ENSURE_EQ(context, t.filter->quantization.type, kTfLiteAffineQuantization);
  const auto* affine = static_cast<const TfLiteAffineQuantization*>(t.filter->quantization.params);
  TF_LITE_ENSURE(context,
                 affine != nullptr && affine->scale != nullptr && affine->zero_point != nullptr);
  TF_LITE_ENSURE(context, affine->scale->size == 1 || affine->scale->size == out_c);
  int32_t unused_multiplier = 0;
  int unused_shift = 0;
  TF_LITE_ENSURE_STATUS(PopulateConvolutionQuantizationParams(
      context, t.input, t.filter, t.bias, t.out, static_cast<TfLiteFusedActivation>(h->activation),
      &unused_multiplier, &unused_shift, &h->activation_min, &h->activation_max,
      h->per_channel_multiplier, h->per_channel_shift, out_c));
  h->input_offset = -t.input->params.zero_point;
  h->output_offset = t.out->params.zero_point;
  return kTfLiteOk;
}

// The band buffer (the image rows one band reads, never more than the image) and the staging
// buffer, requested from the arena.
TfLiteStatus RequestBuffers(TfLiteContext* context, FetchingConvHeader* h, const PrepareTensors& t,
                            int32_t in_h, int32_t in_w, int32_t in_c, int32_t pad_top) {
  const ::tinyseg::ConvRows rows = BandGeometry(h, in_h, t.filter->dims->data[1]);
  ::tinyseg::PaddingRows pad_rows;
  TF_LITE_ENSURE(context, ::tinyseg::Ok(::tinyseg::ComputePaddingRows(rows, t.out->dims->data[1],
                                                                      &pad_rows)) &&
                              pad_rows.top == pad_top);
  const size_t band_bytes = ::tinyseg::BandBufferBytes(
      rows, h->band_rows, in_w, in_c, static_cast<int32_t>(tinyseg_ops::ElementBytes(t.out->type)));
  TF_LITE_ENSURE(context, band_bytes > 0);
  TF_LITE_ENSURE_STATUS(context->RequestScratchBufferInArena(context, band_bytes, &h->band_index));
  return context->RequestScratchBufferInArena(context, h->staging_bytes, &h->staging_index);
}

TfLiteStatus FetchingConvPrepare(TfLiteContext* context, TfLiteNode* node) {
  TF_LITE_ENSURE_MSG(context, node->user_data != nullptr,
                     "FetchingConv2D: bad custom options (see the message above)");
  auto* h = static_cast<FetchingConvHeader*>(node->user_data);
  // Operand k is fetched or the next in-RAM input: the `operands` option counts the in-RAM inputs
  // and the fetched entries (Init checked every position is below it); the inputs between the
  // in-RAM ones and the filter are tokens.
  const int32_t operands = h->operands;
  const int n_in = operands - h->num_fetched;
  const int filter = NumInputs(node) - 2;
  TF_LITE_ENSURE_MSG(context, n_in >= 0 && n_in <= filter,
                     "FetchingConv2D: fewer inputs than in-RAM operands plus filter and bias");
  TF_LITE_ENSURE_EQ(context, NumOutputs(node), 1);
  TF_LITE_ENSURE_STATUS(tinyseg_ops::CheckTokens(context, node, true, n_in, filter - n_in, kOp));
  TF_LITE_ENSURE_STATUS(CheckRegions(context, h));

  PrepareTensors t;
  t.mc = GetMicroContext(context);
  t.out = t.mc->AllocateTempOutputTensor(node, 0);
  TF_LITE_ENSURE(context, t.out != nullptr);
  t.filter = t.mc->AllocateTempInputTensor(node, filter);
  TF_LITE_ENSURE(context, t.filter != nullptr);
  t.bias = t.mc->AllocateTempInputTensor(node, filter + 1);
  TF_LITE_ENSURE_STATUS(CheckFilterAndBias(context, t));

  int32_t in_h = 0, in_w = 0, in_c = 0;
  TF_LITE_ENSURE_STATUS(CheckOperands(context, node, h, t, operands, &in_h, &in_w, &in_c));
  TF_LITE_ENSURE_MSG(context, in_c == t.filter->dims->data[3],
                     "FetchingConv2D: operand channels do not add up to the "
                     "filter's input channels");
  TfLitePaddingValues pad = {};
  TF_LITE_ENSURE_STATUS(PrepareGeometry(context, h, t, in_h, in_w, &pad));
  TF_LITE_ENSURE_STATUS(PrepareQuantization(context, h, t));
  return RequestBuffers(context, h, t, in_h, in_w, in_c, pad.height);
}

// Everything Eval needs about the node, gathered once per invocation.
struct EvalView {
  FetchingConvHeader* h;
  ::tinyseg::Runtime* rt;
  int n_in;
  int32_t operands;
  int32_t batches, in_h, in_w, in_c, out_h, out_w, out_c;
  size_t elem;
  uint8_t* band;
  uint8_t* staging;
};

// Copies or decodes image rows [a, e) of batch b into the band buffer, whose
// first row holds image row `begin`.
TfLiteStatus AssembleRows(TfLiteContext* context, TfLiteNode* node, const EvalView& v, int32_t b,
                          int32_t begin, int32_t a, int32_t e) {
  if (e <= a) return kTfLiteOk;
  const size_t pixel = static_cast<size_t>(v.in_c) * v.elem;  // band bytes per pixel
  const size_t pixels = static_cast<size_t>(e - a) * static_cast<size_t>(v.in_w);
  uint8_t* dst_base = v.band + static_cast<size_t>(a - begin) * v.in_w * pixel;
  size_t channel_offset = 0;  // bytes
  tinyseg_ops::OperandWalk<FetchedConvOperand> walk(tinyseg_ops::ConvOperands(v.h),
                                                    v.h->num_fetched);
  for (int32_t k = 0; k < v.operands; ++k) {
    int input = -1;
    const FetchedConvOperand* f = walk.Next(k, &input);
    size_t run = 0;
    if (f != nullptr) {
      run = f->channels * v.elem;
      const size_t src = (static_cast<size_t>(b) * v.in_h + a) * v.in_w * run;
      TF_LITE_ENSURE_STATUS(tinyseg_ops::FetchStrided(*v.rt, f->region, f->slot, src, pixels, run,
                                                      dst_base + channel_offset, pixel, v.staging,
                                                      v.h->staging_bytes, kOp));
    } else {
      const TfLiteEvalTensor* in = micro::GetEvalInput(context, node, input);
      run = static_cast<size_t>(in->dims->data[3]) * v.elem;
      const uint8_t* src = reinterpret_cast<const uint8_t*>(in->data.raw) +
                           (static_cast<size_t>(b) * v.in_h + a) * v.in_w * run;
      if (run == pixel) {
        std::memcpy(dst_base, src, pixels * run);
      } else {
        for (size_t p = 0; p < pixels; ++p) {
          std::memcpy(dst_base + p * pixel + channel_offset, src + p * run, run);
        }
      }
    }
    channel_offset += run;
  }
  return kTfLiteOk;
}

// reference_integer_ops::ConvPerChannel on a band of T rows with a bias of BiasT.
template <typename T, typename BiasT>
void QuantizedConvBand(const EvalView& v, const ConvParams& params, const RuntimeShape& in_shape,
                       const TfLiteEvalTensor* filter, const TfLiteEvalTensor* bias,
                       const RuntimeShape& out_shape, T* out) {
  reference_integer_ops::ConvPerChannel(
      params, v.h->per_channel_multiplier, v.h->per_channel_shift, in_shape,
      reinterpret_cast<const T*>(v.band), micro::GetTensorShape(filter),
      micro::GetTensorData<int8_t>(filter), micro::GetTensorShape(bias),
      micro::GetOptionalTensorData<BiasT>(bias), out_shape, out);
}

// Runs TFLM's reference convolution on one band.
TfLiteStatus ConvBand(TfLiteContext* context, const EvalView& v, const ConvParams& params,
                      const TfLiteEvalTensor* filter, const TfLiteEvalTensor* bias,
                      TfLiteEvalTensor* out, int32_t b, int32_t r0, int32_t r1, int32_t rows) {
  const int32_t in_dims[4] = {1, rows, v.in_w, v.in_c};
  const int32_t out_dims[4] = {1, r1 - r0, v.out_w, v.out_c};
  const RuntimeShape in_shape(4, in_dims);
  const RuntimeShape out_shape(4, out_dims);
  const size_t out_offset =
      (static_cast<size_t>(b) * v.out_h + r0) * v.out_w * static_cast<size_t>(v.out_c);
  switch (out->type) {
    case kTfLiteInt8:
      QuantizedConvBand<int8_t, int32_t>(v, params, in_shape, filter, bias, out_shape,
                                         micro::GetTensorData<int8_t>(out) + out_offset);
      return kTfLiteOk;
    case kTfLiteInt16:
      // As TFLM's CONV_2D: int32 accumulation with an int32 bias, or without bias when the
      // operator's quantized_bias_type says INT32; int64 otherwise.
      if ((bias != nullptr && bias->type == kTfLiteInt32) ||
          (bias == nullptr && v.h->int32_accumulator)) {
        QuantizedConvBand<int16_t, int32_t>(v, params, in_shape, filter, bias, out_shape,
                                            micro::GetTensorData<int16_t>(out) + out_offset);
      } else {
        QuantizedConvBand<int16_t, int64_t>(v, params, in_shape, filter, bias, out_shape,
                                            micro::GetTensorData<int16_t>(out) + out_offset);
      }
      return kTfLiteOk;
    case kTfLiteFloat32:
      reference_ops::Conv(params, in_shape, reinterpret_cast<const float*>(v.band),
                          micro::GetTensorShape(filter), micro::GetTensorData<float>(filter),
                          micro::GetTensorShape(bias), micro::GetOptionalTensorData<float>(bias),
                          out_shape, micro::GetTensorData<float>(out) + out_offset, RuntimeShape(),
                          nullptr);
      return kTfLiteOk;
    default:
      MicroPrintf("FetchingConv2D: type %s not supported", TfLiteTypeGetName(out->type));
      return kTfLiteError;
  }
}

// The node's shapes, the runtime and the scratch buffers into `v`; every fetched slot checked.
TfLiteStatus OpenView(TfLiteContext* context, TfLiteNode* node, EvalView* v) {
  v->h = static_cast<FetchingConvHeader*>(node->user_data);
  v->operands = v->h->operands;
  v->n_in = v->operands - v->h->num_fetched;  // Prepare checked it; then tokens, filter, bias
  v->rt = nullptr;
  if (v->h->num_fetched > 0) {
    v->rt = tinyseg_ops::GetRuntime(context, kOp);
    if (v->rt == nullptr) return kTfLiteError;
  }
  const TfLiteEvalTensor* filter = micro::GetEvalInput(context, node, NumInputs(node) - 2);
  const TfLiteEvalTensor* out = micro::GetEvalOutput(context, node, 0);
  v->batches = out->dims->data[0];
  v->out_h = out->dims->data[1];
  v->out_w = out->dims->data[2];
  v->out_c = out->dims->data[3];
  v->in_c = filter->dims->data[3];
  if (v->n_in > 0) {
    const TfLiteEvalTensor* first = micro::GetEvalInput(context, node, 0);
    v->in_h = first->dims->data[1];
    v->in_w = first->dims->data[2];
  } else {
    v->in_h = tinyseg_ops::ConvOperands(v->h)[0].height;
    v->in_w = tinyseg_ops::ConvOperands(v->h)[0].width;
  }
  v->elem = tinyseg_ops::ElementBytes(out->type);
  v->band = static_cast<uint8_t*>(context->GetScratchBuffer(context, v->h->band_index));
  v->staging = static_cast<uint8_t*>(context->GetScratchBuffer(context, v->h->staging_index));
  TF_LITE_ENSURE(context, v->band != nullptr && v->staging != nullptr);
  const FetchedConvOperand* fetched = tinyseg_ops::ConvOperands(v->h);
  for (int32_t i = 0; i < v->h->num_fetched; ++i) {
    TF_LITE_ENSURE_STATUS(tinyseg_ops::CheckSlot(*v->rt, fetched[i].region, fetched[i].slot,
                                                 fetched[i].elements * v->elem, kOp));
  }
  return kTfLiteOk;
}

// CONV_2D's ConvParams from the header (the band's top padding is set per band).
ConvParams ParamsOf(const FetchingConvHeader* h) {
  ConvParams params = {};
  params.padding_type = h->padding == kTfLitePaddingSame ? PaddingType::kSame : PaddingType::kValid;
  params.padding_values.width = h->pad_w;
  params.stride_width = h->stride_w;
  params.stride_height = h->stride_h;
  params.dilation_width_factor = h->dilation_w;
  params.dilation_height_factor = h->dilation_h;
  params.input_offset = h->input_offset;
  params.weights_offset = 0;
  params.output_offset = h->output_offset;
  params.quantized_activation_min = h->activation_min;
  params.quantized_activation_max = h->activation_max;
  CalculateActivationRange(static_cast<TfLiteFusedActivation>(h->activation),
                           &params.float_activation_min, &params.float_activation_max);
  return params;
}

// The band walk of tinyseg/band.h over batch b: which image rows each band reads, which of them
// the previous band's buffer already holds; the rest assembled, then the band convolved.
TfLiteStatus ConvBatch(TfLiteContext* context, TfLiteNode* node, const EvalView& v,
                       ConvParams& params, int32_t b) {
  const TfLiteEvalTensor* filter = micro::GetEvalInput(context, node, NumInputs(node) - 2);
  const TfLiteEvalTensor* bias = micro::GetEvalInput(context, node, NumInputs(node) - 1);
  TfLiteEvalTensor* out = micro::GetEvalOutput(context, node, 0);
  const ::tinyseg::ConvRows rows = BandGeometry(v.h, v.in_h, filter->dims->data[1]);
  const size_t row_bytes = static_cast<size_t>(v.in_w) * v.in_c * v.elem;
  ::tinyseg::BandStep band;
  for (int32_t r0 = 0; r0 < v.out_h; r0 = band.r1) {
    TF_LITE_ENSURE(context, ::tinyseg::Ok(::tinyseg::NextBand(rows, v.out_h, v.h->band_rows,
                                                              r0 == 0 ? nullptr : &band, &band)));
    const int32_t begin = band.rows.in_begin;
    const int32_t end = band.rows.in_end;
    if (band.kept > 0) {
      std::memmove(v.band, v.band + static_cast<size_t>(band.keep_from) * row_bytes,
                   static_cast<size_t>(band.kept) * row_bytes);
      if (v.rt != nullptr) v.rt->stats.reused_rows += static_cast<uint64_t>(band.kept);
    }
    TF_LITE_ENSURE_STATUS(AssembleRows(context, node, v, b, begin, begin + band.kept, end));
    // The band's own input starts at image row `begin`: its top padding.
    params.padding_values.height = static_cast<int16_t>(band.rows.pad_top);
    TF_LITE_ENSURE_STATUS(
        ConvBand(context, v, params, filter, bias, out, b, band.r0, band.r1, end - begin));
    if (v.rt != nullptr) ++v.rt->stats.bands;
  }
  return kTfLiteOk;
}

// With release_after_fetch, every fetched slot's storage is released (CheckSlot found it).
TfLiteStatus ReleaseFetched(const EvalView& v) {
  if (v.rt == nullptr || !v.rt->release_after_fetch) return kTfLiteOk;
  const FetchedConvOperand* fetched = tinyseg_ops::ConvOperands(v.h);
  for (int32_t i = 0; i < v.h->num_fetched; ++i) {
    const ::tinyseg::Status s = v.rt->storage(fetched[i].region)->Release(fetched[i].slot);
    if (!::tinyseg::Ok(s)) {
      MicroPrintf("FetchingConv2D: releasing slot %u failed: %s",
                  static_cast<unsigned>(fetched[i].slot), ::tinyseg::StatusName(s));
      return kTfLiteError;
    }
  }
  return kTfLiteOk;
}

TfLiteStatus FetchingConvEval(TfLiteContext* context, TfLiteNode* node) {
  EvalView v;
  TF_LITE_ENSURE_STATUS(OpenView(context, node, &v));
  ConvParams params = ParamsOf(v.h);
  for (int32_t b = 0; b < v.batches; ++b) {
    TF_LITE_ENSURE_STATUS(ConvBatch(context, node, v, params, b));
  }
  return ReleaseFetched(v);
}

}  // namespace

TFLMRegistration Register_FETCHING_CONV_2D() {
  return micro::RegisterOp(FetchingConvInit, FetchingConvPrepare, FetchingConvEval);
}

}  // namespace tflite
