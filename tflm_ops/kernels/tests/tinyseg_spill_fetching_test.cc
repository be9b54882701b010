// Spill and Fetching kernels: round trips through a RAM-backed SpillManager,
// concatenations along every kind of axis with fetched operands anywhere, and
// the failures a model or an application can cause.
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/micro/kernels/kernel_runner.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tests/tinyseg_test_support.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/test_helpers.h"
#include "tensorflow/lite/micro/testing/micro_test.h"

namespace tflite {
namespace testing {
namespace {

using tinyseg_testing::AsChars;
using tinyseg_testing::FetchedSpec;
using tinyseg_testing::Random;

// Runs Spill on `victim` (slot `slot`); returns the kernel's status and, if
// `scratch` is given, the arena scratch buffer the kernel requested.
TfLiteStatus RunSpill(::tinyseg::Runtime* rt, TfLiteTensor victim,
                      const std::vector<uint8_t>& options, uint8_t** scratch = nullptr) {
  TfLiteTensor tensors[] = {victim};
  int inputs_data[] = {1, 0};
  int outputs_data[] = {0};
  const TFLMRegistration reg = Register_SPILL();
  micro::KernelRunner runner(reg, tensors, 1, IntArrayFromInts(inputs_data),
                             IntArrayFromInts(outputs_data), nullptr);
  if (rt != nullptr) runner.GetFakeMicroContext()->set_external_context(rt);
  TF_LITE_ENSURE_STATUS(runner.InitAndPrepare(AsChars(options), options.size()));
  const TfLiteStatus status = runner.Invoke();
  if (scratch != nullptr) {
    *scratch = static_cast<uint8_t*>(runner.GetFakeMicroContext()->GetScratchBuffer(0));
  }
  return status;
}

// Runs Fetching with `in_ram` inputs (tensors[0..n-1]) into tensors[n].
TfLiteStatus RunFetching(::tinyseg::Runtime* rt, TfLiteTensor* tensors, int n_in,
                         const std::vector<uint8_t>& options) {
  int inputs_data[8] = {n_in};
  for (int i = 0; i < n_in; ++i) inputs_data[i + 1] = i;
  int outputs_data[] = {1, n_in};
  const TFLMRegistration reg = Register_FETCHING();
  micro::KernelRunner runner(reg, tensors, n_in + 1, IntArrayFromInts(inputs_data),
                             IntArrayFromInts(outputs_data), nullptr);
  if (rt != nullptr) runner.GetFakeMicroContext()->set_external_context(rt);
  TF_LITE_ENSURE_STATUS(runner.InitAndPrepare(AsChars(options), options.size()));
  return runner.Invoke();
}

// Reference concatenation of byte tensors along `axis`.
void Concat(const std::vector<const uint8_t*>& parts, const std::vector<int>& axis_dims,
            size_t outer, size_t inner_bytes, uint8_t* out) {
  size_t out_run = 0;
  for (int d : axis_dims) out_run += static_cast<size_t>(d) * inner_bytes;
  size_t offset = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const size_t run = static_cast<size_t>(axis_dims[k]) * inner_bytes;
    for (size_t i = 0; i < outer; ++i) {
      std::memcpy(out + i * out_run + offset, parts[k] + i * run, run);
    }
    offset += run;
  }
}

}  // namespace
}  // namespace testing
}  // namespace tflite

TF_LITE_MICRO_TESTS_BEGIN

