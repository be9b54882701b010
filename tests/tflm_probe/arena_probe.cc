// arena_probe: reports how a real TFLM build lays out its tensor arena for a
// .tflite model, as machine-readable lines, so that our own memory figures can
// be checked against ground truth.
//
// Usage: arena_probe MODEL.tflite [ARENA_BYTES] [--print-plan]
//
// On Cortex-M under qemu-arm the program is linked with semihosting (rdimon),
// so argv and fopen() reach the host: the same source serves both targets.
//
// It runs the model three times in the same arena, each time with a fresh
// interpreter:
//   1. RecordingMicroInterpreter: AllocateTensors + Invoke on zeros; prints
//      head/tail/total from the recording arena allocator and the recorded
//      allocations per category.
//   2. MicroInterpreter over a MicroAllocator that uses a greedy planner which
//      records every buffer handed to it; prints the whole memory plan
//      (tensors and kernel scratch buffers) and the scratch requests per node.
//   3. A plain MicroInterpreter(model, resolver, arena, size); prints
//      arena_used_bytes(), i.e. what an application without recording sees.
//
// Output lines (all sizes in bytes):
//   head N / tail N / total N          pass 1
//   alloc CATEGORY REQUESTED USED COUNT pass 1
//   plan_head N / plan_buffers N        pass 2
//   buffer IDX tensor SUBGRAPH TENSOR SIZE FIRST LAST OFFSET
//   buffer IDX scratch NODE OPNAME SIZE FIRST LAST OFFSET
//   scratch NODE OPNAME SIZE            (SIZE is aligned up to 16 bytes)
//   node NODE OPNAME                    operators of subgraph 0
//   plain_used N                        pass 3

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "tensorflow/lite/micro/arena_allocator/single_arena_buffer_allocator.h"
#include "tensorflow/lite/micro/compatibility.h"
#include "tensorflow/lite/micro/memory_planner/greedy_memory_planner.h"
#include "tensorflow/lite/micro/micro_allocator.h"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/micro/recording_micro_allocator.h"
#include "tensorflow/lite/micro/recording_micro_interpreter.h"
#include "tensorflow/lite/schema/schema_generated.h"
#include "tensorflow/lite/schema/schema_utils.h"

#ifndef ARENA_PROBE_KERNELS
#define ARENA_PROBE_KERNELS "unknown"
#endif

