// Spill manager: ring log of compressed tensors over a flash region.
#include "tinyseg/spill_manager.h"

#include <cstring>

namespace tinyseg {

// Codec sink that fills the caller's staging buffer and programs it at the
// ring write position whenever it is full (`buf` bytes: a multiple of the
// program size).
class SpillSink final : public ByteSink {
 public:
  SpillSink(SpillManager& m, uint64_t start, uint8_t* buf, size_t bytes)
      : m_(m), pos_(start), buf_(buf), cap_(bytes) {}
  Status Write(const uint8_t* data, size_t len) override {
    while (len > 0) {
      const size_t room = cap_ - fill_;
      const size_t n = len < room ? len : room;
      std::memcpy(buf_ + fill_, data, n);
      fill_ += n;
      data += n;
      len -= n;
      if (fill_ == cap_) TINYSEG_RETURN_IF_ERROR(Flush(fill_));
    }
    return Status::kOk;
  }
  // Pads the tail to the program size with the erased value and programs it.
  Status Finish() {
    if (fill_ == 0) return Status::kOk;
    const size_t ps = m_.program_size_;
    const size_t padded = (fill_ + ps - 1) / ps * ps;
    std::memset(buf_ + fill_, m_.dev_.erased_value(), padded - fill_);
    return Flush(padded);
  }
  uint64_t programmed() const { return programmed_; }

 private:
  Status Flush(size_t n) {
    const Status s = m_.ProgramRing(pos_, buf_, n);
    if (Ok(s)) {
      pos_ = (pos_ + n) % m_.cfg_.region_size;
      programmed_ += n;
    }
    fill_ = 0;
    return s;
  }

  SpillManager& m_;
  uint64_t pos_;
  uint8_t* buf_;
  size_t cap_;
  size_t fill_ = 0;
  uint64_t programmed_ = 0;
};

// Codec source reading one slot's stream from the ring.
class SlotSource final : public ByteSource {
 public:
  SlotSource(SpillManager& m, const SpillSlot& s) : m_(m), s_(s) {}
  size_t Size() const override { return s_.length; }
  Status Read(size_t offset, uint8_t* dst, size_t len) override {
    if (offset > s_.length || len > s_.length - offset) return Status::kOutOfRange;
    const uint64_t ring = (s_.start + offset) % m_.cfg_.region_size;
    return m_.ReadRing(ring, dst, len);
  }

