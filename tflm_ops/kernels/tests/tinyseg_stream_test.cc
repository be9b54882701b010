// StreamChain against TFLM's own kernels run whole: a chain that spills its
// product row by row and a chain that fetches it row by row into a strided
// convolution, and a chain of a convolution into a max pool through a ring of
// two rows; DEQUANTIZE rows to float32; ELU over every int8 value, through a ring. Outputs must be
// bit-identical; a ring one row short is
// refused; DEQUANTIZE's float32 rows feed a float32 RELU stage; a float32 CONV_2D into RELU6
// matches TFLM's float kernels, and the same chain with an int8 filter is refused.
// A TRANSPOSE_CONV stage against TFLM's TRANSPOSE_CONV (in a CMSIS-NN build, with
// its rows through CMSIS-NN when op_scratch holds CMSIS-NN's accumulator row). The int16 CONV_2D,
// DEPTHWISE_CONV_2D and pool stages against TFLM's kernels (in a CMSIS-NN build, through the s16
// functions).
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/reference/resize_bilinear.h"
#include "tensorflow/lite/micro/kernels/conv.h"
#include "tensorflow/lite/micro/kernels/depthwise_conv.h"
#include "tensorflow/lite/micro/kernels/kernel_runner.h"
#include "tensorflow/lite/micro/kernels/micro_ops.h"
#include "tensorflow/lite/micro/kernels/pooling.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tests/tinyseg_test_support.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/kernels/transpose_conv.h"
#include "tensorflow/lite/micro/test_helpers.h"
#include "tensorflow/lite/micro/testing/micro_test.h"