namespace {

constexpr size_t kDefaultArenaBytes = 8u * 1024u * 1024u;
constexpr size_t kMaxPlannedBuffers = 4096;
constexpr int kOpCapacity = 128;

using ProbeResolver = tflite::MicroMutableOpResolver<kOpCapacity>;

// Registers every builtin that does not need an extra library, so that any
// model made of ordinary layers can be probed without editing this file.
bool RegisterBuiltins(ProbeResolver& r) {
  const TfLiteStatus statuses[] = {
      r.AddAbs(),
      r.AddAdd(),
      r.AddAddN(),
      r.AddArgMax(),
      r.AddArgMin(),
      r.AddAssignVariable(),
      r.AddAveragePool2D(),
      r.AddBatchMatMul(),
      r.AddBatchToSpaceNd(),
      r.AddBroadcastArgs(),
      r.AddBroadcastTo(),
      r.AddCallOnce(),
      r.AddCast(),
      r.AddCeil(),
      r.AddConcatenation(),
      r.AddConv2D(),
      r.AddCos(),
      r.AddCumSum(),
      r.AddDepthToSpace(),
      r.AddDepthwiseConv2D(),
      r.AddDequantize(),
      r.AddDetectionPostprocess(),
      r.AddDiv(),
      r.AddDynamicUpdateSlice(),
      r.AddEmbeddingLookup(),
      r.AddElu(),
      r.AddEqual(),
      r.AddExp(),
      r.AddExpandDims(),
      r.AddFill(),
      r.AddFloor(),
      r.AddFloorDiv(),
      r.AddFloorMod(),
      r.AddFullyConnected(),
      r.AddGather(),
      r.AddGatherNd(),
      r.AddGreater(),
      r.AddGreaterEqual(),
      r.AddHardSwish(),
      r.AddIf(),
      r.AddL2Normalization(),
      r.AddL2Pool2D(),
      r.AddLeakyRelu(),
      r.AddLess(),
      r.AddLessEqual(),
      r.AddLog(),
      r.AddLogicalAnd(),
      r.AddLogicalNot(),
      r.AddLogicalOr(),
      r.AddLogistic(),
      r.AddLogSoftmax(),
      r.AddMaximum(),
      r.AddMaxPool2D(),
      r.AddMirrorPad(),
      r.AddMean(),
      r.AddMinimum(),
      r.AddMul(),
      r.AddNeg(),
      r.AddNotEqual(),
      r.AddPack(),
      r.AddPad(),
      r.AddPadV2(),
      r.AddPrelu(),
      r.AddQuantize(),
      r.AddReadVariable(),
      r.AddReduceAll(),
      r.AddReduceMax(),
      r.AddReduceMin(),
      r.AddRelu(),
      r.AddRelu6(),
      r.AddReshape(),
      r.AddResizeBilinear(),
      r.AddResizeNearestNeighbor(),
      r.AddReverseV2(),
      r.AddRound(),
      r.AddRsqrt(),
      r.AddSelectV2(),
      r.AddShape(),
      r.AddSin(),
      r.AddSlice(),
      r.AddSoftmax(),
      r.AddSpaceToBatchNd(),
      r.AddSpaceToDepth(),
      r.AddSplit(),
      r.AddSplitV(),
      r.AddSqueeze(),
      r.AddSqrt(),
      r.AddSquare(),
      r.AddSquaredDifference(),
      r.AddStridedSlice(),
      r.AddSub(),
      r.AddSum(),
      r.AddSvdf(),
      r.AddTanh(),
      r.AddTransposeConv(),
      r.AddTranspose(),
      r.AddUnpack(),
      r.AddUnidirectionalSequenceLSTM(),
      r.AddVarHandle(),
      r.AddWhile(),
      r.AddZerosLike(),
  };
  for (TfLiteStatus s : statuses) {
    if (s != kTfLiteOk) return false;
  }
  return true;
}

// One buffer as the allocator handed it to the planner.
struct PlannedBuffer {
  int size;
  int first_used;
  int last_used;
};

// Greedy planner (the one TFLM uses by default) that also keeps the list of
// buffers it was given, so the probe can print the plan per buffer. It claims
// to preserve all tensors only so that MicroInterpreter::GetTensor() works;
// nothing in TFLM's planning depends on that flag.
class LoggingGreedyPlanner : public tflite::GreedyMemoryPlanner {
 public:
  using tflite::GreedyMemoryPlanner::AddBuffer;
  TfLiteStatus AddBuffer(int size, int first_time_used, int last_time_used) override {
    Record(size, first_time_used, last_time_used);
    return tflite::GreedyMemoryPlanner::AddBuffer(size, first_time_used, last_time_used);
  }
  // The offline-offset overload of the base class forwards to the one above,
  // so it is recorded there too.
  bool preserves_all_tensors() const override { return true; }

  int logged_count() const { return logged_count_; }
  const PlannedBuffer& logged(int i) const { return logged_[i]; }

 private:
  void Record(int size, int first, int last) {
    if (logged_count_ < static_cast<int>(kMaxPlannedBuffers)) {
      logged_[logged_count_] = {size, first, last};
    }
    ++logged_count_;
  }

  PlannedBuffer logged_[kMaxPlannedBuffers] = {};
  int logged_count_ = 0;

