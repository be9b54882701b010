// Remote spilling protocol over an in-memory loopback: CRC/COBS primitives,
// every command, recovery from corrupted / lost frames, a silent host, and
// the SpillManager (codec + range fetch) over RemoteBlockDevice.
//
// Single-threaded and deterministic (host and Cortex-M7 alike): the client's
// stream runs the reference server whenever the client waits for bytes, and
// time is virtual (a read that finds nothing advances the clock by its whole
// timeout).
#include <cstring>
#include <vector>

#include "tinyseg/codec.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/remote_protocol.h"
#include "tinyseg/spill_manager.h"
#include "tinytest.h"
#include "spill_tables.h"

using namespace tinyseg;
using namespace tinyseg::remote;
using tinytest::Rng;

namespace {

// Byte queue in one direction.
struct Queue {
  std::vector<uint8_t> data;
  size_t pos = 0;
  size_t available() const { return data.size() - pos; }
};

// Faults applied by the loopback, counted in frames (each Write of a frame).
struct Faults {
  int corrupt_request = -1;     // flip a byte of the k-th request frame (0-based)
  int corrupt_response = -1;    // flip a byte of the k-th response frame
  int drop_response = -1;       // lose the k-th response frame
  int duplicate_response = -1;  // send the k-th response twice
  int dead_after = -1;          // host stops answering after k request frames
};

class Loopback;

// Corrupts one wire byte without creating a 0x00 (which would split the
// frame in two): the receiver sees exactly one bad frame.
void Flip(uint8_t* b) {
  const uint8_t v = static_cast<uint8_t>(*b ^ 0x10);
  *b = v != 0 ? v : 0x01;
}

// The host's end: what the server writes goes to the client.
class HostEnd final : public ByteStream {
 public:
  explicit HostEnd(Loopback& l) : l_(l) {}
  Status Write(const uint8_t* data, size_t len) override;
  Status Read(uint8_t*, size_t, uint32_t, size_t* got) override {
    *got = 0;
    return Status::kOk;
  }
  uint32_t NowMs() override;

 private:
  Loopback& l_;
};

class Loopback final : public ByteStream {
 public:
  Loopback(RemoteServer& server, const Faults& f) : server_(server), f_(f), host_(*this) {}

  // Client side.
  Status Write(const uint8_t* data, size_t len) override {
    std::vector<uint8_t> frame(data, data + len);
    const bool is_frame = len > 1;  // the lone resync delimiter is not counted
    if (is_frame) {
      if (requests_ == f_.corrupt_request) Flip(&frame[len / 2]);
      ++requests_;
    }
    if (f_.dead_after >= 0 && requests_ > f_.dead_after) return Status::kOk;  // nobody listens
    to_host_.data.insert(to_host_.data.end(), frame.begin(), frame.end());
    return Status::kOk;
  }
  Status Read(uint8_t* dst, size_t len, uint32_t timeout_ms, size_t* got) override {
    if (to_client_.available() == 0 && to_host_.available() > 0) {
      const size_t n = to_host_.available();
      std::vector<uint8_t> chunk(to_host_.data.begin() + static_cast<long>(to_host_.pos),
                                 to_host_.data.end());
      to_host_.pos += n;
      TINYSEG_RETURN_IF_ERROR(server_.Feed(chunk.data(), chunk.size(), host_));
    }
    if (to_client_.available() == 0) {
      now_ += timeout_ms;  // nothing will come: the whole timeout passes
      *got = 0;
      return Status::kOk;
    }
    const size_t n = len < to_client_.available() ? len : to_client_.available();
    std::memcpy(dst, to_client_.data.data() + to_client_.pos, n);
    to_client_.pos += n;
    now_ += 1;
    *got = n;
    return Status::kOk;
  }
  uint32_t NowMs() override { return now_; }

  // Host side (through HostEnd).
  Status HostWrite(const uint8_t* data, size_t len) {
    const int k = responses_++;
    if (k == f_.drop_response) return Status::kOk;
    std::vector<uint8_t> frame(data, data + len);
    if (k == f_.corrupt_response) Flip(&frame[len / 2]);
    const int copies = k == f_.duplicate_response ? 2 : 1;
    for (int c = 0; c < copies; ++c)
      to_client_.data.insert(to_client_.data.end(), frame.begin(), frame.end());
    return Status::kOk;
  }

