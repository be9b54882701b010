// TinySeg for TFLM, as a library beside the TFLM library (`tinyseg tflm
// package`, docs/runtime.md "Installing"). A sketch or application includes
// this header only:
//
//   tflite::MicroMutableOpResolver<N> ops;   // N counts tinyseg::kOpCount too
//   ops.AddConv2D(); ...                      // not AddTransposeConv: AddOps adds it
//   tinyseg::AddOps(ops);
//   tinyseg::OpResolver<N> resolver(ops);     // TRANSPOSE_CONV -> TinySeg's
//   tflite::MicroInterpreter interpreter(model, resolver, arena, arena_bytes);
//   tinyseg::Runtime runtime;  runtime.spill = &spill_manager;
//   tinyseg::AttachRuntime(interpreter, runtime);
//
// Where MicroMutableOpResolver::AddTransposeConv takes a registration (TFLM
// from 2023-05 on: the ESP-IDF component, upstream), AddOps passes TinySeg's
// to it and `ops` can go to the interpreter as it is. Where it takes none
// (TFLM of 2023-02: the Arduino_TensorFlowLite library), AddOps adds TFLM's
// own and only tinyseg::OpResolver, which answers TRANSPOSE_CONV with
// TinySeg's registration and everything else from `ops`, gives the narrowed
// scratch. Using OpResolver always works with both.
#ifndef TINYSEG_TINYSEG_H_
#define TINYSEG_TINYSEG_H_

#include <utility>

#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_runtime.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_transpose_conv_op.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/micro/micro_op_resolver.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/spill_manager.h"

namespace tinyseg {

// Resolver entries AddOps takes: the four custom operators and TRANSPOSE_CONV.
constexpr unsigned int kOpCount = tflite::kTinySegOpCount + 1;

namespace detail {

// AddTransposeConv(const TFLMRegistration&) where the resolver has it.
template <typename Resolver>
auto AddTransposeConv(Resolver& ops, int)
    -> decltype(ops.AddTransposeConv(std::declval<const TFLMRegistration&>())) {
  return ops.AddTransposeConv(tflite::Register_TINYSEG_TRANSPOSE_CONV());
}

template <typename Resolver>
TfLiteStatus AddTransposeConv(Resolver& ops, long) {
  return ops.AddTransposeConv();
}

}  // namespace detail

// Adds Spill, Fetching, FetchingConv2D, StreamChain and TRANSPOSE_CONV.
template <unsigned int tOpCount>
TfLiteStatus AddOps(tflite::MicroMutableOpResolver<tOpCount>& ops) {
  TF_LITE_ENSURE_STATUS(tflite::AddTinySegOps(ops));
  return detail::AddTransposeConv(ops, 0);
}

// An op resolver that answers TRANSPOSE_CONV with TinySeg's registration and
// every other operator from `ops` (which must outlive it, like the interpreter).
template <unsigned int tOpCount>
class OpResolver : public tflite::MicroOpResolver {
 public:
  using tflite::MicroOpResolver::FindOp;  // TFLM of 2023-02 also has FindOp(op, version)

  explicit OpResolver(const tflite::MicroMutableOpResolver<tOpCount>& ops)
      : ops_(ops), transpose_conv_(tflite::Register_TINYSEG_TRANSPOSE_CONV()) {
    transpose_conv_.builtin_code = tflite::BuiltinOperator_TRANSPOSE_CONV;
  }

  const TFLMRegistration* FindOp(tflite::BuiltinOperator op) const override {
    if (op == tflite::BuiltinOperator_TRANSPOSE_CONV && ops_.FindOp(op) != nullptr) {
      return &transpose_conv_;
    }
    return ops_.FindOp(op);
  }

  const TFLMRegistration* FindOp(const char* op) const override { return ops_.FindOp(op); }

  tflite::TfLiteBridgeBuiltinParseFunction GetOpDataParser(
      tflite::BuiltinOperator op) const override {
    return ops_.GetOpDataParser(op);
  }

 private:
  const tflite::MicroMutableOpResolver<tOpCount>& ops_;
  TFLMRegistration transpose_conv_;
};

}  // namespace tinyseg

#endif  // TINYSEG_TINYSEG_H_