namespace tflite {
namespace testing {
namespace {

using tinyseg_testing::AsChars;
using tinyseg_testing::IntVector;
using tinyseg_testing::IntVectors;
using tinyseg_testing::Random;

constexpr int kH = 9, kW = 7, kC = 3, kM = 4, kY = 2, kK = 3;
constexpr int kSlot = 5;
constexpr float kXScale = 0.05f, kMScale = 0.1f, kYScale = 0.2f;
constexpr int kXZp = 3, kMZp = -5, kYZp = 7;

// One stage of a body: builtin name, chain-local operand ids, output id, options fields.
struct Stage {
  const char* op;
  std::vector<int> inputs;
  int output;
  const char* options;
  std::function<void(flexbuffers::Builder&)> fields;
};

struct BodyTensor {
  const char* name;
  std::vector<int> shape;
  float scale;
  int zero_point;
};

std::vector<uint8_t> ChainOptions(int ring_bytes, int spilled, int fetched,
                                  const std::vector<Stage>& stages,
                                  const std::vector<BodyTensor>& tensors,
                                  const std::vector<std::vector<int>>& spill,
                                  const std::vector<std::vector<int>>& fetch,
                                  const std::vector<std::vector<int>>& rings, int op_scratch = 0,
                                  const char* body_type = "INT8",
                                  std::function<void(flexbuffers::Builder&)> extra = nullptr) {
  flexbuffers::Builder fbb;
  fbb.Map([&]() {
    fbb.Int("version", 1);
    fbb.Int("ring_bytes", ring_bytes);
    fbb.Int("op_scratch", op_scratch);
    fbb.Int("spilled", spilled);
    fbb.Int("fetched", fetched);
    fbb.Int("block", 1024);
    fbb.Vector("stages", [&]() {
      for (const Stage& s : stages) {
        fbb.Map([&]() {
          fbb.String("op", s.op);
          fbb.Int("version", 1);
          IntVector(fbb, "inputs", s.inputs);
          fbb.Vector("outputs", [&]() { fbb.Int(s.output); });
          fbb.String("options", s.options);
          fbb.Map("fields", [&]() { s.fields(fbb); });
        });
      }
    });
    fbb.Vector("tensors", [&]() {
      for (const BodyTensor& t : tensors) {
        fbb.Map([&]() {
          fbb.String("name", t.name);
          fbb.String("type", body_type);
          IntVector(fbb, "shape", t.shape);
          fbb.Vector("scale", [&]() { fbb.Double(static_cast<double>(t.scale)); });
          fbb.Vector("zero_point", [&]() { fbb.Int(t.zero_point); });
          fbb.Int("quantized_dimension", 0);
        });
      }
    });
    IntVectors(fbb, "spill", spill);
    IntVectors(fbb, "fetch", fetch);
    IntVectors(fbb, "rings", rings);
    if (extra) extra(fbb);
  });
  fbb.Finish();
  return fbb.GetBuffer();
}

void ConvFields(flexbuffers::Builder& fbb, int stride, int relu) {
  fbb.Int("padding", 0);  // SAME
  fbb.Int("strideH", stride);
  fbb.Int("strideW", stride);
  fbb.Int("dilationHFactor", 1);
  fbb.Int("dilationWFactor", 1);
  fbb.Int("fusedActivationFunction", relu);
}

// Init and Prepare, then (unless `invoke` is false) Eval of one StreamChain over `tensors`.
TfLiteStatus RunChain(::tinyseg::Runtime* rt, TfLiteTensor* tensors, int n_tensors,
                      std::vector<int> inputs, std::vector<int> outputs,
                      const std::vector<uint8_t>& options, bool invoke = true) {
  std::vector<int> in = {static_cast<int>(inputs.size())};
  in.insert(in.end(), inputs.begin(), inputs.end());
  std::vector<int> out = {static_cast<int>(outputs.size())};
  out.insert(out.end(), outputs.begin(), outputs.end());
  const TFLMRegistration reg = Register_STREAM_CHAIN();
  micro::KernelRunner runner(reg, tensors, n_tensors, IntArrayFromInts(in.data()),
                             IntArrayFromInts(out.data()), nullptr);
  if (rt != nullptr) runner.GetFakeMicroContext()->set_external_context(rt);
  TF_LITE_ENSURE_STATUS(runner.InitAndPrepare(AsChars(options), options.size()));
  return invoke ? runner.Invoke() : kTfLiteOk;
}

// Init and Prepare only: a refusal the chain's Prepare gives.
TfLiteStatus PrepareChain(::tinyseg::Runtime* rt, TfLiteTensor* tensors, int n_tensors,
                          std::vector<int> inputs, std::vector<int> outputs,
                          const std::vector<uint8_t>& options) {
  return RunChain(rt, tensors, n_tensors, inputs, outputs, options, false);
}

// A pool stage's fields: padding (0 SAME, 1 VALID), a square stride and filter, no activation.
void PoolFields(flexbuffers::Builder& fbb, int padding, int stride, int filter) {
  fbb.Int("padding", padding);
  fbb.Int("strideH", stride);
  fbb.Int("strideW", stride);
  fbb.Int("filterHeight", filter);
  fbb.Int("filterWidth", filter);
  fbb.Int("fusedActivationFunction", 0);
}

// A CONV_2D stage: SAME padding, a square `stride`, fused activation `act` (0 none, 1 RELU, 3
// RELU6).
Stage ConvStage(std::vector<int> inputs, int output, int stride, int act) {
  return {"CONV_2D", std::move(inputs), output, "Conv2DOptions",
          [stride, act](flexbuffers::Builder& f) { ConvFields(f, stride, act); }};
}

// A MAX_POOL_2D or AVERAGE_POOL_2D stage of one input (PoolFields).
Stage PoolStage(const char* op, int input, int output, int padding, int stride, int filter) {
  return {op, {input}, output, "Pool2DOptions", [padding, stride, filter](flexbuffers::Builder& f) {
            PoolFields(f, padding, stride, filter);
          }};
}

TfLiteStatus RunBuiltin(const TFLMRegistration& reg, TfLiteTensor* tensors, int n_in,
                        void* params) {
  int inputs[4] = {n_in, 0, 1, 2};
  int outputs[] = {1, n_in};
  micro::KernelRunner runner(reg, tensors, n_in + 1, IntArrayFromInts(inputs),
                             IntArrayFromInts(outputs), params);
  TF_LITE_ENSURE_STATUS(runner.InitAndPrepare());
  return runner.Invoke();
}

// The data every case shares: an input, two per-channel convolutions' weights.
struct Weights {
  int8_t x[kH * kW * kC];
  int8_t f1[kM * kK * kK * kC];
  int32_t b1[kM];
  int8_t f2[kY * kK * kK * kM];
  int32_t b2[kY];
  Weights() {
    Random rng(11);
    rng.Fill<int8_t>(x, sizeof(x), -128, 127, 30, kXZp);
    rng.Fill<int8_t>(f1, sizeof(f1), -127, 127, 10, 0);
    rng.Fill<int8_t>(f2, sizeof(f2), -127, 127, 10, 0);
    for (int i = 0; i < kM; ++i) b1[i] = rng.Int(-2000, 2000);
    for (int i = 0; i < kY; ++i) b2[i] = rng.Int(-2000, 2000);
  }
};

Weights& W() {
  static Weights w;
  return w;
}

// The input x as a tensor (its dims live as long as the test).
TfLiteTensor XTensor() {
  static int x_dims[] = {4, 1, kH, kW, kC};
  return CreateQuantizedTensor(W().x, IntArrayFromInts(x_dims), kXScale, kXZp);
}

// The most channels a test's per-channel filter has.
constexpr int kMaxCh = 8;

// A per-channel int8 filter [d0, kK, kK, d3] over `f`, quantized along `qdim` (0: CONV_2D and
// TRANSPOSE_CONV, 3: DEPTHWISE_CONV_2D) with channel i's scale first + step * i, and its bias over
// `b` (int32, or int64 for the 16x8 forms); the quantization arrays live as long as this.
struct PerChannelTensors {
  TfLiteAffineQuantization fq, bq;
  float f_scales[kMaxCh + 1], b_scales[kMaxCh + 1];
  int f_zps[kMaxCh + 1], b_zps[kMaxCh + 1];
  int f_dims[5], b_dims[2];
  TfLiteTensor filter, bias;
  template <typename B>
  void Init(int8_t* f, B* b, int d0, int d3, int qdim, float first, float step, float in_scale) {
    const int out_c = qdim == 0 ? d0 : d3;
    f_scales[0] = b_scales[0] = static_cast<float>(out_c);
    f_zps[0] = b_zps[0] = out_c;
    for (int i = 1; i <= out_c; ++i) {
      f_scales[i] = first + step * static_cast<float>(i);
      f_zps[i] = b_zps[i] = 0;
    }
    const int fd[] = {4, d0, kK, kK, d3};
    std::memcpy(f_dims, fd, sizeof(fd));
    b_dims[0] = 1;
    b_dims[1] = out_c;
    TfLiteFloatArray* scales = FloatArrayFromFloats(f_scales);
    filter = CreatePerChannelQuantizedTensor(f, IntArrayFromInts(f_dims), scales,
                                             IntArrayFromInts(f_zps), &fq, qdim);
    bias = CreatePerChannelQuantizedBiasTensor(b, IntArrayFromInts(b_dims), in_scale, scales,
                                               FloatArrayFromFloats(b_scales),
                                               IntArrayFromInts(b_zps), &bq, 0);
  }
};

// A CONV_2D's filter [out_c, kK, kK, in_c] and bias over the shared weights.
struct ConvTensors : PerChannelTensors {
  ConvTensors(int8_t* f, int32_t* b, int out_c, int in_c, float in_scale) {
    Init(f, b, out_c, in_c, 0, 0.01f, 0.003f, in_scale);
  }
};

constexpr int kYH = (kH + 1) / 2, kYW = (kW + 1) / 2;  // the stride-2 SAME convolution's output

// TFLM's CONV_2D on whole tensors: m = RELU(CONV(x)) (stride 1, SAME) with c1's weights.
TfLiteStatus ConvXIntoM(const ConvTensors& c1, int8_t* m) {
  int m_dims[] = {4, 1, kH, kW, kM};
  TfLiteConvParams p = {kTfLitePaddingSame, 1, 1, kTfLiteActRelu, 1, 1, kTfLiteNoType};
  TfLiteTensor t[] = {XTensor(), c1.filter, c1.bias,
                      CreateQuantizedTensor(m, IntArrayFromInts(m_dims), kMScale, kMZp)};
  return RunBuiltin(tflite::Register_CONV_2D(), t, 3, &p);
}

// And y = CONV(m) (stride 2, SAME, no activation) with c2's weights.
TfLiteStatus ConvMIntoY(const ConvTensors& c2, int8_t* m, int8_t* y) {
  int m_dims[] = {4, 1, kH, kW, kM};
  int y_dims[] = {4, 1, kYH, kYW, kY};
  TfLiteConvParams p = {kTfLitePaddingSame, 2, 2, kTfLiteActNone, 1, 1, kTfLiteNoType};
  TfLiteTensor t[] = {CreateQuantizedTensor(m, IntArrayFromInts(m_dims), kMScale, kMZp), c2.filter,
                      c2.bias, CreateQuantizedTensor(y, IntArrayFromInts(y_dims), kYScale, kYZp)};
  return RunBuiltin(tflite::Register_CONV_2D(), t, 3, &p);
}

// A depthwise filter [1, K, K, C * multiplier] with per-channel scales (quantized dimension 3).
constexpr int kMult = 2, kD = kC * kMult;

// y = second(m) for m = first(x) as TFLM computed it whole (kH x kW x mc, kMScale, kMZp): TFLM's
// `second` (one input, `params`) run whole on m against one chain of the `stages` first and
// second (node inputs [x, filter, bias], output y (local 3), body m (local 4) in a ring of
// `ring_rows` rows); y is oh x ow x mc of m's quantization. True when the chain writes TFLM's
// bytes.
bool TwoStagesMatchTflm(const TFLMRegistration& second, void* params, int8_t* m, int mc,
                        const TfLiteTensor& filter, const TfLiteTensor& bias,
                        const std::vector<Stage>& stages, int oh, int ow, int ring_rows) {
  static int8_t want[kH * kW * kD], got[kH * kW * kD];
  int m_dims[] = {4, 1, kH, kW, mc};
  int y_dims[] = {4, 1, oh, ow, mc};
  TfLiteTensor r[] = {CreateQuantizedTensor(m, IntArrayFromInts(m_dims), kMScale, kMZp),
                      CreateQuantizedTensor(want, IntArrayFromInts(y_dims), kMScale, kMZp)};
  if (RunBuiltin(second, r, 1, params) != kTfLiteOk) return false;
  std::memset(got, 0x5a, sizeof(got));
  const std::vector<uint8_t> o =
      ChainOptions(ring_rows * kW * mc, 0, 0, stages, {{"m", {1, kH, kW, mc}, kMScale, kMZp}}, {},
                   {}, {{4, ring_rows}});
  TfLiteTensor t[] = {XTensor(), filter, bias,
                      CreateQuantizedTensor(got, IntArrayFromInts(y_dims), kMScale, kMZp)};
  return RunChain(nullptr, t, 4, {0, 1, 2}, {3}, o) == kTfLiteOk &&
         std::memcmp(want, got, static_cast<size_t>(oh * ow * mc)) == 0;
}

// A camera: rows of `x` on request, each call recorded; it fails at `fail_row`, and claims
// `skew` bytes more (or fewer) than it was given room for.
struct Camera {
  const int8_t* x = nullptr;
  std::vector<int> calls;   // input * 1000 + row, in call order
  size_t bad_capacity = 0;  // calls whose capacity was not one row
  int fail_row = -1;
  int skew = 0;
  static ::tinyseg::Status Read(void* user, int32_t input, int32_t row, uint8_t* dst,
                                size_t capacity, size_t* written) {
    Camera& c = *static_cast<Camera*>(user);
    c.calls.push_back(input * 1000 + row);
    constexpr size_t kRow = static_cast<size_t>(kW * kC);
    if (capacity != kRow) ++c.bad_capacity;
    if (row == c.fail_row) return ::tinyseg::Status::kIoError;
    std::memcpy(dst, c.x + static_cast<size_t>(row) * kRow, capacity < kRow ? capacity : kRow);
    *written = static_cast<size_t>(static_cast<int>(capacity) + c.skew);
    return ::tinyseg::Status::kOk;
  }
};

// A mask display: finished rows stored by row number, each call recorded; it fails at `fail_row`.
struct Display {
  int8_t y[kYH * kYW * kY];
  std::vector<int> calls;  // output * 1000 + row, in call order
  size_t bad_bytes = 0;
  int fail_row = -1;
  static ::tinyseg::Status Write(void* user, int32_t output, int32_t row, const uint8_t* src,
                                 size_t bytes) {
    Display& d = *static_cast<Display*>(user);
    d.calls.push_back(output * 1000 + row);
    constexpr size_t kRow = static_cast<size_t>(kYW * kY);
    if (bytes != kRow || row < 0 || row >= kYH) {
      ++d.bad_bytes;
      return ::tinyseg::Status::kInvalidArgument;
    }
    if (row == d.fail_row) return ::tinyseg::Status::kIoError;
    std::memcpy(d.y + static_cast<size_t>(row) * kRow, src, bytes);
    return ::tinyseg::Status::kOk;
  }
};

// A body's source, sink and tokens entries: [tensor, stream] pairs and the tokens list.
std::function<void(flexbuffers::Builder&)> RowIo(std::vector<std::vector<int>> source,
                                                 std::vector<std::vector<int>> sink,
                                                 std::vector<int> tokens) {
  return [source, sink, tokens](flexbuffers::Builder& f) {
    IntVectors(f, "source", source);
    IntVectors(f, "sink", sink);
    IntVector(f, "tokens", tokens);
  };
}

// y = CONV(CONV(x), stride 2) with x from row source 0 and y to row sink 1: node inputs [f1, b1,
// f2, b2, token] (tokens come last), node output [token] (local 5), body x (6), m (7), y (8).
// `extra` writes other source, sink and tokens entries (a hostile body); `spill` spills body
// tensors.
std::vector<uint8_t> RowIoChain(std::function<void(flexbuffers::Builder&)> extra = nullptr,
                                const std::vector<std::vector<int>>& spill = {}) {
  if (!extra) extra = RowIo({{6, 0}}, {{8, 1}}, {4, 5});
  return ChainOptions(3 * kW * kC + 3 * kW * kM + kYW * kY, static_cast<int>(spill.size()), 0,
                      {ConvStage({6, 0, 1}, 7, 1, 1), ConvStage({7, 2, 3}, 8, 2, 0)},
                      {{"x", {1, kH, kW, kC}, kXScale, kXZp},
                       {"m", {1, kH, kW, kM}, kMScale, kMZp},
                       {"y", {1, kYH, kYW, kY}, kYScale, kYZp}},
                      spill, {}, {{6, 3}, {7, 3}, {8, 1}}, 0, "INT8", extra);
}

// The depthwise filter [1, kK, kK, kD] and bias, seeded random weights.
struct DepthwiseTensors : PerChannelTensors {
  int8_t f[kK * kK * kD];
  int32_t b[kD];
  explicit DepthwiseTensors(float in_scale) {
    Random rng(23);
    rng.Fill<int8_t>(f, sizeof(f), -127, 127, 10, 0);
    for (int i = 0; i < kD; ++i) b[i] = rng.Int(-1500, 1500);
    Init(f, b, 1, kD, 3, 0.02f, 0.004f, in_scale);
  }
};

// y = TRANSPOSE_CONV(x) run whole by TFLM (the fused activation `act` applied after) and as a
// one-stage chain with `op_scratch` bytes of member scratch; returns the chain's TRANSPOSE_CONV
// rows computed by CMSIS-NN, -1 on a mismatch.
// x is 3 x 5 x kC; the filter kM x kh x kw x kC (kh, kw <= kK); stride (sh, sw); SAME, or VALID
// with sh >= kh (the output has kTH * sh rows).
int TransposeConvRows(TfLitePadding padding, int kh, int kw, int sh, int sw,
                      TfLiteFusedActivation act, int op_scratch) {
  constexpr int kTH = 3, kTW = 5;
  Weights& w = W();
  const int oh = kTH * sh;
  const int ow = padding == kTfLitePaddingSame ? kTW * sw : (kTW - 1) * sw + kw;
  static int8_t want[kTH * 3 * kTW * 3 * kM], got[kTH * 3 * kTW * 3 * kM];
  int32_t shape[4] = {1, oh, ow, kM};
  int shape_dims[] = {1, 4};
  int x_dims[] = {4, 1, kTH, kTW, kC};
  int y_dims[] = {4, 1, oh, ow, kM};
  ConvTensors c(w.f1, w.b1, kM, kC, kXScale);
  c.f_dims[2] = kh;  // the filter's [kM, kh, kw, kC] view of f1
  c.f_dims[3] = kw;
  TfLiteTransposeConvParams params = {padding, sw, sh, kTfLiteActNone, kTfLiteNoType};
  int inputs[] = {4, 0, 1, 2, 3};
  int outputs[] = {1, 4};
  TfLiteTensor whole[] = {CreateTensor(shape, IntArrayFromInts(shape_dims)), c.filter,
                          CreateQuantizedTensor(w.x, IntArrayFromInts(x_dims), kXScale, kXZp),
                          c.bias,
                          CreateQuantizedTensor(want, IntArrayFromInts(y_dims), kYScale, kYZp)};
  // KernelRunner keeps a reference to the registration: it must outlive the runner (a temporary
  // here is read after its scope ends, which ASan reports).
  const TFLMRegistration transpose_conv = Register_TRANSPOSE_CONV();
  micro::KernelRunner runner(transpose_conv, whole, 5, IntArrayFromInts(inputs),
                             IntArrayFromInts(outputs), &params);
  if (runner.InitAndPrepare() != kTfLiteOk || runner.Invoke() != kTfLiteOk) return -1;
  if (act == kTfLiteActRelu) {
    // TFLM's CMSIS-NN TRANSPOSE_CONV drops a fused activation (its Prepare passes kTfLiteActNone
    // to PopulateConvolutionQuantizationParams); its reference kernel clamps at the output zero
    // point. The stage does the latter: the expected bytes are the unclamped ones clamped there.
    for (int i = 0; i < oh * ow * kM; ++i)
      want[i] = want[i] < kYZp ? static_cast<int8_t>(kYZp) : want[i];
  }

  std::memset(got, 0x5a, sizeof(got));
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  static int pad, stride_h, stride_w, activation;
  pad = padding == kTfLitePaddingSame ? 0 : 1;
  stride_h = sh;
  stride_w = sw;
  activation = act == kTfLiteActRelu ? 1 : 0;
  // inputs [shape, filter, x, bias], outputs [y] (local 4); no body tensors, no rings.
  const std::vector<uint8_t> o = ChainOptions(0, 0, 0,
                                              {{"TRANSPOSE_CONV",
                                                {0, 1, 2, 3},
                                                4,
                                                "TransposeConvOptions",
                                                [](flexbuffers::Builder& f) {
                                                  f.Int("padding", pad);
                                                  f.Int("strideH", stride_h);
                                                  f.Int("strideW", stride_w);
                                                  f.Int("fusedActivationFunction", activation);
                                                }}},
                                              {}, {}, {}, {}, op_scratch);
  TfLiteTensor t[] = {CreateTensor(shape, IntArrayFromInts(shape_dims)), c.filter,
                      CreateQuantizedTensor(w.x, IntArrayFromInts(x_dims), kXScale, kXZp), c.bias,
                      CreateQuantizedTensor(got, IntArrayFromInts(y_dims), kYScale, kYZp)};
  if (RunChain(&rt, t, 5, {0, 1, 2, 3}, {4}, o) != kTfLiteOk) return -1;
  if (std::memcmp(want, got, static_cast<size_t>(oh * ow * kM)) != 0) return -1;
  return static_cast<int>(rt.stats.optimized_transpose_conv_rows);
}

// y = PAD(x) by `pads` ([before, after] per NHWC axis, at most 5 each) run whole by TFLM and as a
// one-stage chain; returns the chain's rows computed by CMSIS-NN, -1 on a mismatch.
int PadRows(const int32_t (&pads)[8]) {
  constexpr int kMax = 5;
  const int oh = kH + pads[2] + pads[3], ow = kW + pads[4] + pads[5], oc = kC + pads[6] + pads[7];
  static int8_t want[(kH + 2 * kMax) * (kW + 2 * kMax) * (kC + 2 * kMax)];
  static int8_t got[sizeof(want)];
  static int32_t paddings[8];
  for (int k = 0; k < 8; ++k) {
    if (pads[k] < 0 || pads[k] > kMax) return -1;
    paddings[k] = pads[k];
  }
  int p_dims[] = {2, 4, 2};
  int y_dims[] = {4, 1, oh, ow, oc};
  TfLiteTensor r[] = {XTensor(), CreateTensor(paddings, IntArrayFromInts(p_dims)),
                      CreateQuantizedTensor(want, IntArrayFromInts(y_dims), kXScale, kXZp)};
  r[1].allocation_type = kTfLiteMmapRo;
  if (RunBuiltin(tflite::Register_PAD(), r, 2, nullptr) != kTfLiteOk) return -1;

  std::memset(got, 0x5a, sizeof(got));
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  auto none = [](flexbuffers::Builder&) {};
  // inputs [x, paddings], outputs [y] (local 2); no body tensors, no rings.
  const std::vector<uint8_t> o =
      ChainOptions(0, 0, 0, {{"PAD", {0, 1}, 2, "", none}}, {}, {}, {}, {});
  TfLiteTensor t[] = {XTensor(), CreateTensor(paddings, IntArrayFromInts(p_dims)),
                      CreateQuantizedTensor(got, IntArrayFromInts(y_dims), kXScale, kXZp)};
  t[1].allocation_type = kTfLiteMmapRo;
  if (RunChain(&rt, t, 3, {0, 1}, {2}, o) != kTfLiteOk) return -1;
  if (std::memcmp(want, got, static_cast<size_t>(oh * ow * oc)) != 0) return -1;
  return static_cast<int>(rt.stats.optimized_rows);
}

// A 16x8 convolution's per-channel int8 filter [d0, kK, kK, d3], quantized along `qdim` (0:
// CONV_2D, 3: DEPTHWISE_CONV_2D), and its bias of type B (TFLM takes int64, CONV_2D int32 too).
template <typename B>
struct Int16ConvTensors : PerChannelTensors {
  int8_t f[kMaxCh * kK * kK * kMaxCh];
  B b[kMaxCh];
  Int16ConvTensors(int d0, int d3, int qdim, float in_scale) {
    const int out_c = qdim == 0 ? d0 : d3;
    Random rng(31);
    rng.Fill<int8_t>(f, static_cast<size_t>(d0 * kK * kK * d3), -127, 127, 10, 0);
    for (int i = 0; i < out_c; ++i) b[i] = static_cast<B>(rng.Int(-40000, 40000));
    Init(f, b, d0, d3, qdim, 0.01f, 0.002f, in_scale);
  }
};

// y = op(x) for an int16 x (kH x kW x kC, zero point 0 as TFLM's int16 kernels need): CONV_2D
// (kM outputs, int64 or int32 bias), DEPTHWISE_CONV_2D (multiplier kMult, int64 bias), MAX_POOL_2D
// or AVERAGE_POOL_2D (3x3), stride `s`, SAME, run whole by TFLM and as a one-stage chain with
// `op_scratch` bytes of member scratch; returns the chain's rows computed by CMSIS-NN, -1 on a
// mismatch.
template <typename B>
int Int16StageRows(const char* op, int s, int op_scratch) {
  constexpr float kX16Scale = 0.002f;
  const bool conv = std::strcmp(op, "CONV_2D") == 0;
  const bool dw = std::strcmp(op, "DEPTHWISE_CONV_2D") == 0;
  const int oh = (kH + s - 1) / s, ow = (kW + s - 1) / s, oc = conv ? kM : dw ? kD : kC;
  const float out_scale = conv || dw ? 0.05f : kX16Scale;
  static int16_t x[kH * kW * kC], want[kH * kW * kMaxCh], got[kH * kW * kMaxCh];
  Random rng(41);
  rng.Fill<int16_t>(x, sizeof(x) / sizeof(x[0]), -30000, 30000, 10, 0);
  static Int16ConvTensors<B> ct(kM, kC, 0, kX16Scale);
  static Int16ConvTensors<int64_t> dt(1, kD, 3, kX16Scale);
  TfLiteTensor& filter = conv ? ct.filter : dt.filter;
  TfLiteTensor& bias = conv ? ct.bias : dt.bias;
  int x_dims[] = {4, 1, kH, kW, kC};
  int y_dims[] = {4, 1, oh, ow, oc};
  TfLiteConvParams cp = {kTfLitePaddingSame, s, s, kTfLiteActNone, 1, 1, kTfLiteNoType};
  TfLiteDepthwiseConvParams dp = {kTfLitePaddingSame, s, s, kMult, kTfLiteActNone, 1, 1};
  TfLitePoolParams pp = {kTfLitePaddingSame, s, s, 3, 3, kTfLiteActNone, {}};
  const bool max = std::strcmp(op, "MAX_POOL_2D") == 0;
  const TFLMRegistration reg = conv  ? tflite::Register_CONV_2D()
                               : dw  ? tflite::Register_DEPTHWISE_CONV_2D()
                               : max ? tflite::Register_MAX_POOL_2D()
                                     : tflite::Register_AVERAGE_POOL_2D();
  void* params = conv ? static_cast<void*>(&cp) : dw ? static_cast<void*>(&dp) : &pp;
  const int n_in = conv || dw ? 3 : 1;
  TfLiteTensor r[] = {CreateQuantizedTensor(x, IntArrayFromInts(x_dims), kX16Scale, 0), filter,
                      bias, CreateQuantizedTensor(want, IntArrayFromInts(y_dims), out_scale, 0)};
  if (n_in == 1) r[1] = r[3];
  if (RunBuiltin(reg, r, n_in, params) != kTfLiteOk) return -1;

  std::memset(got, 0x5a, sizeof(got));
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  auto fields = [conv, dw, s](flexbuffers::Builder& f) {
    ConvFields(f, s, 0);
    if (dw) f.Int("depthMultiplier", kMult);
    if (!conv && !dw) {
      f.Int("filterHeight", kK);
      f.Int("filterWidth", kK);
    }
  };
  const char* options = conv ? "Conv2DOptions" : dw ? "DepthwiseConv2DOptions" : "Pool2DOptions";
  std::vector<int> inputs = {0, 1, 2};
  if (n_in == 1) inputs = {0};
  // inputs [x (, filter, bias)], outputs [y]; no body tensors, no rings.
  const std::vector<uint8_t> o = ChainOptions(0, 0, 0, {{op, inputs, n_in, options, fields}}, {},
                                              {}, {}, {}, op_scratch, "INT16");
  TfLiteTensor t[] = {CreateQuantizedTensor(x, IntArrayFromInts(x_dims), kX16Scale, 0), filter,
                      bias, CreateQuantizedTensor(got, IntArrayFromInts(y_dims), out_scale, 0)};
  if (n_in == 1) t[1] = t[3];
  if (RunChain(&rt, t, n_in + 1, inputs, {n_in}, o) != kTfLiteOk) return -1;
  if (std::memcmp(want, got, static_cast<size_t>(oh * ow * oc) * sizeof(int16_t)) != 0) return -1;
  return static_cast<int>(rt.stats.optimized_rows);
}

}  // namespace
}  // namespace testing
}  // namespace tflite