  uint32_t now_ = 0;
  int requests_ = 0;
  int responses_ = 0;

 private:
  RemoteServer& server_;
  Faults f_;
  HostEnd host_;
  Queue to_host_;
  Queue to_client_;
};

Status HostEnd::Write(const uint8_t* data, size_t len) { return l_.HostWrite(data, len); }
uint32_t HostEnd::NowMs() { return l_.NowMs(); }

// A host with 8 slots of 256 KB and a client, wired by a Loopback.
struct Rig {
  static constexpr uint32_t kSlots = 8;
  static constexpr uint32_t kSlotBytes = 256 * 1024;
  std::vector<uint8_t> store_mem = std::vector<uint8_t>(size_t{kSlots} * kSlotBytes);
  uint32_t sizes[kSlots] = {};
  uint8_t present[kSlots] = {};
  RamSlotStore store{store_mem.data(), sizes, present, kSlots, kSlotBytes};
  std::vector<uint8_t> server_buf;
  RemoteServer server;
  Loopback link;
  std::vector<uint8_t> client_buf;
  RemoteClient client;

  Rig(const Faults& f, uint32_t host_payload = 1024, ClientConfig cc = ClientConfig())
      : server_buf(ServerBufferBytes(host_payload)),
        server(store, host_payload, server_buf.data(), server_buf.size()),
        link(server, f),
        client_buf(ClientBufferBytes(cc.max_payload)),
        client(link, cc, client_buf.data(), client_buf.size()) {}
  // The client's Init, then its Hello to the host.
  Status Connect() {
    const Status s = client.Init();
    return s != Status::kOk ? s : client.Hello();
  }
};

std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng.Next());
  // Zeros and long non-zero runs exercise every COBS block shape.
  for (size_t i = 0; i < n; i += 97) v[i] = 0;
  return v;
}

// Reads data.size() bytes of `slot` from `offset` back: true when the read succeeds and they are
// `data`.
bool ReadsBack(RemoteClient& client, uint32_t slot, uint32_t offset,
               const std::vector<uint8_t>& data) {
  std::vector<uint8_t> back(data.size());
  return Ok(client.Read(slot, offset, back.data(), back.size())) && back == data;
}

// Writes `data` to `slot` at `offset`, then reads it back (ReadsBack).
bool WritesAndReadsBack(RemoteClient& client, uint32_t slot, uint32_t offset,
                        const std::vector<uint8_t>& data) {
  return Ok(client.Write(slot, offset, data.data(), data.size())) &&
         ReadsBack(client, slot, offset, data);
}

}  // namespace

TEST(Crc32MatchesZlib) {
  const char* s = "123456789";
  CHECK_EQ(Crc32(reinterpret_cast<const uint8_t*>(s), 9), 0xCBF43926u);
  CHECK_EQ(Crc32(nullptr, 0), 0u);
  uint32_t st = Crc32Update(0xFFFFFFFFu, reinterpret_cast<const uint8_t*>(s), 4);
  st = Crc32Update(st, reinterpret_cast<const uint8_t*>(s) + 4, 5);
  CHECK_EQ(st ^ 0xFFFFFFFFu, 0xCBF43926u);
}

TEST(CobsRoundTripAllShapes) {
  Rng rng(7);
  for (size_t len : {size_t{0}, size_t{1}, size_t{253}, size_t{254}, size_t{255}, size_t{508},
                     size_t{1000}, size_t{3000}}) {
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<uint8_t> in(len);
      for (auto& b : in) {
        switch (variant) {
          case 0:
            b = static_cast<uint8_t>(rng.Next() | 1);
            break;  // no zeros
          case 1:
            b = 0;
            break;  // all zeros
          case 2:
            b = static_cast<uint8_t>(rng.Below(3));
            break;  // many zeros
          default:
            b = static_cast<uint8_t>(rng.Next());
            break;
        }
      }
      std::vector<uint8_t> enc(CobsMaxEncoded(len));
      const size_t n = CobsEncode(in.data(), len, enc.data(), enc.size());
      CHECK(n > 0 && n <= CobsMaxEncoded(len));
      for (size_t i = 0; i < n; ++i) CHECK(enc[i] != 0);
      size_t out_len = 0;
      std::vector<uint8_t> work(enc.begin(), enc.begin() + static_cast<long>(n));
      CHECK(CobsDecode(work.data(), n, work.data(), &out_len));  // in place
      CHECK_EQ(out_len, len);
      CHECK(len == 0 || std::memcmp(work.data(), in.data(), len) == 0);
    }
  }
  uint8_t bad[] = {3, 1};  // block claims 2 data bytes, has 1
  size_t out_len = 0;
  CHECK(!CobsDecode(bad, 2, bad, &out_len));
  uint8_t zero[] = {2, 0};
  CHECK(!CobsDecode(zero, 2, zero, &out_len));
}

