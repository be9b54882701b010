// tinyseg_run: runs a .tflite model -- original or TinySeg-optimized, as written
// (offline arena layout, scratch markers) -- in a host build of TFLM prepared by
// `tinyseg tflm install`, with TinySeg's kernels and a RAM-backed SpillManager.
// `tinyseg verify` (tinyseg_plugin/checks/real_kernels.py) builds and runs it.
//
// Usage: tinyseg_run MODEL INPUT OUTPUT [--batches N] [--arena BYTES] [--storage BYTES]
//                    [--ram-region BYTES]... [--flash-region BYTES]...
//                    [--fault-sweep KIND [--fault-limit N]]
//                    [--source K:ROW_BYTES:ROWS]... [--sink K:ROW_BYTES:ROWS]...
//                    [--hostile-source short|fail|long] [--hostile-sink fail]
//   INPUT   N batches, each the raw bytes of every model input in input order; a sourced input
//           K holds ROWS*ROW_BYTES bytes (the whole image its row source hands over row by row)
//           and its token tensor stays zero
//   OUTPUT  written with N batches, each the raw bytes of every output in order; a sunk output
//           K is the ROWS*ROW_BYTES bytes its row sink received, its token is not written
//   --source K:ROW_BYTES:ROWS  Runtime::sources[K]: hands row r of graph input K's image to
//                         StreamChain; a request out of order, repeated, past ROWS or of another
//                         capacity than ROW_BYTES is an error status, and so is a run that did
//                         not ask for all ROWS rows (K < 8, the graph input the body's "source"
//                         names)
//   --sink K:ROW_BYTES:ROWS    Runtime::sinks[K]: row r of graph output K into its image, with
//                         the same checks (the body's "sink")
//   --hostile-source KIND every source, at row ROWS/2: short delivers one byte fewer, fail
//                         returns kIoError, long claims ROW_BYTES+1 written
//   --hostile-sink fail   every sink returns kIoError at row ROWS/2 (both: sanitizer runs; the
//                         kernel's status ends the run, exit 1 with its message)
//   --storage BYTES       storage region 0 (Runtime::spill): RAM, 8 MiB by default
//   --ram-region BYTES    the next storage region (1, 2, ... in the order given; at most 7 in all):
//   --flash-region BYTES  RAM, or the NOR flash simulator (erase before program), each with its
//                         own SpillManager in Runtime::regions[i]. A model whose slots name a
//                         region not given here is refused in AllocateTensors (the kernels'
//                         Prepare).
//   --fault-sweep KIND    storage fault injection (this host tool only, never a device build):
//                         one clean inference of the first batch (its outputs go to OUTPUT,
//                         its device calls are counted), then one inference per fault, each
//                         from freshly initialised spill storage: KIND transient-flip (one read
//                         returns a flipped bit, storage unchanged) or stored-flip (the stored
//                         bit flips just before the read), each on every read at three places
//                         (bit 7 of its first byte, bit 0 of its middle byte, bit 3 of its last
//                         byte); read-fail, program-fail, erase-fail (the call fails, nothing
//                         read, written or erased) on every call of that kind. Calls are
//                         counted over every storage region. --fault-limit N: at most N calls,
//                         spread evenly. Prints "wrong CALL BYTE BIT" for each inference that
//                         returned OK with outputs other than the clean ones, then
//                         "sweep KIND calls N faults N wrong N reported N harmless N after
//                         same|differ" (after: a clean inference once the sweep is done).
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
//   source_rows N / sink_rows N rows the row sources delivered and the sinks received
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

enum class FaultKind : uint8_t {
  kNone,
  kTransientFlip,  // one read returns one flipped bit; the stored bytes stay as they are
  kStoredFlip,     // the stored bit flips just before the read (and stays flipped)
  kReadFails,
  kProgramFails,  // nothing programmed
  kEraseFails,    // nothing erased
};

