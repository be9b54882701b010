// Codec round-trip, range decoding and robustness tests.
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "tinyseg/codec.h"
#include "tinytest.h"

using namespace tinyseg;
using tinytest::Rng;

namespace {

std::vector<uint8_t> Encoded(const std::vector<uint8_t>& t, CodecParams p,
                             EncodeStats* st = nullptr) {
  std::vector<uint8_t> out(WorstCaseEncodedSize(t.size(), p));
  size_t len = 0;
  if (!Ok(EncodeToBuffer(t.data(), t.size(), p, out.data(), out.size(), &len, st))) {
    out.clear();
    return out;
  }
  out.resize(len);
  return out;
}

// Random tensor where a fraction `rep_permille` of elements equals one value.
std::vector<uint8_t> Skewed(size_t n_elems, uint32_t es, uint32_t rep_permille, Rng& rng) {
  std::vector<uint8_t> t(n_elems * es);
  const uint32_t rep = static_cast<uint32_t>(rng.Next());
  for (size_t i = 0; i < n_elems; ++i) {
    uint32_t v = rng.Below(1000) < rep_permille ? rep : static_cast<uint32_t>(rng.Next());
    std::memcpy(&t[i * es], &v, es);
  }
  return t;
}

// Checks encode/measure/decode agree, and that no block grew past its header.
bool RoundTrip(const std::vector<uint8_t>& t, CodecParams p) {
  EncodeStats st;
  std::vector<uint8_t> enc = Encoded(t, p, &st);
  if (enc.empty()) return false;
  size_t measured = 0;
  if (!Ok(MeasureEncodedSize(t.data(), t.size(), p, &measured))) return false;
  if (measured != enc.size() || st.encoded_bytes != enc.size()) return false;
  if (enc.size() > WorstCaseEncodedSize(t.size(), p)) return false;
  // Per block: encoded size <= header + block bytes.
  const size_t nb = NumBlocks(t.size(), p.block_bytes);
  const size_t entry = kIndexEntryBytes;
  for (size_t b = 0; b < nb; ++b) {
    uint32_t off, next;
    std::memcpy(&off, &enc[kStreamHeaderBytes + entry * b], 4);  // host is LE
    if (b + 1 < nb)
      std::memcpy(&next, &enc[kStreamHeaderBytes + entry * (b + 1)], 4);
    else
      next = static_cast<uint32_t>(enc.size());
    size_t blen = t.size() - b * p.block_bytes;
    if (blen > p.block_bytes) blen = p.block_bytes;
    if (next - off > BlockOverheadBytes(p.block_crc) + blen) return false;
  }
  MemorySource src(enc.data(), enc.size());
  std::vector<uint8_t> dec(t.size() + 1, 0xAB);
  size_t len = 0;
  if (!Ok(DecodeAll(src, dec.data(), dec.size(), &len))) return false;
  if (len != t.size()) return false;
  if (!t.empty() && std::memcmp(dec.data(), t.data(), t.size()) != 0) return false;
  return dec[t.size()] == 0xAB;  // no write past the end
}

}  // namespace

TEST(RandomRoundTrip) {
  Rng rng(1);
  const uint32_t blocks[] = {8, 64, 512, 1024};
  for (uint32_t es : {1u, 2u, 4u}) {
    for (uint32_t bb : blocks) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{255}, size_t{1000}, size_t{4099}}) {
        std::vector<uint8_t> t(n * es);
        for (auto& b : t) b = static_cast<uint8_t>(rng.Next());
        CHECK(RoundTrip(t, CodecParams{es, bb}));
        CHECK(RoundTrip(t, CodecParams{es, bb, false}));
      }
    }
  }
}

TEST(SkewedRoundTripAndCompresses) {
  Rng rng(2);
  for (uint32_t es : {1u, 2u, 4u}) {
    for (uint32_t permille : {0u, 300u, 500u, 900u, 1000u}) {
      std::vector<uint8_t> t = Skewed(3001, es, permille, rng);
      CodecParams p{es, 1024};
      CHECK(RoundTrip(t, p));
      EncodeStats st;
      std::vector<uint8_t> enc = Encoded(t, p, &st);
      if (permille >= 500) {
        CHECK(enc.size() < t.size());  // the paper's case: ~50% dominant value
        CHECK(st.compressed_blocks + st.constant_blocks > 0);
      }
    }
  }
}