TF_LITE_MICRO_TESTS_BEGIN

// Chain A computes m = CONV(x) row by row into storage; chain B fetches m row
// by row into y = CONV(m, stride 2). Against CONV_2D twice on whole tensors.
TF_LITE_MICRO_TEST(RowSpillThenRowFetchMatchesTwoConvolutions) {
  using namespace tflite::testing;
  Weights& w = W();
  static int8_t m[kH * kW * kM], want[kYH * kYW * kY], got[kYH * kYW * kY];
  int y_dims[] = {4, 1, kYH, kYW, kY};
  ConvTensors c1(w.f1, w.b1, kM, kC, kXScale);
  ConvTensors c2(w.f2, w.b2, kY, kM, kMScale);

  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, ConvXIntoM(c1, m));
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, ConvMIntoY(c2, m, want));

  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  // Chain A: inputs [x, f1, b1], no outputs, body [m] (local 3): spilled, a ring of one row.
  const std::vector<uint8_t> a =
      ChainOptions(kW * kM, 1, 0, {ConvStage({0, 1, 2}, 3, 1, 1)},
                   {{"m", {1, kH, kW, kM}, kMScale, kMZp}}, {{3, kSlot}}, {}, {{3, 1}});
  TfLiteTensor ta[] = {XTensor(), c1.filter, c1.bias};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunChain(&rt, ta, 3, {0, 1, 2}, {}, a));
  TF_LITE_MICRO_EXPECT(rt.spill->slot(kSlot)->live);
  TF_LITE_MICRO_EXPECT_EQ(1u, static_cast<unsigned>(rt.stats.spills));

  // Chain B: inputs [f2, b2], outputs [y] (local 2), body [m] (local 3) fetched, a ring of three
  // rows.
  std::memset(got, 0x5a, sizeof(got));
  const std::vector<uint8_t> b =
      ChainOptions(3 * kW * kM, 0, 1, {ConvStage({3, 0, 1}, 2, 2, 0)},
                   {{"m", {1, kH, kW, kM}, kMScale, kMZp}}, {}, {{3, kSlot}}, {{3, 3}});
  TfLiteTensor tb[] = {c2.filter, c2.bias,
                       CreateQuantizedTensor(got, IntArrayFromInts(y_dims), kYScale, kYZp)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunChain(&rt, tb, 3, {0, 1}, {2}, b));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(want, got, sizeof(want)));
  TF_LITE_MICRO_EXPECT_EQ(static_cast<unsigned>(kH),
                          static_cast<unsigned>(rt.stats.fetches));  // each row once

  // The same chain with a ring one row short is refused while it runs, not miscomputed.
  const std::vector<uint8_t> short_ring =
      ChainOptions(2 * kW * kM, 0, 1, {ConvStage({3, 0, 1}, 2, 2, 0)},
                   {{"m", {1, kH, kW, kM}, kMScale, kMZp}}, {}, {{3, kSlot}}, {{3, 2}});
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, RunChain(&rt, tb, 3, {0, 1}, {2}, short_ring));
}