constexpr const char* kFaultNames[] = {"none",      "transient-flip", "stored-flip",
                                       "read-fail", "program-fail",   "erase-fail"};

::tinyseg::Op OpOf(FaultKind k) {
  if (k == FaultKind::kProgramFails) return ::tinyseg::Op::kProgram;
  if (k == FaultKind::kEraseFails) return ::tinyseg::Op::kErase;
  return ::tinyseg::Op::kRead;
}

// The one armed fault, shared by the devices of every storage region: device calls are counted
// over all of them, and the fault hits call `at` (from 0) of its kind, once.
struct FaultPlan {
  FaultKind kind = FaultKind::kNone;
  uint64_t at = 0;
  int place = 0;  // flips: 0 the first, 1 the middle, 2 the last byte of the read
  uint64_t calls[3] = {0, 0, 0};
  bool fired = false;

  void Arm(FaultKind k, uint64_t call, int where) {
    kind = k;
    at = call;
    place = where;
    calls[0] = calls[1] = calls[2] = 0;
    fired = false;
  }
  bool Hit(::tinyseg::Op op) {
    const uint64_t n = calls[static_cast<int>(op)]++;
    if (kind == FaultKind::kNone || fired || OpOf(kind) != op || n != at) return false;
    fired = true;
    return true;
  }
};

constexpr int kFlipBits[3] = {7, 0, 3};  // the bit flipped at each place

// Forwards to the region's device, except for the call the plan hits. `storage` is the
// device's memory (device address = offset), where a stored flip lands.
class FaultDevice final : public ::tinyseg::BlockDevice {
 public:
  FaultDevice(::tinyseg::BlockDevice& inner, uint8_t* storage, FaultPlan& plan)
      : in_(inner), mem_(storage), plan_(plan) {}
  const ::tinyseg::Geometry& geometry() const override { return in_.geometry(); }
  uint8_t erased_value() const override { return in_.erased_value(); }
  uint64_t ModelledNs(::tinyseg::Op op, uint64_t addr, uint64_t len) const override {
    return in_.ModelledNs(op, addr, len);
  }
  uint32_t BankOf(uint64_t addr) const override { return in_.BankOf(addr); }
  bool IsRam() const override { return in_.IsRam(); }

  ::tinyseg::Status Read(uint64_t addr, void* dst, size_t len) override {
    if (!plan_.Hit(::tinyseg::Op::kRead) || len == 0) return in_.Read(addr, dst, len);
    if (plan_.kind == FaultKind::kReadFails) return ::tinyseg::Status::kIoError;
    const size_t byte = plan_.place == 0 ? 0 : plan_.place == 1 ? len / 2 : len - 1;
    const uint8_t mask = static_cast<uint8_t>(1u << kFlipBits[plan_.place]);
    const bool stored = plan_.kind == FaultKind::kStoredFlip;
    if (stored && addr + byte < in_.geometry().total_size) mem_[addr + byte] ^= mask;
    const ::tinyseg::Status s = in_.Read(addr, dst, len);
    if (!stored && ::tinyseg::Ok(s)) static_cast<uint8_t*>(dst)[byte] ^= mask;
    return s;
  }
  ::tinyseg::Status Program(uint64_t addr, const void* src, size_t len) override {
    if (plan_.Hit(::tinyseg::Op::kProgram)) return ::tinyseg::Status::kIoError;
    return in_.Program(addr, src, len);
  }
  ::tinyseg::Status Erase(uint64_t addr, uint64_t len) override {
    if (plan_.Hit(::tinyseg::Op::kErase)) return ::tinyseg::Status::kIoError;
    return in_.Erase(addr, len);
  }