TEST(ConstantTensorIsHeaderOnly) {
  for (uint32_t es : {1u, 2u, 4u}) {
    std::vector<uint8_t> t(10000 * es);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint8_t>(0xF7 + (i % es));
    CodecParams p{es, 512};
    EncodeStats st;
    std::vector<uint8_t> enc = Encoded(t, p, &st);
    const size_t nb = NumBlocks(t.size(), 512);
    CHECK_EQ(enc.size(), kStreamHeaderBytes + nb * (kIndexEntryBytes + BlockOverheadBytes(true)));
    CHECK_EQ(st.constant_blocks, nb);
    CHECK(RoundTrip(t, p));
  }
}

TEST(AllDistinctFallsBackToRaw) {
  // 1-byte: 0..255 repeated has no value above 1/256; 2/4-byte: a counter.
  for (uint32_t es : {1u, 2u, 4u}) {
    const size_t n = 4096;
    std::vector<uint8_t> t(n * es);
    for (size_t i = 0; i < n; ++i) {
      uint32_t v = static_cast<uint32_t>(i * 2654435761u);
      if (es == 1) v = static_cast<uint32_t>(i);
      std::memcpy(&t[i * es], &v, es);
    }
    CodecParams p{es, 1024};
    EncodeStats st;
    std::vector<uint8_t> enc = Encoded(t, p, &st);
    CHECK_EQ(st.compressed_blocks, 0u);
    CHECK_EQ(st.constant_blocks, 0u);
    CHECK_EQ(enc.size(), WorstCaseEncodedSize(t.size(), p));
    CHECK(RoundTrip(t, p));
  }
}

TEST(SizesNotMultipleOfBlock) {
  Rng rng(3);
  for (uint32_t es : {1u, 2u, 4u}) {
    for (size_t n_elems = 1; n_elems < 300; n_elems += 7) {
      std::vector<uint8_t> t = Skewed(n_elems, es, 600, rng);
      CHECK(RoundTrip(t, CodecParams{es, 16 * es}));
      CHECK(RoundTrip(t, CodecParams{es, 40 * es}));
    }
  }
}

TEST(DecodeEverySubRange) {
  Rng rng(4);
  for (uint32_t es : {1u, 2u, 4u}) {
    for (uint32_t permille : {0u, 500u, 1000u}) {
      for (uint32_t bb_elems : {1u, 3u, 8u}) {
        std::vector<uint8_t> t = Skewed(23, es, permille, rng);
        CodecParams p{es, bb_elems * es};
        std::vector<uint8_t> enc = Encoded(t, p);
        CHECK(!enc.empty());
        MemorySource src(enc.data(), enc.size());
        StreamReader reader;
        CHECK_OK(reader.Open(src));
        std::vector<uint8_t> dst(t.size() + 2);
        for (size_t off = 0; off <= t.size(); ++off) {
          for (size_t len = 0; off + len <= t.size(); ++len) {
            std::fill(dst.begin(), dst.end(), 0xCD);
            CHECK_OK(reader.DecodeRange(off, len, dst.data()));
            CHECK(len == 0 || std::memcmp(dst.data(), &t[off], len) == 0);
            CHECK_EQ(dst[len], 0xCD);
          }
        }
        CHECK_STATUS(reader.DecodeRange(1, t.size(), dst.data()), Status::kOutOfRange);
      }
    }
  }
}

TEST(DecodeRangeLargeBlocksBitmapBeyondStackChunk) {
  // 4096-element blocks: bitmap 512 bytes > the decoder's 128-byte chunk.
  Rng rng(5);
  std::vector<uint8_t> t = Skewed(20000, 1, 700, rng);
  CodecParams p{1, 4096};
  std::vector<uint8_t> enc = Encoded(t, p);
  MemorySource src(enc.data(), enc.size());
  std::vector<uint8_t> dst(t.size());
  for (int i = 0; i < 300; ++i) {
    const size_t off = rng.Below(static_cast<uint32_t>(t.size()));
    const size_t len = rng.Below(static_cast<uint32_t>(t.size() - off + 1));
    CHECK_OK(DecodeRange(src, off, len, dst.data()));
    CHECK(len == 0 || std::memcmp(dst.data(), &t[off], len) == 0);
  }
}