 private:
  SpillManager& m_;
  const SpillSlot& s_;
};

WearEstimate EstimateWear(uint64_t region_bytes, uint32_t sector_bytes,
                          uint64_t bytes_per_inference, uint32_t endurance) {
  WearEstimate w;
  if (sector_bytes == 0 || region_bytes == 0 || bytes_per_inference == 0) return w;
  w.erases_per_inference =
      static_cast<double>(bytes_per_inference) / static_cast<double>(sector_bytes);
  w.inferences_to_limit = static_cast<double>(endurance) * static_cast<double>(region_bytes) /
                          static_cast<double>(bytes_per_inference);
  return w;
}

SpillManager::SpillManager(BlockDevice& device, EraseQueue& erase_queue, const SpillConfig& config,
                           const SpillMemory& memory, VirtualClock* clock)
    : dev_(device), eq_(erase_queue), cfg_(config), mem_(memory), clock_(clock) {}

Status SpillManager::Init() {
  ready_ = false;
  const Geometry& g = dev_.geometry();
  TINYSEG_RETURN_IF_ERROR(ValidateGeometry(g));
  erase_size_ = g.erase_size;
  program_size_ = g.program_size;
  if (cfg_.region_size == 0 || cfg_.region_offset % g.erase_size != 0 ||
      cfg_.region_size % g.erase_size != 0) {
    return Status::kMisaligned;
  }
  if (cfg_.region_offset > g.total_size || cfg_.region_size > g.total_size - cfg_.region_offset) {
    return Status::kOutOfRange;
  }
  if (cfg_.region_size > 0xFFFFFFFFull) return Status::kInvalidArgument;
  nsec_ = static_cast<size_t>(cfg_.region_size / g.erase_size);
  if (mem_.slots == nullptr || mem_.num_slots == 0 || mem_.sectors == nullptr ||
      mem_.num_sectors < nsec_) {
    return Status::kInvalidArgument;
  }
  if (g.read_size > 1) {
    if (mem_.read_bounce == nullptr) return Status::kInvalidArgument;
    if (mem_.read_bounce_bytes < g.read_size) return Status::kBufferTooSmall;
  }
  if (cfg_.codec_block_bytes == 0 || cfg_.codec_block_bytes % 4 != 0 ||
      cfg_.codec_block_bytes > kMaxBlockBytes) {
    return Status::kInvalidArgument;
  }
  for (size_t i = 0; i < mem_.num_slots; ++i) mem_.slots[i] = SpillSlot();
  for (size_t i = 0; i < nsec_; ++i) {
    mem_.sectors[i] = SectorInfo();
    mem_.sectors[i].state = cfg_.assume_erased ? SectorState::kErased : SectorState::kDirty;
  }
  head_ = 0;
  checks_ = !dev_.IsRam() || cfg_.check_ram;
  program_failed_ = false;
  stats_ = SpillStats();
  erases_at_last_inference_ = 0;
  last_inference_erases_ = 0;
  ready_ = true;
  return PreErase();
}

bool SpillManager::RangeOverlapsLive(uint64_t start, uint64_t len) const {
  if (len == 0) return false;
  const uint64_t r = cfg_.region_size;
  for (size_t i = 0; i < mem_.num_slots; ++i) {
    const SpillSlot& s = mem_.slots[i];
    if (!s.live || s.stored == 0) continue;
    // Two arcs of a circle overlap iff one starts inside the other.
    if ((s.start + r - start) % r < len || (start + r - s.start) % r < s.stored) {
      return true;
    }
  }
  return false;
}

bool SpillManager::SectorHasLiveData(uint32_t sector) const {
  return RangeOverlapsLive(static_cast<uint64_t>(sector) * erase_size_, erase_size_);
}

Status SpillManager::SubmitErase(uint32_t sector) {
  const uint64_t addr = cfg_.region_offset + static_cast<uint64_t>(sector) * erase_size_;
  EraseTicket t = 0;
  Status s = eq_.Submit(addr, erase_size_, &t);
  while (s == Status::kBusy) {
    // Queue full: wait for our oldest pending erase, then retry.
    // A failed erase there only marks that sector for a fresh erase.
    EraseTicket oldest = 0;
    size_t which = 0;
    for (size_t i = 0; i < nsec_; ++i) {
      const SectorInfo& si = mem_.sectors[i];
      if (si.state == SectorState::kErasing && (oldest == 0 || si.ticket < oldest)) {
        oldest = si.ticket;
        which = i;
      }
    }
    if (oldest != 0) {
      (void)SettleErase(static_cast<uint32_t>(which));
    } else {
      (void)eq_.Drain();  // tickets not ours: their results are not ours either
    }
    s = eq_.Submit(addr, erase_size_, &t);
  }
  TINYSEG_RETURN_IF_ERROR(s);
  SectorInfo& si = mem_.sectors[sector];
  si.state = SectorState::kErasing;
  si.ticket = t;
  ++si.erases;
  ++stats_.erases_submitted;
  return Status::kOk;
}

Status SpillManager::PreErase() {
  const uint64_t k = head_ / erase_size_;
  const bool mid = (head_ % erase_size_) != 0;
  const uint64_t first = mid ? k + 1 : k;
  uint64_t n = cfg_.pre_erase_sectors;
  if (n > nsec_ - 1) n = nsec_ - 1;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t s = static_cast<uint32_t>((first + i) % nsec_);
    if (mid && s == k) break;
    if (mem_.sectors[s].state != SectorState::kDirty) continue;  // retired ones too
    if (SectorHasLiveData(s)) break;  // the head cannot pass live data anyway
    TINYSEG_RETURN_IF_ERROR(SubmitErase(s));
  }
  return Status::kOk;
}