 private:
  ::tinyseg::BlockDevice& in_;
  uint8_t* mem_;
  FaultPlan& plan_;
};

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
    delete fault_;
    delete nor_;
    delete ram_;
    free(erase_counts_);
    free(sectors_);
    free(memory_);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // False when memory runs out or the device or the manager refuses to start. Every device call
  // goes through `plan`'s fault device (a plan of kind kNone forwards all of them).
  bool Init(FaultPlan& plan) {
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
    fault_ = new FaultDevice(*device_, memory_, plan);
    queue_ = new ::tinyseg::SyncEraseQueue(*fault_);
    manager_ = new ::tinyseg::SpillManager(*fault_, *queue_, config, memory);
    return ::tinyseg::Ok(started) && ::tinyseg::Ok(manager_->Init());
  }
  // Forgets every slot and sector state, as at power-up (a fault sweep's next inference).
  bool Restart() { return ::tinyseg::Ok(manager_->Init()); }
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
  FaultDevice* fault_ = nullptr;
  ::tinyseg::SyncEraseQueue* queue_ = nullptr;
  ::tinyseg::SpillManager* manager_ = nullptr;
};

// How a --hostile-source or --hostile-sink misbehaves, at row ROWS/2 (sanitizer runs).
enum class Hostile : uint8_t { kNone, kShort, kFail, kLong };

// One --source or --sink: graph input or output K's whole image, handed over or filled row by row.
struct RowStream {
  int32_t index = 0;
  size_t row_bytes = 0;  // 0: no stream at this index
  int32_t rows = 0;
  uint8_t* image = nullptr;  // this batch's ROWS*ROW_BYTES bytes
  int32_t next = 0;          // the row due next: rows come in order, each once
  Hostile hostile = Hostile::kNone;

  size_t bytes() const { return row_bytes * static_cast<size_t>(rows); }
  // Whether `row` of `bytes` bytes of stream `k` is the one due (then it is counted as done).
  bool Take(int32_t k, int32_t row, size_t n) {
    if (k != index || row != next || row >= rows || n != row_bytes) return false;
    ++next;
    return true;
  }
};

// Runtime::sources[K]: row `row` of the image into the kernel's row buffer.
::tinyseg::Status ReadRow(void* user, int32_t input, int32_t row, uint8_t* dst, size_t capacity,
                          size_t* written) {
  RowStream& s = *static_cast<RowStream*>(user);
  *written = 0;
  if (!s.Take(input, row, capacity)) return ::tinyseg::Status::kOutOfRange;
  const bool hit = row == s.rows / 2;
  if (hit && s.hostile == Hostile::kFail) return ::tinyseg::Status::kIoError;
  const size_t n = hit && s.hostile == Hostile::kShort ? capacity - 1 : capacity;
  memcpy(dst, s.image + static_cast<size_t>(row) * s.row_bytes, n);
  *written = hit && s.hostile == Hostile::kLong ? capacity + 1 : n;
  return ::tinyseg::Status::kOk;
}

// Runtime::sinks[K]: row `row` into the image.
::tinyseg::Status WriteRow(void* user, int32_t output, int32_t row, const uint8_t* src,
                           size_t bytes) {
  RowStream& s = *static_cast<RowStream*>(user);
  if (!s.Take(output, row, bytes)) return ::tinyseg::Status::kOutOfRange;
  if (row == s.rows / 2 && s.hostile == Hostile::kFail) return ::tinyseg::Status::kIoError;
  memcpy(s.image + static_cast<size_t>(row) * s.row_bytes, src, bytes);
  return ::tinyseg::Status::kOk;
}

constexpr uint64_t kMaxImageBytes = uint64_t{1} << 31;

// A decimal number starting at `text` (digits only) into `*v`; the character after it, or null.
const char* Number(const char* text, uint64_t* v) {
  if (*text < '0' || *text > '9') return nullptr;
  char* end = nullptr;
  *v = strtoull(text, &end, 10);
  return end;
}

