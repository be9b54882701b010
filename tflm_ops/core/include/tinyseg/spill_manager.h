// Spill manager: compressed tensor spilling to a block device (paper sections
// 4.2.1, 5.1, 5.2).
//
// Spill slots (small integer ids, one per spilled tensor) map to byte ranges
// of a spill region, used as a ring log over its sectors: each spill is
// appended after the previous one (program-size aligned), wrapping at the
// region end, so erases rotate over every sector of the region (wear
// levelling). A sector is erased only when no live slot has data in it.
// Erases go through an EraseQueue: sectors ahead of the write head are
// pre-erased after every spill and release, and the spill path waits only
// when it must program a sector whose erase has not finished.
//
// Spill() streams the codec output to the device through a staging buffer the
// caller passes with each call (in TFLM: the Spill kernel's arena scratch, so
// the bytes the memory planner counts are the bytes used). FetchRange()
// decodes only the codec blocks covering the requested bytes, reading the
// device straight into the destination. No heap: what the manager keeps
// between calls is caller memory of fixed size (SpillMemory: the slot and
// sector tables, plus a read_size bounce on devices with read_size > 1).
//
// Faults (see docs/runtime.md, "Storage faults"): every stored codec block
// carries a CRC-32 (codec.h) that FetchRange verifies, so a flipped bit comes
// back as Status::kChecksumMismatch, never as wrong data with kOk. A failed
// program or erase fails the call that needed it; the manager then moves the
// write head past the damaged bytes, marks the sector for a fresh erase and,
// after kRetireAfterFailures failures of one sector without a good program
// in between, retires it (the ring skips it from then on), so the next
// inference spills normally.
#ifndef TINYSEG_SPILL_MANAGER_H_
#define TINYSEG_SPILL_MANAGER_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/block_device.h"
#include "tinyseg/codec.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/status.h"

