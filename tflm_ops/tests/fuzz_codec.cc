// libFuzzer target: codec round trip on arbitrary tensors, and decoding of
// arbitrary bytes as a stream (must fail cleanly, never crash).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tinyseg/codec.h"
#include "tinyseg/crc32.h"

using namespace tinyseg;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // First byte picks the element size and block size; the rest is the tensor.
  const uint32_t es = (data[0] & 3) == 0 ? 1 : (data[0] & 3) == 1 ? 2 : 4;
  const uint32_t block_elems = 1 + (data[1] % 64);
  CodecParams p{es, block_elems * es};
  const uint8_t* t = data + 2;
  size_t n = size - 2;
  n -= n % es;

  std::vector<uint8_t> enc(WorstCaseEncodedSize(n, p));
  size_t len = 0;
  if (!Ok(EncodeToBuffer(t, n, p, enc.data(), enc.size(), &len, nullptr))) std::abort();
  size_t measured = 0;
  if (!Ok(MeasureEncodedSize(t, n, p, &measured)) || measured != len) std::abort();
  MemorySource src(enc.data(), len);
  std::vector<uint8_t> dec(n + 1);
  size_t out = 0;
  if (!Ok(DecodeAll(src, dec.data(), dec.size(), &out)) || out != n) std::abort();
  if (n && std::memcmp(dec.data(), t, n) != 0) std::abort();
  if (n) {  // one sub-range chosen from the data
    const size_t off = data[size - 1] % n;
    const size_t l = (n - off) / 2 + 1;
    StreamReader r;
    if (!Ok(r.Open(src)) || !Ok(r.DecodeRange(off, l, dec.data()))) std::abort();
    if (std::memcmp(dec.data(), t + off, l) != 0) std::abort();
  }

  // A valid stream with one bit flipped: the block checks must refuse it.
  const size_t flip = (static_cast<size_t>(data[size - 2]) * 7919u + size) % len;
  const uint8_t bit = static_cast<uint8_t>(1u << (data[size - 1] & 7));
  {
    std::vector<uint8_t> bad(enc.begin(), enc.begin() + static_cast<long>(len));
    bad[flip] ^= bit;
    MemorySource bsrc(bad.data(), bad.size());
    std::vector<uint8_t> sink(n + 1);
    if (Ok(DecodeAll(bsrc, sink.data(), sink.size(), nullptr))) std::abort();
  }
  // The same on an unchecked stream: reaches deep decoder paths, never crashes.
  {
    CodecParams q = p;
    q.block_crc = false;
    std::vector<uint8_t> bad(WorstCaseEncodedSize(n, q));
    size_t blen = 0;
    if (!Ok(EncodeToBuffer(t, n, q, bad.data(), bad.size(), &blen, nullptr))) std::abort();
    if (flip >= kStreamHeaderBytes && flip < blen) bad[flip] ^= bit;
    MemorySource bsrc(bad.data(), blen);
    std::vector<uint8_t> sink(n + 1);
    (void)DecodeAll(bsrc, sink.data(), sink.size(), nullptr);
  }

  // The raw input as a (mostly corrupt) stream, its header CRC made to match
  // so the decoder looks past the header.
  std::vector<uint8_t> raw_bytes(data, data + size);
  if (size >= kStreamHeaderBytes) {
    const uint32_t c = Crc32(raw_bytes.data(), 16);
    for (int i = 0; i < 4; ++i) raw_bytes[16 + i] = static_cast<uint8_t>(c >> (8 * i));
  }
  MemorySource raw(raw_bytes.data(), raw_bytes.size());
  StreamHeader h;
  if (Ok(ReadStreamHeader(raw, &h)) && h.total_bytes <= (1u << 20)) {
    std::vector<uint8_t> sink(h.total_bytes);
    (void)DecodeAll(raw, sink.data(), sink.size(), nullptr);
  }
  return 0;
}
