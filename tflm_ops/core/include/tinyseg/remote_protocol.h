// Remote spilling (paper section 6.2.2, "Remote Spilling"): the board sends a
// spilled tensor to a host over a serial line and reads it back when needed.
//
// Wire format. Every message is one frame:
//
//   u8  type | u8 flags(0) | u16 seq | u32 slot | u32 offset | u32 arg |
//   u8  payload[n] (n <= negotiated max payload) | u32 crc32
//
// little-endian, CRC-32 (IEEE 802.3, reflected 0xEDB88320, the zlib crc32)
// over everything before it, then COBS-encoded and terminated by one 0x00
// byte, so a receiver resynchronises at the next 0x00 after any corruption.
//
// Requests (board -> host), each answered by exactly one response with the
// same seq:
//   HELLO  arg = protocol version, payload = u32 client max payload
//          -> ACK arg = protocol version, payload = u32 server max payload
//   WRITE  slot, offset, payload = bytes          -> ACK arg = bytes written
//   READ   slot, offset, arg = length             -> DATA payload = bytes
//   ERASE  slot, offset, arg = length: fill with 0xFF (erased flash), growing
//          the slot as needed                     -> ACK
//   DROP   slot: forget the slot                  -> ACK
//   SIZE   slot                                   -> ACK arg = slot size
//   LOG    payload = text for the host's console (the board's prints share
//          the USB link with the spills)          -> ACK
// Responses: ACK, DATA, NAK (frame failed CRC/framing: resend; arg = NakReason),
// ERROR (arg = tinyseg::Status code, e.g. kNotFound, kOutOfRange).
//
// Reliability: stop-and-wait. The client resends the same frame (same seq)
// when no valid response arrives within timeout_ms, when the response fails
// its CRC, or on NAK, up to max_attempts sends; then it fails with
// Status::kIoError and last_error() == RemoteError::kTimeout (or the last
// failure seen). Responses with another seq are stale duplicates and are
// ignored. The host keeps the last response and resends it, without
// re-executing, when a request repeats the previous seq (HELLO always runs
// and restarts the sequence).
//
// No heap: the client uses one caller buffer (ClientBufferBytes) and an
// abstract ByteStream, implemented over a UART / USB serial on the board and
// over a pty or pipe on the host (host/posix_serial_stream.h).
#ifndef TINYSEG_REMOTE_PROTOCOL_H_
#define TINYSEG_REMOTE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/block_device.h"
#include "tinyseg/crc32.h"
#include "tinyseg/status.h"

