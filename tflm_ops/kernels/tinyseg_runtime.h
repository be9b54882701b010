// TinySeg kernels <-> application: the object through which the Spill,
// Fetching, FetchingConv2D and StreamChain kernels reach spill storage.
// StreamChain needs it only when its chain spills or fetches rows (row streams:
// SpillManager::BeginStream/Append/EndStream, FetchRange per row) or reads or writes rows through
// the application (row sources and sinks, below); it counts
// into `stats` like the others but applies neither release_after_fetch nor
// verify_spills (docs/runtime.md, "StreamChain and the runtime").
//
// Why an external context: a TFLMRegistration carries only function pointers,
// so a kernel cannot be bound to an application object at registration time
// without a global. TFLM's own per-interpreter hook is the external context
// (MicroInterpreter::SetMicroExternalContext, read by kernels through
// GetMicroContext(context)->external_context()). The application owns a
// tinyseg::Runtime, points it at its SpillManager and attaches it to the
// interpreter before AllocateTensors; nothing here is global, and two
// interpreters can use two different storages.
//
// Storage regions: a plan may keep its spill slots in several storages (say a
// second RAM bank beside the flash). A slot's region is an operator option
// (Spill "region", each fetched entry's "region", StreamChain "slot_regions";
// absent = 0). Region 0 is `spill`; regions 1..kMaxStorageRegions-1 are
// `regions[1..]`. Every kernel refuses, in Prepare, a region the attached
// Runtime holds no SpillManager for. `stats` counts across all regions.
//
// Row sources and sinks: a StreamChain may read a body tensor row by row from the application
// (body key "source": [local id, input index]) and hand one row by row to it ("sink": [local id,
// output index]), so that the arena never holds a whole camera frame or mask. The application fills
// sources[input index] and sinks[output index]; the kernel refuses, in Prepare, a chain whose
// entry is null or that runs without a Runtime. Both are plain function pointers with a user word:
// no heap, no virtual calls. A source is called from Invoke's thread for rows 0..height-1 of its
// input, in order, each once per inference, into the kernel's own row buffer of exactly `capacity`
// bytes; it may block until the row has arrived and must set `written` to `capacity`. A sink is
// called once per finished row, in order; its `src` is valid only during the call. A non-OK
// status, or a short or long `written`, fails Invoke (docs/runtime.md, "Row sources and sinks").
//
// The external context is a single slot per interpreter. An application that
// already uses it for something else (e.g. the Ethos-U driver) cannot also
// attach a Runtime; the kernels detect a foreign object by the magic word and
// fail with a clear message instead of misusing it.
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_RUNTIME_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_RUNTIME_H_

#include <cstddef>
#include <cstdint>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_contract.h"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tinyseg/spill_manager.h"
#include "tinyseg/status.h"

namespace tinyseg {

constexpr uint32_t kRuntimeMagic = 0x54535254u;  // "TRST" little-endian
constexpr int kMaxStorageRegions = tflite::tinyseg_ops::contract::kMaxRegions;
constexpr int kMaxRowStreams = tflite::tinyseg_ops::contract::kMaxRowStreams;

// Row `row` of streamed graph input `input` into `dst` (`capacity` bytes: one row); `*written`: the
// bytes delivered, which must be `capacity`.
using RowSourceFn = Status (*)(void* user, int32_t input, int32_t row, uint8_t* dst,
                               size_t capacity, size_t* written);
// Finished row `row` of streamed graph output `output` (`bytes` bytes, valid during the call).
using RowSinkFn = Status (*)(void* user, int32_t output, int32_t row, const uint8_t* src,
                             size_t bytes);

struct RowSource {
  RowSourceFn read = nullptr;
  void* user = nullptr;  // passed back to `read`
};

struct RowSink {
  RowSinkFn write = nullptr;
  void* user = nullptr;  // passed back to `write`
};

// What the kernels did, for reports and tests (application memory).
struct RuntimeStats {
  uint64_t spills = 0;          // Spill kernel invocations
  uint64_t spilled_bytes = 0;   // raw bytes handed to SpillManager::Spill
  uint64_t fetches = 0;         // SpillManager::FetchRange calls
  uint64_t fetched_bytes = 0;   // raw bytes decoded from storage
  uint64_t staged_bytes = 0;    // of those, bytes decoded via the staging buffer
  uint64_t bands = 0;           // FetchingConv2D bands computed
  uint64_t reused_rows = 0;     // band rows kept from the previous band
  uint64_t optimized_rows = 0;  // StreamChain stage rows computed by the build's optimized
                                // kernels (CMSIS-NN), not the reference arithmetic
  uint64_t optimized_transpose_conv_rows = 0;  // of those, TRANSPOSE_CONV stage rows
  uint64_t source_rows = 0;                    // rows a row source delivered to StreamChain
  uint64_t sink_rows = 0;                      // rows StreamChain handed to a row sink
};

struct Runtime {
  uint32_t magic = kRuntimeMagic;  // lets the kernels reject a foreign context
  SpillManager* spill = nullptr;   // region 0: storage of every slot without a region option
  // Regions 1..kMaxStorageRegions-1 (null: none). regions[0] stands in for `spill` only when
  // `spill` is null, so an application may fill the array alone.
  SpillManager* regions[kMaxStorageRegions] = {};
  // Release a slot after the fetching kernel that restores it has read it:
  // the optimizer emits exactly one fetching operator per slot and inference,
  // and a released slot lets SpillManager pre-erase its sectors early.
  bool release_after_fetch = true;
  // Read every spilled tensor back through the Spill kernel's staging buffer
  // and compare it with the victim (flash bring-up aid; costs a full read).
  bool verify_spills = false;
  // The streamed graph inputs' row sources and outputs' row sinks, by index (StreamChain "source"
  // and "sink"); a null function: none.
  RowSource sources[kMaxRowStreams] = {};
  RowSink sinks[kMaxRowStreams] = {};
  RuntimeStats stats;

  // The SpillManager of storage region `region`, or nullptr (none, or outside
  // 0..kMaxStorageRegions-1).
  SpillManager* storage(int region) const {
    if (region < 0 || region >= kMaxStorageRegions) return nullptr;
    if (region == 0 && spill != nullptr) return spill;
    return regions[region];
  }
};

// Attaches `runtime` to `interpreter` (call once, before AllocateTensors).
inline TfLiteStatus AttachRuntime(tflite::MicroInterpreter& interpreter, Runtime& runtime) {
  return interpreter.SetMicroExternalContext(&runtime);
}

}  // namespace tinyseg

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_RUNTIME_H_
