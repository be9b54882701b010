// TinySeg's TRANSPOSE_CONV registration for the packaged library
// (`tinyseg tflm package`, docs/runtime.md "Installing"): TFLM's own kernel for
// unmarked operators, the narrowed scratch for marked int8 ones.
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_TRANSPOSE_CONV_OP_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_TRANSPOSE_CONV_OP_H_

#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_tflm_compat.h"

namespace tflite {

TFLMRegistration Register_TINYSEG_TRANSPOSE_CONV();

}  // namespace tflite

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_TRANSPOSE_CONV_OP_H_
