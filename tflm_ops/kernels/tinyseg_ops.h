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

// OperatorCode.custom_code of each operator and the contract's version, from the generated
// contract (tinyseg_contract.h).
constexpr const char* kTinySegSpillName = tinyseg_ops::contract::kSpill;
constexpr const char* kTinySegFetchingName = tinyseg_ops::contract::kFetching;
constexpr const char* kTinySegFetchingConv2DName = tinyseg_ops::contract::kFetchingConv2D;
constexpr const char* kTinySegStreamChainName = tinyseg_ops::contract::kStreamChain;
constexpr int kTinySegContractVersion = tinyseg_ops::contract::kVersion;
// How many resolver entries AddTinySegOps takes.
constexpr unsigned int kTinySegOpCount = 4;

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
  TF_LITE_ENSURE_STATUS(resolver.AddCustom(kTinySegSpillName, &spill));
  TF_LITE_ENSURE_STATUS(resolver.AddCustom(kTinySegFetchingName, &fetching));
  TF_LITE_ENSURE_STATUS(resolver.AddCustom(kTinySegFetchingConv2DName, &fetching_conv));
  TF_LITE_ENSURE_STATUS(resolver.AddCustom(kTinySegStreamChainName, &stream_chain));
  return kTfLiteOk;
}

}  // namespace tflite

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_OPS_H_
