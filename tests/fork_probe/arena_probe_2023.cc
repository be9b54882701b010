// Arena figures of a TFLM tree of 2023 (the Arduino_TensorFlowLite library's TFLM of
// 2023-02), for tests/test_runtime_profiles.py: the head and tail a RecordingMicroInterpreter
// reports after AllocateTensors and one Invoke on zeros, and each kernel's scratch requests.
// tests/tflm_probe/arena_probe.cc does the same for upstream TFLM, whose API has moved on
// (resolver entries, MemoryPlanner, MicroInterpreter::GetTensor), hence this small sibling.
//
//   arena_probe_2023 MODEL.tflite [ARENA_BYTES]
// prints: head N / tail N / total N
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tensorflow/lite/micro/all_ops_resolver.h"
#include "tensorflow/lite/micro/debug_log.h"
#include "tensorflow/lite/micro/recording_micro_allocator.h"
#include "tensorflow/lite/micro/recording_micro_interpreter.h"
#include "tensorflow/lite/schema/schema_generated.h"

// The Arduino library's DebugLog lives in its board-specific system_setup.cpp (Serial),
// which is not built for the host: the probe is the platform here.
extern "C" void DebugLog(const char* s) { fputs(s, stderr); }

namespace {

std::vector<uint8_t> ReadFile(const char* path) {
  std::vector<uint8_t> data;
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return data;
  uint8_t buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) data.insert(data.end(), buf, buf + n);
  fclose(f);
  return data;
}

unsigned long U(size_t v) { return static_cast<unsigned long>(v); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: arena_probe_2023 MODEL.tflite [ARENA_BYTES]\n");
    return 2;
  }
  std::vector<uint8_t> file = ReadFile(argv[1]);
  if (file.empty()) {
    fprintf(stderr, "arena_probe_2023: cannot read %s\n", argv[1]);
    return 2;
  }
  // The flatbuffer must be 16-byte aligned like a firmware's model array.
  std::vector<uint8_t> aligned_storage(file.size() + 16);
  uint8_t* model_data = aligned_storage.data() +
                        ((16 - reinterpret_cast<uintptr_t>(aligned_storage.data()) % 16) % 16);
  memcpy(model_data, file.data(), file.size());
  const size_t arena_bytes = argc > 2 ? strtoul(argv[2], nullptr, 10) : 64u << 20;
  std::vector<uint8_t> arena_storage(arena_bytes + 16);
  uint8_t* arena =
      arena_storage.data() + ((16 - reinterpret_cast<uintptr_t>(arena_storage.data()) % 16) % 16);

  const tflite::Model* model = tflite::GetModel(model_data);
  static tflite::AllOpsResolver resolver;
  tflite::RecordingMicroInterpreter interpreter(model, resolver, arena, arena_bytes);
  if (interpreter.AllocateTensors() != kTfLiteOk) {
    fprintf(stderr, "arena_probe_2023: AllocateTensors failed\n");
    return 1;
  }
  for (size_t i = 0; i < interpreter.inputs_size(); ++i) {
    TfLiteTensor* t = interpreter.input(i);
    if (t != nullptr && t->data.raw != nullptr) memset(t->data.raw, 0, t->bytes);
  }
  if (interpreter.Invoke() != kTfLiteOk) {
    fprintf(stderr, "arena_probe_2023: Invoke failed\n");
    return 1;
  }
  const auto* buffers = interpreter.GetMicroAllocator().GetSimpleMemoryAllocator();
  printf("head %lu\n", U(buffers->GetNonPersistentUsedBytes()));
  printf("tail %lu\n", U(buffers->GetPersistentUsedBytes()));
  printf("total %lu\n", U(buffers->GetUsedBytes()));
  return 0;
}
