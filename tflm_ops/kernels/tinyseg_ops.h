// TinySeg's custom operators for TFLM (docs/custom_ops.md)
// and the one call that adds them to an op resolver.
//
//   tflite::MicroMutableOpResolver<N> resolver;   // N counts these 4 too
//   ... resolver.AddConv2D(); ...
//   tflite::AddTinySegOps(resolver);
//   tflite::MicroInterpreter interpreter(model, resolver, arena, arena_bytes);
//   tinyseg::Runtime runtime;  runtime.spill = &spill_manager;
//   tinyseg::AttachRuntime(interpreter, runtime);   // tinyseg_runtime.h
//   interpreter.AllocateTensors(); interpreter.Invoke();
//
// Marked TRANSPOSE_CONVs need no registration: the patched builtin kernel
// reads the marker itself (tinyseg_transpose_conv.h).
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_OPS_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_OPS_H_

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_contract.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_tflm_compat.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"

namespace tflite {

// The contract's version and how many resolver entries AddTinySegOps takes; the operator names
// (OperatorCode.custom_code) are the generated contract's (tinyseg_contract.h) only.
constexpr int kTinySegContractVersion = tinyseg_ops::contract::kVersion;
constexpr unsigned int kTinySegOpCount = tinyseg_ops::contract::kOpCount;

TFLMRegistration Register_SPILL();
TFLMRegistration Register_FETCHING();
TFLMRegistration Register_FETCHING_CONV_2D();
TFLMRegistration Register_STREAM_CHAIN();

// Adds Spill, Fetching, FetchingConv2D and StreamChain (AddCustom copies each
// registration, so the temporaries below are enough). They are not const:
// AddCustom takes `const TFLMRegistration*` upstream but a non-const
// `TfLiteRegistration*` in TFLM of 2023 (Arduino library, Edge Impulse), and a
// non-const pointer converts to both.
template <unsigned int tOpCount>
TfLiteStatus AddTinySegOps(MicroMutableOpResolver<tOpCount>& resolver) {
  TFLMRegistration spill = Register_SPILL();
  TFLMRegistration fetching = Register_FETCHING();
  TFLMRegistration fetching_conv = Register_FETCHING_CONV_2D();
  TFLMRegistration stream_chain = Register_STREAM_CHAIN();
  TF_LITE_ENSURE_STATUS(resolver.AddCustom(tinyseg_ops::contract::kSpill, &spill));
  TF_LITE_ENSURE_STATUS(resolver.AddCustom(tinyseg_ops::contract::kFetching, &fetching));
  TF_LITE_ENSURE_STATUS(resolver.AddCustom(tinyseg_ops::contract::kFetchingConv2D, &fetching_conv));
  TF_LITE_ENSURE_STATUS(resolver.AddCustom(tinyseg_ops::contract::kStreamChain, &stream_chain));
  return kTfLiteOk;
}

}  // namespace tflite

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_OPS_H_