// "K:ROW_BYTES:ROWS" into streams[K]; nullptr, or the sentence that refuses it.
const char* ParseStream(const char* text, RowStream* streams) {
  uint64_t k = 0, row_bytes = 0, rows = 0;
  const char* p = Number(text, &k);
  if (p != nullptr && *p == ':') p = Number(p + 1, &row_bytes);
  if (p != nullptr && *p == ':') p = Number(p + 1, &rows);
  if (p == nullptr || *p != '\0' || k >= static_cast<uint64_t>(::tinyseg::kMaxRowStreams) ||
      row_bytes == 0 || rows == 0) {
    return "--source and --sink take K:ROW_BYTES:ROWS, K below 8, ROW_BYTES and ROWS above 0";
  }
  if (row_bytes >= kMaxImageBytes || rows > kMaxImageBytes / row_bytes) {
    return "a --source or --sink image (ROW_BYTES*ROWS) must stay below 2^31 bytes";
  }
  RowStream& s = streams[k];
  if (s.row_bytes != 0) return "two --source or two --sink options name the same K";
  s.index = static_cast<int32_t>(k);
  s.row_bytes = static_cast<size_t>(row_bytes);
  s.rows = static_cast<int32_t>(rows);
  return nullptr;
}

// What the command line asks for.
struct Args {
  long batches = 1;
  size_t arena_bytes = 4u << 20;
  size_t storage_bytes = 8u << 20;
  int extra = 0;  // storage regions 1..extra
  size_t region_bytes[::tinyseg::kMaxStorageRegions] = {};
  bool region_flash[::tinyseg::kMaxStorageRegions] = {};
  FaultKind sweep = FaultKind::kNone;
  uint64_t fault_limit = 0;  // 0: every call
  RowStream sources[::tinyseg::kMaxRowStreams];
  RowStream sinks[::tinyseg::kMaxRowStreams];
};

constexpr char kUsage[] =
    "usage: tinyseg_run MODEL INPUT OUTPUT [--batches N] [--arena BYTES] [--storage BYTES] "
    "[--ram-region BYTES]... [--flash-region BYTES]... [--fault-sweep KIND [--fault-limit N]] "
    "[--source K:ROW_BYTES:ROWS]... [--sink K:ROW_BYTES:ROWS]... [--hostile-source "
    "short|fail|long] "
    "[--hostile-sink fail]";

// The fault kind named `name`, or kNone.
FaultKind FaultNamed(const char* name) {
  for (int k = 1; k < 6; ++k) {
    if (strcmp(name, kFaultNames[k]) == 0) return static_cast<FaultKind>(k);
  }
  return FaultKind::kNone;
}

// --hostile-source short|fail|long or --hostile-sink fail, for every stream of its kind.
const char* ParseHostile(const char* option, const char* kind, Args* a) {
  const bool sink = strcmp(option, "--hostile-sink") == 0;
  Hostile h = strcmp(kind, "fail") == 0 ? Hostile::kFail : Hostile::kNone;
  if (!sink && strcmp(kind, "short") == 0) h = Hostile::kShort;
  if (!sink && strcmp(kind, "long") == 0) h = Hostile::kLong;
  if (h == Hostile::kNone) {
    return "--hostile-source takes short, fail or long, and --hostile-sink takes fail";
  }
  RowStream* streams = sink ? a->sinks : a->sources;
  for (int k = 0; k < ::tinyseg::kMaxRowStreams; ++k) streams[k].hostile = h;
  return nullptr;
}

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
    } else if (strcmp(argv[i], "--fault-sweep") == 0) {
      a->sweep = FaultNamed(argv[i + 1]);
      if (a->sweep == FaultKind::kNone) {
        return "--fault-sweep takes transient-flip, stored-flip, read-fail, program-fail or "
               "erase-fail";
      }
    } else if (strcmp(argv[i], "--fault-limit") == 0) {
      a->fault_limit = static_cast<uint64_t>(atoll(argv[i + 1]));
    } else if (strcmp(argv[i], "--source") == 0 || strcmp(argv[i], "--sink") == 0) {
      const char* refusal =
          ParseStream(argv[i + 1], strcmp(argv[i], "--source") == 0 ? a->sources : a->sinks);
      if (refusal != nullptr) return refusal;
    } else if (strcmp(argv[i], "--hostile-source") == 0 || strcmp(argv[i], "--hostile-sink") == 0) {
      if (const char* refusal = ParseHostile(argv[i], argv[i + 1], a)) return refusal;
    } else {
      return "unknown option";
    }
  }
  if (a->batches < 1 || a->arena_bytes == 0 || a->storage_bytes < Region::kSector) {
    return "bad --batches, --arena or --storage";
  }
  for (int k = 0; k < ::tinyseg::kMaxRowStreams; ++k) {
    if (a->sweep != FaultKind::kNone && (a->sources[k].row_bytes || a->sinks[k].row_bytes)) {
      return "--fault-sweep runs without --source and --sink";
    }
  }
  return nullptr;
}