TEST(FloatBitExact) {
  const float vals[] = {0.0f, -0.0f, 1.5f, -3.25e-7f};
  std::vector<uint8_t> t;
  for (int i = 0; i < 1000; ++i) {
    float f = vals[(i * 7) % 4];
    if (i % 97 == 0) {
      uint32_t nan = 0x7FC00001u + static_cast<uint32_t>(i);
      std::memcpy(&f, &nan, 4);
    }
    uint8_t b[4];
    std::memcpy(b, &f, 4);
    t.insert(t.end(), b, b + 4);
  }
  CHECK(RoundTrip(t, CodecParams{4, 256}));
}

TEST(DominantValueFoundForWideElements) {
  // 2-byte elements: value 0x1234 at 20% (mode), the rest distinct.
  std::vector<uint8_t> t(2 * 1000);
  for (uint32_t i = 0; i < 1000; ++i) {
    uint16_t v = (i % 5 == 0) ? 0x1234 : static_cast<uint16_t>(i * 7 + 1);
    if (v == 0x1234 && i % 5 != 0) v = 1;
    std::memcpy(&t[2 * i], &v, 2);
  }
  CodecParams p{2, 2000};
  std::vector<uint8_t> enc = Encoded(t, p);
  CHECK(enc.size() > kStreamHeaderBytes + kIndexEntryBytes + kBlockHeaderBytes);
  const uint8_t* bh = &enc[kStreamHeaderBytes + kIndexEntryBytes];
  CHECK_EQ(bh[0], static_cast<uint8_t>(BlockMode::kCompressed));
  uint16_t rep;
  std::memcpy(&rep, bh + 4, 2);
  CHECK_EQ(rep, 0x1234);
  CHECK(RoundTrip(t, p));
}

TEST(MeasureMatchesEncodeWhenCandidatesCancel) {
  // Wide elements from a small alphabet: the Misra-Gries table often ends
  // empty; the representative count must still be exact (fuzzer finding).
  Rng rng(7);
  for (uint32_t es : {2u, 4u}) {
    for (uint32_t alphabet : {3u, 9u, 12u, 40u}) {
      for (uint32_t block_elems = 1; block_elems <= 40; ++block_elems) {
        std::vector<uint8_t> t(es * (block_elems * 3 + rng.Below(block_elems)));
        for (size_t i = 0; i < t.size() / es; ++i) {
          const uint32_t v = 0x01010101u * (1 + rng.Below(alphabet));
          std::memcpy(&t[i * es], &v, es);
        }
        CHECK(RoundTrip(t, CodecParams{es, block_elems * es}));
      }
    }
  }
  // The fuzzer's crash input: elem_size 4, 64-element blocks.
  static const uint8_t kCrash[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0b, 0x9b, 0xd4, 0xff,
                                   0xb1, 0xb1, 0xf2, 0xb1, 0xff, 0xff, 0xff, 0x0b, 0x4f, 0x0f, 0x0f,
                                   0x0f, 0x0f, 0x01, 0x00, 0x60, 0x60, 0x00, 0xfd, 0xa5, 0x00, 0x01,
                                   0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x35, 0xe8, 0x44, 0x35, 0xd4,
                                   0xf2, 0xb1, 0xb1, 0xff, 0xff, 0xd4, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xf2, 0xb1, 0xb1, 0x01, 0x00, 0x00, 0x00, 0xf2, 0xb1,
                                   0xb1, 0xff, 0xff, 0xff, 0x0b, 0x9b, 0x1b, 0x35, 0x35, 0xff};
  std::vector<uint8_t> t(kCrash + 2, kCrash + 2 + 72);
  CHECK(RoundTrip(t, CodecParams{4, 256}));
}