TEST(FrameEncodeParseAndCrcRejection) {
  FrameHeader h;
  h.type = MsgType::kWrite;
  h.seq = 0xBEEF;
  h.slot = 7;
  h.offset = 0x01020304;
  h.arg = 5;
  const uint8_t payload[5] = {0, 1, 0, 2, 0};
  uint8_t raw[64], wire[MaxWireFrame(16)];
  const size_t n = EncodeFrame(h, payload, 5, raw, sizeof(raw), wire, sizeof(wire));
  CHECK(n > 0);
  CHECK_EQ(wire[n - 1], 0);
  uint8_t abuf[80];
  FrameAssembler a(abuf, sizeof(abuf));
  FrameAssembler::Event e = FrameAssembler::Event::kNone;
  for (size_t i = 0; i < n; ++i) e = a.Push(wire[i]);
  CHECK(e == FrameAssembler::Event::kFrame);
  FrameHeader g;
  const uint8_t* p = nullptr;
  size_t pn = 0;
  CHECK_OK(ParseFrame(a.frame(), a.frame_len(), &g, &p, &pn));
  CHECK(g.type == MsgType::kWrite);
  CHECK_EQ(g.seq, 0xBEEF);
  CHECK_EQ(g.slot, 7u);
  CHECK_EQ(g.offset, 0x01020304u);
  CHECK_EQ(pn, 5u);
  CHECK(std::memcmp(p, payload, 5) == 0);
  // Any single flipped bit in the raw frame fails the CRC.
  for (size_t bit = 0; bit < (kHeaderBytes + 5 + kCrcBytes) * 8; bit += 7) {
    uint8_t copy[64];
    std::memcpy(copy, raw, kHeaderBytes + 5 + kCrcBytes);
    copy[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    CHECK(ParseFrame(copy, kHeaderBytes + 5 + kCrcBytes, &g, &p, &pn) == Status::kCorrupt);
  }
  // Overlong input is reported once, at its delimiter.
  uint8_t small[8];
  FrameAssembler b(small, sizeof(small));
  for (int i = 0; i < 20; ++i) CHECK(b.Push(0x55) == FrameAssembler::Event::kNone);
  CHECK(b.Push(0) == FrameAssembler::Event::kBadFrame);
  CHECK(b.Push(0) == FrameAssembler::Event::kNone);
}

TEST(EveryCommandRoundTrips) {
  Rig r{Faults()};
  CHECK_OK(r.client.Init());
  uint32_t version = 0;
  CHECK_OK(r.client.Hello(&version));
  CHECK_EQ(version, kProtocolVersion);
  CHECK_EQ(r.client.chunk_bytes(), 1024u);
  const std::vector<uint8_t> data = Pattern(10000, 1);
  CHECK_OK(r.client.Write(3, 100, data.data(), data.size()));
  uint32_t size = 0;
  CHECK_OK(r.client.Size(3, &size));
  CHECK_EQ(size, 10100u);
  CHECK(ReadsBack(r.client, 3, 100, data));
  uint8_t head[100];
  CHECK_OK(r.client.Read(3, 0, head, sizeof(head)));  // gap before the write is erased
  for (uint8_t b : head) CHECK_EQ(b, 0xFF);
  CHECK_OK(r.client.Erase(3, 200, 50));
  CHECK_OK(r.client.Read(3, 200, head, 50));
  for (int i = 0; i < 50; ++i) CHECK_EQ(head[i], 0xFF);
  // Errors of the host come back as its Status, without retries.
  const uint64_t frames = r.client.stats().frames_sent;
  CHECK(r.client.Read(3, 10050, head, 100) == Status::kOutOfRange);
  CHECK(r.client.last_error() == RemoteError::kRemoteStatus);
  CHECK_OK(r.client.Drop(3));
  CHECK(r.client.Read(3, 0, head, 1) == Status::kNotFound);
  CHECK(r.client.Size(3, &size) == Status::kNotFound);
  CHECK(r.client.Write(99, 0, head, 1) == Status::kOutOfRange);  // no such slot on this host
  CHECK_EQ(r.client.stats().frames_sent, frames + 5);
  CHECK_EQ(r.client.stats().retries, 0u);
  const char line[] = "inference 1: 1270 ms";
  CHECK_OK(r.client.Log(line, sizeof(line) - 1));
  CHECK_EQ(r.server.stats().logs, 1u);
}

TEST(ChunkSizeIsNegotiated) {
  Rig r{Faults(), 256};
  CHECK_OK(r.Connect());
  CHECK_EQ(r.client.chunk_bytes(), 256u);
  CHECK(WritesAndReadsBack(r.client, 0, 0, Pattern(3000, 2)));
  CHECK_EQ(r.client.stats().requests, 1u + 12u + 12u);
}

TEST(CorruptedRequestIsNakedAndResent) {
  Faults f;
  f.corrupt_request = 2;  // hello, write#1, then write#2 is corrupted
  Rig r{f};
  CHECK_OK(r.Connect());
  const std::vector<uint8_t> data = Pattern(4000, 3);
  CHECK_OK(r.client.Write(1, 0, data.data(), data.size()));
  CHECK_EQ(r.client.stats().naks, 1u);
  CHECK_EQ(r.client.stats().retries, 1u);
  CHECK_EQ(r.server.stats().bad_frames, 1u);
  CHECK(ReadsBack(r.client, 1, 0, data));
}

TEST(CorruptedResponseIsResentFromTheHostCache) {
  Faults f;
  f.corrupt_response = 3;  // hello ack, 2 write acks, then the first read's data
  Rig r{f};
  CHECK_OK(r.Connect());
  CHECK(WritesAndReadsBack(r.client, 2, 0, Pattern(2048, 4)));
  CHECK_EQ(r.client.stats().bad_frames, 1u);
  CHECK_EQ(r.server.stats().duplicates, 1u);  // not executed twice
}

TEST(LostResponseTimesOutAndRetries) {
  Faults f;
  f.drop_response = 1;  // the first write's ack is lost
  ClientConfig cc;
  cc.timeout_ms = 50;
  Rig r{f, 1024, cc};
  CHECK_OK(r.Connect());
  const std::vector<uint8_t> data = Pattern(1500, 5);
  const uint32_t t0 = r.link.now_;
  CHECK_OK(r.client.Write(4, 10, data.data(), data.size()));
  CHECK_EQ(r.client.stats().timeouts, 1u);
  CHECK(r.link.now_ - t0 >= 50u);
  CHECK(ReadsBack(r.client, 4, 10, data));
}

TEST(StaleDuplicateResponsesAreIgnored) {
  Faults f;
  f.duplicate_response = 1;  // the first write's ack arrives twice
  Rig r{f};
  CHECK_OK(r.Connect());
  CHECK(WritesAndReadsBack(r.client, 5, 0, Pattern(3000, 6)));
  CHECK_EQ(r.client.stats().stale, 1u);
}

TEST(SilentHostGivesTimeoutAfterRetries) {
  Faults f;
  f.dead_after = 2;  // hello and one write are answered, then silence
  ClientConfig cc;
  cc.timeout_ms = 100;
  cc.max_attempts = 3;
  Rig r{f, 1024, cc};
  CHECK_OK(r.Connect());
  uint8_t buf[64] = {1, 2, 3};
  CHECK_OK(r.client.Write(0, 0, buf, sizeof(buf)));
  const uint32_t t0 = r.link.now_;
  const uint64_t sent0 = r.client.stats().frames_sent;
  std::memset(buf, 0xAB, sizeof(buf));
  CHECK(r.client.Read(0, 0, buf, sizeof(buf)) == Status::kIoError);
  CHECK(r.client.last_error() == RemoteError::kTimeout);
  CHECK_EQ(r.client.stats().frames_sent - sent0, 3u);
  CHECK_EQ(r.link.now_ - t0, 300u);
  for (uint8_t b : buf) CHECK_EQ(b, 0xAB);  // nothing written into the destination
  CHECK(std::strcmp(RemoteErrorName(r.client.last_error()), "timeout") == 0);
}

TEST(SpillManagerOverRemoteBlockDevice) {
  Rig r{Faults()};
  CHECK_OK(r.Connect());
  Geometry g;
  g.read_size = 1;
  g.program_size = 1;
  g.erase_size = 16 * 1024;
  g.total_size = 128 * 1024;
  RemoteBlockDevice dev(r.client, 6, g, LinkModel{92160, 1000000});
  CHECK_OK(dev.Init());
  SyncEraseQueue q(dev);
  SpillTables tb(2, 8, 512);
  SpillManager m(dev, q, ErasedRegion(g.total_size), tb.memory());
  CHECK_OK(m.Init());
  // An activation-like tensor: 60% of the values are the zero point.
  Rng rng(11);
  std::vector<uint8_t> t(40 * 60 * 16);
  for (auto& v : t) v = rng.Below(10) < 6 ? 0x80 : static_cast<uint8_t>(rng.Next());
  CHECK_OK(m.Spill(1, t.data(), t.size(), 1, tb.span()));
  CHECK(m.stats().encoded_bytes < t.size());
  const uint64_t wire_before = r.client.stats().bytes_received;
  std::vector<uint8_t> band(5 * 60 * 16);
  CHECK_OK(m.FetchRange(1, 17 * 60 * 16, band.size(), band.data()));
  CHECK(std::memcmp(band.data(), t.data() + 17 * 60 * 16, band.size()) == 0);
  // A band fetch moves only the codec blocks it needs, not the tensor.
  CHECK(r.client.stats().bytes_received - wire_before < t.size() / 4);
  std::vector<uint8_t> all(t.size());
  CHECK_OK(m.Fetch(1, all.data(), all.size()));
  CHECK(all == t);
  CHECK_OK(m.Release(1));
  // Link model: 1 KB over a 921600-baud line is ~11 ms plus one round trip.
  const uint64_t ns = dev.ModelledNs(Op::kProgram, 0, 1024);
  CHECK(ns > 11000000ull && ns < 14000000ull);
}

TEST(CacheBatchesSmallCallsAndStaysCoherent) {
  Rig r{Faults()};
  CHECK_OK(r.Connect());
  Geometry g;
  g.erase_size = 4096;
  g.total_size = 64 * 1024;
  std::vector<uint8_t> cache(1024);
  RemoteBlockDevice dev(r.client, 2, g, LinkModel{1000000, 1000000}, cache.data(), cache.size());
  CHECK_OK(dev.Init());
  const uint64_t base = dev.requests();
  // 64 contiguous 32-byte programs: two WRITE requests, not 64.
  std::vector<uint8_t> data = Pattern(2048, 9);
  for (size_t i = 0; i < data.size(); i += 32) CHECK_OK(dev.Program(100 + i, data.data() + i, 32));
  CHECK_EQ(dev.requests() - base, 2u);
  // A read flushes nothing more (already sent) and sees the data; small
  // reads after it hit the read-ahead buffer.
  uint8_t b[16];
  for (size_t i = 0; i < 512; i += 16) {
    CHECK_OK(dev.Read(100 + i, b, 16));
    CHECK(std::memcmp(b, data.data() + i, 16) == 0);
  }
  CHECK_EQ(dev.requests() - base, 3u);
  CHECK_EQ(dev.ModelledNs(Op::kRead, 100 + 496, 16), 0u);  // that last read was a hit
  // A program into the cached range is visible to the next read.
  const uint8_t x[4] = {1, 2, 3, 4};
  CHECK_OK(dev.Program(104, x, 4));
  CHECK_OK(dev.Read(100, b, 8));
  CHECK(std::memcmp(b + 4, x, 4) == 0);
  // Buffered programs reach the host on Flush (and before any erase).
  CHECK_OK(dev.Program(5000, x, 4));
  uint8_t host[4] = {};
  CHECK_OK(r.store.Read(2, 5000, host, 4));
  CHECK_EQ(host[0], 0xFF);  // still buffered on the board
  CHECK_OK(dev.Flush());
  CHECK_OK(r.store.Read(2, 5000, host, 4));
  CHECK(std::memcmp(host, x, 4) == 0);
  CHECK_OK(dev.Erase(4096, 4096));
  CHECK_OK(dev.Read(5000, b, 4));
  CHECK_EQ(b[0], 0xFF);
}

TINYTEST_MAIN("remote_protocol")