  // The base class has a private operator delete (no heap in TFLM); the
  // virtual destructor of this class needs one of its own.
  TF_LITE_REMOVE_VIRTUAL_DELETE
};

struct ModelBytes {
  uint8_t* raw = nullptr;         // what malloc returned
  const uint8_t* data = nullptr;  // 16-byte aligned copy of the file
  size_t size = 0;
};

bool ReadModel(const char* path, ModelBytes* out) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return false;
  if (fseek(f, 0, SEEK_END) != 0) {
    fclose(f);
    return false;
  }
  const long n = ftell(f);
  if (n <= 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return false;
  }
  const size_t size = static_cast<size_t>(n);
  uint8_t* raw = static_cast<uint8_t*>(malloc(size + 16));
  if (raw == nullptr) {
    fclose(f);
    return false;
  }
  uint8_t* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 15u) &
                                                ~static_cast<uintptr_t>(15u));
  const size_t got = fread(aligned, 1, size, f);
  fclose(f);
  if (got != size) {
    free(raw);
    return false;
  }
  out->raw = raw;
  out->data = aligned;
  out->size = size;
  return true;
}

const char* OpName(const tflite::Model* model, int subgraph, int node) {
  const tflite::SubGraph* sg = model->subgraphs()->Get(subgraph);
  if (sg->operators() == nullptr || node < 0 || node >= static_cast<int>(sg->operators()->size())) {
    return "?";
  }
  const uint32_t code_index = sg->operators()->Get(node)->opcode_index();
  const tflite::OperatorCode* code = model->operator_codes()->Get(code_index);
  const tflite::BuiltinOperator builtin = tflite::GetBuiltinCode(code);
  if (builtin == tflite::BuiltinOperator_CUSTOM && code->custom_code()) {
    return code->custom_code()->c_str();
  }
  return tflite::EnumNameBuiltinOperator(builtin);
}

void ZeroInputs(tflite::MicroInterpreter& interpreter) {
  for (size_t i = 0; i < interpreter.inputs_size(); ++i) {
    TfLiteTensor* t = interpreter.input(i);
    if (t != nullptr && t->data.raw != nullptr) memset(t->data.raw, 0, t->bytes);
  }
}

unsigned long U(size_t v) { return static_cast<unsigned long>(v); }

// Pass 1: ground-truth head/tail/total from the recording allocator.
bool RecordingPass(const tflite::Model* model, const ProbeResolver& resolver, uint8_t* arena,
                   size_t arena_bytes) {
  tflite::RecordingMicroInterpreter interpreter(model, resolver, arena, arena_bytes);
  if (interpreter.AllocateTensors() != kTfLiteOk) {
    fprintf(stderr, "arena_probe: AllocateTensors failed\n");
    return false;
  }
  ZeroInputs(interpreter);
  if (interpreter.Invoke() != kTfLiteOk) {
    fprintf(stderr, "arena_probe: Invoke failed\n");
    return false;
  }
  const tflite::RecordingMicroAllocator& allocator = interpreter.GetMicroAllocator();
  const auto* buffers = allocator.GetSimpleMemoryAllocator();
  printf("head %lu\n", U(buffers->GetNonPersistentUsedBytes()));
  printf("tail %lu\n", U(buffers->GetPersistentUsedBytes()));
  printf("total %lu\n", U(buffers->GetUsedBytes()));
  printf("arena_used_bytes %lu\n", U(interpreter.arena_used_bytes()));

  struct Category {
    tflite::RecordedAllocationType type;
    const char* name;
  };
  const Category categories[] = {
      {tflite::RecordedAllocationType::kTfLiteEvalTensorData, "eval_tensor_data"},
      {tflite::RecordedAllocationType::kPersistentTfLiteTensorData, "persistent_tensor_data"},
      {tflite::RecordedAllocationType::kPersistentTfLiteTensorQuantizationData,
       "persistent_tensor_quantization_data"},
      {tflite::RecordedAllocationType::kPersistentBufferData, "persistent_buffer_data"},
      {tflite::RecordedAllocationType::kTfLiteTensorVariableBufferData, "variable_buffer_data"},
      {tflite::RecordedAllocationType::kNodeAndRegistrationArray, "node_and_registration_array"},
      {tflite::RecordedAllocationType::kOpData, "op_data"},
  };
  for (const Category& c : categories) {
    const tflite::RecordedAllocation a = allocator.GetRecordedAllocation(c.type);
    printf("alloc %s %lu %lu %lu\n", c.name, U(a.requested_bytes), U(a.used_bytes), U(a.count));
  }
  return true;
}