// What a fault sweep works on: the interpreter, its storage regions and the first batch.
struct Sweep {
  tflite::RecordingMicroInterpreter& interpreter;
  Region** regions;
  int count;  // regions 0..count-1
  const uint8_t* input;
  FaultPlan& plan;
};

// Whether the interpreter's outputs equal `ref` (else, with copy, they are copied into it).
bool OutputsEqual(tflite::MicroInterpreter& in, uint8_t* ref, bool copy) {
  size_t at = 0;
  for (size_t i = 0; i < in.outputs_size(); ++i) {
    const TfLiteTensor* t = in.output(i);
    if (copy) memcpy(ref + at, t->data.raw, t->bytes);
    if (!copy && memcmp(ref + at, t->data.raw, t->bytes) != 0) return false;
    at += t->bytes;
  }
  return true;
}

// One inference of the first batch from freshly started storage with the plan armed; false when
// the storage does not restart or Invoke fails.
bool RunArmed(Sweep& w, FaultKind kind, uint64_t at, int place) {
  w.plan.Arm(FaultKind::kNone, 0, 0);
  for (int r = 0; r < w.count; ++r) {
    if (!w.regions[r]->Restart()) return false;
  }
  w.plan.Arm(kind, at, place);
  size_t offset = 0;
  for (size_t i = 0; i < w.interpreter.inputs_size(); ++i) {
    TfLiteTensor* t = w.interpreter.input(i);
    memcpy(t->data.raw, w.input + offset, t->bytes);
    offset += t->bytes;
  }
  return w.interpreter.Invoke() == kTfLiteOk;
}

// --fault-sweep: the clean inference (its outputs into `ref` and OUTPUT), then one per fault.
int RunSweep(Sweep& w, FaultKind kind, uint64_t limit, uint8_t* ref, size_t ref_bytes, FILE* out) {
  if (!RunArmed(w, FaultKind::kNone, 0, 0)) return Fail("Invoke failed");
  OutputsEqual(w.interpreter, ref, true);
  if (fwrite(ref, 1, ref_bytes, out) != ref_bytes || fclose(out) != 0) {
    return Fail("cannot write the output file");
  }
  const uint64_t calls = w.plan.calls[static_cast<int>(OpOf(kind))];
  const uint64_t n = limit != 0 && limit < calls ? limit : calls;
  const bool flip = kind == FaultKind::kTransientFlip || kind == FaultKind::kStoredFlip;
  uint64_t faults = 0, wrong = 0, reported = 0, harmless = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t call = n == calls ? i : i * calls / n;
    for (int place = 0; place < (flip ? 3 : 1); ++place) {
      const bool ok = RunArmed(w, kind, call, place);
      if (!w.plan.fired) continue;
      ++faults;
      if (!ok) {
        ++reported;
      } else if (OutputsEqual(w.interpreter, ref, false)) {
        ++harmless;
      } else {
        ++wrong;
        printf("wrong %llu %d %d\n", U(call), place, kFlipBits[place]);
      }
    }
  }
  const bool after = RunArmed(w, FaultKind::kNone, 0, 0) && OutputsEqual(w.interpreter, ref, false);
  printf("sweep %s calls %llu faults %llu wrong %llu reported %llu harmless %llu after %s\n",
         kFaultNames[static_cast<int>(kind)], U(calls), U(faults), U(wrong), U(reported),
         U(harmless), after ? "same" : "differ");
  fflush(stdout);
  return 0;
}

