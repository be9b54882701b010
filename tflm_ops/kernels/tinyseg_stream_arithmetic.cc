// StreamChain's arithmetic family: ADD, SUB and MUL stages (tinyseg_stream_internal.h), int8, with
// the parameters TFLM's own Prepare computes (add_common.cc, sub_common.cc, mul_common.cc) for
// inputs broadcast across width and channels as TFLM's kernels do, along rows only a constant of
// one row or a MUL's one-pixel StreamChain input read whole (ReadWhole: a squeeze-and-excitation
// gate); a constant of the output's rows (a detection head's grid) gives output row y its row y. A
// row without broadcast goes through CMSIS-NN's elementwise functions in a CMSIS-NN build (ADD,
// MUL); otherwise TFLM's reference arithmetic. Float32 ADD, SUB and MUL: TFLM's reference float
// arithmetic in every build (add.cc's EvalAdd, sub.cc's EvalSub, mul_common.cc's
// EvalMulFloatReference). The int16 (16x8) ADD, SUB and MUL share the int8 code, with TFLM's int16
// parameters (left shift 15, zero points 0 for MUL) and functions, and CMSIS-NN's s16 functions in
// a CMSIS-NN build.
#include <cmath>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/common.h"
#include "tensorflow/lite/kernels/internal/quantization_util.h"
#include "tensorflow/lite/kernels/internal/reference/add.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/add.h"
#include "tensorflow/lite/kernels/internal/reference/integer_ops/mul.h"
#include "tensorflow/lite/kernels/internal/reference/mul.h"
#include "tensorflow/lite/kernels/internal/reference/sub.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_cmsis.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_params.h"
#include "tensorflow/lite/micro/micro_context.h"