// Waits for a sector's erase. A failure marks it dirty again (the next
// entry re-erases it) and counts towards retiring it.
Status SpillManager::SettleErase(uint32_t sector) {
  SectorInfo& si = mem_.sectors[sector];
  const Status s = eq_.Wait(si.ticket);
  if (Ok(s)) {
    si.state = SectorState::kErased;
    return Status::kOk;
  }
  ++stats_.erase_failures;
  si.state = SectorState::kDirty;
  NoteFailure(sector);
  return s;
}

void SpillManager::NoteFailure(uint32_t sector) {
  SectorInfo& si = mem_.sectors[sector];
  if (si.failures < 0xFF) ++si.failures;
  if (si.failures >= kRetireAfterFailures && si.state != SectorState::kRetired) {
    si.state = SectorState::kRetired;
    ++stats_.retired_sectors;
  }
}

Status SpillManager::EnsureErased(uint32_t sector) {
  SectorInfo& si = mem_.sectors[sector];
  if (si.state == SectorState::kErased) return Status::kOk;
  if (si.state == SectorState::kRetired) return Status::kNoSpace;
  if (si.state == SectorState::kDirty) TINYSEG_RETURN_IF_ERROR(SubmitErase(sector));
  if (!eq_.IsDone(si.ticket)) ++stats_.erase_waits;
  return SettleErase(sector);
}

Status SpillManager::Drain() {
  Status first = Status::kOk;
  for (size_t i = 0; i < nsec_; ++i) {
    if (mem_.sectors[i].state != SectorState::kErasing) continue;
    const Status s = SettleErase(static_cast<uint32_t>(i));
    if (Ok(first)) first = s;
  }
  const Status rest = eq_.Drain();  // erases submitted by others share the queue
  (void)rest;
  return first;
}

Status SpillManager::ProgramRing(uint64_t ring_off, const uint8_t* data, size_t len, bool ensure) {
  while (len > 0) {
    const uint32_t sector = static_cast<uint32_t>(ring_off / erase_size_);
    const uint64_t in_sector = erase_size_ - ring_off % erase_size_;
    const size_t n = len < in_sector ? len : static_cast<size_t>(in_sector);
    const uint64_t addr = cfg_.region_offset + ring_off;
    Status s = Status::kOk;
    if (ensure && ring_off % erase_size_ == 0) s = EnsureErased(sector);
    if (Ok(s)) s = eq_.AwaitBankIdle(addr, n);
    if (!Ok(s)) {
      // Nothing programmed here; what came before is: the head goes here.
      program_failed_ = true;
      fault_end_ = ring_off;
      return s;
    }
    s = dev_.Program(addr, data, n);
    mem_.sectors[sector].state = SectorState::kDirty;
    if (!Ok(s)) {
      // [ring_off, ring_off + n) may hold some of the bytes now: never
      // program there again before the sector is erased.
      ++stats_.program_failures;
      NoteFailure(sector);
      program_failed_ = true;
      fault_end_ = (ring_off + n) % cfg_.region_size;
      return s;
    }
    if (clock_) clock_->Advance(dev_.ModelledNs(Op::kProgram, addr, n));
    mem_.sectors[sector].failures = 0;
    stats_.bytes_programmed += n;
    data += n;
    len -= n;
    ring_off = (ring_off + n) % cfg_.region_size;
  }
  return Status::kOk;
}

// Whole read units (or any length when read_size is 1) straight into dst.
Status SpillManager::ReadUnits(uint64_t addr, uint8_t* dst, size_t len) {
  TINYSEG_RETURN_IF_ERROR(eq_.AwaitBankIdle(addr, len));
  TINYSEG_RETURN_IF_ERROR(dev_.Read(addr, dst, len));
  if (clock_) clock_->Advance(dev_.ModelledNs(Op::kRead, addr, len));
  stats_.bytes_read += len;
  return Status::kOk;
}