// One chain: p = MAX_POOL(CONV(x)) with the convolution's rows in a ring of two.
TF_LITE_MICRO_TEST(ConvolutionIntoMaxPoolThroughARingOfTwoRows) {
  using namespace tflite::testing;
  Weights& w = W();
  static int8_t m[kH * kW * kM];
  ConvTensors c1(w.f1, w.b1, kM, kC, kXScale);
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, ConvXIntoM(c1, m));
  TfLitePoolParams pool = {kTfLitePaddingValid, 2, 2, 2, 2, kTfLiteActNone, {}};
  TF_LITE_MICRO_EXPECT(TwoStagesMatchTflm(
      tflite::Register_MAX_POOL_2D(), &pool, m, kM, c1.filter, c1.bias,
      {ConvStage({0, 1, 2}, 4, 1, 1), PoolStage("MAX_POOL_2D", 4, 3, 1, 2, 2)}, kH / 2, kW / 2, 2));
}

// One chain: a = AVERAGE_POOL(DEPTHWISE_CONV(x), stride 2 SAME padding) through a ring of the
// depthwise rows.
TF_LITE_MICRO_TEST(DepthwiseIntoAveragePool) {
  using namespace tflite::testing;
  static int8_t m[kH * kW * kD];
  static DepthwiseTensors dw(kXScale);
  int m_dims[] = {4, 1, kH, kW, kD};
  TfLiteDepthwiseConvParams dp = {kTfLitePaddingSame, 1, 1, kMult, kTfLiteActRelu6, 1, 1};
  TfLiteTensor r1[] = {XTensor(), dw.filter, dw.bias,
                       CreateQuantizedTensor(m, IntArrayFromInts(m_dims), kMScale, kMZp)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunBuiltin(tflite::Register_DEPTHWISE_CONV_2D(), r1, 3, &dp));
  TfLitePoolParams pool = {kTfLitePaddingSame, 2, 2, 3, 3, kTfLiteActNone, {}};
  const Stage depthwise = {
      "DEPTHWISE_CONV_2D", {0, 1, 2}, 4, "DepthwiseConv2DOptions", [](flexbuffers::Builder& f) {
        ConvFields(f, 1, 3);  // RELU6
        f.Int("depthMultiplier", kMult);
      }};
  // The 3x3 stride-2 pool reads rows 2y-1..2y+1 (SAME), so m's ring holds 3 rows.
  TF_LITE_MICRO_EXPECT(TwoStagesMatchTflm(
      tflite::Register_AVERAGE_POOL_2D(), &pool, m, kD, dw.filter, dw.bias,
      {depthwise, PoolStage("AVERAGE_POOL_2D", 4, 3, 0, 2, 3)}, (kH + 1) / 2, (kW + 1) / 2, 3));
}