// A whole tensor spilled and restored: Fetching with one operand and no input.
TF_LITE_MICRO_TEST(SpillThenRestoreInt8) {
  using namespace tflite::testing;
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  static int8_t victim[1 * 10 * 12 * 9];
  static int8_t restored[sizeof(victim)];
  Random rng(7);
  rng.Fill<int8_t>(victim, sizeof(victim), -128, 127, 70, -128);
  int dims[] = {4, 1, 10, 12, 9};
  TfLiteIntArray* shape = IntArrayFromInts(dims);
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunSpill(&rt, CreateQuantizedTensor(victim, shape, 0.1f, -128),
                                              tflite::tinyseg_testing::SpillOptions(5)));
  TF_LITE_MICRO_EXPECT_EQ(1u, static_cast<unsigned>(rt.stats.spills));
  TF_LITE_MICRO_EXPECT(rt.spill->slot(5)->live);
  // 70% at the zero point: the codec stores far fewer bytes than it was given.
  TF_LITE_MICRO_EXPECT(rt.spill->slot(5)->length < sizeof(victim) / 2);
  std::memset(restored, 0, sizeof(restored));
  TfLiteTensor tensors[] = {CreateQuantizedTensor(restored, shape, 0.1f, -128)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunFetching(&rt, tensors, 0,
                                                 tflite::tinyseg_testing::FetchingOptions(
                                                     0, 1, {FetchedSpec{0, 5, {1, 10, 12, 9}}})));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(victim, restored, sizeof(victim)));
  // Released after its one fetch, so its sectors can be erased again.
  TF_LITE_MICRO_EXPECT(!rt.spill->slot(5)->live);
}

// Channel concatenation (axis 3): 2-byte runs go through the staging buffer.
TF_LITE_MICRO_TEST(FetchingChannelsInt8FetchedFirst) {
  using namespace tflite::testing;
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  static int8_t a[1 * 5 * 4 * 3], b[1 * 5 * 4 * 2], out[1 * 5 * 4 * 5], want[sizeof(out)];
  Random rng(11);
  rng.Fill<int8_t>(a, sizeof(a), -128, 127, 30, 3);
  rng.Fill<int8_t>(b, sizeof(b), -128, 127, 30, 3);
  int b_dims[] = {4, 1, 5, 4, 2};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk,
                          RunSpill(&rt, CreateQuantizedTensor(b, IntArrayFromInts(b_dims), 0.5f, 3),
                                   tflite::tinyseg_testing::SpillOptions(2)));
  int a_dims[] = {4, 1, 5, 4, 3};
  int out_dims[] = {4, 1, 5, 4, 5};
  TfLiteTensor tensors[] = {CreateQuantizedTensor(a, IntArrayFromInts(a_dims), 0.5f, 3),
                            CreateQuantizedTensor(out, IntArrayFromInts(out_dims), 0.5f, 3)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk,
                          RunFetching(&rt, tensors, 1,
                                      tflite::tinyseg_testing::FetchingOptions(
                                          3, 2, {FetchedSpec{0, 2, {1, 5, 4, 2}}}, false)));
  const uint8_t* parts[] = {reinterpret_cast<uint8_t*>(b), reinterpret_cast<uint8_t*>(a)};
  Concat({parts[0], parts[1]}, {2, 3}, 20, 1, reinterpret_cast<uint8_t*>(want));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(out, want, sizeof(out)));
  TF_LITE_MICRO_EXPECT(rt.stats.staged_bytes == sizeof(b));
}

// Row concatenation (axis 1) of float32: the fetched run is longer than the
// staging buffer and is decoded straight into the output.
TF_LITE_MICRO_TEST(FetchingRowsFloatFetchedLast) {
  using namespace tflite::testing;
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  static float a[1 * 2 * 40 * 8], b[1 * 3 * 40 * 8], out[1 * 5 * 40 * 8], want[1 * 5 * 40 * 8];
  Random rng(3);
  rng.FillFloat(a, 640, 50);
  rng.FillFloat(b, 960, 50);
  int b_dims[] = {4, 1, 3, 40, 8};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunSpill(&rt, CreateTensor(b, IntArrayFromInts(b_dims)),
                                              tflite::tinyseg_testing::SpillOptions(0)));
  int a_dims[] = {4, 1, 2, 40, 8};
  int out_dims[] = {4, 1, 5, 40, 8};
  TfLiteTensor tensors[] = {CreateTensor(a, IntArrayFromInts(a_dims)),
                            CreateTensor(out, IntArrayFromInts(out_dims))};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunFetching(&rt, tensors, 1,
                                                 tflite::tinyseg_testing::FetchingOptions(
                                                     1, 2, {FetchedSpec{1, 0, {1, 3, 40, 8}}})));
  Concat({reinterpret_cast<uint8_t*>(a), reinterpret_cast<uint8_t*>(b)}, {2, 3}, 1, 40 * 8 * 4,
         reinterpret_cast<uint8_t*>(want));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(out, want, sizeof(out)));
  TF_LITE_MICRO_EXPECT(rt.stats.staged_bytes == 0);
}