// Any byte range: the aligned middle goes straight into dst; a partial read
// unit at either end is read whole into the read bounce and copied from there.
Status SpillManager::DeviceRead(uint64_t addr, uint8_t* dst, size_t len) {
  const uint32_t rs = dev_.geometry().read_size;
  if (rs <= 1) return len == 0 ? Status::kOk : ReadUnits(addr, dst, len);
  while (len > 0) {
    const size_t skip = static_cast<size_t>(addr % rs);
    size_t take;
    if (skip == 0 && len >= rs) {
      take = len - len % rs;
      TINYSEG_RETURN_IF_ERROR(ReadUnits(addr, dst, take));
    } else {
      TINYSEG_RETURN_IF_ERROR(ReadUnits(addr - skip, mem_.read_bounce, rs));
      take = rs - skip < len ? rs - skip : len;
      std::memcpy(dst, mem_.read_bounce + skip, take);
    }
    dst += take;
    addr += take;
    len -= take;
  }
  return Status::kOk;
}

Status SpillManager::ReadRing(uint64_t ring_off, uint8_t* dst, size_t len) {
  while (len > 0) {
    const uint64_t to_end = cfg_.region_size - ring_off;
    const size_t n = len < to_end ? len : static_cast<size_t>(to_end);
    TINYSEG_RETURN_IF_ERROR(DeviceRead(cfg_.region_offset + ring_off, dst, n));
    dst += n;
    len -= n;
    ring_off = (ring_off + n) % cfg_.region_size;
  }
  return Status::kOk;
}

Status SpillManager::Spill(uint32_t slot, const void* data, size_t size, uint32_t elem_size,
                           ByteSpan staging, uint32_t block_bytes) {
  if (!ready_ || slot >= mem_.num_slots || (data == nullptr && size != 0) ||
      staging.data == nullptr) {
    return Status::kInvalidArgument;
  }
  if (staging.size < MinStagingBytes()) return Status::kBufferTooSmall;
  const uintptr_t s0 = reinterpret_cast<uintptr_t>(staging.data);
  const uintptr_t d0 = reinterpret_cast<uintptr_t>(data);
  if (size != 0 && s0 < d0 + size && d0 < s0 + staging.size) {
    return Status::kInvalidArgument;  // the sink would overwrite unread input
  }
  const CodecParams params{elem_size, block_bytes != 0 ? block_bytes : cfg_.codec_block_bytes,
                           checks_};
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  size_t encoded = 0;
  TINYSEG_RETURN_IF_ERROR(MeasureEncodedSize(bytes, size, params, &encoded));
  mem_.slots[slot].live = false;  // re-spill replaces the old data

  const uint64_t stored = (encoded + program_size_ - 1) / program_size_ * program_size_;
  TINYSEG_RETURN_IF_ERROR(ReserveAtHead(stored));

  SpillSink sink(*this, head_, staging.data, staging.size - staging.size % program_size_);
  program_failed_ = false;
  Status s = Encode(bytes, size, params, sink, nullptr);
  if (Ok(s)) s = sink.Finish();
  // Keep the invariant "bytes after the head are erased" even on failure:
  // a failed program may have left bytes anywhere in its range.
  head_ = program_failed_ ? fault_end_ : (head_ + sink.programmed()) % cfg_.region_size;
  program_failed_ = false;
  TINYSEG_RETURN_IF_ERROR(s);

  SpillSlot& sl = mem_.slots[slot];
  sl.live = true;
  sl.writing = false;
  sl.start = (head_ + cfg_.region_size - stored) % cfg_.region_size;
  sl.length = static_cast<uint32_t>(encoded);
  sl.stored = static_cast<uint32_t>(stored);
  sl.raw_bytes = static_cast<uint32_t>(size);
  sl.elem_size = elem_size;
  ++stats_.spills;
  stats_.raw_bytes_spilled += size;
  stats_.encoded_bytes += encoded;
  return cfg_.pre_erase_after_spill ? PreErase() : Status::kOk;
}

Status SpillManager::FetchRange(uint32_t slot, size_t offset, size_t length, void* dst) {
  if (!ready_ || slot >= mem_.num_slots) return Status::kInvalidArgument;
  const SpillSlot& sl = mem_.slots[slot];
  if (!sl.live || sl.writing) return Status::kNotFound;
  SlotSource src(*this, sl);
  StreamReader reader;
  Status s = reader.Open(src);
  if (Ok(s)) s = reader.DecodeRange(offset, length, static_cast<uint8_t*>(dst));
  if (s == Status::kChecksumMismatch) ++stats_.checksum_failures;
  TINYSEG_RETURN_IF_ERROR(s);
  ++stats_.fetches;
  return Status::kOk;
}