// Pass 2: the memory plan, buffer by buffer, with scratch buffers per node.
bool PlanPass(const tflite::Model* model, const ProbeResolver& resolver, uint8_t* arena,
              size_t arena_bytes, bool print_plan) {
  LoggingGreedyPlanner planner;
  tflite::SingleArenaBufferAllocator* buffers =
      tflite::SingleArenaBufferAllocator::Create(arena, arena_bytes);
  tflite::MicroAllocator* allocator = tflite::MicroAllocator::Create(buffers, &planner);
  if (allocator == nullptr) {
    fprintf(stderr, "arena_probe: MicroAllocator::Create failed\n");
    return false;
  }
  tflite::MicroInterpreter interpreter(model, resolver, allocator);
  if (interpreter.AllocateTensors() != kTfLiteOk) {
    fprintf(stderr, "arena_probe: AllocateTensors failed in plan pass\n");
    return false;
  }
  const int count = planner.logged_count();
  if (count > static_cast<int>(kMaxPlannedBuffers)) {
    fprintf(stderr, "arena_probe: more than %lu planned buffers\n", U(kMaxPlannedBuffers));
    return false;
  }
  const size_t plan_head = planner.GetMaximumMemorySize();
  // TFLM's own rendering of the plan (what TF_LITE_SHOW_MEMORY_USE prints),
  // written through DebugLog, i.e. to stderr.
  if (print_plan) planner.PrintMemoryPlan();
  printf("plan_head %lu\n", U(plan_head));
  printf("plan_head_used %lu\n", U(buffers->GetNonPersistentUsedBytes()));
  printf("plan_buffers %d\n", count);
  const auto* ops = model->subgraphs()->Get(0)->operators();
  const int node_count = ops == nullptr ? 0 : static_cast<int>(ops->size());
  for (int node = 0; node < node_count; ++node) {
    printf("node %d %s\n", node, OpName(model, 0, node));
  }

  // Planned tensors come first, in (subgraph, tensor index) order; they are
  // the tensors whose data pointer lies in the non-persistent region. Every
  // buffer after them is a kernel scratch buffer, in request order.
  const uint8_t* base = reinterpret_cast<const uint8_t*>(
      (reinterpret_cast<uintptr_t>(arena) + 15u) & ~static_cast<uintptr_t>(15u));
  const uint8_t* head_end = base + plan_head;
  const int subgraphs = static_cast<int>(model->subgraphs()->size());
  int index = 0;
  for (int sg = 0; sg < subgraphs; ++sg) {
    const auto* tensors = model->subgraphs()->Get(sg)->tensors();
    const int n = tensors == nullptr ? 0 : static_cast<int>(tensors->size());
    for (int t = 0; t < n; ++t) {
      const TfLiteEvalTensor* e = interpreter.GetTensor(t, sg);
      if (e == nullptr) return false;
      const uint8_t* p = static_cast<const uint8_t*>(e->data.data);
      if (p == nullptr || p < base || p >= head_end) continue;
      if (index >= count) {
        fprintf(stderr, "arena_probe: plan has fewer buffers than tensors\n");
        return false;
      }
      int offset = -1;
      planner.GetOffsetForBuffer(index, &offset);
      const PlannedBuffer& b = planner.logged(index);
      printf("buffer %d tensor %d %d %d %d %d %d\n", index, sg, t, b.size, b.first_used,
             b.last_used, offset);
      if (offset != static_cast<int>(p - base)) {
        printf("warning buffer %d offset %d but tensor at %ld\n", index, offset,
               static_cast<long>(p - base));
      }
      ++index;
    }
  }
  for (; index < count; ++index) {
    int offset = -1;
    planner.GetOffsetForBuffer(index, &offset);
    const PlannedBuffer& b = planner.logged(index);
    // Allocation scope 0 holds the graph inputs; node i of subgraph 0 is
    // scope i + 1. Scopes of other subgraphs follow on, so only a model with a
    // single subgraph maps scopes to node indices directly.
    const int node = subgraphs == 1 ? b.first_used - 1 : -1;
    const char* op = subgraphs == 1 ? OpName(model, 0, node) : "?";
    printf("buffer %d scratch %d %s %d %d %d %d\n", index, node, op, b.size, b.first_used,
           b.last_used, offset);
    printf("scratch %d %s %d\n", node, op, b.size);
  }
  return true;
}