namespace tinyseg {

struct SpillSlot {
  bool live = false;
  uint64_t start = 0;      // ring offset in the region
  uint32_t length = 0;     // encoded stream bytes
  uint32_t stored = 0;     // bytes used on flash (length rounded to program size)
  uint32_t raw_bytes = 0;  // original tensor bytes
  uint32_t elem_size = 0;
  bool writing = false;  // a row stream is still being written into it
};

// Row streams: a streamed chain writes a slot while it computes it,
// a few rows at a time, and may write several slots at once. BeginStream
// reserves the worst-case encoded size in the ring log, so streams never
// interleave; the stream header and the index are programmed as they become
// known, in program units of their own before the first block (the stream
// layout is the codec's, with a gap before the blocks). All state is in the
// caller's SpillStream and its block accumulator (block_bytes: the arena
// scratch the planner counts per spilled tensor of a chain).
constexpr size_t kStreamUnitBytes =
    64;  // program units are collected to this size (program size must divide it)

struct SpillStream {
  bool open = false;
  uint32_t slot = 0;
  uint32_t total = 0;     // raw bytes the stream will hold
  uint32_t appended = 0;  // raw bytes appended so far
  uint32_t elem_size = 0;
  uint32_t block_bytes = 0;
  uint64_t start = 0;         // ring offset of the reservation
  uint32_t reserved = 0;      // bytes reserved
  uint32_t data_start = 0;    // stream offset of the first block (program aligned)
  uint32_t data_end = 0;      // stream offset after the last block byte encoded
  uint32_t meta_fill = 0;     // header/index bytes collected (stream offset 0 onwards)
  uint32_t meta_flushed = 0;  // header/index bytes programmed
  uint32_t data_flushed = 0;  // block bytes programmed (from data_start)
  uint32_t unit_fill[2] = {0, 0};
  uint8_t unit[2][kStreamUnitBytes];  // [0]: header/index, [1]: blocks
  uint8_t* accumulator = nullptr;     // block_bytes of caller memory
  uint32_t acc_fill = 0;
};

enum class SectorState : uint8_t { kDirty = 0, kErasing = 1, kErased = 2, kRetired = 3 };

// Failed programs/erases of one sector, without a good program in between,
// after which the sector is retired.
constexpr uint8_t kRetireAfterFailures = 3;

struct SectorInfo {
  SectorState state = SectorState::kDirty;
  uint8_t failures = 0;    // see kRetireAfterFailures
  EraseTicket ticket = 0;  // valid while kErasing
  uint32_t erases = 0;     // erases issued by this manager
};

struct SpillConfig {
  uint64_t region_offset = 0;  // device byte offset, erase-aligned
  uint64_t region_size = 0;    // bytes, multiple of the erase size
  uint32_t codec_block_bytes = 1024;
  uint32_t pre_erase_sectors = 2;  // sectors kept erased ahead of the head
  // Pre-erase after every spill too (not only after Init/Release). Off suits
  // one-bank flash when spills come in bursts: an erase started between two
  // spills blocks the bank for the second one.
  bool pre_erase_after_spill = true;
  bool assume_erased = false;  // region known erased at Init
  // Stored blocks carry a CRC-32 checked on every fetch. Always on for flash
  // and remote devices; on a RAM device (BlockDevice::IsRam) only when set,
  // since RAM that holds the arena too gains little from it.
  bool check_ram = true;
};

// A caller buffer lent to the manager for the duration of one call.
struct ByteSpan {
  uint8_t* data = nullptr;
  size_t size = 0;
};

// What the manager keeps between calls (all caller memory, fixed size).
struct SpillMemory {
  SpillSlot* slots = nullptr;
  size_t num_slots = 0;
  SectorInfo* sectors = nullptr;  // region_size / erase_size entries
  size_t num_sectors = 0;
  // One device read unit, for reads that do not start or end on a read_size
  // boundary: at least read_size bytes. Only needed (and only checked) when
  // the device's read_size is > 1; NOR flash with read_size 1 needs none.
  uint8_t* read_bounce = nullptr;
  size_t read_bounce_bytes = 0;
};

struct SpillStats {
  uint64_t spills = 0;
  uint64_t fetches = 0;
  uint64_t raw_bytes_spilled = 0;
  uint64_t encoded_bytes = 0;
  uint64_t bytes_programmed = 0;  // incl. alignment padding
  uint64_t bytes_read = 0;        // device bytes read by fetches
  uint64_t erases_submitted = 0;  // sectors
  uint64_t erase_waits = 0;       // programs that found their sector not yet erased
  uint64_t inferences = 0;
  uint64_t program_failures = 0;   // device programs that failed
  uint64_t erase_failures = 0;     // sector erases that failed
  uint64_t checksum_failures = 0;  // fetches refused with kChecksumMismatch
  uint64_t retired_sectors = 0;
};

struct WearReport {
  uint64_t inferences = 0;
  uint64_t total_erases = 0;
  uint32_t max_sector_erases = 0;
  uint32_t min_sector_erases = 0;
  uint64_t last_inference_erases = 0;
  double erases_per_inference = 0.0;
  // inferences * endurance / max_sector_erases (0 when nothing was erased).
  double projected_inferences = 0.0;
};

struct WearEstimate {
  double erases_per_inference = 0.0;  // sectors erased per inference, steady state
  double inferences_to_limit = 0.0;   // before any sector reaches `endurance`
};

// Steady-state wear of a ring over region_bytes with perfect rotation:
// every inference writes bytes_per_inference (after alignment padding), so
// each sector is erased once per region_bytes / bytes_per_inference
// inferences.
WearEstimate EstimateWear(uint64_t region_bytes, uint32_t sector_bytes,
                          uint64_t bytes_per_inference, uint32_t endurance = 10000);

class SpillManager {
 public:
  // clock (optional): flash reads/programs are booked on it as main-core time.
  SpillManager(BlockDevice& device, EraseQueue& erase_queue, const SpillConfig& config,
               const SpillMemory& memory, VirtualClock* clock = nullptr);

  // Validates configuration and memory, forgets every slot and pre-erases.
  Status Init();

  // Compresses data[0, size) and appends it to the ring under `slot`
  // (replacing that slot's previous data). The encoded stream reaches the
  // device through `staging`: at least MinStagingBytes() bytes (else
  // kBufferTooSmall, nothing changed), not overlapping data (else
  // kInvalidArgument); only its first whole multiple of the program size is
  // used. The manager does not keep it after the call. `block_bytes` is the
  // codec block (a multiple of elem_size, at most kMaxBlockBytes; else
  // kInvalidArgument): the Spill operator's `block` option, so the block the
  // optimizer chose is the one encoded; 0 takes SpillConfig::codec_block_bytes.
  // Fetches read the block size from the stream, whatever it was.
  Status Spill(uint32_t slot, const void* data, size_t size, uint32_t elem_size, ByteSpan staging,
               uint32_t block_bytes = 0);

