// Host client of the remote-spilling protocol, built from the core, for the
// end-to-end test against the Python host (tests/test_remote.py) over a
// pseudo-terminal or a real serial device.
//
//   remote_pty_client PORT SCENARIO [--baud N] [--timeout-ms N] [--attempts N]
//                     [--corrupt-request K] [--payload N]
//
// PORT is a device path or fd:N (an inherited descriptor, e.g. a pty master).
// Scenarios:
//   roundtrip  hello; writes, reads, erase, size, drop on several slots; a
//              compressed spill through SpillManager over RemoteBlockDevice
//              with band fetches. Exit 0 when every byte read back matches.
//   timeout    hello and one write, then a read the host is expected to
//              ignore: exit 3 with "timeout" on stderr, and no data used.
// --corrupt-request K flips one byte of the K-th request frame on the wire
// (0-based), so the host must NAK it and the client resend.
// Prints one summary line on stdout: "remote_pty_client: ok ..." with stats.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tinyseg/erase_queue.h"
#include "tinyseg/host/posix_serial_stream.h"
#include "tinyseg/remote_protocol.h"
#include "tinyseg/spill_manager.h"
#include "spill_tables.h"

using namespace tinyseg;
using namespace tinyseg::remote;

namespace {

// Wraps a stream and corrupts one outgoing frame.
class CorruptingStream final : public ByteStream {
 public:
  CorruptingStream(ByteStream& inner, int corrupt_frame) : in_(inner), k_(corrupt_frame) {}
  Status Write(const uint8_t* data, size_t len) override {
    if (len > 1 && frames_++ == k_) {
      std::vector<uint8_t> copy(data, data + len);
      uint8_t v = static_cast<uint8_t>(copy[len / 2] ^ 0x10);
      copy[len / 2] = v != 0 ? v : 0x01;
      return in_.Write(copy.data(), len);
    }
    return in_.Write(data, len);
  }
  Status Read(uint8_t* dst, size_t len, uint32_t timeout_ms, size_t* got) override {
    return in_.Read(dst, len, timeout_ms, got);
  }
  uint32_t NowMs() override { return in_.NowMs(); }

 private:
  ByteStream& in_;
  int k_;
  int frames_ = 0;
};

int Fail(const char* what, Status s, const RemoteClient& c) {
  std::fprintf(stderr, "remote_pty_client: error: %s: %s (%s, %llu frames sent, %llu retries)\n",
               what, StatusName(s), RemoteErrorName(c.last_error()),
               static_cast<unsigned long long>(c.stats().frames_sent),
               static_cast<unsigned long long>(c.stats().retries));
  return c.last_error() == RemoteError::kTimeout ? 3 : 1;
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = (i % 53 == 0) ? 0 : static_cast<uint8_t>(x >> 24);
  }
  return v;
}

#define TRY(what, expr)                         \
  do {                                          \
    const Status s_ = (expr);                   \
    if (!Ok(s_)) return Fail(what, s_, client); \
  } while (0)