namespace tflite {
namespace tinyseg_stream {

bool WholeCandidate(StageOp op, const TensorSlot& x) {
  return op == StageOp::kMul && x.kind == Kind::kNodeInput && !x.constant && x.row_bytes > 0 &&
         (x.type == kTfLiteInt8 || x.type == kTfLiteFloat32 || x.type == kTfLiteInt16) &&
         x.height == 1 && x.width == 1;
}

bool WholeCandidate(StageOp op, const TfLiteTensor& t) {
  return op == StageOp::kMul && !IsConstantTensor(&t) &&
         (t.type == kTfLiteInt8 || t.type == kTfLiteFloat32 || t.type == kTfLiteInt16) &&
         t.dims->size == 4 && t.dims->data[1] == 1 && t.dims->data[2] == 1 && t.dims->data[3] > 0;
}

int32_t WholeIndex(const bool candidate[2], const bool constant[2]) {
  for (int32_t k = 0; k < 2; ++k) {
    if (candidate[k] && !candidate[1 - k] && !constant[1 - k]) return k;
  }
  return -1;
}

bool ReadWhole(const Tables& tab, const StageSlot& g, int32_t k) {
  if (g.op != StageOp::kMul || g.operand_count != 2) return false;
  bool candidate[2] = {false, false};
  bool constant[2] = {true, true};
  for (int32_t j = 0; j < 2; ++j) {
    const int32_t id = tab.operands[g.operand_begin + j];
    if (id < 0) continue;
    candidate[j] = WholeCandidate(g.op, tab.tensor(id));
    constant[j] = tab.tensor(id).constant != 0;
  }
  return WholeIndex(candidate, constant) == k;
}

// Each operand broadcasts to the output: a constant of one row or of the output's rows, or an
// activation of the output's height; width and channels 1 or the output's.
TfLiteStatus CheckOperands(const StageArgs& a, const StageSlot& g, const TensorSlot& out,
                           TfLiteType type) {
  TfLiteContext* context = a.context;
  MicroContext* mc = GetMicroContext(context);
  for (int32_t k = 0; k < 2; ++k) {
    const int32_t id = a.tab->operands[g.operand_begin + k];
    const TensorSlot& x = a.tab->tensor(id);
    int32_t dims[4] = {1, 1, 1, 1};
    if (x.constant || ReadWhole(*a.tab, g, k)) {
      TfLiteTensor* t = mc->AllocateTempInputTensor(a.node, NodeIndex(a.node, *a.d, id));
      TF_LITE_ENSURE(context, t != nullptr);
      const int rank = t->dims->size;
      for (int j = 0; j < rank && rank <= 4; ++j) dims[4 - rank + j] = t->dims->data[j];
      const bool ok = rank <= 4 && t->type == type;
      mc->DeallocateTempTfLiteTensor(t);
      TF_LITE_ENSURE_MSG(context, ok && (dims[1] == 1 || (x.constant && dims[1] == out.height)),
                         "StreamChain: a constant ADD/SUB/MUL operand has one row or the output's "
                         "rows (a MUL's one-pixel input read whole one row), of the output's type");
      TF_LITE_ENSURE_MSG(context, x.constant || (dims[0] == 1 && dims[1] == 1 && dims[2] == 1),
                         "StreamChain: a MUL input read whole is 1 x 1 x 1 x C");
    } else {
      dims[1] = x.height;
      dims[2] = x.width;
      dims[3] = x.channels;
      TF_LITE_ENSURE_MSG(context, dims[1] == out.height,
                         "StreamChain: ADD/SUB/MUL rows do not broadcast");
    }
    TF_LITE_ENSURE_MSG(context,
                       dims[0] == 1 && (dims[2] == 1 || dims[2] == out.width) &&
                           (dims[3] == 1 || dims[3] == out.channels),
                       "StreamChain: ADD/SUB/MUL operands broadcast to the output");
  }
  return kTfLiteOk;
}

namespace {

// Whether TFLM's QuantizeMultiplierSmallerThanOneExp takes `m` (it aborts otherwise): 0 < m < 1,
// and m's 31-bit mantissa does not round up to 1 (which would give a shift of 1).
bool SmallerThanOne(double m) {
  if (!(m > 0.0 && m < 1.0)) return false;
  int exponent = 0;
  const double q = std::frexp(m, &exponent);
  return exponent < 0 || std::round(q * 2147483648.0) < 2147483648.0;
}

}  // namespace

bool AddSubMultipliers(const double (&m)[3], ArithmeticStage& ar) {
  if (!SmallerThanOne(m[0]) || !SmallerThanOne(m[1]) || !SmallerThanOne(m[2])) return false;
  QuantizeMultiplierSmallerThanOneExp(m[0], &ar.input1_multiplier, &ar.input1_shift);
  QuantizeMultiplierSmallerThanOneExp(m[1], &ar.input2_multiplier, &ar.input2_shift);
  QuantizeMultiplierSmallerThanOneExp(m[2], &ar.output_multiplier, &ar.output_shift);
  return true;
}

namespace {

// The multipliers: ADD's as add_common.cc (quotients in double); SUB's as sub_common.cc
// (quotients in float, only then widened to double); MUL's one. `left_shift`: 20 for int8, 15 for
// int16, as add_common.cc and sub_common.cc. False (nothing computed) where TFLM's
// QuantizeMultiplierSmallerThanOneExp would abort.
bool Multipliers(StageOp op, int32_t left_shift, const TensorSlot& in1, const TensorSlot& in2,
                 const TensorSlot& out, ArithmeticStage& ar) {
  if (op == StageOp::kMul) {
    ar.left_shift = 0;
    QuantizeMultiplier(static_cast<double>(in1.scale) * static_cast<double>(in2.scale) /
                           static_cast<double>(out.scale),
                       &ar.output_multiplier, &ar.output_shift);
    return true;
  }
  ar.left_shift = left_shift;
  double m[3];
  if (op == StageOp::kAdd) {
    const double twice_max = 2 * static_cast<double>(in1.scale > in2.scale ? in1.scale : in2.scale);
    m[0] = static_cast<double>(in1.scale) / twice_max;
    m[1] = static_cast<double>(in2.scale) / twice_max;
    m[2] = twice_max / ((1 << ar.left_shift) * static_cast<double>(out.scale));
  } else {
    const float twice_max = 2 * (in1.scale > in2.scale ? in1.scale : in2.scale);
    m[0] = static_cast<double>(in1.scale / twice_max);
    m[1] = static_cast<double>(in2.scale / twice_max);
    m[2] = static_cast<double>(twice_max / ((1 << ar.left_shift) * out.scale));
  }
  return AddSubMultipliers(m, ar);
}

// TFLM's int8 and int16 ADD, SUB and MUL Prepare: the multipliers, the activation's range;
// operands broadcast across width and channels (CheckOperands). An int16 MUL needs zero points 0,
// as mul_common.cc checks.
TfLiteStatus PrepareQuantizedArithmetic(const StageArgs& a, StageSlot& g, TfLiteType type) {
  TfLiteContext* context = a.context;
  const TensorSlot& out = a.tab->tensor(g.output);
  const bool int16 = type == kTfLiteInt16;
  TF_LITE_ENSURE_STATUS(RequireRows(a, out, int16 ? kTfLiteInt16 : kTfLiteInt8));
  ArithmeticStage& ar = g.arith;
  TF_LITE_ENSURE_MSG(context, g.operand_count == 2,
                     "StreamChain: ADD, SUB and MUL take two inputs");
  ar.input2 = a.tab->operands[g.operand_begin + 1];
  TF_LITE_ENSURE_STATUS(CheckOperands(a, g, out, type));
  const TensorSlot& in1 = a.tab->tensor(a.tab->operands[g.operand_begin]);
  const TensorSlot& in2 = a.tab->tensor(ar.input2);
  TF_LITE_ENSURE_MSG(context,
                     !int16 || g.op != StageOp::kMul ||
                         (in1.zero_point == 0 && in2.zero_point == 0 && out.zero_point == 0),
                     "StreamChain: an int16 MUL stage needs zero points 0 (as TFLM's MUL)");
  ar.input1_offset = -in1.zero_point;
  ar.input2_offset = -in2.zero_point;
  ar.output_offset = out.zero_point;
  TF_LITE_ENSURE_MSG(context, Multipliers(g.op, int16 ? 15 : 20, in1, in2, out, ar),
                     TINYSEG_ADD_SUB_SCALES);
  TfLiteTensor out_q = QuantView(out);
  return CalculateActivationRangeQuantized(context, a.f.activation, &out_q, &ar.act_min,
                                           &ar.act_max);
}

}  // namespace

TfLiteStatus PrepareArithmetic(const StageArgs& a, StageSlot& g) {
  return PrepareQuantizedArithmetic(a, g, kTfLiteInt8);
}

TfLiteStatus PrepareArithmeticInt16(const StageArgs& a, StageSlot& g) {
  return PrepareQuantizedArithmetic(a, g, kTfLiteInt16);
}

namespace {

// Row y of a constant of the output's rows (its dims right-aligned to 4, as TFLM broadcasts;
// CheckOperands checked its rank, type and rows): 1 x 1 x W x C. False: the constant has one row.
bool ConstantRow(const TfLiteEvalTensor& t, int32_t y, const uint8_t** data, RuntimeShape* shape) {
  int32_t dims[4] = {1, 1, 1, 1};
  const int rank = t.dims->size < 4 ? t.dims->size : 4;
  for (int j = 0; j < rank; ++j) dims[4 - rank + j] = t.dims->data[j];
  if (dims[1] <= 1) return false;
  const size_t row =
      static_cast<size_t>(dims[2]) * static_cast<size_t>(dims[3]) * contract::ElementBytes(t.type);
  *data = static_cast<const uint8_t*>(t.data.data) + static_cast<size_t>(y) * row;
  const int32_t one_row[4] = {1, 1, dims[2], dims[3]};
  shape->ReplaceWith(4, one_row);
  return true;
}

// Operand k's data and shape for this row: row y of an activation (1 x 1 x W x C) or of a constant
// of the output's rows, or a constant of one row or a MUL's one-pixel gate read whole (ReadWhole:
// one row for all). `*same` stays true while every operand has the output's row shape.
::tinyseg::Status Operand(const EvalState& v, const StageSlot& g, const StageRow& r, int32_t k,
                          const uint8_t** data, RuntimeShape* shape, bool* same) {
  const int32_t id = v.tab.operands[g.operand_begin + k];
  const TensorSlot& x = v.tab.tensor(id);
  if (x.constant || ReadWhole(v.tab, g, k)) {
    const TfLiteEvalTensor* t = micro::GetEvalInput(v.context, v.node, NodeIndex(v.node, *v.d, id));
    *same = false;
    if (x.constant && ConstantRow(*t, r.y, data, shape)) return ::tinyseg::Status::kOk;
    *data = static_cast<const uint8_t*>(t->data.data);
    int32_t dims[4] = {1, 1, 1, 1};
    const int rank = t->dims->size < 4 ? t->dims->size : 4;
    for (int j = 0; j < rank; ++j) dims[j] = t->dims->data[j];
    shape->ReplaceWith(rank, dims);
    return ::tinyseg::Status::kOk;
  }
  TINYSEG_RETURN_IF_ERROR(Band(v, id, r.y, r.y, data));
  const int32_t dims[4] = {1, 1, x.width, x.channels};
  shape->ReplaceWith(4, dims);
  *same = *same && x.width == r.out->width && x.channels == r.out->channels;
  return ::tinyseg::Status::kOk;
}

// Both operands of this row, typed.
template <typename T>
struct Operands {
  const T* data[2] = {nullptr, nullptr};
  RuntimeShape shapes[2];
  bool same = true;
};

template <typename T>
::tinyseg::Status ReadOperands(const EvalState& v, const StageSlot& g, const StageRow& r,
                               Operands<T>* o) {
  for (int32_t k = 0; k < 2; ++k) {
    const uint8_t* bytes = nullptr;
    TINYSEG_RETURN_IF_ERROR(Operand(v, g, r, k, &bytes, &o->shapes[k], &o->same));
    o->data[k] = reinterpret_cast<const T*>(bytes);
  }
  return ::tinyseg::Status::kOk;
}

ArithmeticParams ParamsOf(StageOp op, const ArithmeticStage& ar) {
  ArithmeticParams p = {};
  p.input1_offset = ar.input1_offset;
  p.input2_offset = ar.input2_offset;
  p.output_offset = ar.output_offset;
  p.output_multiplier = ar.output_multiplier;
  p.output_shift = ar.output_shift;
  p.quantized_activation_min = ar.act_min;
  p.quantized_activation_max = ar.act_max;
  if (op != StageOp::kMul) {
    p.left_shift = ar.left_shift;
    p.input1_multiplier = ar.input1_multiplier;
    p.input1_shift = ar.input1_shift;
    p.input2_multiplier = ar.input2_multiplier;
    p.input2_shift = ar.input2_shift;
  }
  return p;
}

// The functions TFLM's kernels call per type: add.cc's int8 case (reference_integer_ops::Add or
// BroadcastAdd4DSlow), its int16 case (reference_ops::Add with general scales, or
// BroadcastAdd4DSlow); CMSIS-NN's elementwise functions in a CMSIS-NN build.
void AddRow(const ArithmeticParams& p, const RuntimeShape& os, const int8_t* a, const int8_t* b,
            int8_t* o) {
  reference_integer_ops::Add(p, os, a, os, b, os, o);
}
void AddRow(const ArithmeticParams& p, const RuntimeShape& os, const int16_t* a, const int16_t* b,
            int16_t* o) {
  reference_ops::Add(p, os, a, os, b, os, o, false);
}
void BroadcastAddRow(const ArithmeticParams& p, const RuntimeShape* s, const int8_t* a,
                     const int8_t* b, const RuntimeShape& os, int8_t* o) {
  reference_integer_ops::BroadcastAdd4DSlow(p, s[0], a, s[1], b, os, o);
}
void BroadcastAddRow(const ArithmeticParams& p, const RuntimeShape* s, const int16_t* a,
                     const int16_t* b, const RuntimeShape& os, int16_t* o) {
  reference_ops::BroadcastAdd4DSlow(p, s[0], a, s[1], b, os, o);
}
bool CmsisRow(StageOp op, const tinyseg_ops::ElementwiseRow& e) {
  return op == StageOp::kAdd ? tinyseg_ops::CmsisAddRow(e) : tinyseg_ops::CmsisMulRow(e);
}
bool CmsisRow(StageOp op, const tinyseg_ops::ElementwiseRowS16& e) {
  return op == StageOp::kAdd ? tinyseg_ops::CmsisAddRowS16(e) : tinyseg_ops::CmsisMulRowS16(e);
}

// add.cc's, sub.cc's (EvalSubQuantized: reference_ops::Sub or BroadcastQuantSubSlow) and
// mul_common.cc's (reference_integer_ops::Mul or BroadcastMul4DSlow) int8 and int16 cases: the
// elementwise function without broadcast, else the broadcasting one; without broadcast ADD and
// MUL through CMSIS-NN in a CMSIS-NN build (TFLM has no CMSIS-NN SUB).
template <typename T>
::tinyseg::Status QuantizedArithmeticRow(const EvalState& v, const StageSlot& g,
                                         const StageRow& r) {
  Operands<T> in;
  TINYSEG_RETURN_IF_ERROR(ReadOperands(v, g, r, &in));
  const T* a = in.data[0];
  const T* b = in.data[1];
  auto* o = reinterpret_cast<T*>(r.dst);
  if (in.same && g.op != StageOp::kSub &&
      OptimizedRow(
          v, CmsisRow(g.op, ElementwiseRowOf(g.arith, a, b, o, r.out->width * r.out->channels)))) {
    return ::tinyseg::Status::kOk;
  }
  const ArithmeticParams p = ParamsOf(g.op, g.arith);
  const RuntimeShape& os = r.out_shape;
  if (g.op == StageOp::kAdd) {
    if (in.same) {
      AddRow(p, os, a, b, o);
    } else {
      BroadcastAddRow(p, in.shapes, a, b, os, o);
    }
  } else if (g.op == StageOp::kSub) {
    if (in.same) {
      reference_ops::Sub(p, os, a, os, b, os, o);
    } else {
      reference_ops::BroadcastQuantSubSlow(p, in.shapes[0], a, in.shapes[1], b, os, o);
    }
  } else if (in.same) {
    reference_integer_ops::Mul(p, os, a, os, b, os, o);
  } else {
    reference_integer_ops::BroadcastMul4DSlow(p, in.shapes[0], a, in.shapes[1], b, os, o);
  }
  return ::tinyseg::Status::kOk;
}

}  // namespace

::tinyseg::Status ArithmeticRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedArithmeticRow<int8_t>(v, g, r);
}

::tinyseg::Status ArithmeticInt16Row(const EvalState& v, const StageSlot& g, const StageRow& r) {
  return QuantizedArithmeticRow<int16_t>(v, g, r);
}

// Float32 ADD, SUB and MUL: the operands' shapes and the activation's range
// (CalculateActivationRange).
TfLiteStatus PrepareArithmeticFloat(const StageArgs& a, StageSlot& g) {
  TfLiteContext* context = a.context;
  const TensorSlot& out = a.tab->tensor(g.output);
  TF_LITE_ENSURE_STATUS(RequireRows(a, out, kTfLiteFloat32));
  TF_LITE_ENSURE_MSG(context, g.operand_count == 2,
                     "StreamChain: ADD, SUB and MUL take two inputs");
  g.arith.input2 = a.tab->operands[g.operand_begin + 1];
  TF_LITE_ENSURE_STATUS(CheckOperands(a, g, out, kTfLiteFloat32));
  CalculateActivationRange(a.f.activation, &g.arith.float_min, &g.arith.float_max);
  return kTfLiteOk;
}

// As TFLM's float kernels: the elementwise function without broadcast, else the broadcasting one
// (each output element is the same one operation and clamp either way).
::tinyseg::Status ArithmeticFloatRow(const EvalState& v, const StageSlot& g, const StageRow& r) {
  Operands<float> in;
  TINYSEG_RETURN_IF_ERROR(ReadOperands(v, g, r, &in));
  const float* a = in.data[0];
  const float* b = in.data[1];
  const bool same = in.same;
  const RuntimeShape* shapes = in.shapes;
  auto* o = reinterpret_cast<float*>(r.dst);
  ArithmeticParams p = {};
  p.float_activation_min = g.arith.float_min;
  p.float_activation_max = g.arith.float_max;
  const RuntimeShape& os = r.out_shape;
  if (g.op == StageOp::kAdd) {
    if (same) {
      reference_ops::Add(p, os, a, os, b, os, o);
    } else {
      reference_ops::BroadcastAdd4DSlow(p, shapes[0], a, shapes[1], b, os, o);
    }
  } else if (g.op == StageOp::kSub) {  // as sub.cc's EvalSub for float32
    if (same) {
      reference_ops::SubWithActivation(p, os, a, os, b, os, o);
    } else {
      reference_ops::BroadcastSubSlow(p, shapes[0], a, shapes[1], b, os, o);
    }
  } else if (same) {
    reference_ops::Mul(p, os, a, os, b, os, o);
  } else {
    reference_ops::BroadcastMul4DSlow(p, shapes[0], a, shapes[1], b, os, o);
  }
  return ::tinyseg::Status::kOk;
}

}  // namespace tinyseg_stream
}  // namespace tflite