// Two fetched operands around an in-RAM one, int16, concatenation on axis 2
// (outer = 6 runs per operand, runs of 10 and 6 bytes).
TF_LITE_MICRO_TEST(FetchingTwoFetchedInt16Axis2) {
  using namespace tflite::testing;
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  static int16_t f0[2 * 3 * 5], mid[2 * 3 * 4], f2[2 * 3 * 3];
  static int16_t out[2 * 3 * 12], want[2 * 3 * 12];
  Random rng(5);
  rng.Fill<int16_t>(f0, 30, -3000, 3000, 40, 0);
  rng.Fill<int16_t>(mid, 24, -3000, 3000, 40, 0);
  rng.Fill<int16_t>(f2, 18, -3000, 3000, 40, 0);
  int f0_dims[] = {3, 2, 3, 5};
  int f2_dims[] = {3, 2, 3, 3};
  TfLiteTensor f0_t = CreateQuantizedTensor(f0, IntArrayFromInts(f0_dims), 0.01f, 0);
  TfLiteTensor f2_t = CreateQuantizedTensor(f2, IntArrayFromInts(f2_dims), 0.01f, 0);
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunSpill(&rt, f0_t, tflite::tinyseg_testing::SpillOptions(1)));
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunSpill(&rt, f2_t, tflite::tinyseg_testing::SpillOptions(9)));
  int mid_dims[] = {3, 2, 3, 4};
  int out_dims[] = {3, 2, 3, 12};
  TfLiteTensor tensors[] = {CreateQuantizedTensor(mid, IntArrayFromInts(mid_dims), 0.01f, 0),
                            CreateQuantizedTensor(out, IntArrayFromInts(out_dims), 0.01f, 0)};
  TF_LITE_MICRO_EXPECT_EQ(
      kTfLiteOk,
      RunFetching(&rt, tensors, 1,
                  tflite::tinyseg_testing::FetchingOptions(
                      2, 3, {FetchedSpec{2, 9, {2, 3, 3}}, FetchedSpec{0, 1, {2, 3, 5}}})));
  Concat({reinterpret_cast<uint8_t*>(f0), reinterpret_cast<uint8_t*>(mid),
          reinterpret_cast<uint8_t*>(f2)},
         {5, 4, 3}, 6, 2, reinterpret_cast<uint8_t*>(want));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(out, want, sizeof(out)));
}

// Runtime::verify_spills reads the slot back through the staging scratch.
TF_LITE_MICRO_TEST(SpillVerifiesReadBack) {
  using namespace tflite::testing;
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  rt.verify_spills = true;
  static int8_t victim[3000];
  Random rng(9);
  rng.Fill<int8_t>(victim, sizeof(victim), -128, 127, 50, 0);
  int dims[] = {2, 30, 100};
  TfLiteTensor t = CreateQuantizedTensor(victim, IntArrayFromInts(dims), 1.0f, 0);
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunSpill(&rt, t, tflite::tinyseg_testing::SpillOptions(4)));
  TF_LITE_MICRO_EXPECT(rt.stats.fetched_bytes == 0);  // verification is not counted
}