// DEQUANTIZE as a stage: its rows against TFLM's DEQUANTIZE run whole; then the same stage
// writing a float32 body tensor (a ring of one row) that a float32 RELU stage reads, against TFLM's
// DEQUANTIZE and RELU run whole (float32 stages read a DEQUANTIZE's rows inside the chain).
TF_LITE_MICRO_TEST(DequantizeRowsFeedFloatStages) {
  using namespace tflite::testing;
  static float want[kH * kW * kC], got[kH * kW * kC], relu[kH * kW * kC];
  int x_dims[] = {4, 1, kH, kW, kC};
  TfLiteTensor r[] = {XTensor(), CreateTensor(want, IntArrayFromInts(x_dims))};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunBuiltin(tflite::Register_DEQUANTIZE(), r, 1, nullptr));

  std::memset(got, 0x5a, sizeof(got));
  auto none = [](flexbuffers::Builder&) {};
  const std::vector<uint8_t> o =
      ChainOptions(0, 0, 0, {{"DEQUANTIZE", {0}, 1, "", none}}, {}, {}, {}, {});
  TfLiteTensor t[] = {XTensor(), CreateTensor(got, IntArrayFromInts(x_dims))};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunChain(nullptr, t, 2, {0}, {1}, o));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(want, got, sizeof(want)));

  TfLiteTensor rr[] = {CreateTensor(want, IntArrayFromInts(x_dims)),
                       CreateTensor(relu, IntArrayFromInts(x_dims))};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunBuiltin(tflite::Register_RELU(), rr, 1, nullptr));
  // inputs [x], outputs [y] (local 1), body [d] (local 2, float32, a ring of one row).
  std::memset(got, 0x5a, sizeof(got));
  const std::vector<uint8_t> chained = ChainOptions(
      kW * kC * 4, 0, 0, {{"DEQUANTIZE", {0}, 2, "", none}, {"RELU", {2}, 1, "", none}},
      {{"d", {1, kH, kW, kC}, 1.0f, 0}}, {}, {}, {{2, 1}}, 0, "FLOAT32");
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunChain(nullptr, t, 2, {0}, {1}, chained));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(relu, got, sizeof(relu)));
}