namespace tinyseg {
namespace remote {

constexpr uint32_t kProtocolVersion = 1;
constexpr size_t kHeaderBytes = 16;
constexpr size_t kCrcBytes = 4;
constexpr uint32_t kDefaultMaxPayload = 1024;
constexpr uint32_t kMaxPayloadLimit = 16384;

enum class MsgType : uint8_t {
  kHello = 0x01,
  kWrite = 0x02,
  kRead = 0x03,
  kErase = 0x04,
  kDrop = 0x05,
  kSize = 0x06,
  kLog = 0x07,
  kAck = 0x80,
  kData = 0x81,
  kNak = 0x82,
  kError = 0x83,
};

enum class NakReason : uint32_t { kCrc = 1, kFraming = 2, kTooLong = 3, kMalformed = 4 };

// Why the last call of a client failed (Status alone cannot say "timeout").
enum class RemoteError : uint8_t {
  kNone = 0,
  kTimeout = 1,       // no valid response within timeout_ms, after every attempt
  kCorruptFrame = 2,  // responses kept failing CRC / framing
  kNak = 3,           // the host kept rejecting our frames
  kRemoteStatus = 4,  // the host answered ERROR (the Status returned is its code)
  kProtocol = 5,      // unexpected response type or length
  kStream = 6,        // the ByteStream itself failed
};
const char* RemoteErrorName(RemoteError e);

// ---------------------------------------------------------------- primitives

// CRC-32 (IEEE, reflected): Crc32Update(0xFFFFFFFF, ...) ... ^ 0xFFFFFFFF, or
// Crc32(data, len) for one piece. Equals Python's zlib.crc32 (tinyseg/crc32.h).
using ::tinyseg::Crc32;
using ::tinyseg::Crc32Update;

// COBS: encoded size is at most len + len / 254 + 1 (no 0x00 in the output).
constexpr size_t CobsMaxEncoded(size_t len) { return len + len / 254 + 1; }
// Returns the encoded length, or 0 if out_capacity is too small.
size_t CobsEncode(const uint8_t* in, size_t len, uint8_t* out, size_t out_capacity);
// Decodes in place or into out (out may equal in). Returns false on a 0x00
// code or a truncated block.
bool CobsDecode(const uint8_t* in, size_t len, uint8_t* out, size_t* out_len);

struct FrameHeader {
  MsgType type = MsgType::kHello;
  uint8_t flags = 0;
  uint16_t seq = 0;
  uint32_t slot = 0;
  uint32_t offset = 0;
  uint32_t arg = 0;
};

// Largest wire frame (COBS + delimiter) for a payload size.
constexpr size_t MaxWireFrame(uint32_t max_payload) {
  return CobsMaxEncoded(kHeaderBytes + max_payload + kCrcBytes) + 1;
}

// Builds header + payload + CRC, COBS-encodes it and appends the 0x00
// delimiter. `scratch` holds the raw frame (kHeaderBytes + len + kCrcBytes
// bytes) and may not overlap `out`. Returns the wire length or 0 if a buffer
// is too small.
size_t EncodeFrame(const FrameHeader& h, const uint8_t* payload, size_t len, uint8_t* scratch,
                   size_t scratch_capacity, uint8_t* out, size_t out_capacity);

// Parses a raw (already COBS-decoded) frame: checks length and CRC.
// On success *payload points into `frame`.
Status ParseFrame(const uint8_t* frame, size_t len, FrameHeader* h, const uint8_t** payload,
                  size_t* payload_len);

// Collects wire bytes up to the 0x00 delimiter, then decodes the frame in
// place. Overlong frames are dropped up to the next delimiter.
class FrameAssembler {
 public:
  enum class Event : uint8_t { kNone, kFrame, kBadFrame };
  FrameAssembler(uint8_t* buffer, size_t capacity) : buf_(buffer), cap_(capacity) {}
  // Feeds one byte. kFrame: frame() / frame_len() hold the decoded (raw)
  // frame until the next Push. kBadFrame: COBS error or overflow.
  Event Push(uint8_t byte);
  void Reset() {
    len_ = 0;
    overflow_ = false;
  }
  const uint8_t* frame() const { return buf_; }
  size_t frame_len() const { return frame_len_; }
  bool in_frame() const { return len_ > 0 || overflow_; }

 private:
  uint8_t* buf_;
  size_t cap_;
  size_t len_ = 0;
  size_t frame_len_ = 0;
  bool overflow_ = false;
};

// ---------------------------------------------------------------- transport

// A byte pipe with timeouts: UART / USB CDC on the board, a pty on the host.
class ByteStream {
 public:
  // Writes every byte (blocking until accepted by the driver).
  virtual Status Write(const uint8_t* data, size_t len) = 0;
  // Reads up to `len` bytes; waits at most timeout_ms for the first one.
  // *got = 0 on timeout (not an error).
  virtual Status Read(uint8_t* dst, size_t len, uint32_t timeout_ms, size_t* got) = 0;
  // Monotonic milliseconds (wrap-around is handled).
  virtual uint32_t NowMs() = 0;

 protected:
  ~ByteStream() = default;
};

// ---------------------------------------------------------------- client

struct ClientConfig {
  uint32_t timeout_ms = 1000;  // per attempt
  uint32_t max_attempts = 4;   // sends of one request before giving up
  uint32_t max_payload = kDefaultMaxPayload;
};

struct ClientStats {
  uint64_t requests = 0;
  uint64_t frames_sent = 0;
  uint64_t retries = 0;
  uint64_t timeouts = 0;
  uint64_t bad_frames = 0;  // responses failing COBS/CRC
  uint64_t naks = 0;
  uint64_t stale = 0;       // responses with an old seq
  uint64_t bytes_sent = 0;  // wire bytes
  uint64_t bytes_received = 0;
};

// Caller buffer for a client with this max payload: tx wire frame, raw frame
// scratch, rx assembler.
constexpr size_t ClientBufferBytes(uint32_t max_payload) {
  return 2 * MaxWireFrame(max_payload) + (kHeaderBytes + max_payload + kCrcBytes);
}

class RemoteClient {
 public:
  RemoteClient(ByteStream& stream, const ClientConfig& config, uint8_t* buffer,
               size_t buffer_bytes);