// The Spill kernel's arena scratch is the staging buffer: every programmed
// byte comes from it, a block at a time (flash words of 32 bytes: 1024 of
// its 1032 bytes are used), and the slot restores exactly.
TF_LITE_MICRO_TEST(SpillStagesThroughArenaScratch) {
  using namespace tflite::testing;
  tflite::tinyseg_testing::RamStorage& storage = tflite::tinyseg_testing::WordStorage();
  ::tinyseg::Runtime& rt = storage.Reset();
  static int8_t victim[1 * 20 * 16 * 8], restored[sizeof(victim)];
  Random rng(13);
  rng.Fill<int8_t>(victim, sizeof(victim), -128, 127, 20, 0);
  int dims[] = {4, 1, 20, 16, 8};
  TfLiteIntArray* shape = IntArrayFromInts(dims);
  uint8_t* scratch = nullptr;
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunSpill(&rt, CreateQuantizedTensor(victim, shape, 0.1f, 0),
                                              tflite::tinyseg_testing::SpillOptions(2), &scratch));
  TF_LITE_MICRO_EXPECT(scratch != nullptr);
  TF_LITE_MICRO_EXPECT(storage.device().AllFrom(scratch, 1024 + 8));
  TF_LITE_MICRO_EXPECT_EQ(1024u, static_cast<unsigned>(storage.device().longest()));
  TfLiteTensor tensors[] = {CreateQuantizedTensor(restored, shape, 0.1f, 0)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunFetching(&rt, tensors, 0,
                                                 tflite::tinyseg_testing::FetchingOptions(
                                                     0, 1, {FetchedSpec{0, 2, {1, 20, 16, 8}}})));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(victim, restored, sizeof(victim)));
}

// A `block` whose staging (block + 8) cannot hold one program unit of the
// device is an error at Eval, and the slot stays empty; one unit is enough.
TF_LITE_MICRO_TEST(SpillRefusesStagingSmallerThanProgramUnit) {
  using namespace tflite::testing;
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::WordStorage().Reset();
  static int8_t victim[600], restored[600];
  Random rng(17);
  rng.Fill<int8_t>(victim, sizeof(victim), -128, 127, 50, 0);
  int dims[] = {2, 20, 30};
  TfLiteIntArray* shape = IntArrayFromInts(dims);
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError,
                          RunSpill(&rt, CreateQuantizedTensor(victim, shape, 1.0f, 0),
                                   tflite::tinyseg_testing::SpillOptions(1, 8)));  // 16 < 32
  TF_LITE_MICRO_EXPECT(!rt.spill->slot(1)->live);
  TF_LITE_MICRO_EXPECT_EQ(0u, static_cast<unsigned>(rt.stats.spills));
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunSpill(&rt, CreateQuantizedTensor(victim, shape, 1.0f, 0),
                                              tflite::tinyseg_testing::SpillOptions(1, 24)));  // 32
  TfLiteTensor tensors[] = {CreateQuantizedTensor(restored, shape, 1.0f, 0)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunFetching(&rt, tensors, 0,
                                                 tflite::tinyseg_testing::FetchingOptions(
                                                     0, 1, {FetchedSpec{0, 1, {20, 30}}})));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(victim, restored, sizeof(victim)));
}