TEST(InvalidParamsRejected) {
  uint8_t data[16] = {0};
  uint8_t out[256];
  size_t len;
  CHECK_STATUS(EncodeToBuffer(data, 16, CodecParams{3, 12}, out, sizeof(out), &len, nullptr),
               Status::kInvalidArgument);
  CHECK_STATUS(EncodeToBuffer(data, 16, CodecParams{4, 6}, out, sizeof(out), &len, nullptr),
               Status::kInvalidArgument);
  CHECK_STATUS(EncodeToBuffer(data, 15, CodecParams{2, 8}, out, sizeof(out), &len, nullptr),
               Status::kMisaligned);
  CHECK_STATUS(EncodeToBuffer(data, 16, CodecParams{1, 0}, out, sizeof(out), &len, nullptr),
               Status::kInvalidArgument);
  CHECK_STATUS(EncodeToBuffer(data, 16, CodecParams{1, 8}, out, 20, &len, nullptr),
               Status::kBufferTooSmall);
  CHECK_EQ(WorstCaseEncodedSize(16, CodecParams{3, 12}), 0u);
}

TEST(CorruptStreamsRejectedWithoutCrash) {
  Rng rng(6);
  std::vector<uint8_t> t = Skewed(500, 1, 600, rng);
  std::vector<uint8_t> enc = Encoded(t, CodecParams{1, 64});
  std::vector<uint8_t> dst(t.size());
  {
    std::vector<uint8_t> bad = enc;
    bad[0] ^= 1;  // magic: the header's own CRC no longer matches
    MemorySource src(bad.data(), bad.size());
    CHECK_STATUS(DecodeAll(src, dst.data(), dst.size(), nullptr), Status::kChecksumMismatch);
  }
  // Every truncation fails cleanly.
  for (size_t cut = 0; cut < enc.size(); ++cut) {
    MemorySource src(enc.data(), cut);
    const Status s = DecodeAll(src, dst.data(), dst.size(), nullptr);
    CHECK(s == Status::kCorrupt || s == Status::kOutOfRange || s == Status::kChecksumMismatch);
  }
  // Random byte flips: any status, but never a crash or out-of-bounds access.
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> bad = enc;
    bad[rng.Below(static_cast<uint32_t>(bad.size()))] ^= static_cast<uint8_t>(1u << rng.Below(8));
    MemorySource src(bad.data(), bad.size());
    (void)DecodeAll(src, dst.data(), dst.size(), nullptr);
  }
  std::vector<uint8_t> small(10);
  MemorySource src(enc.data(), enc.size());
  CHECK_STATUS(DecodeAll(src, small.data(), small.size(), nullptr), Status::kBufferTooSmall);
}

// With block checks, every single-bit flip anywhere in a stream (header,
// index, block headers, bitmaps, values) fails the decode, whole or by range.
TEST(EverySingleBitFlipDetected) {
  Rng rng(11);
  for (uint32_t es : {1u, 2u, 4u}) {
    std::vector<uint8_t> t = Skewed(150, es, 700, rng);
    for (size_t i = 0; i < 16 * es; ++i) t[i] = static_cast<uint8_t>(rng.Next());  // a raw block
    std::vector<uint8_t> enc = Encoded(t, CodecParams{es, 16 * es});
    CHECK(!enc.empty());
    std::vector<uint8_t> dst(t.size());
    size_t flips = 0, detected = 0;
    for (size_t byte = 0; byte < enc.size(); ++byte) {
      for (int bit = 0; bit < 8; ++bit) {
        enc[byte] ^= static_cast<uint8_t>(1u << bit);
        MemorySource src(enc.data(), enc.size());
        ++flips;
        if (!Ok(DecodeAll(src, dst.data(), dst.size(), nullptr))) ++detected;
        // A range inside one block (the partial-block path).
        const Status r = DecodeRange(src, 3 * es, 5 * es, dst.data());
        CHECK(!Ok(r) || std::memcmp(dst.data(), &t[3 * es], 5 * es) == 0);
        enc[byte] ^= static_cast<uint8_t>(1u << bit);
      }
    }
    CHECK_EQ(detected, flips);
  }
}