  // Checks config and buffer size.
  Status Init();
  // Resynchronises the line, restarts the sequence and negotiates the chunk
  // size: min(our max payload, the host's). *host_version may be null.
  Status Hello(uint32_t* host_version = nullptr);
  // Whole ranges, split into chunks of chunk_bytes().
  Status Write(uint32_t slot, uint32_t offset, const void* data, size_t len);
  Status Read(uint32_t slot, uint32_t offset, void* dst, size_t len);
  Status Erase(uint32_t slot, uint32_t offset, uint32_t len);
  Status Drop(uint32_t slot);
  Status Size(uint32_t slot, uint32_t* size);
  // Sends text to the host's console (truncated to chunk_bytes()).
  Status Log(const char* text, size_t len);

  RemoteError last_error() const { return last_error_; }
  const ClientStats& stats() const { return stats_; }
  uint32_t chunk_bytes() const { return chunk_; }
  uint16_t seq() const { return seq_; }

 private:
  // One request/response exchange with retries. On kOk, rx_payload_/rx_len_
  // and rx_hdr_ describe the response.
  Status Transact(const FrameHeader& req, const uint8_t* payload, size_t len, MsgType expect);
  // Waits for the next complete frame until deadline; kOk with a frame,
  // kIoError on timeout (*timed_out) or a stream error, kCorrupt on a bad frame.
  Status Receive(uint32_t deadline_ms, bool* timed_out);

  ByteStream& s_;
  ClientConfig cfg_;
  uint8_t* buf_;
  size_t buf_bytes_;
  uint8_t* tx_ = nullptr;
  size_t tx_cap_ = 0;
  uint8_t* raw_ = nullptr;
  size_t raw_cap_ = 0;
  FrameAssembler rx_;
  uint8_t pend_[64];
  size_t pend_pos_ = 0;
  size_t pend_len_ = 0;
  uint32_t chunk_ = 0;
  uint16_t seq_ = 0;
  bool ready_ = false;
  RemoteError last_error_ = RemoteError::kNone;
  ClientStats stats_;
  FrameHeader rx_hdr_;
  const uint8_t* rx_payload_ = nullptr;
  size_t rx_len_ = 0;
};

// ---------------------------------------------------------------- block device

// Time model of a serial link for ModelledNs (0 = untimed): wire bytes
// (COBS + header + CRC included) at bytes_per_second plus one round trip
// per chunk.
struct LinkModel {
  uint64_t bytes_per_second = 0;
  uint64_t round_trip_ns = 0;
};

// One host slot seen as a block device, so the SpillManager (codec, range
// fetch) runs unchanged over the serial link. Programs overwrite (no NOR
// rule on the host); Erase fills with 0xFF on the host.
//
// Over a link every request costs a round trip, and the SpillManager issues
// many small device calls (index entries, block headers, staging-sized
// programs). With a caller cache buffer the device batches them: a read miss
// fills one of two cache lines (half the buffer each, least recently used
// first) from the requested address on (read-ahead; two lines so the codec's
// index and the block data it points to do not evict each other),
// contiguous programs are collected in the whole buffer and sent as one
// WRITE when it is full or anything else touches the device (write-behind;
// Flush() sends them now). A read always sees earlier programs. Without a
// buffer every call is a request.
//
// ModelledNs() of the call just made reports the wire time of the requests
// that call actually sent (0 for a cache hit or a buffered program), so a
// VirtualClock sees the real batching; for any other query it gives the
// unbatched cost.
class RemoteBlockDevice final : public BlockDevice {
 public:
  RemoteBlockDevice(RemoteClient& client, uint32_t slot, const Geometry& g,
                    const LinkModel& link = LinkModel(), uint8_t* cache = nullptr,
                    size_t cache_bytes = 0)
      : c_(client),
        slot_(slot),
        g_(g),
        link_(link),
        cache_(cache),
        cache_cap_(cache ? cache_bytes : 0) {}
  // Validates the geometry and erases the whole slot on the host.
  Status Init();
  const Geometry& geometry() const override { return g_; }
  Status Read(uint64_t addr, void* dst, size_t len) override;
  Status Program(uint64_t addr, const void* src, size_t len) override;
  Status Erase(uint64_t addr, uint64_t len) override;
  uint64_t ModelledNs(Op op, uint64_t addr, uint64_t len) const override;
  // Sends buffered programs.
  Status Flush();
  // Requests sent (READ/WRITE/ERASE), for tests and benchmarks.
  uint64_t requests() const { return requests_; }
  uint64_t wire_ns() const { return wire_ns_; }