// A float32 CONV_2D stage (a ring of one row into a float32 RELU6 stage) against TFLM's float
// CONV_2D and RELU6 run whole; the same chain with an int8 filter is refused in Prepare.
TF_LITE_MICRO_TEST(FloatConvStagesMatchTflmAndRefuseInt8Filters) {
  using namespace tflite::testing;
  Weights& w = W();
  static float x[kH * kW * kC], f[kM * kK * kK * kC], bias[kM];
  static float conv[kH * kW * kM], want[kH * kW * kM], got[kH * kW * kM];
  for (int i = 0; i < kH * kW * kC; ++i) x[i] = static_cast<float>(i % 17 - 8) * 0.37f;
  for (int i = 0; i < kM * kK * kK * kC; ++i) f[i] = static_cast<float>((i * 7) % 13 - 6) * 0.11f;
  for (int i = 0; i < kM; ++i) bias[i] = 0.05f * static_cast<float>(i) - 0.1f;
  int x_dims[] = {4, 1, kH, kW, kC};
  int f_dims[] = {4, kM, kK, kK, kC};
  int b_dims[] = {1, kM};
  int y_dims[] = {4, 1, kH, kW, kM};
  TfLiteConvParams p = {kTfLitePaddingSame, 1, 1, kTfLiteActRelu, 1, 1, kTfLiteNoType};
  TfLiteTensor r[] = {
      CreateTensor(x, IntArrayFromInts(x_dims)), CreateTensor(f, IntArrayFromInts(f_dims)),
      CreateTensor(bias, IntArrayFromInts(b_dims)), CreateTensor(conv, IntArrayFromInts(y_dims))};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunBuiltin(tflite::Register_CONV_2D(), r, 3, &p));
  TfLiteTensor rr[] = {CreateTensor(conv, IntArrayFromInts(y_dims)),
                       CreateTensor(want, IntArrayFromInts(y_dims))};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunBuiltin(tflite::Register_RELU6(), rr, 1, nullptr));

  // inputs [x, f, bias], outputs [y] (local 3), body [c] (local 4, float32, a ring of one row).
  std::memset(got, 0x5a, sizeof(got));
  auto none = [](flexbuffers::Builder&) {};
  const std::vector<uint8_t> o =
      ChainOptions(kW * kM * 4, 0, 0, {ConvStage({0, 1, 2}, 4, 1, 1), {"RELU6", {4}, 3, "", none}},
                   {{"c", {1, kH, kW, kM}, 1.0f, 0}}, {}, {}, {{4, 1}}, 0, "FLOAT32");
  TfLiteTensor t[] = {
      CreateTensor(x, IntArrayFromInts(x_dims)), CreateTensor(f, IntArrayFromInts(f_dims)),
      CreateTensor(bias, IntArrayFromInts(b_dims)), CreateTensor(got, IntArrayFromInts(y_dims))};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunChain(nullptr, t, 4, {0, 1, 2}, {3}, o));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(want, got, sizeof(want)));

  ConvTensors c1(w.f1, w.b1, kM, kC, kXScale);
  TfLiteTensor bad[] = {CreateTensor(x, IntArrayFromInts(x_dims)), c1.filter, c1.bias,
                        CreateTensor(got, IntArrayFromInts(y_dims))};
  TF_LITE_MICRO_EXPECT_NE(kTfLiteOk, RunChain(nullptr, bad, 4, {0, 1, 2}, {3}, o));
}

// ELU as stages: every int8 input value (16 rows of 16) through two ELUs of different
// quantizations, the first's rows in a ring of one row, against TFLM's ELU run twice whole; each
// stage's lookup table is filled in Prepare from its own quantization.
TF_LITE_MICRO_TEST(EluStagesOverEveryInt8Value) {
  using namespace tflite::testing;
  constexpr int kE = 16;
  constexpr float kEScale = 0.03f, kZScale = 0.02f;
  constexpr int kEZp = -90, kZZp = 40;
  static int8_t x[kE * kE], e[kE * kE], want[kE * kE], got[kE * kE];
  for (int i = 0; i < kE * kE; ++i) x[i] = static_cast<int8_t>(i - 128);
  int dims[] = {4, 1, kE, kE, 1};
  TfLiteTensor r1[] = {CreateQuantizedTensor(x, IntArrayFromInts(dims), kXScale, kXZp),
                       CreateQuantizedTensor(e, IntArrayFromInts(dims), kEScale, kEZp)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunBuiltin(tflite::Register_ELU(), r1, 1, nullptr));
  TfLiteTensor r2[] = {CreateQuantizedTensor(e, IntArrayFromInts(dims), kEScale, kEZp),
                       CreateQuantizedTensor(want, IntArrayFromInts(dims), kZScale, kZZp)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunBuiltin(tflite::Register_ELU(), r2, 1, nullptr));

  std::memset(got, 0x5a, sizeof(got));
  auto none = [](flexbuffers::Builder&) {};
  // inputs [x], outputs [y] (local 1), body [e] (local 2, a ring of one row).
  const std::vector<uint8_t> o =
      ChainOptions(kE, 0, 0, {{"ELU", {0}, 2, "", none}, {"ELU", {2}, 1, "", none}},
                   {{"e", {1, kE, kE, 1}, kEScale, kEZp}}, {}, {}, {{2, 1}});
  TfLiteTensor t[] = {CreateQuantizedTensor(x, IntArrayFromInts(dims), kXScale, kXZp),
                      CreateQuantizedTensor(got, IntArrayFromInts(dims), kZScale, kZZp)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunChain(nullptr, t, 2, {0}, {1}, o));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(want, got, sizeof(want)));
}