int RoundTrip(RemoteClient& client) {
  uint32_t version = 0;
  TRY("hello", client.Hello(&version));
  const size_t sizes[] = {1, 1000, 4096, 20000};
  for (uint32_t slot = 0; slot < 4; ++slot) {
    const std::vector<uint8_t> d = Pattern(sizes[slot], slot + 1);
    TRY("write", client.Write(slot, 0, d.data(), d.size()));
  }
  for (uint32_t slot = 0; slot < 4; ++slot) {
    const std::vector<uint8_t> d = Pattern(sizes[slot], slot + 1);
    std::vector<uint8_t> back(d.size());
    TRY("read", client.Read(slot, 0, back.data(), back.size()));
    if (back != d) {
      std::fprintf(stderr, "remote_pty_client: error: slot %u read back differs\n", slot);
      return 1;
    }
    uint32_t size = 0;
    TRY("size", client.Size(slot, &size));
    if (size != d.size()) {
      std::fprintf(stderr, "remote_pty_client: error: slot %u size %u != %zu\n", slot, size,
                   d.size());
      return 1;
    }
  }
  // Partial overwrite and erase inside slot 3.
  const std::vector<uint8_t> patch = Pattern(300, 99);
  TRY("write", client.Write(3, 5000, patch.data(), patch.size()));
  TRY("erase", client.Erase(3, 100, 200));
  std::vector<uint8_t> expect = Pattern(20000, 4);
  std::memcpy(expect.data() + 5000, patch.data(), patch.size());
  std::memset(expect.data() + 100, 0xFF, 200);
  std::vector<uint8_t> back(expect.size());
  TRY("read", client.Read(3, 0, back.data(), back.size()));
  if (back != expect) {
    std::fprintf(stderr, "remote_pty_client: error: slot 3 after patch/erase differs\n");
    return 1;
  }
  // Host errors come back as the host's status, not as data.
  uint8_t byte = 0;
  TRY("drop", client.Drop(0));
  const Status gone = client.Read(0, 0, &byte, 1);
  if (gone != Status::kNotFound) {
    std::fprintf(stderr, "remote_pty_client: error: read of a dropped slot gave %s\n",
                 StatusName(gone));
    return 1;
  }
  const Status past = client.Read(1, 990, back.data(), 20);
  if (past != Status::kOutOfRange) {
    std::fprintf(stderr, "remote_pty_client: error: read past the end gave %s\n", StatusName(past));
    return 1;
  }

  // Compressed spill of an activation-like tensor through the SpillManager.
  Geometry g;
  g.erase_size = 16 * 1024;
  g.total_size = 256 * 1024;
  static uint8_t cache[4096];  // read-ahead / write-behind: few round trips
  RemoteBlockDevice dev(client, 7, g, LinkModel(), cache, sizeof(cache));
  TRY("device init", dev.Init());
  SyncEraseQueue q(dev);
  SpillTables tb(2, 16, 1024);
  SpillManager m(dev, q, ErasedRegion(g.total_size), tb.memory());
  TRY("spill init", m.Init());
  std::vector<uint8_t> t(80 * 120 * 8);
  uint32_t x = 12345;
  for (size_t i = 0; i < t.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    t[i] = (x >> 28) < 9 ? 0x80 : static_cast<uint8_t>(x >> 16);  // ~56% zero point
  }
  TRY("spill", m.Spill(1, t.data(), t.size(), 1, tb.span()));
  const size_t row = 120 * 8;
  std::vector<uint8_t> band(22 * row);
  for (int r0 = 0; r0 < 80; r0 += 20) {
    const int rows = r0 + 22 <= 80 ? 22 : 80 - r0;
    TRY("fetch band", m.FetchRange(1, r0 * row, rows * row, band.data()));
    if (std::memcmp(band.data(), t.data() + r0 * row, rows * row) != 0) {
      std::fprintf(stderr, "remote_pty_client: error: band at row %d differs\n", r0);
      return 1;
    }
  }
  TRY("release", m.Release(1));
  static const char kLine[] = "remote_pty_client: all slots verified\n";
  TRY("log", client.Log(kLine, sizeof(kLine) - 1));
  const ClientStats& s = client.stats();
  std::printf(
      "remote_pty_client: ok version=%u chunk=%u requests=%llu frames=%llu retries=%llu "
      "naks=%llu bad_frames=%llu timeouts=%llu stale=%llu encoded=%llu/%zu device_requests=%llu\n",
      version, client.chunk_bytes(), static_cast<unsigned long long>(s.requests),
      static_cast<unsigned long long>(s.frames_sent), static_cast<unsigned long long>(s.retries),
      static_cast<unsigned long long>(s.naks), static_cast<unsigned long long>(s.bad_frames),
      static_cast<unsigned long long>(s.timeouts), static_cast<unsigned long long>(s.stale),
      static_cast<unsigned long long>(m.stats().encoded_bytes), t.size(),
      static_cast<unsigned long long>(dev.requests()));
  return 0;
}

int Timeout(RemoteClient& client) {
  TRY("hello", client.Hello());
  uint8_t buf[256];
  for (size_t i = 0; i < sizeof(buf); ++i) buf[i] = static_cast<uint8_t>(i);
  TRY("write", client.Write(0, 0, buf, sizeof(buf)));
  std::memset(buf, 0xA5, sizeof(buf));
  const Status s = client.Read(0, 0, buf, sizeof(buf));
  if (Ok(s)) {
    std::fprintf(stderr, "remote_pty_client: error: the silent host answered\n");
    return 1;
  }
  for (uint8_t b : buf) {
    if (b != 0xA5) {
      std::fprintf(stderr, "remote_pty_client: error: failed read wrote into the buffer\n");
      return 1;
    }
  }
  return Fail("read slot 0", s, client);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: remote_pty_client PORT|fd:N roundtrip|timeout [options]\n");
    return 2;
  }
  const char* port = argv[1];
  const char* scenario = argv[2];
  uint32_t baud = 0;
  ClientConfig cc;
  int corrupt = -1;
  for (int i = 3; i + 1 < argc; i += 2) {
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--baud") == 0)
      baud = static_cast<uint32_t>(v);
    else if (std::strcmp(argv[i], "--timeout-ms") == 0)
      cc.timeout_ms = static_cast<uint32_t>(v);
    else if (std::strcmp(argv[i], "--attempts") == 0)
      cc.max_attempts = static_cast<uint32_t>(v);
    else if (std::strcmp(argv[i], "--payload") == 0)
      cc.max_payload = static_cast<uint32_t>(v);
    else if (std::strcmp(argv[i], "--corrupt-request") == 0)
      corrupt = static_cast<int>(v);
    else {
      std::fprintf(stderr, "remote_pty_client: error: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  PosixSerialStream serial;
  Status os = std::strncmp(port, "fd:", 3) == 0
                  ? serial.Adopt(static_cast<int>(std::strtol(port + 3, nullptr, 10)), false)
                  : serial.Open(port, baud);
  if (!Ok(os)) {
    std::fprintf(stderr, "remote_pty_client: error: cannot open %s: %s\n", port, StatusName(os));
    return 2;
  }
  CorruptingStream stream(serial, corrupt);
  std::vector<uint8_t> buffer(ClientBufferBytes(cc.max_payload));
  RemoteClient client(stream, cc, buffer.data(), buffer.size());
  const Status is = client.Init();
  if (!Ok(is)) {
    std::fprintf(stderr, "remote_pty_client: error: client init: %s\n", StatusName(is));
    return 2;
  }
  if (std::strcmp(scenario, "roundtrip") == 0) return RoundTrip(client);
  if (std::strcmp(scenario, "timeout") == 0) return Timeout(client);
  std::fprintf(stderr, "remote_pty_client: error: unknown scenario %s\n", scenario);
  return 2;
}