 private:
  struct Line {
    bool valid = false;
    uint64_t addr = 0;
    size_t len = 0;
    uint32_t used = 0;  // LRU stamp
  };
  uint64_t FrameNs(Op op, uint64_t len) const;
  void DropLines() { line_[0].valid = line_[1].valid = false; }
  Status SendRead(uint64_t addr, uint8_t* dst, size_t len);
  Status SendWrite(uint64_t addr, const uint8_t* src, size_t len);
  void Record(Op op, uint64_t addr, uint64_t len, uint64_t ns);

  RemoteClient& c_;
  uint32_t slot_;
  Geometry g_;
  LinkModel link_;
  uint8_t* cache_;
  size_t cache_cap_;
  Line line_[2];
  uint32_t stamp_ = 0;
  uint64_t write_addr_ = 0;
  size_t write_len_ = 0;     // > 0: the buffer holds programs not yet sent
  uint64_t pending_ns_ = 0;  // wire time of the current call so far
  Op last_op_ = Op::kRead;
  uint64_t last_addr_ = 0;
  uint64_t last_len_ = 0;
  uint64_t last_ns_ = 0;
  bool have_last_ = false;
  uint64_t requests_ = 0;
  uint64_t wire_ns_ = 0;
};

// ---------------------------------------------------------------- reference host

// Slots in caller memory: num_slots x slot_capacity bytes (tests, and a
// board that serves another board).
class RamSlotStore {
 public:
  RamSlotStore(uint8_t* memory, uint32_t* sizes, uint8_t* present, uint32_t num_slots,
               uint32_t slot_capacity);
  void Clear();
  Status Write(uint32_t slot, uint32_t offset, const uint8_t* data, size_t len);
  Status Read(uint32_t slot, uint32_t offset, uint8_t* dst, size_t len);
  Status Erase(uint32_t slot, uint32_t offset, uint32_t len);
  Status Drop(uint32_t slot);
  Status Size(uint32_t slot, uint32_t* size);

 private:
  Status Grow(uint32_t slot, uint64_t end);
  uint8_t* mem_;
  uint32_t* sizes_;
  uint8_t* present_;
  uint32_t n_;
  uint32_t cap_;
};

constexpr size_t ServerBufferBytes(uint32_t max_payload) {
  // rx assembler, raw scratch, tx wire frame, cached last response
  return 3 * MaxWireFrame(max_payload) + (kHeaderBytes + max_payload + kCrcBytes);
}

struct ServerStats {
  uint64_t frames = 0;
  uint64_t bad_frames = 0;
  uint64_t duplicates = 0;
  uint64_t logs = 0;
};

// The host side of the protocol in C++ (the Python host is
// tinyseg_plugin/deploy/remote.py): for loopback tests and board-to-board use.
class RemoteServer {
 public:
  RemoteServer(RamSlotStore& store, uint32_t max_payload, uint8_t* buffer, size_t buffer_bytes);
  // Feeds received wire bytes; writes responses to `out`.
  Status Feed(const uint8_t* data, size_t len, ByteStream& out);
  const ServerStats& stats() const { return stats_; }

 private:
  Status Handle(const uint8_t* frame, size_t len, ByteStream& out);
  Status Respond(const FrameHeader& h, const uint8_t* payload, size_t len, ByteStream& out);
  RamSlotStore& store_;
  uint32_t max_payload_;
  uint8_t* raw_;
  size_t raw_cap_;
  uint8_t* tx_;
  size_t tx_cap_;
  uint8_t* last_;
  size_t last_len_ = 0;
  bool have_last_ = false;
  uint16_t last_seq_ = 0;
  MsgType last_type_ = MsgType::kHello;
  FrameAssembler rx_;
  ServerStats stats_;
};

}  // namespace remote
}  // namespace tinyseg

#endif  // TINYSEG_REMOTE_PROTOCOL_H_