// Pass 3: what an application using the plain interpreter sees.
bool PlainPass(const tflite::Model* model, const ProbeResolver& resolver, uint8_t* arena,
               size_t arena_bytes) {
  tflite::MicroInterpreter interpreter(model, resolver, arena, arena_bytes);
  if (interpreter.AllocateTensors() != kTfLiteOk) {
    fprintf(stderr, "arena_probe: AllocateTensors failed in plain pass\n");
    return false;
  }
  printf("plain_used %lu\n", U(interpreter.arena_used_bytes()));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* model_path = nullptr;
  const char* arena_arg = nullptr;
  bool print_plan = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--print-plan") == 0) {
      print_plan = true;
    } else if (model_path == nullptr) {
      model_path = argv[i];
    } else if (arena_arg == nullptr) {
      arena_arg = argv[i];
    } else {
      model_path = nullptr;
      break;
    }
  }
  if (model_path == nullptr) {
    fprintf(stderr, "usage: arena_probe MODEL.tflite [ARENA_BYTES] [--print-plan]\n");
    return 2;
  }
  size_t arena_bytes = kDefaultArenaBytes;
  if (arena_arg != nullptr) {
    char* end = nullptr;
    const unsigned long v = strtoul(arena_arg, &end, 10);
    if (end == arena_arg || *end != '\0' || v < 1024) {
      fprintf(stderr, "arena_probe: bad arena size '%s'\n", arena_arg);
      return 2;
    }
    arena_bytes = static_cast<size_t>(v);
  }
  ModelBytes bytes;
  if (!ReadModel(model_path, &bytes)) {
    fprintf(stderr, "arena_probe: cannot read model '%s'\n", model_path);
    return 2;
  }
  flatbuffers::Verifier verifier(bytes.data, bytes.size);
  if (!tflite::VerifyModelBuffer(verifier)) {
    fprintf(stderr, "arena_probe: '%s' is not a valid .tflite model\n", model_path);
    free(bytes.raw);
    return 2;
  }
  const tflite::Model* model = tflite::GetModel(bytes.data);
  ProbeResolver resolver;
  if (!RegisterBuiltins(resolver)) {
    fprintf(stderr, "arena_probe: op registration failed\n");
    free(bytes.raw);
    return 3;
  }
  uint8_t* arena_raw = static_cast<uint8_t*>(malloc(arena_bytes + 16));
  if (arena_raw == nullptr) {
    fprintf(stderr, "arena_probe: cannot allocate %lu-byte arena\n", U(arena_bytes));
    free(bytes.raw);
    return 3;
  }
  uint8_t* arena = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(arena_raw) + 15u) &
                                              ~static_cast<uintptr_t>(15u));

  printf("model %s\n", model_path);
  printf("kernels %s\n", ARENA_PROBE_KERNELS);
  printf("pointer_bytes %lu\n", U(sizeof(void*)));
  printf("arena_size %lu\n", U(arena_bytes));
  bool ok = RecordingPass(model, resolver, arena, arena_bytes);
  if (ok) ok = PlanPass(model, resolver, arena, arena_bytes, print_plan);
  if (ok) ok = PlainPass(model, resolver, arena, arena_bytes);
  free(arena_raw);
  free(bytes.raw);
  if (!ok) return 1;
  printf("done\n");
  return 0;
}