// Moves the head past retired sectors until [head, head + bytes) avoids them
// (the rest of the head's sector stays unused until its next erase).
Status SpillManager::SkipRetired(uint64_t bytes) {
  for (size_t attempt = 0; attempt <= nsec_; ++attempt) {
    const uint64_t first_off = head_ % erase_size_;
    const uint64_t count = (first_off + bytes + erase_size_ - 1) / erase_size_;
    if (bytes > cfg_.region_size || count > nsec_) return Status::kNoSpace;
    const uint64_t k = head_ / erase_size_;
    uint64_t retired = nsec_;
    for (uint64_t i = 0; i < count && retired == nsec_; ++i) {
      if (mem_.sectors[(k + i) % nsec_].state == SectorState::kRetired) retired = (k + i) % nsec_;
    }
    if (retired == nsec_) return Status::kOk;
    head_ = ((retired + 1) % nsec_) * erase_size_;
  }
  return Status::kNoSpace;  // every sector retired
}

Status SpillManager::ReserveAtHead(uint64_t stored) {
  TINYSEG_RETURN_IF_ERROR(SkipRetired(stored));
  const uint64_t first_off = head_ % erase_size_;
  const uint64_t count = (first_off + stored + erase_size_ - 1) / erase_size_;
  if (stored > cfg_.region_size || count > nsec_) return Status::kNoSpace;
  const uint64_t k = head_ / erase_size_;
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t s = static_cast<uint32_t>((k + i) % nsec_);
    const bool entered = i > 0 || first_off == 0;
    if (entered && mem_.sectors[s].state == SectorState::kDirty && SectorHasLiveData(s)) {
      return Status::kNoSpace;
    }
  }
  // Start every needed erase now; programs wait only for the ones not done.
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t s = static_cast<uint32_t>((k + i) % nsec_);
    const bool entered = i > 0 || first_off == 0;
    if (entered && mem_.sectors[s].state == SectorState::kDirty) {
      TINYSEG_RETURN_IF_ERROR(SubmitErase(s));
    }
  }
  return Status::kOk;
}

// ---------------------------------------------------------------- row streams

// Codec sink over one area of an open stream (area 1: the blocks).
class StreamUnitSink final : public ByteSink {
 public:
  StreamUnitSink(SpillManager& m, SpillStream* st) : m_(m), st_(st) {}
  Status Write(const uint8_t* data, size_t len) override {
    return m_.StreamWrite(st_, 1, data, len);
  }

 private:
  SpillManager& m_;
  SpillStream* st_;
};

// Collects bytes of an area into its unit and programs every full unit at the
// area's next position: area 0 from stream offset 0 (header, index), area 1
// from data_start (blocks).
Status SpillManager::StreamWrite(SpillStream* st, int area, const uint8_t* data, size_t len) {
  while (len > 0) {
    const size_t room = kStreamUnitBytes - st->unit_fill[area];
    const size_t n = len < room ? len : room;
    std::memcpy(st->unit[area] + st->unit_fill[area], data, n);
    st->unit_fill[area] += static_cast<uint32_t>(n);
    data += n;
    len -= n;
    if (st->unit_fill[area] == kStreamUnitBytes)
      TINYSEG_RETURN_IF_ERROR(StreamFlush(st, area, false));
  }
  return Status::kOk;
}

Status SpillManager::StreamFlush(SpillStream* st, int area, bool pad) {
  uint32_t n = st->unit_fill[area];
  if (n == 0) return Status::kOk;
  if (pad) {
    const uint32_t padded = (n + program_size_ - 1) / program_size_ * program_size_;
    std::memset(st->unit[area] + n, dev_.erased_value(), padded - n);
    n = padded;
  }
  uint32_t& flushed = area == 0 ? st->meta_flushed : st->data_flushed;
  const uint32_t at = (area == 0 ? 0 : st->data_start) + flushed;
  if (at + n > st->reserved || (area == 0 && at + n > st->data_start)) return Status::kCorrupt;
  TINYSEG_RETURN_IF_ERROR(
      ProgramRing((st->start + at) % cfg_.region_size, st->unit[area], n, /*ensure=*/false));
  flushed += n;
  st->unit_fill[area] = 0;
  return Status::kOk;
}

