// Remote spilling protocol: framing, client with retries, reference host.
// See remote_protocol.h for the wire format.
#include "tinyseg/remote_protocol.h"

#include <cstring>

namespace tinyseg {
namespace remote {
namespace {

void PutU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t GetU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t GetU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

bool IsKnownType(uint8_t t) { return (t >= 0x01 && t <= 0x07) || (t >= 0x80 && t <= 0x83); }

// Signed difference of wrapping millisecond stamps.
int32_t MsUntil(uint32_t deadline, uint32_t now) { return static_cast<int32_t>(deadline - now); }

// A request's header: its type, slot, offset and argument (the sequence number is Transact's).
FrameHeader Request(MsgType type, uint32_t slot = 0, uint32_t offset = 0, uint32_t arg = 0) {
  return FrameHeader{type, /*flags=*/0, /*seq=*/0, slot, offset, arg};
}

// By value (remote_protocol.h numbers RemoteError from 0 without gaps).
constexpr const char* kRemoteErrorNames[] = {
    "none", "timeout", "corrupt_frame", "nak", "remote_status", "protocol", "stream",
};
static_assert(NamesUpTo(kRemoteErrorNames, RemoteError::kStream), "a name for every RemoteError");
}  // namespace

const char* RemoteErrorName(RemoteError e) { return EnumName(e, kRemoteErrorNames); }

size_t CobsEncode(const uint8_t* in, size_t len, uint8_t* out, size_t cap) {
  if (cap < CobsMaxEncoded(len)) return 0;
  size_t code_at = 0;  // where the current block's code byte goes
  size_t o = 1;
  uint8_t code = 1;
  for (size_t i = 0; i < len; ++i) {
    if (in[i] == 0) {
      out[code_at] = code;
      code_at = o++;
      code = 1;
    } else {
      out[o++] = in[i];
      if (++code == 0xFF) {
        out[code_at] = code;
        code_at = o++;
        code = 1;
      }
    }
  }
  out[code_at] = code;
  return o;
}

bool CobsDecode(const uint8_t* in, size_t len, uint8_t* out, size_t* out_len) {
  // The zero that ends a block is written only once the next block's code
  // byte has been read, so decoding in place never overwrites unread input.
  size_t i = 0, o = 0;
  bool pending_zero = false;
  while (i < len) {
    const uint8_t code = in[i++];
    if (code == 0) return false;
    if (pending_zero) out[o++] = 0;
    const size_t n = static_cast<size_t>(code) - 1;
    if (n > len - i) return false;
    for (size_t k = 0; k < n; ++k) {
      if (in[i] == 0) return false;  // 0x00 never occurs inside an encoded frame
      out[o++] = in[i++];
    }
    pending_zero = code != 0xFF;
  }
  *out_len = o;
  return true;
}

size_t EncodeFrame(const FrameHeader& h, const uint8_t* payload, size_t len, uint8_t* scratch,
                   size_t scratch_cap, uint8_t* out, size_t out_cap) {
  const size_t raw_len = kHeaderBytes + len + kCrcBytes;
  if (scratch_cap < raw_len || (len > 0 && payload == nullptr)) return 0;
  scratch[0] = static_cast<uint8_t>(h.type);
  scratch[1] = h.flags;
  PutU16(scratch + 2, h.seq);
  PutU32(scratch + 4, h.slot);
  PutU32(scratch + 8, h.offset);
  PutU32(scratch + 12, h.arg);
  if (len) std::memcpy(scratch + kHeaderBytes, payload, len);
  PutU32(scratch + kHeaderBytes + len, Crc32(scratch, kHeaderBytes + len));
  if (out_cap < 1) return 0;
  const size_t n = CobsEncode(scratch, raw_len, out, out_cap - 1);
  if (n == 0) return 0;
  out[n] = 0;
  return n + 1;
}

Status ParseFrame(const uint8_t* frame, size_t len, FrameHeader* h, const uint8_t** payload,
                  size_t* payload_len) {
  if (len < kHeaderBytes + kCrcBytes) return Status::kCorrupt;
  const size_t body = len - kCrcBytes;
  if (Crc32(frame, body) != GetU32(frame + body)) return Status::kCorrupt;
  if (!IsKnownType(frame[0])) return Status::kCorrupt;
  h->type = static_cast<MsgType>(frame[0]);
  h->flags = frame[1];
  h->seq = GetU16(frame + 2);
  h->slot = GetU32(frame + 4);
  h->offset = GetU32(frame + 8);
  h->arg = GetU32(frame + 12);
  *payload = frame + kHeaderBytes;
  *payload_len = body - kHeaderBytes;
  return Status::kOk;
}

FrameAssembler::Event FrameAssembler::Push(uint8_t byte) {
  if (byte != 0) {
    if (len_ < cap_) {
      buf_[len_++] = byte;
    } else {
      overflow_ = true;
    }
    return Event::kNone;
  }
  // Delimiter.
  const bool overflow = overflow_;
  const size_t n = len_;
  len_ = 0;
  overflow_ = false;
  if (overflow) return Event::kBadFrame;
  if (n == 0) return Event::kNone;  // idle / resync delimiter
  size_t out = 0;
  if (!CobsDecode(buf_, n, buf_, &out)) return Event::kBadFrame;
  frame_len_ = out;
  return Event::kFrame;
}

// ---------------------------------------------------------------- client

RemoteClient::RemoteClient(ByteStream& stream, const ClientConfig& config, uint8_t* buffer,
                           size_t buffer_bytes)
    : s_(stream), cfg_(config), buf_(buffer), buf_bytes_(buffer_bytes), rx_(nullptr, 0) {}

Status RemoteClient::Init() {
  if (buf_ == nullptr || cfg_.max_payload == 0 || cfg_.max_payload > kMaxPayloadLimit ||
      cfg_.max_attempts == 0 || cfg_.timeout_ms == 0) {
    return Status::kInvalidArgument;
  }
  if (buf_bytes_ < ClientBufferBytes(cfg_.max_payload)) return Status::kBufferTooSmall;
  const size_t wire = MaxWireFrame(cfg_.max_payload);
  tx_ = buf_;
  tx_cap_ = wire;
  raw_ = buf_ + wire;
  raw_cap_ = kHeaderBytes + cfg_.max_payload + kCrcBytes;
  rx_ = FrameAssembler(raw_ + raw_cap_, wire);
  chunk_ = cfg_.max_payload;
  pend_pos_ = pend_len_ = 0;
  ready_ = true;
  return Status::kOk;
}

Status RemoteClient::Receive(uint32_t deadline_ms, bool* timed_out) {
  *timed_out = false;
  for (;;) {
    while (pend_pos_ < pend_len_) {
      const FrameAssembler::Event e = rx_.Push(pend_[pend_pos_++]);
      if (e == FrameAssembler::Event::kFrame) return Status::kOk;
      if (e == FrameAssembler::Event::kBadFrame) return Status::kCorrupt;
    }
    const int32_t left = MsUntil(deadline_ms, s_.NowMs());
    if (left <= 0) {
      *timed_out = true;
      return Status::kIoError;
    }
    size_t got = 0;
    const Status st = s_.Read(pend_, sizeof(pend_), static_cast<uint32_t>(left), &got);
    if (!Ok(st)) return st;
    stats_.bytes_received += got;
    pend_pos_ = 0;
    pend_len_ = got;
  }
}

Status RemoteClient::Transact(const FrameHeader& req_in, const uint8_t* payload, size_t len,
                              MsgType expect) {
  if (!ready_) return Status::kInvalidArgument;
  if (len > cfg_.max_payload) return Status::kInvalidArgument;
  FrameHeader req = req_in;
  seq_ = static_cast<uint16_t>(seq_ + 1);
  if (seq_ == 0) seq_ = 1;  // 0 is never a request seq
  req.seq = seq_;
  const size_t wire = EncodeFrame(req, payload, len, raw_, raw_cap_, tx_, tx_cap_);
  if (wire == 0) return Status::kBufferTooSmall;
  ++stats_.requests;
  last_error_ = RemoteError::kNone;
  RemoteError failure = RemoteError::kTimeout;
  for (uint32_t attempt = 0; attempt < cfg_.max_attempts; ++attempt) {
    if (attempt > 0) ++stats_.retries;
    const Status ws = s_.Write(tx_, wire);
    if (!Ok(ws)) {
      last_error_ = RemoteError::kStream;
      return ws;
    }
    ++stats_.frames_sent;
    stats_.bytes_sent += wire;
    const uint32_t deadline = s_.NowMs() + cfg_.timeout_ms;
    for (;;) {
      bool timed_out = false;
      const Status rs = Receive(deadline, &timed_out);
      if (timed_out) {
        ++stats_.timeouts;
        failure = RemoteError::kTimeout;
        break;  // resend
      }
      if (rs == Status::kCorrupt) {
        ++stats_.bad_frames;
        failure = RemoteError::kCorruptFrame;
        break;  // resend: the host answers a repeated seq from its cache
      }
      if (!Ok(rs)) {
        last_error_ = RemoteError::kStream;
        return rs;
      }
      FrameHeader h;
      const uint8_t* p = nullptr;
      size_t n = 0;
      if (!Ok(ParseFrame(rx_.frame(), rx_.frame_len(), &h, &p, &n))) {
        ++stats_.bad_frames;
        failure = RemoteError::kCorruptFrame;
        break;
      }
      if (h.type == MsgType::kNak) {
        ++stats_.naks;
        failure = RemoteError::kNak;
        break;
      }
      if (h.seq != seq_) {
        ++stats_.stale;
        continue;  // a duplicate answer to an earlier request
      }
      if (h.type == MsgType::kError) {
        last_error_ = RemoteError::kRemoteStatus;
        const Status remote = static_cast<Status>(static_cast<int32_t>(h.arg));
        return (h.arg == 0 || h.arg > static_cast<uint32_t>(Status::kUnsupported))
                   ? Status::kIoError
                   : remote;
      }
      if (h.type != expect) {
        last_error_ = RemoteError::kProtocol;
        return Status::kCorrupt;
      }
      rx_hdr_ = h;
      rx_payload_ = p;
      rx_len_ = n;
      return Status::kOk;
    }
  }
  last_error_ = failure;
  return Status::kIoError;
}

Status RemoteClient::Hello(uint32_t* host_version) {
  if (!ready_) return Status::kInvalidArgument;
  // A lone delimiter ends whatever partial frame the host may hold.
  const uint8_t resync = 0;
  TINYSEG_RETURN_IF_ERROR(s_.Write(&resync, 1));
  pend_pos_ = pend_len_ = 0;
  rx_.Reset();
  const FrameHeader h = Request(MsgType::kHello, 0, 0, kProtocolVersion);
  uint8_t p[4];
  PutU32(p, cfg_.max_payload);
  TINYSEG_RETURN_IF_ERROR(Transact(h, p, sizeof(p), MsgType::kAck));
  if (rx_len_ < 4) {
    last_error_ = RemoteError::kProtocol;
    return Status::kCorrupt;
  }
  if (rx_hdr_.arg != kProtocolVersion) {
    last_error_ = RemoteError::kProtocol;
    return Status::kUnsupported;
  }
  const uint32_t host_max = GetU32(rx_payload_);
  if (host_max == 0) {
    last_error_ = RemoteError::kProtocol;
    return Status::kCorrupt;
  }
  chunk_ = host_max < cfg_.max_payload ? host_max : cfg_.max_payload;
  if (host_version) *host_version = rx_hdr_.arg;
  return Status::kOk;
}

Status RemoteClient::Write(uint32_t slot, uint32_t offset, const void* data, size_t len) {
  if (data == nullptr && len > 0) return Status::kInvalidArgument;
  if (static_cast<uint64_t>(offset) + len > 0xFFFFFFFFull) return Status::kOutOfRange;
  const uint8_t* src = static_cast<const uint8_t*>(data);
  size_t done = 0;
  do {
    const size_t n = (len - done) < chunk_ ? (len - done) : chunk_;
    const FrameHeader h = Request(MsgType::kWrite, slot, offset + static_cast<uint32_t>(done),
                                  static_cast<uint32_t>(n));
    TINYSEG_RETURN_IF_ERROR(Transact(h, src + done, n, MsgType::kAck));
    if (rx_hdr_.arg != n) {
      last_error_ = RemoteError::kProtocol;
      return Status::kCorrupt;
    }
    done += n;
  } while (done < len);
  return Status::kOk;
}

Status RemoteClient::Read(uint32_t slot, uint32_t offset, void* dst, size_t len) {
  if (dst == nullptr && len > 0) return Status::kInvalidArgument;
  if (static_cast<uint64_t>(offset) + len > 0xFFFFFFFFull) return Status::kOutOfRange;
  uint8_t* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < len) {
    const size_t n = (len - done) < chunk_ ? (len - done) : chunk_;
    const FrameHeader h = Request(MsgType::kRead, slot, offset + static_cast<uint32_t>(done),
                                  static_cast<uint32_t>(n));
    TINYSEG_RETURN_IF_ERROR(Transact(h, nullptr, 0, MsgType::kData));
    if (rx_len_ != n) {  // never hand back a short or long read as data
      last_error_ = RemoteError::kProtocol;
      return Status::kCorrupt;
    }
    std::memcpy(out + done, rx_payload_, n);
    done += n;
  }
  return Status::kOk;
}

Status RemoteClient::Erase(uint32_t slot, uint32_t offset, uint32_t len) {
  return Transact(Request(MsgType::kErase, slot, offset, len), nullptr, 0, MsgType::kAck);
}

Status RemoteClient::Drop(uint32_t slot) {
  return Transact(Request(MsgType::kDrop, slot), nullptr, 0, MsgType::kAck);
}

Status RemoteClient::Size(uint32_t slot, uint32_t* size) {
  if (size == nullptr) return Status::kInvalidArgument;
  TINYSEG_RETURN_IF_ERROR(Transact(Request(MsgType::kSize, slot), nullptr, 0, MsgType::kAck));
  *size = rx_hdr_.arg;
  return Status::kOk;
}

Status RemoteClient::Log(const char* text, size_t len) {
  if (text == nullptr && len > 0) return Status::kInvalidArgument;
  const size_t n = len < chunk_ ? len : chunk_;
  return Transact(Request(MsgType::kLog, 0, 0, static_cast<uint32_t>(n)),
                  reinterpret_cast<const uint8_t*>(text), n, MsgType::kAck);
}

// ---------------------------------------------------------------- block device

Status RemoteBlockDevice::Init() {
  TINYSEG_RETURN_IF_ERROR(ValidateGeometry(g_));
  if (g_.total_size > 0xFFFFFFFFull) return Status::kOutOfRange;
  DropLines();
  write_len_ = 0;
  ++requests_;
  return c_.Erase(slot_, 0, static_cast<uint32_t>(g_.total_size));
}

uint64_t RemoteBlockDevice::FrameNs(Op op, uint64_t len) const {
  if (link_.bytes_per_second == 0) return 0;
  const uint64_t chunk = c_.chunk_bytes() ? c_.chunk_bytes() : kDefaultMaxPayload;
  const uint64_t frames = (op == Op::kErase || len == 0) ? 1 : (len + chunk - 1) / chunk;
  const uint64_t overhead = kHeaderBytes + kCrcBytes + 2;  // + COBS code + delimiter
  uint64_t wire = frames * 2 * overhead;                   // request + response frames
  if (op != Op::kErase) wire += len + len / 254;
  return wire * 1000000000ull / link_.bytes_per_second + frames * link_.round_trip_ns;
}

Status RemoteBlockDevice::SendRead(uint64_t addr, uint8_t* dst, size_t len) {
  ++requests_;
  pending_ns_ += FrameNs(Op::kRead, len);
  return c_.Read(slot_, static_cast<uint32_t>(addr), dst, len);
}

Status RemoteBlockDevice::SendWrite(uint64_t addr, const uint8_t* src, size_t len) {
  ++requests_;
  pending_ns_ += FrameNs(Op::kProgram, len);
  return c_.Write(slot_, static_cast<uint32_t>(addr), src, len);
}

void RemoteBlockDevice::Record(Op op, uint64_t addr, uint64_t len, uint64_t ns) {
  last_op_ = op;
  last_addr_ = addr;
  last_len_ = len;
  last_ns_ = ns;
  have_last_ = true;
  wire_ns_ += ns;
}

Status RemoteBlockDevice::Flush() {
  if (write_len_ == 0) return Status::kOk;
  const size_t n = write_len_;
  write_len_ = 0;  // on failure the data is lost: the caller sees the error
  return SendWrite(write_addr_, cache_, n);
}

Status RemoteBlockDevice::Read(uint64_t addr, void* dst, size_t len) {
  TINYSEG_RETURN_IF_ERROR(CheckAccess(g_, addr, len, g_.read_size));
  pending_ns_ = 0;
  Status s = Status::kOk;
  if (len > 0) s = Flush();
  if (len > 0 && Ok(s)) {
    uint8_t* out = static_cast<uint8_t*>(dst);
    const size_t line_cap = cache_cap_ / 2;
    Line* hit = nullptr;
    for (Line& l : line_) {
      if (l.valid && addr >= l.addr && addr + len <= l.addr + l.len) hit = &l;
    }
    if (hit != nullptr) {
      hit->used = ++stamp_;
      std::memcpy(out, cache_ + (hit - line_) * line_cap + (addr - hit->addr), len);
    } else if (len >= line_cap) {
      s = SendRead(addr, out, len);  // no buffer, or bigger than a line
    } else {
      const size_t k =
          (!line_[0].valid || (line_[1].valid && line_[0].used < line_[1].used)) ? 0 : 1;
      Line& l = line_[k];
      const uint64_t left = g_.total_size - addr;
      const size_t fill = left < line_cap ? static_cast<size_t>(left) : line_cap;
      l.valid = false;
      s = SendRead(addr, cache_ + k * line_cap, fill);
      if (Ok(s)) {
        l.valid = true;
        l.addr = addr;
        l.len = fill;
        l.used = ++stamp_;
        std::memcpy(out, cache_ + k * line_cap, len);
      }
    }
  }
  Record(Op::kRead, addr, len, pending_ns_);
  return s;
}

Status RemoteBlockDevice::Program(uint64_t addr, const void* src, size_t len) {
  TINYSEG_RETURN_IF_ERROR(CheckAccess(g_, addr, len, g_.program_size));
  pending_ns_ = 0;
  Status s = Status::kOk;
  const uint8_t* in = static_cast<const uint8_t*>(src);
  if (len > 0) {
    DropLines();  // the write buffer reuses their memory (and may overlap them)
    const bool append =
        write_len_ > 0 && addr == write_addr_ + write_len_ && write_len_ + len <= cache_cap_;
    if (append) {
      std::memcpy(cache_ + write_len_, in, len);
      write_len_ += len;
    } else {
      s = Flush();
      if (Ok(s)) {
        if (len >= cache_cap_) {
          s = SendWrite(addr, in, len);
        } else {
          write_addr_ = addr;
          std::memcpy(cache_, in, len);
          write_len_ = len;
        }
      }
    }
    if (Ok(s) && write_len_ == cache_cap_ && cache_cap_ > 0) s = Flush();
  }
  Record(Op::kProgram, addr, len, pending_ns_);
  return s;
}

Status RemoteBlockDevice::Erase(uint64_t addr, uint64_t len) {
  TINYSEG_RETURN_IF_ERROR(CheckAccess(g_, addr, len, g_.erase_size));
  pending_ns_ = 0;
  Status s = Status::kOk;
  if (len > 0) {
    s = Flush();
    DropLines();
    if (Ok(s)) {
      ++requests_;
      pending_ns_ += FrameNs(Op::kErase, len);
      s = c_.Erase(slot_, static_cast<uint32_t>(addr), static_cast<uint32_t>(len));
    }
  }
  Record(Op::kErase, addr, len, pending_ns_);
  return s;
}

uint64_t RemoteBlockDevice::ModelledNs(Op op, uint64_t addr, uint64_t len) const {
  if (have_last_ && op == last_op_ && addr == last_addr_ && len == last_len_) return last_ns_;
  return FrameNs(op, len);
}

// ---------------------------------------------------------------- reference host

RamSlotStore::RamSlotStore(uint8_t* memory, uint32_t* sizes, uint8_t* present, uint32_t num_slots,
                           uint32_t slot_capacity)
    : mem_(memory), sizes_(sizes), present_(present), n_(num_slots), cap_(slot_capacity) {
  Clear();
}

void RamSlotStore::Clear() {
  for (uint32_t i = 0; i < n_; ++i) {
    sizes_[i] = 0;
    present_[i] = 0;
  }
}

Status RamSlotStore::Grow(uint32_t slot, uint64_t end) {
  if (slot >= n_) return Status::kOutOfRange;
  if (end > cap_) return Status::kNoSpace;
  uint8_t* base = mem_ + static_cast<size_t>(slot) * cap_;
  if (!present_[slot]) {
    present_[slot] = 1;
    sizes_[slot] = 0;
  }
  if (end > sizes_[slot]) {
    std::memset(base + sizes_[slot], 0xFF, static_cast<size_t>(end - sizes_[slot]));
    sizes_[slot] = static_cast<uint32_t>(end);
  }
  return Status::kOk;
}

Status RamSlotStore::Write(uint32_t slot, uint32_t offset, const uint8_t* data, size_t len) {
  TINYSEG_RETURN_IF_ERROR(Grow(slot, static_cast<uint64_t>(offset) + len));
  if (len) std::memcpy(mem_ + static_cast<size_t>(slot) * cap_ + offset, data, len);
  return Status::kOk;
}

Status RamSlotStore::Read(uint32_t slot, uint32_t offset, uint8_t* dst, size_t len) {
  if (slot >= n_ || !present_[slot]) return Status::kNotFound;
  if (static_cast<uint64_t>(offset) + len > sizes_[slot]) return Status::kOutOfRange;
  if (len) std::memcpy(dst, mem_ + static_cast<size_t>(slot) * cap_ + offset, len);
  return Status::kOk;
}

Status RamSlotStore::Erase(uint32_t slot, uint32_t offset, uint32_t len) {
  const uint64_t end = static_cast<uint64_t>(offset) + len;
  TINYSEG_RETURN_IF_ERROR(Grow(slot, end));
  if (len) std::memset(mem_ + static_cast<size_t>(slot) * cap_ + offset, 0xFF, len);
  return Status::kOk;
}

Status RamSlotStore::Drop(uint32_t slot) {
  if (slot >= n_) return Status::kOutOfRange;
  present_[slot] = 0;
  sizes_[slot] = 0;
  return Status::kOk;
}

Status RamSlotStore::Size(uint32_t slot, uint32_t* size) {
  if (slot >= n_ || !present_[slot]) return Status::kNotFound;
  *size = sizes_[slot];
  return Status::kOk;
}

RemoteServer::RemoteServer(RamSlotStore& store, uint32_t max_payload, uint8_t* buffer,
                           size_t buffer_bytes)
    : store_(store),
      max_payload_(max_payload),
      raw_(nullptr),
      raw_cap_(0),
      tx_(nullptr),
      tx_cap_(0),
      last_(nullptr),
      rx_(nullptr, 0) {
  if (buffer == nullptr || max_payload == 0 || buffer_bytes < ServerBufferBytes(max_payload)) {
    max_payload_ = 0;  // Feed() then fails with kInvalidArgument
    return;
  }
  const size_t wire = MaxWireFrame(max_payload);
  rx_ = FrameAssembler(buffer, wire);
  raw_ = buffer + wire;
  raw_cap_ = kHeaderBytes + max_payload + kCrcBytes;
  tx_ = raw_ + raw_cap_;
  tx_cap_ = wire;
  last_ = tx_ + wire;
}

Status RemoteServer::Feed(const uint8_t* data, size_t len, ByteStream& out) {
  if (max_payload_ == 0) return Status::kInvalidArgument;
  for (size_t i = 0; i < len; ++i) {
    const FrameAssembler::Event e = rx_.Push(data[i]);
    if (e == FrameAssembler::Event::kBadFrame) {
      ++stats_.bad_frames;
      FrameHeader nak;
      nak.type = MsgType::kNak;
      nak.arg = static_cast<uint32_t>(NakReason::kFraming);
      TINYSEG_RETURN_IF_ERROR(Respond(nak, nullptr, 0, out));
    } else if (e == FrameAssembler::Event::kFrame) {
      TINYSEG_RETURN_IF_ERROR(Handle(rx_.frame(), rx_.frame_len(), out));
    }
  }
  return Status::kOk;
}

Status RemoteServer::Respond(const FrameHeader& h, const uint8_t* payload, size_t len,
                             ByteStream& out) {
  const size_t n = EncodeFrame(h, payload, len, raw_, raw_cap_, tx_, tx_cap_);
  if (n == 0) return Status::kBufferTooSmall;
  if (h.type != MsgType::kNak) {  // keep the answer for a repeated request
    std::memcpy(last_, tx_, n);
    last_len_ = n;
  }
  return out.Write(tx_, n);
}

Status RemoteServer::Handle(const uint8_t* frame, size_t len, ByteStream& out) {
  FrameHeader h;
  const uint8_t* p = nullptr;
  size_t n = 0;
  if (!Ok(ParseFrame(frame, len, &h, &p, &n))) {
    ++stats_.bad_frames;
    FrameHeader nak;
    nak.type = MsgType::kNak;
    nak.arg = static_cast<uint32_t>(NakReason::kCrc);
    return Respond(nak, nullptr, 0, out);
  }
  ++stats_.frames;
  if (h.type != MsgType::kHello && have_last_ && h.seq == last_seq_ && h.type == last_type_) {
    ++stats_.duplicates;
    return out.Write(last_, last_len_);
  }
  FrameHeader r;
  r.seq = h.seq;
  r.slot = h.slot;
  r.offset = h.offset;
  r.type = MsgType::kAck;
  Status st = Status::kOk;
  const uint8_t* rp = nullptr;
  size_t rn = 0;
  uint8_t hello[4];
  switch (h.type) {
    case MsgType::kHello:
      r.arg = kProtocolVersion;
      for (int i = 0; i < 4; ++i) hello[i] = static_cast<uint8_t>(max_payload_ >> (8 * i));
      rp = hello;
      rn = 4;
      break;
    case MsgType::kWrite:
      if (n != h.arg) {
        st = Status::kInvalidArgument;
        break;
      }
      st = store_.Write(h.slot, h.offset, p, n);
      r.arg = static_cast<uint32_t>(n);
      break;
    case MsgType::kRead:
      if (h.arg > max_payload_) {
        st = Status::kInvalidArgument;
        break;
      }
      // Read straight into the payload area of the raw scratch would alias
      // EncodeFrame's copy; the rx buffer is free now, so read there.
      st = store_.Read(h.slot, h.offset, const_cast<uint8_t*>(frame), h.arg);
      r.type = MsgType::kData;
      rp = frame;
      rn = h.arg;
      break;
    case MsgType::kErase:
      st = store_.Erase(h.slot, h.offset, h.arg);
      break;
    case MsgType::kDrop:
      st = store_.Drop(h.slot);
      break;
    case MsgType::kSize:
      st = store_.Size(h.slot, &r.arg);
      break;
    case MsgType::kLog:
      ++stats_.logs;  // the reference host has no console
      break;
    default:
      st = Status::kUnsupported;
      break;
  }
  if (!Ok(st)) {
    r.type = MsgType::kError;
    r.arg = static_cast<uint32_t>(st);
    rp = nullptr;
    rn = 0;
  }
  have_last_ = true;
  last_seq_ = h.seq;
  last_type_ = h.type;
  return Respond(r, rp, rn, out);
}

}  // namespace remote
}  // namespace tinyseg