// The printed lines of a run (the list at the top of this file).
void PrintStats(tflite::RecordingMicroInterpreter& interpreter, const ::tinyseg::Runtime& runtime,
                Region** regions, int extra) {
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
  for (int k = 0; k <= extra; ++k) {
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
  printf("source_rows %llu\nsink_rows %llu\n", U(runtime.stats.source_rows),
         U(runtime.stats.sink_rows));
  for (int k = 0; extra > 0 && k <= extra; ++k) {  // where the slots went
    const ::tinyseg::SpillStats& r = regions[k]->manager().stats();
    printf("region%d_spilled_bytes %llu\nregion%d_fetches %llu\nregion%d_erases %llu\n", k,
           U(r.raw_bytes_spilled), k, U(r.fetches), k, U(r.erases_submitted));
  }
}

// The stream at graph input or output `i`, or null.
RowStream* StreamAt(RowStream* streams, size_t i) {
  if (i >= static_cast<size_t>(::tinyseg::kMaxRowStreams) || streams[i].row_bytes == 0) {
    return nullptr;
  }
  return &streams[i];
}

// The Runtime's row sources and sinks for the --source and --sink options, each sink with its
// image; false when memory runs out.
bool AttachStreams(Args& a, ::tinyseg::Runtime& runtime) {
  for (int k = 0; k < ::tinyseg::kMaxRowStreams; ++k) {
    if (a.sources[k].row_bytes != 0) runtime.sources[k] = {ReadRow, &a.sources[k]};
    if (a.sinks[k].row_bytes == 0) continue;
    a.sinks[k].image = static_cast<uint8_t*>(malloc(a.sinks[k].bytes()));
    if (a.sinks[k].image == nullptr) return false;
    runtime.sinks[k] = {WriteRow, &a.sinks[k]};
  }
  return true;
}

// One batch's bytes in INPUT (`inputs`) or OUTPUT: every model input or output in order, a
// streamed one as its whole image. Null, or the sentence refusing a stream that names no tensor.
const char* BatchBytes(tflite::MicroInterpreter& in, RowStream* streams, bool inputs,
                       size_t* total) {
  const size_t n = inputs ? in.inputs_size() : in.outputs_size();
  for (int k = 0; k < ::tinyseg::kMaxRowStreams; ++k) {
    if (streams[k].row_bytes != 0 && static_cast<size_t>(k) >= n) {
      return inputs ? "a --source names no graph input of the model"
                    : "a --sink names no graph output of the model";
    }
  }
  *total = 0;
  for (size_t i = 0; i < n; ++i) {
    const RowStream* s = StreamAt(streams, i);
    *total += s != nullptr ? s->bytes() : (inputs ? in.input(i) : in.output(i))->bytes;
  }
  return nullptr;
}

// Whether every source and sink was asked for every row of its image in the last Invoke.
bool AllRowsTaken(const Args& a) {
  for (int k = 0; k < ::tinyseg::kMaxRowStreams; ++k) {
    if (a.sources[k].next != a.sources[k].rows || a.sinks[k].next != a.sinks[k].rows) return false;
  }
  return true;
}

// Every batch: its inputs (a sourced input's image stays in `input` for its source, the token is
// zero), one Invoke, its outputs to `out` (a sunk output's image). Null, or the failing step.
const char* RunBatches(tflite::MicroInterpreter& in, Args& a, uint8_t* input, Region** regions,
                       FILE* out) {
  size_t offset = 0;
  for (long r = 0; r < a.batches; ++r) {
    for (size_t i = 0; i < in.inputs_size(); ++i) {
      TfLiteTensor* t = in.input(i);
      RowStream* s = StreamAt(a.sources, i);
      if (s != nullptr) s->image = input + offset;
      if (s == nullptr) memcpy(t->data.raw, input + offset, t->bytes);
      if (s != nullptr) memset(t->data.raw, 0, t->bytes);
      offset += s != nullptr ? s->bytes() : t->bytes;
    }
    for (int k = 0; k < ::tinyseg::kMaxRowStreams; ++k) a.sources[k].next = a.sinks[k].next = 0;
    if (in.Invoke() != kTfLiteOk) return "Invoke failed";
    for (int k = 0; k <= a.extra; ++k) regions[k]->manager().EndInference();
    if (!AllRowsTaken(a)) {
      return "a row source or sink was not asked for every row of its image (ROWS other than "
             "the model's?)";
    }
    for (size_t i = 0; i < in.outputs_size(); ++i) {
      const RowStream* s = StreamAt(a.sinks, i);
      const TfLiteTensor* t = in.output(i);
      const size_t n = s != nullptr ? s->bytes() : t->bytes;
      const void* data = s != nullptr ? static_cast<const void*>(s->image) : t->data.raw;
      if (fwrite(data, 1, n, out) != n) {
        return "cannot write the output file";
      }
    }
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
  FaultPlan plan;
  for (int r = 0; r <= args.extra; ++r) {
    regions[r] = r == 0 ? new Region(args.storage_bytes, false)
                        : new Region(args.region_bytes[r], args.region_flash[r]);
    if (!regions[r]->Init(plan)) return Fail("spill storage does not initialise");
    runtime.regions[r] = &regions[r]->manager();
  }
  runtime.spill = &regions[0]->manager();
  if (!AttachStreams(args, runtime)) return Fail("no memory for the row sinks");

  uint8_t* arena = AlignedAlloc(args.arena_bytes);
  if (arena == nullptr) return Fail("no memory for the arena");
  tflite::RecordingMicroInterpreter interpreter(model, resolver, arena, args.arena_bytes);
  if (::tinyseg::AttachRuntime(interpreter, runtime) != kTfLiteOk) {
    return Fail("cannot attach the TinySeg runtime");
  }
  if (interpreter.AllocateTensors() != kTfLiteOk) return Fail("AllocateTensors failed");

  size_t needed = 0, output_bytes = 0;
  if (const char* refusal = BatchBytes(interpreter, args.sources, true, &needed)) {
    return Fail(refusal);
  }
  if (const char* refusal = BatchBytes(interpreter, args.sinks, false, &output_bytes)) {
    return Fail(refusal);
  }
  if (needed * static_cast<size_t>(args.batches) != input_size) {
    return Fail("input file size differs from the model's inputs times --batches");
  }
  FILE* out = fopen(argv[3], "wb");
  if (out == nullptr) return Fail("cannot write the output file");
  if (args.sweep != FaultKind::kNone) {
    Sweep w{interpreter, regions, args.extra + 1, input_data, plan};
    uint8_t* ref = static_cast<uint8_t*>(malloc(output_bytes + 1));
    if (ref == nullptr) return Fail("no memory for the clean outputs");
    return RunSweep(w, args.sweep, args.fault_limit, ref, output_bytes, out);
  }
  if (const char* failed = RunBatches(interpreter, args, input_data, regions, out)) {
    fclose(out);
    remove(argv[3]);  // no half-written outputs
    return Fail(failed);
  }
  if (fclose(out) != 0) return Fail("cannot write the output file");

  PrintStats(interpreter, runtime, regions, args.extra);
  fflush(stdout);
  AlignedFree(input_data);
  // The arena and the model stay allocated: the interpreter, destroyed on
  // return, still reads them.
  return 0;
}