// Encodes the accumulated block and records its offset in the index.
Status SpillManager::StreamBlock(SpillStream* st) {
  uint8_t entry[kIndexEntryBytes];
  const uint32_t off = st->data_end;
  for (size_t i = 0; i < kIndexEntryBytes; ++i) entry[i] = static_cast<uint8_t>(off >> (8 * i));
  TINYSEG_RETURN_IF_ERROR(StreamWrite(st, 0, entry, sizeof(entry)));
  const uint32_t block = (st->appended - st->acc_fill) / st->block_bytes;
  StreamUnitSink sink(*this, st);
  size_t encoded = 0;
  TINYSEG_RETURN_IF_ERROR(EncodeBlock(st->accumulator, st->acc_fill, st->elem_size, block, off,
                                      checks_, sink, &encoded));
  st->data_end += static_cast<uint32_t>(encoded);
  st->acc_fill = 0;
  return Status::kOk;
}

// A failed stream leaves its slot empty (its reservation is free again).
Status SpillManager::AbortStream(SpillStream* st, Status why) {
  st->open = false;
  mem_.slots[st->slot].live = false;
  mem_.slots[st->slot].writing = false;
  program_failed_ = false;
  return why;
}

Status SpillManager::BeginStream(uint32_t slot, size_t total_bytes, uint32_t elem_size,
                                 uint8_t* accumulator, SpillStream* st, uint32_t block_bytes) {
  if (!ready_ || slot >= mem_.num_slots || accumulator == nullptr || st == nullptr ||
      total_bytes == 0) {
    return Status::kInvalidArgument;
  }
  if (kStreamUnitBytes % program_size_ != 0) return Status::kUnsupported;
  const CodecParams params{elem_size, block_bytes != 0 ? block_bytes : cfg_.codec_block_bytes,
                           checks_};
  TINYSEG_RETURN_IF_ERROR(ValidateCodecParams(total_bytes, params));
  const uint64_t nb = NumBlocks(total_bytes, params.block_bytes);
  const uint64_t meta = StreamMetaBytes(static_cast<size_t>(nb));
  const uint64_t data_start = (meta + program_size_ - 1) / program_size_ * program_size_;
  const uint64_t worst = data_start + nb * BlockOverheadBytes(checks_) + total_bytes;
  const uint64_t reserved = (worst + program_size_ - 1) / program_size_ * program_size_;
  if (reserved > 0xFFFFFFFFull) return Status::kOutOfRange;
  mem_.slots[slot].live = false;  // a new stream replaces the old data
  mem_.slots[slot].writing = false;
  TINYSEG_RETURN_IF_ERROR(ReserveAtHead(reserved));
  // Every sector the reservation enters is erased before anything is written
  // (the part of the head's sector after the head is erased already).
  {
    const uint64_t first_off = head_ % erase_size_;
    const uint64_t count = (first_off + reserved + erase_size_ - 1) / erase_size_;
    for (uint64_t i = first_off == 0 ? 0 : 1; i < count; ++i) {
      TINYSEG_RETURN_IF_ERROR(
          EnsureErased(static_cast<uint32_t>((head_ / erase_size_ + i) % nsec_)));
    }
  }

  *st = SpillStream();
  st->open = true;
  st->slot = slot;
  st->total = static_cast<uint32_t>(total_bytes);
  st->elem_size = elem_size;
  st->block_bytes = params.block_bytes;
  st->start = head_;
  st->reserved = static_cast<uint32_t>(reserved);
  st->data_start = static_cast<uint32_t>(data_start);
  st->data_end = static_cast<uint32_t>(data_start);
  st->accumulator = accumulator;
  head_ = (head_ + reserved) % cfg_.region_size;

  // The reservation is the slot's from now on: nothing erases or overwrites it.
  SpillSlot& sl = mem_.slots[slot];
  sl.live = true;
  sl.writing = true;
  sl.start = st->start;
  sl.length = 0;
  sl.stored = st->reserved;
  sl.raw_bytes = st->total;
  sl.elem_size = elem_size;

  uint8_t hdr[kStreamHeaderBytes];
  TINYSEG_RETURN_IF_ERROR(EncodeStreamHeader(total_bytes, params, hdr));
  return StreamWrite(st, 0, hdr, sizeof(hdr));
}