// TRANSPOSE_CONV stages: every row that reads a filter row goes through CMSIS-NN in a CMSIS-NN
// build when op_scratch holds CMSIS-NN's accumulator row ((in_w - 1) * stride_w + max(kw, stride_w)
// columns), and keeps the reference arithmetic otherwise; the bytes are TFLM's either way.
TF_LITE_MICRO_TEST(TransposeConvStageAgainstTransposeConv) {
  using namespace tflite::testing;
  const bool cmsis = tflite::tinyseg_ops::StreamStagesUseCmsisNn();
  constexpr int kRowBytes = 4 * kM;  // one int32 output column
  // stride 2 = kernel 2, SAME: 10 output columns, as many in the row; all 6 rows read a filter row
  TF_LITE_MICRO_EXPECT_EQ(cmsis ? 6 : 0, TransposeConvRows(kTfLitePaddingSame, 2, 2, 2, 2,
                                                           kTfLiteActNone, 10 * kRowBytes));
  // stride 3 > kernel 2 (ReLU): rows 2, 5, 8 hold the bias only (reference); 15 columns
  TF_LITE_MICRO_EXPECT_EQ(cmsis ? 6 : 0, TransposeConvRows(kTfLitePaddingSame, 2, 2, 3, 3,
                                                           kTfLiteActRelu, 15 * kRowBytes));
  // stride 2 < kernel 3 (Keras' Conv2DTranspose(3, strides=2), SAME): each output row from a band
  // of the input rows that reach it (two for the even rows), each band row through CMSIS-NN's row
  // function; 11 columns in its row
  TF_LITE_MICRO_EXPECT_EQ(cmsis ? 6 : 0, TransposeConvRows(kTfLitePaddingSame, 3, 3, 2, 2,
                                                           kTfLiteActNone, 11 * kRowBytes));
  // VALID, stride 2 > kernel width 1: 9 output columns, CMSIS-NN's row has 10. (Not a stride
  // width above the stride height: arm_transpose_conv_s8_get_buffer_size sizes the row with the
  // stride height, so TFLM's CMSIS-NN kernel, run whole for the expected bytes, overruns it.)
  TF_LITE_MICRO_EXPECT_EQ(cmsis ? 6 : 0, TransposeConvRows(kTfLitePaddingValid, 2, 1, 2, 2,
                                                           kTfLiteActNone, 10 * kRowBytes));
  // ... with a member scratch of the 9 output columns only: the reference arithmetic
  TF_LITE_MICRO_EXPECT_EQ(
      0, TransposeConvRows(kTfLitePaddingValid, 2, 1, 2, 2, kTfLiteActNone, 9 * kRowBytes));
}

// PAD as a stage, of height and width (2 rows above, 1 below, 1 column left, 2 right), with
// channels before and after the input's too, and of channels only (as MediaPipe's residual blocks
// pad a skip): its rows against TFLM's PAD run whole; in a CMSIS-NN build every row (the padding
// rows too) goes through arm_pad_s8, as TFLM's CMSIS-NN PAD does for the whole tensor.
TF_LITE_MICRO_TEST(PadStageAgainstPad) {
  using namespace tflite::testing;
  const int32_t rows = tflite::tinyseg_ops::StreamStagesUseCmsisNn() ? 1 : 0;
  const int32_t spatial[8] = {0, 0, 2, 1, 1, 2, 0, 0};
  const int32_t both[8] = {0, 0, 2, 1, 1, 2, 3, 2};
  const int32_t channels[8] = {0, 0, 0, 0, 0, 0, 0, 5};
  TF_LITE_MICRO_EXPECT_EQ(rows * (kH + 3), PadRows(spatial));
  TF_LITE_MICRO_EXPECT_EQ(rows * (kH + 3), PadRows(both));
  TF_LITE_MICRO_EXPECT_EQ(rows * kH, PadRows(channels));
}

// The 16x8 CONV_2D (int64 and int32 bias), DEPTHWISE_CONV_2D and pool stages, stride 1 and 2 with
// SAME padding (the first and last rows' windows take padding rows), against TFLM's kernels run
// whole; in a CMSIS-NN build every row goes through the s16 function TFLM's CMSIS-NN kernel calls
// (the convolution and the average pool with their buffer in op_scratch), and a member scratch too
// small for the convolution's buffer keeps the reference arithmetic: the bytes are TFLM's either
// way.
TF_LITE_MICRO_TEST(Int16StagesAgainstTflm) {
  using namespace tflite::testing;
  const bool cmsis = tflite::tinyseg_ops::StreamInt16StagesUseCmsisNn();
  constexpr int kConvBuffer = 2 * kC * kK * kK * 2;  // arm_convolve_s16's: two int16 columns
  constexpr int kPoolBuffer = kC * 4;  // arm_avgpool_s16's with DSP: an int32 per channel
  for (int s = 1; s <= 2; ++s) {
    const int rows = cmsis ? (kH + s - 1) / s : 0;
    TF_LITE_MICRO_EXPECT_EQ(rows, Int16StageRows<int64_t>("CONV_2D", s, kConvBuffer));
    TF_LITE_MICRO_EXPECT_EQ(rows, Int16StageRows<int32_t>("CONV_2D", s, kConvBuffer));
    TF_LITE_MICRO_EXPECT_EQ(rows, Int16StageRows<int64_t>("DEPTHWISE_CONV_2D", s, 0));
    TF_LITE_MICRO_EXPECT_EQ(rows, Int16StageRows<int64_t>("MAX_POOL_2D", s, 0));
    TF_LITE_MICRO_EXPECT_EQ(rows, Int16StageRows<int64_t>("AVERAGE_POOL_2D", s, kPoolBuffer));
  }
  TF_LITE_MICRO_EXPECT_EQ(0, Int16StageRows<int64_t>("CONV_2D", 2, kConvBuffer - 2));
}

// The float32 RESIZE_BILINEAR row rule (BilinearFloatRule, Prepare's) holds both rows TFLM's
// float kernel reads, as this build's float arithmetic computes them (ComputeInterpolationValues:
// on the Cortex-M7 too), for every output row of 40 x 60 sizes under each flag setting; and it
// gives the rules customops.bilinear_float_row_rule gives (values from the Python side).
TF_LITE_MICRO_TEST(FloatBilinearRuleHoldsTheRowsTflmReads) {
  using tflite::tinyseg_stream::BilinearFloatRule;
  using tflite::tinyseg_stream::RowRule;
  const bool flags[3][2] = {{false, false}, {false, true}, {true, false}};
  int32_t checked = 0;
  for (const auto& f : flags) {
    for (int32_t in_h = 1; in_h <= 40; ++in_h) {
      for (int32_t out_h = 1; out_h <= 60; ++out_h) {
        RowRule rule = {};
        if (!BilinearFloatRule(in_h, out_h, f[0], f[1], &rule)) continue;
        float scale = static_cast<float>(in_h) / out_h;
        if (f[0] && out_h > 1) scale = static_cast<float>(in_h - 1) / (out_h - 1);
        const ::tinyseg::RowMap m = {in_h,        rule.num,    rule.den,
                                     rule.offset, rule.before, rule.after};
        for (int32_t y = 0; y < out_h; ++y) {
          float pos = 0.0f;
          int32_t y0 = 0, y1 = 0, lo = 0, hi = 0;
          tflite::reference_ops::ComputeInterpolationValues(static_cast<float>(y), scale, f[1],
                                                            in_h, &pos, &y0, &y1);
          ::tinyseg::RowWindow(m, y, &lo, &hi);
          TF_LITE_MICRO_EXPECT(lo <= y0 && y0 <= y1 && y1 <= hi);
          ++checked;
        }
      }
    }
  }
  TF_LITE_MICRO_EXPECT_GT(checked, 3 * 40 * 30);
  struct Case {
    int32_t in_h, out_h;
    bool align, half;
    int32_t num, den, offset, before, after;
  };
  const Case cases[] = {
      {4, 8, false, false, 8, 16, 0, 0, 1},   {4, 8, false, true, 8, 16, -4, 0, 1},
      {5, 35, false, false, 10, 70, 0, 1, 1}, {7, 23, false, true, 14, 46, -16, 1, 1},
      {4, 38, true, false, 6, 74, 0, 1, 1},   {33, 257, true, false, 64, 512, 0, 0, 1},
      {12, 5, false, true, 24, 10, 7, 0, 1}};
  for (const Case& c : cases) {
    RowRule r = {};
    TF_LITE_MICRO_EXPECT(BilinearFloatRule(c.in_h, c.out_h, c.align, c.half, &r));
    TF_LITE_MICRO_EXPECT(r.num == c.num && r.den == c.den && r.offset == c.offset &&
                         r.before == c.before && r.after == c.after);
  }
  RowRule r = {};
  TF_LITE_MICRO_EXPECT(!BilinearFloatRule(1, 9, true, false, &r));  // align onto one row
  TF_LITE_MICRO_EXPECT(!BilinearFloatRule(4, 8, true, true, &r));   // both flags
  TF_LITE_MICRO_EXPECT(!BilinearFloatRule(4, (1 << 15) + 1, false, false, &r));
}

