// tinyseg_run: runs a .tflite model -- original or TinySeg-optimized, as written
// (offline arena layout, scratch markers) -- in a host build of TFLM prepared by
// `tinyseg tflm install`, with TinySeg's kernels and a RAM-backed SpillManager.
// `tinyseg verify` (tinyseg_plugin/checks/real_kernels.py) builds and runs it.
//
// Usage: tinyseg_run MODEL INPUT OUTPUT [--batches N] [--arena BYTES] [--storage BYTES]
//                    [--ram-region BYTES]... [--flash-region BYTES]...
//   INPUT   N batches, each the raw bytes of every model input in input order
//   OUTPUT  written with N batches, each the raw bytes of every output in order
//   --storage BYTES       storage region 0 (Runtime::spill): RAM, 8 MiB by default
//   --ram-region BYTES    the next storage region (1, 2, ... in the order given; at most 7 in all):
//   --flash-region BYTES  RAM, or the NOR flash simulator (erase before program), each with its
//                         own SpillManager in Runtime::regions[i]. A model whose slots name a
//                         region not given here is refused in AllocateTensors (the kernels'
//                         Prepare).
// One Invoke per batch, on the same interpreter (spill slots are rewritten and
// released each inference). Printed lines (sizes in bytes):
//   head N / tail N / total N   RecordingMicroAllocator's arena sections
//   persistent_buffers N        tail bytes of AllocatePersistentBuffer: the kernels' Init and
//                               Prepare allocations, then the input and output pointer arrays
//   persistent_tensors N        tail bytes of the input/output TfLiteTensors
//   persistent_quantization N   tail bytes of their quantization parameters
//   spills N / spilled_bytes N / encoded_bytes N / fetches N / fetched_bytes N
//   staged_bytes N / bands N / reused_rows N / erases N
//   optimized_rows N            StreamChain stage rows run with CMSIS-NN (a CMSIS-NN build)
//   optimized_transpose_conv_rows N   of those, TRANSPOSE_CONV stage rows
//   regionR_spilled_bytes N / regionR_fetches N / regionR_erases N
//                               per storage region R, printed when regions beyond 0 are given
// Exit 0 on success; 1 with one line on stderr naming the failing step.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_runtime.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/micro/recording_micro_allocator.h"
#include "tensorflow/lite/micro/recording_micro_interpreter.h"
#include "tensorflow/lite/schema/schema_generated.h"
#include "tinyseg/block_device.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/nor_flash_sim.h"
#include "tinyseg/spill_manager.h"

namespace {

using Resolver = tflite::MicroMutableOpResolver<128>;

bool AddBuiltins(Resolver& r) {
  const TfLiteStatus statuses[] = {
      r.AddAbs(),
      r.AddAdd(),
      r.AddAddN(),
      r.AddArgMax(),
      r.AddArgMin(),
      r.AddAveragePool2D(),
      r.AddBatchMatMul(),
      r.AddBatchToSpaceNd(),
      r.AddCast(),
      r.AddCeil(),
      r.AddConcatenation(),
      r.AddConv2D(),
      r.AddCos(),
      r.AddCumSum(),
      r.AddDepthToSpace(),
      r.AddDepthwiseConv2D(),
      r.AddDequantize(),
      r.AddDiv(),
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
      r.AddReduceMax(),
      r.AddReduceMin(),
      r.AddRelu(),
      r.AddRelu6(),
      r.AddReshape(),
      r.AddResizeBilinear(),
      r.AddResizeNearestNeighbor(),
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
      r.AddTanh(),
      r.AddTranspose(),
      r.AddTransposeConv(),
      r.AddUnpack(),
      r.AddZerosLike(),
      r.AddBroadcastArgs(),
      r.AddBroadcastTo(),
      r.AddDynamicUpdateSlice(),
      r.AddEmbeddingLookup(),
      r.AddIf(),
      r.AddReduceAll(),
      r.AddReverseV2(),
      r.AddSvdf(),
      r.AddUnidirectionalSequenceLSTM(),
      r.AddWhile(),
      r.AddDetectionPostprocess(),
      r.AddCircularBuffer(),
      tflite::AddTinySegOps(r),
  };
  for (TfLiteStatus s : statuses) {
    if (s != kTfLiteOk) return false;
  }
  return true;
}

// 16-byte aligned heap memory, by hand: newlib (the Cortex-M build, run under qemu-arm) has no
// posix_memalign behind aligned_alloc. The byte before the block holds its distance from malloc's.
uint8_t* AlignedAlloc(size_t n) {
  uint8_t* block = static_cast<uint8_t*>(malloc(n + 16));
  if (block == nullptr) return nullptr;
  uint8_t* p = block + 16 - reinterpret_cast<uintptr_t>(block) % 16;
  p[-1] = static_cast<uint8_t>(p - block);
  return p;
}

void AlignedFree(uint8_t* p) {
  if (p != nullptr) free(p - p[-1]);
}

// A file's bytes in 16-byte aligned heap memory (the model must be aligned).
uint8_t* ReadFile(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return nullptr;
  uint8_t* data = nullptr;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    data = AlignedAlloc(static_cast<size_t>(n) + 1);
    if (data != nullptr && fread(data, 1, static_cast<size_t>(n), f) != static_cast<size_t>(n)) {
      AlignedFree(data);
      data = nullptr;
    }
  }
  fclose(f);
  *size = n < 0 ? 0 : static_cast<size_t>(n);
  return data;
}