// A bit flipped in any byte a Spill stored (stream header, index, block
// headers and data, block checks): Fetching fails instead of restoring wrong
// values, and succeeds again once the bit is back.
TF_LITE_MICRO_TEST(StorageBitFlipsFailTheFetch) {
  using namespace tflite::testing;
  tflite::tinyseg_testing::RamStorage& storage = tflite::tinyseg_testing::Storage();
  ::tinyseg::Runtime& rt = storage.Reset();
  rt.release_after_fetch = false;
  static int8_t victim[6 * 10 * 8], restored[sizeof(victim)];
  Random rng(13);
  rng.Fill<int8_t>(victim, sizeof(victim), -128, 127, 60, -128);
  int dims[] = {3, 6, 10, 8};
  TfLiteIntArray* shape = IntArrayFromInts(dims);
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunSpill(&rt, CreateQuantizedTensor(victim, shape, 0.1f, -128),
                                              tflite::tinyseg_testing::SpillOptions(4, 128)));
  const ::tinyseg::SpillSlot* sl = rt.spill->slot(4);
  const std::vector<uint8_t> options =
      tflite::tinyseg_testing::FetchingOptions(0, 1, {FetchedSpec{0, 4, {6, 10, 8}}});
  uint32_t errors = 0, wrong_ok = 0;
  for (uint32_t i = 0; i < sl->length; ++i) {
    uint8_t* byte = storage.memory() + sl->start + i;
    const uint8_t bit = static_cast<uint8_t>(1u << (i % 8));
    *byte ^= bit;
    TfLiteTensor tensors[] = {CreateQuantizedTensor(restored, shape, 0.1f, -128)};
    const TfLiteStatus s = RunFetching(&rt, tensors, 0, options);
    *byte ^= bit;
    if (s != kTfLiteOk) {
      ++errors;
    } else if (std::memcmp(victim, restored, sizeof(victim)) != 0) {
      ++wrong_ok;
    }
  }
  TF_LITE_MICRO_EXPECT_EQ(sl->length, errors);
  TF_LITE_MICRO_EXPECT_EQ(0u, wrong_ok);
  TfLiteTensor tensors[] = {CreateQuantizedTensor(restored, shape, 0.1f, -128)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunFetching(&rt, tensors, 0, options));
  TF_LITE_MICRO_EXPECT_EQ(0, std::memcmp(victim, restored, sizeof(victim)));
}

// What goes wrong is reported, not executed.
TF_LITE_MICRO_TEST(FailuresAreErrors) {
  using namespace tflite::testing;
  ::tinyseg::Runtime& rt = tflite::tinyseg_testing::Storage().Reset();
  static int8_t victim[64], out[64];
  int dims[] = {2, 8, 8};
  TfLiteIntArray* shape = IntArrayFromInts(dims);
  // No runtime attached.
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError,
                          RunSpill(nullptr, CreateQuantizedTensor(victim, shape, 1.0f, 0),
                                   tflite::tinyseg_testing::SpillOptions(0)));
  // A contract version this runtime does not speak.
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError,
                          RunSpill(&rt, CreateQuantizedTensor(victim, shape, 1.0f, 0),
                                   tflite::tinyseg_testing::SpillOptions(0, 1024, 2)));
  // A slot beyond the manager's table.
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, RunSpill(&rt, CreateQuantizedTensor(victim, shape, 1.0f, 0),
                                                 tflite::tinyseg_testing::SpillOptions(99)));
  // Fetching a slot that was never spilled.
  TfLiteTensor tensors[] = {CreateQuantizedTensor(out, shape, 1.0f, 0)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, RunFetching(&rt, tensors, 0,
                                                    tflite::tinyseg_testing::FetchingOptions(
                                                        0, 1, {FetchedSpec{0, 3, {8, 8}}})));
  // A slot holding a tensor of another size.
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteOk, RunSpill(&rt, CreateQuantizedTensor(victim, shape, 1.0f, 0),
                                              tflite::tinyseg_testing::SpillOptions(3)));
  int small_dims[] = {2, 4, 8};
  TfLiteTensor small[] = {CreateQuantizedTensor(out, IntArrayFromInts(small_dims), 1.0f, 0)};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, RunFetching(&rt, small, 0,
                                                    tflite::tinyseg_testing::FetchingOptions(
                                                        0, 1, {FetchedSpec{0, 3, {4, 8}}})));
  // Shapes that do not add up to the output: rejected in Prepare.
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError, RunFetching(&rt, tensors, 0,
                                                    tflite::tinyseg_testing::FetchingOptions(
                                                        0, 1, {FetchedSpec{0, 3, {4, 8}}})));
  // Options that are not a FlexBuffers map.
  const std::vector<uint8_t> junk = {1, 2, 3};
  TF_LITE_MICRO_EXPECT_EQ(kTfLiteError,
                          RunSpill(&rt, CreateQuantizedTensor(victim, shape, 1.0f, 0), junk));
}

TF_LITE_MICRO_TESTS_END