// A source whose `at`-th Read (from 0) returns one flipped bit, the stored
// bytes unchanged: a marginal QSPI read, read disturb, a noisy serial link.
class TransientFlipSource final : public ByteSource {
 public:
  TransientFlipSource(const std::vector<uint8_t>& data, size_t at, uint32_t pick, int bit)
      : data_(data), at_(at), pick_(pick), bit_(bit) {}
  size_t Size() const override { return data_.size(); }
  Status Read(size_t offset, uint8_t* dst, size_t len) override {
    if (offset > data_.size() || len > data_.size() - offset) return Status::kOutOfRange;
    std::memcpy(dst, data_.data() + offset, len);
    if (reads_++ == at_ && len > 0) {
      const size_t byte = pick_ == 0 ? 0 : pick_ == 1 ? len / 2 : len - 1;
      dst[byte] ^= static_cast<uint8_t>(1u << bit_);
      flipped_ = true;
    }
    return Status::kOk;
  }
  size_t reads() const { return reads_; }
  bool flipped() const { return flipped_; }

 private:
  const std::vector<uint8_t>& data_;
  size_t at_;
  uint32_t pick_;  // the first, middle or last byte of the read
  int bit_;
  size_t reads_ = 0;
  bool flipped_ = false;
};

// A bit flipped on one read only, on any read a range decode makes (the
// header's, the index's, the block header's, the body's, the check's),
// fails the decode or leaves the decoded bytes right; for ranges inside one
// block (the partial-block path) and whole blocks, raw, compressed and
// constant blocks, 1-, 2- and 4-byte elements.
TEST(TransientReadFlipNeverDecodedAsData) {
  Rng rng(13);
  size_t flips = 0, detected = 0, wrong = 0;
  for (uint32_t es : {1u, 2u, 4u}) {
    std::vector<uint8_t> t = Skewed(200, es, 700, rng);
    for (size_t i = 0; i < 40 * es; ++i) t[i] = static_cast<uint8_t>(rng.Next());  // raw blocks
    for (size_t i = 120 * es; i < 160 * es; ++i) t[i] = t[120 * es + i % es];      // constant
    std::vector<uint8_t> enc = Encoded(t, CodecParams{es, 40 * es});
    CHECK(!enc.empty());
    std::vector<uint8_t> dst(t.size());
    const size_t ranges[][2] = {{3, 5}, {0, 40}, {41, 30}, {85, 30}, {125, 10}, {30, 100}};
    for (const auto& r : ranges) {
      const size_t off = r[0] * es + (es > 1 ? 1 : 0), len = r[1] * es;
      for (size_t at = 0;; ++at) {
        bool any = false;
        for (uint32_t pick = 0; pick < 3; ++pick) {
          for (int bit : {0, 3, 7}) {
            TransientFlipSource src(enc, at, pick, bit);
            const Status s = DecodeRange(src, off, len, dst.data());
            if (!src.flipped()) continue;
            any = true;
            ++flips;
            if (!Ok(s)) {
              ++detected;
            } else if (std::memcmp(dst.data(), &t[off], len) != 0) {
              ++wrong;
            }
          }
        }
        if (!any) break;
      }
    }
  }
  std::printf("transient read flips: %zu, detected %zu, harmless %zu, wrong with OK %zu\n", flips,
              detected, flips - detected - wrong, wrong);
  CHECK(flips > 0);
  CHECK_EQ(wrong, 0u);
}

TEST(UncheckedStreamsStillCheckTheirHeader) {
  Rng rng(12);
  std::vector<uint8_t> t = Skewed(300, 1, 600, rng);
  std::vector<uint8_t> enc = Encoded(t, CodecParams{1, 64, false});
  // Unchecked: the blocks have no 4-byte check, nothing else changes.
  CHECK_EQ(Encoded(t, CodecParams{1, 64}).size(),
           enc.size() + NumBlocks(t.size(), 64) * kBlockCrcBytes);
  std::vector<uint8_t> dst(t.size());
  for (size_t byte = 0; byte < kStreamHeaderBytes; ++byte) {
    enc[byte] ^= 0x10;
    MemorySource src(enc.data(), enc.size());
    CHECK(!Ok(DecodeAll(src, dst.data(), dst.size(), nullptr)));
    enc[byte] ^= 0x10;
  }
  MemorySource src(enc.data(), enc.size());
  CHECK_OK(DecodeAll(src, dst.data(), dst.size(), nullptr));
  CHECK(dst == t);
}

TINYTEST_MAIN("codec")