int Fail(const char* what) {
  fprintf(stderr, "tinyseg_run: %s\n", what);
  return 1;
}

unsigned long long U(uint64_t v) { return static_cast<unsigned long long>(v); }

// One storage region: RAM, or the NOR flash simulator (erase before program, 1 -> 0 only, as a
// board's flash), behind the same SpillManager a board uses.
class Region {
 public:
  static constexpr uint32_t kSector = 4096;
  static constexpr size_t kSlots = 64;

  Region(size_t bytes, bool flash) : bytes_(bytes / kSector * kSector), flash_(flash) {}
  ~Region() {
    delete manager_;
    delete queue_;
    delete nor_;
    delete ram_;
    free(erase_counts_);
    free(sectors_);
    free(memory_);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // False when memory runs out or the device or the manager refuses to start.
  bool Init() {
    const size_t n = bytes_ / kSector;
    memory_ = static_cast<uint8_t*>(malloc(bytes_));
    sectors_ = static_cast<::tinyseg::SectorInfo*>(calloc(n, sizeof(::tinyseg::SectorInfo)));
    erase_counts_ = static_cast<uint32_t*>(calloc(n, sizeof(uint32_t)));
    if (n == 0 || memory_ == nullptr || sectors_ == nullptr || erase_counts_ == nullptr)
      return false;
    ::tinyseg::Geometry g;
    g.read_size = 1;
    g.program_size = 1;
    g.erase_size = kSector;
    g.total_size = bytes_;
    ::tinyseg::Status started = ::tinyseg::Status::kOk;
    if (flash_) {
      ::tinyseg::NorFlashConfig config;
      config.geometry = g;
      nor_ = new ::tinyseg::NorFlashSim(config, memory_, erase_counts_, nullptr);
      started = nor_->Init();
      device_ = nor_;
    } else {
      ram_ = new ::tinyseg::RamBlockDevice(g, memory_);
      started = ram_->Init();
      device_ = ram_;
    }
    ::tinyseg::SpillConfig config;
    config.region_offset = 0;
    config.region_size = bytes_;
    config.codec_block_bytes = 1024;
    ::tinyseg::SpillMemory memory;
    memory.slots = slots_;
    memory.num_slots = kSlots;
    memory.sectors = sectors_;
    memory.num_sectors = n;
    queue_ = new ::tinyseg::SyncEraseQueue(*device_);
    manager_ = new ::tinyseg::SpillManager(*device_, *queue_, config, memory);
    return ::tinyseg::Ok(started) && ::tinyseg::Ok(manager_->Init());
  }
  ::tinyseg::SpillManager& manager() { return *manager_; }

 private:
  size_t bytes_;
  bool flash_;
  uint8_t* memory_ = nullptr;
  ::tinyseg::SectorInfo* sectors_ = nullptr;
  uint32_t* erase_counts_ = nullptr;
  ::tinyseg::SpillSlot slots_[kSlots] = {};
  ::tinyseg::RamBlockDevice* ram_ = nullptr;  // the one of the two this region is
  ::tinyseg::NorFlashSim* nor_ = nullptr;
  ::tinyseg::BlockDevice* device_ = nullptr;
  ::tinyseg::SyncEraseQueue* queue_ = nullptr;
  ::tinyseg::SpillManager* manager_ = nullptr;
};

// What the command line asks for.
struct Args {
  long batches = 1;
  size_t arena_bytes = 4u << 20;
  size_t storage_bytes = 8u << 20;
  int extra = 0;  // storage regions 1..extra
  size_t region_bytes[::tinyseg::kMaxStorageRegions] = {};
  bool region_flash[::tinyseg::kMaxStorageRegions] = {};
};

constexpr char kUsage[] =
    "usage: tinyseg_run MODEL INPUT OUTPUT [--batches N] [--arena BYTES] [--storage BYTES] "
    "[--ram-region BYTES]... [--flash-region BYTES]...";

// Parses the options after OUTPUT; nullptr, or the sentence that refuses them.
const char* ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 4; i < argc; i += 2) {
    if (i + 1 >= argc) return "an option lacks its value";
    const bool ram = strcmp(argv[i], "--ram-region") == 0;
    if (strcmp(argv[i], "--batches") == 0) {
      a->batches = atol(argv[i + 1]);
    } else if (strcmp(argv[i], "--arena") == 0) {
      a->arena_bytes = static_cast<size_t>(atoll(argv[i + 1]));
    } else if (strcmp(argv[i], "--storage") == 0) {
      a->storage_bytes = static_cast<size_t>(atoll(argv[i + 1]));
    } else if (ram || strcmp(argv[i], "--flash-region") == 0) {
      if (a->extra + 1 >= ::tinyseg::kMaxStorageRegions) {
        return "too many --ram-region/--flash-region options (storage regions 1..7)";
      }
      ++a->extra;
      a->region_bytes[a->extra] = static_cast<size_t>(atoll(argv[i + 1]));
      a->region_flash[a->extra] = !ram;
      if (a->region_bytes[a->extra] < Region::kSector) {
        return "a --ram-region or --flash-region needs at least 4096 bytes";
      }
    } else {
      return "unknown option";
    }
  }
  if (a->batches < 1 || a->arena_bytes == 0 || a->storage_bytes < Region::kSector) {
    return "bad --batches, --arena or --storage";
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Fail(kUsage);
  Args args;
  if (const char* refusal = ParseArgs(argc, argv, &args)) return Fail(refusal);

  size_t model_size = 0, input_size = 0;
  uint8_t* model_data = ReadFile(argv[1], &model_size);
  if (model_data == nullptr) return Fail("cannot read the model");
  uint8_t* input_data = ReadFile(argv[2], &input_size);
  if (input_data == nullptr) return Fail("cannot read the input file");
  const tflite::Model* model = tflite::GetModel(model_data);

  Resolver resolver;
  if (!AddBuiltins(resolver)) return Fail("op resolver is too small");

  // Region 0 (Runtime::spill) is RAM of --storage bytes; regions 1.. as the options list them.
  Region* regions[::tinyseg::kMaxStorageRegions] = {};
  ::tinyseg::Runtime runtime;
  for (int r = 0; r <= args.extra; ++r) {
    regions[r] = r == 0 ? new Region(args.storage_bytes, false)
                        : new Region(args.region_bytes[r], args.region_flash[r]);
    if (!regions[r]->Init()) return Fail("spill storage does not initialise");
    runtime.regions[r] = &regions[r]->manager();
  }
  runtime.spill = &regions[0]->manager();

  uint8_t* arena = AlignedAlloc(args.arena_bytes);
  if (arena == nullptr) return Fail("no memory for the arena");
  tflite::RecordingMicroInterpreter interpreter(model, resolver, arena, args.arena_bytes);
  if (::tinyseg::AttachRuntime(interpreter, runtime) != kTfLiteOk) {
    return Fail("cannot attach the TinySeg runtime");
  }
  if (interpreter.AllocateTensors() != kTfLiteOk) return Fail("AllocateTensors failed");

  size_t needed = 0;
  for (size_t i = 0; i < interpreter.inputs_size(); ++i) needed += interpreter.input(i)->bytes;
  if (needed * static_cast<size_t>(args.batches) != input_size) {
    return Fail("input file size differs from the model's inputs times --batches");
  }
  size_t output_bytes = 0;
  for (size_t i = 0; i < interpreter.outputs_size(); ++i) {
    output_bytes += interpreter.output(i)->bytes;
  }
  FILE* out = fopen(argv[3], "wb");
  if (out == nullptr) return Fail("cannot write the output file");
  size_t offset = 0;
  for (long r = 0; r < args.batches; ++r) {
    for (size_t i = 0; i < interpreter.inputs_size(); ++i) {
      TfLiteTensor* t = interpreter.input(i);
      memcpy(t->data.raw, input_data + offset, t->bytes);
      offset += t->bytes;
    }
    if (interpreter.Invoke() != kTfLiteOk) return Fail("Invoke failed");
    for (int k = 0; k <= args.extra; ++k) regions[k]->manager().EndInference();
    for (size_t i = 0; i < interpreter.outputs_size(); ++i) {
      const TfLiteTensor* t = interpreter.output(i);
      if (fwrite(t->data.raw, 1, t->bytes, out) != t->bytes)
        return Fail("cannot write the output file");
    }
  }
  if (fclose(out) != 0) return Fail("cannot write the output file");

  const tflite::RecordingMicroAllocator& allocator = interpreter.GetMicroAllocator();
  const auto* sections = allocator.GetSimpleMemoryAllocator();
  printf("head %llu\n", U(sections->GetNonPersistentUsedBytes()));
  printf("tail %llu\n", U(sections->GetPersistentUsedBytes()));
  printf("total %llu\n", U(sections->GetUsedBytes()));
  const tflite::RecordedAllocation buffers =
      allocator.GetRecordedAllocation(tflite::RecordedAllocationType::kPersistentBufferData);
  printf("persistent_buffers %llu\n", U(buffers.used_bytes));
  printf(
      "persistent_tensors %llu\n",
      U(allocator.GetRecordedAllocation(tflite::RecordedAllocationType::kPersistentTfLiteTensorData)
            .used_bytes));
  printf("persistent_quantization %llu\n",
         U(allocator
               .GetRecordedAllocation(
                   tflite::RecordedAllocationType::kPersistentTfLiteTensorQuantizationData)
               .used_bytes));
  uint64_t encoded_bytes = 0, erases = 0;  // over every region
  for (int k = 0; k <= args.extra; ++k) {
    encoded_bytes += regions[k]->manager().stats().encoded_bytes;
    erases += regions[k]->manager().stats().erases_submitted;
  }
  printf("spills %llu\nspilled_bytes %llu\nencoded_bytes %llu\n", U(runtime.stats.spills),
         U(runtime.stats.spilled_bytes), U(encoded_bytes));
  printf("fetches %llu\nfetched_bytes %llu\nstaged_bytes %llu\n", U(runtime.stats.fetches),
         U(runtime.stats.fetched_bytes), U(runtime.stats.staged_bytes));
  printf("bands %llu\nreused_rows %llu\nerases %llu\n", U(runtime.stats.bands),
         U(runtime.stats.reused_rows), U(erases));
  printf("optimized_rows %llu\n", U(runtime.stats.optimized_rows));
  printf("optimized_transpose_conv_rows %llu\n", U(runtime.stats.optimized_transpose_conv_rows));
  for (int k = 0; args.extra > 0 && k <= args.extra; ++k) {  // where the slots went
    const ::tinyseg::SpillStats& r = regions[k]->manager().stats();
    printf("region%d_spilled_bytes %llu\nregion%d_fetches %llu\nregion%d_erases %llu\n", k,
           U(r.raw_bytes_spilled), k, U(r.fetches), k, U(r.erases_submitted));
  }
  fflush(stdout);
  AlignedFree(input_data);
  // The arena and the model stay allocated: the interpreter, destroyed on
  // return, still reads them.
  return 0;
}