// Camera rows in, mask rows out: y = CONV(CONV(x), stride 2) with x read row by row from the
// Runtime's row source 0 and y handed row by row to its row sink 1; the node's one input and one
// output are tokens. Against CONV_2D twice on whole tensors; each row asked and handed once, in
// order; a failing source, a short or long row and a failing sink fail Invoke; a missing callback,
// a missing Runtime and malformed entries are refused in Prepare.
TF_LITE_MICRO_TEST(RowSourceAndSinkMatchTwoConvolutions) {
  using namespace tflite::testing;
  Weights& w = W();
  static int8_t m[kH * kW * kM], want[kYH * kYW * kY];
  ConvTensors c1(w.f1, w.b1, kM, kC, kXScale);
  ConvTensors c2(w.f2, w.b2, kY, kM, kMScale);
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, ConvXIntoM(c1, m));
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, ConvMIntoY(c2, m, want));

  static int8_t token_in[1] = {7}, token_out[4];
  int token_dims[] = {1, 1};
  int token_out_dims[] = {2, 2, 2};
  TfLiteTensor t[] = {c1.filter,
                      c1.bias,
                      c2.filter,
                      c2.bias,
                      CreateQuantizedTensor(token_in, IntArrayFromInts(token_dims), 1.0f, 0),
                      CreateQuantizedTensor(token_out, IntArrayFromInts(token_out_dims), 1.0f, 0)};
  const std::vector<int> ins = {0, 1, 2, 3, 4}, outs = {5};
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  Camera camera;
  camera.x = w.x;
  static Display display;
  rt.sources[0] = {Camera::Read, &camera};
  rt.sinks[1] = {Display::Write, &display};
  std::memset(display.y, 0x5a, sizeof(display.y));
  std::memset(token_out, 0x5a, sizeof(token_out));
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunChain(&rt, t, 6, ins, outs, RowIoChain()));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(want, display.y, sizeof(want)));
  TF_LITE_MICRO_EXPECT_EQ(static_cast<size_t>(kH), camera.calls.size());
  for (size_t r = 0; r < camera.calls.size(); ++r) {
    TF_LITE_MICRO_EXPECT_EQ(static_cast<int>(r), camera.calls[r]);  // input 0, rows in order
  }
  TF_LITE_MICRO_EXPECT_EQ(static_cast<size_t>(kYH), display.calls.size());
  for (size_t r = 0; r < display.calls.size(); ++r) {
    TF_LITE_MICRO_EXPECT_EQ(1000 + static_cast<int>(r), display.calls[r]);  // output 1, in order
  }
  TF_LITE_MICRO_EXPECT_EQ(0u, static_cast<unsigned>(camera.bad_capacity + display.bad_bytes));
  TF_LITE_MICRO_EXPECT_EQ(static_cast<unsigned>(kH), static_cast<unsigned>(rt.stats.source_rows));
  TF_LITE_MICRO_EXPECT_EQ(static_cast<unsigned>(kYH), static_cast<unsigned>(rt.stats.sink_rows));
  for (int8_t b : token_out) TF_LITE_MICRO_EXPECT_EQ(0, static_cast<int>(b));

  // A failing source, a short row, a long claim and a failing sink: a status from Invoke.
  camera.fail_row = 4;
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, RunChain(&rt, t, 6, ins, outs, RowIoChain()));
  camera.fail_row = -1;
  camera.skew = -1;
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, RunChain(&rt, t, 6, ins, outs, RowIoChain()));
  camera.skew = 1;
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, RunChain(&rt, t, 6, ins, outs, RowIoChain()));
  camera.skew = 0;
  display.fail_row = 2;
  const size_t before = display.calls.size();
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, RunChain(&rt, t, 6, ins, outs, RowIoChain()));
  TF_LITE_MICRO_EXPECT_EQ(static_cast<size_t>(3), display.calls.size() - before);  // stops there
  display.fail_row = -1;
  TF_LITE_MICRO_EXPECT_EQ(0u, static_cast<unsigned>(camera.bad_capacity + display.bad_bytes));
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, PrepareChain(&rt, t, 6, ins, outs, RowIoChain()));

  // Refused in Prepare: no Runtime, a null source or sink, and malformed entries.
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, PrepareChain(nullptr, t, 6, ins, outs, RowIoChain()));
  rt.sinks[1].write = nullptr;
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, PrepareChain(&rt, t, 6, ins, outs, RowIoChain()));
  rt.sinks[1].write = Display::Write;
  rt.sources[0].read = nullptr;
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, PrepareChain(&rt, t, 6, ins, outs, RowIoChain()));
  rt.sources[0].read = Camera::Read;
  for (int k = 0; k < ::tinyseg::kMaxRowStreams; ++k) {
    rt.sources[k] = {Camera::Read, &camera};
    rt.sinks[k] = {Display::Write, &display};
  }
  const std::function<void(flexbuffers::Builder&)> hostile[] = {
      RowIo({{6, 8}}, {{8, 1}}, {4, 5}),          // a source index past kMaxRowStreams
      RowIo({{6, 0}}, {{8, -1}}, {4, 5}),         // a negative sink index
      RowIo({{7, 0}}, {{8, 1}}, {4, 5}),          // a source a stage writes
      RowIo({{6, 0}, {7, 0}}, {{8, 1}}, {4, 5}),  // one source index twice (on a made tensor)
      RowIo({{6, 0}}, {{8, 1}, {7, 1}}, {4, 5}),  // one sink index twice
      RowIo({{6, 0}}, {{6, 1}}, {4, 5}),          // a tensor sourced and sunk
      RowIo({{6, 0}}, {{8, 1}}, {4, 6}),          // a token that is a body tensor
      RowIo({{6, 0}}, {{8, 1}}, {4, 5, 4}),       // a token twice
      RowIo({{6, 0}}, {{8, 1}}, {4}),             // an output no stage writes, not a token
      RowIo({{6, 0}}, {{8, 1}}, {3, 4, 5}),       // a stage reads a token
      RowIo({{6, 0}}, {{8, 1}}, {0, 5}),          // a token before the node's other inputs
  };
  for (const auto& edit : hostile) {
    TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, PrepareChain(&rt, t, 6, ins, outs, RowIoChain(edit)));
  }
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, PrepareChain(&rt, t, 6, ins, outs, RowIoChain()));

  // A tensor both spilled and sunk.
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError,
                          PrepareChain(&rt, t, 6, ins, outs, RowIoChain(nullptr, {{8, kSlot}})));
}

TF_LITE_MICRO_TESTS_END