  // Opens a row stream into `slot` (replacing its data) for total_bytes raw
  // bytes. accumulator: block_bytes of caller memory that outlives the stream
  // (block_bytes 0 takes SpillConfig::codec_block_bytes). kNoSpace when the
  // worst-case size does not fit before live data; kUnsupported when the
  // program size does not divide kStreamUnitBytes.
  Status BeginStream(uint32_t slot, size_t total_bytes, uint32_t elem_size, uint8_t* accumulator,
                     SpillStream* stream, uint32_t block_bytes = 0);
  // Appends the next raw bytes (any length; blocks are encoded as they fill).
  // kOutOfRange past total_bytes.
  Status Append(SpillStream* stream, const void* data, size_t size);
  // Encodes the last block, programs what is left and makes the slot
  // fetchable. kInvalidArgument unless exactly total_bytes were appended.
  Status EndStream(SpillStream* stream);

  // Smallest staging buffer Spill accepts: one program unit (valid after Init).
  size_t MinStagingBytes() const { return program_size_; }

  // Decodes original bytes [offset, offset + length) of `slot` into dst,
  // reading only the codec blocks that cover them. No buffer besides dst
  // (and the read bounce of SpillMemory on read_size > 1 devices).
  Status FetchRange(uint32_t slot, size_t offset, size_t length, void* dst);
  Status Fetch(uint32_t slot, void* dst, size_t capacity);

  // Marks a slot's data dead so its sectors can be erased and reused.
  Status Release(uint32_t slot);

  // Marks the end of one inference (for the wear report).
  void EndInference();

  // Waits for every queued erase; returns the first failure among them
  // (each failed sector is marked for a fresh erase, as in a spill).
  Status Drain();

  // Whether spilled blocks carry a CRC-32 (valid after Init).
  bool checks_blocks() const { return checks_; }

  WearReport Wear(uint32_t endurance = 10000) const;
  const SpillStats& stats() const { return stats_; }
  const SpillSlot* slot(uint32_t id) const {
    return id < mem_.num_slots ? &mem_.slots[id] : nullptr;
  }
  uint64_t head() const { return head_; }
  uint32_t num_sectors() const { return static_cast<uint32_t>(nsec_); }
  const SectorInfo& sector(uint32_t i) const { return mem_.sectors[i]; }

 private:
  friend class SpillSink;
  friend class SlotSource;
  friend class StreamUnitSink;

  Status ReserveAtHead(uint64_t bytes);  // checks and erases what [head, head + bytes) needs
  Status StreamWrite(SpillStream* st, int area, const uint8_t* data, size_t len);
  Status StreamFlush(SpillStream* st, int area, bool pad);
  Status StreamBlock(SpillStream* st);
  Status AbortStream(SpillStream* st, Status why);

  void NoteFailure(uint32_t sector);
  Status SkipRetired(uint64_t bytes);
  Status SettleErase(uint32_t sector);
  bool SectorHasLiveData(uint32_t sector) const;
  bool RangeOverlapsLive(uint64_t start, uint64_t len) const;
  Status SubmitErase(uint32_t sector);
  Status PreErase();
  Status EnsureErased(uint32_t sector);
  // ensure: wait for (or start) the erase of each sector entered at its start.
  // Row streams pass false: BeginStream has erased their whole reservation,
  // and their two areas program out of order, so a sector boundary reached
  // late must not erase what the other area already wrote.
  Status ProgramRing(uint64_t ring_off, const uint8_t* data, size_t len, bool ensure = true);
  Status ReadRing(uint64_t ring_off, uint8_t* dst, size_t len);
  Status DeviceRead(uint64_t addr, uint8_t* dst, size_t len);
  Status ReadUnits(uint64_t addr, uint8_t* dst, size_t len);

  BlockDevice& dev_;
  EraseQueue& eq_;
  SpillConfig cfg_;
  SpillMemory mem_;
  VirtualClock* clock_;
  uint32_t erase_size_ = 0;
  uint32_t program_size_ = 0;
  size_t nsec_ = 0;
  uint64_t head_ = 0;  // ring offset of the next write, program-aligned
  bool ready_ = false;
  bool checks_ = true;
  bool program_failed_ = false;  // ProgramRing stopped early (read by Spill)
  uint64_t fault_end_ = 0;       // ring offset where the bytes after it are still erased
  SpillStats stats_;
  uint64_t erases_at_last_inference_ = 0;
  uint64_t last_inference_erases_ = 0;
};

}  // namespace tinyseg

#endif  // TINYSEG_SPILL_MANAGER_H_