Status SpillManager::Append(SpillStream* st, const void* data, size_t size) {
  if (!ready_ || st == nullptr || !st->open || (data == nullptr && size != 0)) {
    return Status::kInvalidArgument;
  }
  if (size > st->total - st->appended) return Status::kOutOfRange;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const size_t room = st->block_bytes - st->acc_fill;
    const size_t n = size < room ? size : room;
    std::memcpy(st->accumulator + st->acc_fill, p, n);
    st->acc_fill += static_cast<uint32_t>(n);
    st->appended += static_cast<uint32_t>(n);
    p += n;
    size -= n;
    if (st->acc_fill == st->block_bytes) {
      const Status s = StreamBlock(st);
      if (!Ok(s)) return AbortStream(st, s);
    }
  }
  return Status::kOk;
}

Status SpillManager::EndStream(SpillStream* st) {
  if (!ready_ || st == nullptr || !st->open || st->appended != st->total) {
    return Status::kInvalidArgument;
  }
  Status s = st->acc_fill > 0 ? StreamBlock(st) : Status::kOk;
  if (Ok(s)) s = StreamFlush(st, 0, true);
  if (Ok(s)) s = StreamFlush(st, 1, true);
  if (!Ok(s)) return AbortStream(st, s);
  st->open = false;
  SpillSlot& sl = mem_.slots[st->slot];
  sl.writing = false;
  sl.length = st->data_end;
  ++stats_.spills;
  stats_.raw_bytes_spilled += st->total;
  stats_.encoded_bytes += st->data_end;
  return cfg_.pre_erase_after_spill ? PreErase() : Status::kOk;
}

Status SpillManager::Fetch(uint32_t slot, void* dst, size_t capacity) {
  if (!ready_ || slot >= mem_.num_slots) return Status::kInvalidArgument;
  const SpillSlot& sl = mem_.slots[slot];
  if (!sl.live) return Status::kNotFound;
  if (capacity < sl.raw_bytes) return Status::kBufferTooSmall;
  return FetchRange(slot, 0, sl.raw_bytes, dst);
}

Status SpillManager::Release(uint32_t slot) {
  if (!ready_ || slot >= mem_.num_slots) return Status::kInvalidArgument;
  if (!mem_.slots[slot].live) return Status::kNotFound;
  mem_.slots[slot].live = false;
  return PreErase();
}

void SpillManager::EndInference() {
  ++stats_.inferences;
  last_inference_erases_ = stats_.erases_submitted - erases_at_last_inference_;
  erases_at_last_inference_ = stats_.erases_submitted;
}

WearReport SpillManager::Wear(uint32_t endurance) const {
  WearReport w;
  w.inferences = stats_.inferences;
  w.last_inference_erases = last_inference_erases_;
  if (nsec_ == 0) return w;
  w.min_sector_erases = mem_.sectors[0].erases;
  for (size_t i = 0; i < nsec_; ++i) {
    const uint32_t e = mem_.sectors[i].erases;
    w.total_erases += e;
    if (e > w.max_sector_erases) w.max_sector_erases = e;
    if (e < w.min_sector_erases) w.min_sector_erases = e;
  }
  if (w.inferences > 0) {
    w.erases_per_inference =
        static_cast<double>(w.total_erases) / static_cast<double>(w.inferences);
  }
  if (w.max_sector_erases > 0) {
    w.projected_inferences = static_cast<double>(w.inferences) * static_cast<double>(endurance) /
                             static_cast<double>(w.max_sector_erases);
  }
  return w;
}

}  // namespace tinyseg
