// The TFLM API differences between the trees TinySeg installs into
// (`tinyseg tflm install`, docs/runtime.md): upstream tflite-micro from
// mid-2025 on, its Arduino library form (TFLM of 2023-02), the ESP-IDF
// component, Zephyr's module and the Edge Impulse SDK. Everything here is C++14.
//
// - FlexBuffers: upstream and the CMake forks put flatbuffers/include on the
//   include path; the Arduino library has only src/ there, so its copy is
//   reached as third_party/flatbuffers/include/flatbuffers/flexbuffers.h.
// - Registration type: TFLMRegistration (micro_common.h) replaced
//   TfLiteRegistration for micro kernels in 2023; older trees have neither
//   the header nor the name, so the name is given to the old type here.
// - runtime_shape.h is not self-contained in old trees (it uses TFLITE_DCHECK
//   and std::memcpy without including them): compatibility.h and <cstring>
//   come first.
//
// The installer rewrites the quoted include paths below for trees whose
// includes carry a prefix (Edge Impulse: "edge-impulse-sdk/tensorflow/...").
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_TFLM_COMPAT_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_TFLM_COMPAT_H_

#include <cstring>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/compatibility.h"

#if !defined(__has_include)
#error "TinySeg needs a compiler with __has_include (GCC 5+, Clang 3+)"
#endif

#if __has_include("flatbuffers/flexbuffers.h")
#include "flatbuffers/flexbuffers.h"
#elif __has_include("third_party/flatbuffers/include/flatbuffers/flexbuffers.h")
#include "third_party/flatbuffers/include/flatbuffers/flexbuffers.h"
#else
#error "flexbuffers.h not found (flatbuffers/include must be on the include path)"
#endif

#if __has_include("tensorflow/lite/micro/micro_common.h")
#include "tensorflow/lite/micro/micro_common.h"
#else
// TFLM before 2023-05: micro kernels are registered as TfLiteRegistration.
typedef TfLiteRegistration TFLMRegistration;
#endif

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_TFLM_COMPAT_H_
