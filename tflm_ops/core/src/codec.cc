// Block-wise representative-value codec (see codec.h for the format).
#include "tinyseg/codec.h"

#include "tinyseg/crc32.h"

#include <cstdint>
#include <cstring>

namespace tinyseg {
namespace {

constexpr size_t kChunk = 128;  // stack staging for bitmap / others

void PutU16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void PutU32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}
uint32_t GetU16(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8);
}
uint32_t GetU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Element bytes as an integer key; only equality matters, so host byte
// order is irrelevant.
// Elements are 1, 2 or 4 bytes: each size gets a copy of constant size (a
// load and a store) instead of a library call per element.
inline uint32_t LoadElem(const uint8_t* p, uint32_t es) {
  uint32_t v = 0;
  switch (es) {
    case 1:
      std::memcpy(&v, p, 1);
      break;
    case 2:
      std::memcpy(&v, p, 2);
      break;
    case 4:
      std::memcpy(&v, p, 4);
      break;
    default:
      std::memcpy(&v, p, es);
      break;
  }
  return v;
}

inline void CopyElem(uint8_t* dst, const uint8_t* src, uint32_t es) {
  switch (es) {
    case 1:
      std::memmove(dst, src, 1);
      break;
    case 2:
      std::memmove(dst, src, 2);
      break;
    case 4:
      std::memmove(dst, src, 4);
      break;
    default:
      std::memmove(dst, src, es);
      break;
  }
}

inline int PopCount8(uint8_t v) {
  int c = 0;
  while (v) {
    v = static_cast<uint8_t>(v & (v - 1));
    ++c;
  }
  return c;
}

struct BlockPlan {
  BlockMode mode = BlockMode::kRaw;
  uint32_t rep = 0;     // element bytes, memcpy'd into a u32
  uint32_t others = 0;  // elements != rep
  size_t encoded = 0;   // bytes including the block header
};

// Most frequent element of block[0, n). Exact for es == 1.
void FindRepresentative(const uint8_t* block, uint32_t n, uint32_t es, uint32_t* rep,
                        uint32_t* rep_count) {
  if (es == 1) {
    uint16_t hist[256];
    std::memset(hist, 0, sizeof(hist));
    for (uint32_t i = 0; i < n; ++i) ++hist[block[i]];
    uint32_t best = 0;
    for (uint32_t v = 1; v < 256; ++v) {
      if (hist[v] > hist[best]) best = v;
    }
    *rep = best;
    *rep_count = hist[best];
    return;
  }
  // Misra-Gries heavy hitters with K candidates, then exact recount.
  constexpr int K = 8;
  uint32_t cand[K];
  uint32_t cnt[K];
  int used = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t v = LoadElem(block + i * es, es);
    int j = 0;
    for (; j < used; ++j) {
      if (cand[j] == v) break;
    }
    if (j < used) {
      ++cnt[j];
    } else if (used < K) {
      cand[used] = v;
      cnt[used] = 1;
      ++used;
    } else {
      for (int k = 0; k < K; ++k) --cnt[k];
      // Drop exhausted candidates (compact the table).
      int w = 0;
      for (int k = 0; k < K; ++k) {
        if (cnt[k] != 0) {
          cand[w] = cand[k];
          cnt[w] = cnt[k];
          ++w;
        }
      }
      used = w;
    }
  }
  if (used == 0) {
    // Every candidate cancelled out (no value above n/(K+1)): fall back to
    // the first element; its count is taken exactly below like any other.
    if (n == 0) {
      *rep = 0;
      *rep_count = 0;
      return;
    }
    cand[0] = LoadElem(block, es);
    used = 1;
  }
  uint32_t exact[K];
  for (int k = 0; k < used; ++k) exact[k] = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t v = LoadElem(block + i * es, es);
    for (int k = 0; k < used; ++k) {
      if (cand[k] == v) {
        ++exact[k];
        break;
      }
    }
  }
  int best = 0;
  for (int k = 1; k < used; ++k) {
    if (exact[k] > exact[best]) best = k;
  }
  *rep = cand[best];
  *rep_count = exact[best];
}

BlockPlan PlanBlock(const uint8_t* block, uint32_t n, uint32_t es) {
  BlockPlan p;
  uint32_t rep_count = 0;
  FindRepresentative(block, n, es, &p.rep, &rep_count);
  p.others = n - rep_count;
  const size_t raw = kBlockHeaderBytes + static_cast<size_t>(n) * es;
  const size_t comp = kBlockHeaderBytes + (n + 7) / 8 + static_cast<size_t>(p.others) * es;
  if (p.others == 0) {
    p.mode = BlockMode::kConstant;
    p.encoded = kBlockHeaderBytes;
  } else if (comp < raw) {
    p.mode = BlockMode::kCompressed;
    p.encoded = comp;
  } else {
    p.mode = BlockMode::kRaw;
    p.others = 0;
    p.encoded = raw;
  }
  return p;
}

Status WriteBlock(const uint8_t* block, uint32_t n, uint32_t es, const BlockPlan& p,
                  ByteSink& sink) {
  uint8_t hdr[kBlockHeaderBytes];
  hdr[0] = static_cast<uint8_t>(p.mode);
  hdr[1] = 0;
  PutU16(hdr + 2, p.mode == BlockMode::kCompressed ? p.others : 0);
  std::memset(hdr + 4, 0, 4);
  if (p.mode != BlockMode::kRaw) std::memcpy(hdr + 4, &p.rep, es);
  TINYSEG_RETURN_IF_ERROR(sink.Write(hdr, sizeof(hdr)));
  if (p.mode == BlockMode::kConstant) return Status::kOk;
  if (p.mode == BlockMode::kRaw) {
    return sink.Write(block, static_cast<size_t>(n) * es);
  }
  // Bitmap, streamed in kChunk-byte pieces.
  uint8_t buf[kChunk];
  const uint32_t bitmap_bytes = (n + 7) / 8;
  for (uint32_t byte0 = 0; byte0 < bitmap_bytes; byte0 += kChunk) {
    const uint32_t nb = (bitmap_bytes - byte0 < kChunk) ? bitmap_bytes - byte0 : kChunk;
    std::memset(buf, 0, nb);
    const uint32_t e_begin = byte0 * 8;
    uint32_t e_end = (byte0 + nb) * 8;
    if (e_end > n) e_end = n;
    for (uint32_t i = e_begin; i < e_end; ++i) {
      if (LoadElem(block + i * es, es) != p.rep) {
        buf[(i - e_begin) >> 3] |= static_cast<uint8_t>(1u << (i & 7));
      }
    }
    TINYSEG_RETURN_IF_ERROR(sink.Write(buf, nb));
  }
  // Other values, packed through the same staging buffer.
  size_t fill = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t* e = block + i * es;
    if (LoadElem(e, es) == p.rep) continue;
    if (fill + es > kChunk) {
      TINYSEG_RETURN_IF_ERROR(sink.Write(buf, fill));
      fill = 0;
    }
    CopyElem(buf + fill, e, es);
    fill += es;
  }
  if (fill) TINYSEG_RETURN_IF_ERROR(sink.Write(buf, fill));
  return Status::kOk;
}

// Passes bytes on to a sink and runs the block check over them.
class CrcTeeSink final : public ByteSink {
 public:
  CrcTeeSink(ByteSink& next, uint32_t state) : next_(next), state_(state) {}
  Status Write(const uint8_t* data, size_t len) override {
    state_ = Crc32Update(state_, data, len);
    return next_.Write(data, len);
  }
  // Appends the check itself.
  Status Finish() {
    uint8_t c[kBlockCrcBytes];
    PutU32(c, Crc32Final(state_));
    return next_.Write(c, sizeof(c));
  }

 private:
  ByteSink& next_;
  uint32_t state_;
};

// Check state before a block's bytes: block number and offset come first.
uint32_t BlockCrcSeed(uint32_t block, uint32_t offset) {
  uint8_t pre[8];
  PutU32(pre, block);
  PutU32(pre + 4, offset);
  return Crc32Update(kCrc32Init, pre, sizeof(pre));
}

void PutStreamHeader(uint8_t* out, size_t total_bytes, const CodecParams& params) {
  PutU32(out + 0, kCodecMagic);
  PutU32(out + 4, static_cast<uint32_t>(total_bytes));
  PutU32(out + 8, params.block_bytes);
  out[12] = static_cast<uint8_t>(params.elem_size);
  out[13] = kCodecVersion;
  out[14] = params.block_crc ? kFlagBlockCrc : 0;
  out[15] = 0;
  PutU32(out + 16, Crc32(out, 16));
}

inline uint32_t BlockElems(const StreamHeader& h, uint32_t block) {
  const uint32_t start = block * h.block_bytes;
  const uint32_t left = h.total_bytes - start;
  return (left < h.block_bytes ? left : h.block_bytes) / h.elem_size;
}

// By value (status.h numbers Status from 0 without gaps).
constexpr const char* kStatusNames[] = {
    "ok",
    "invalid_argument",
    "out_of_range",
    "misaligned",
    "not_erased",
    "buffer_too_small",
    "corrupt",
    "io_error",
    "busy",
    "no_space",
    "not_found",
    "unsupported",
    "checksum_mismatch",
};
static_assert(NamesUpTo(kStatusNames, Status::kChecksumMismatch), "a name for every Status");
}  // namespace

const char* StatusName(Status s) { return EnumName(s, kStatusNames); }

Status MemorySink::Write(const uint8_t* data, size_t len) {
  if (len > cap_ - len_) return Status::kBufferTooSmall;
  if (len) std::memcpy(buf_ + len_, data, len);
  len_ += len;
  return Status::kOk;
}

Status MemorySource::Read(size_t offset, uint8_t* dst, size_t len) {
  if (offset > size_ || len > size_ - offset) return Status::kOutOfRange;
  if (len) std::memcpy(dst, data_ + offset, len);
  return Status::kOk;
}

Status ValidateCodecParams(size_t total_bytes, const CodecParams& params) {
  const uint32_t es = params.elem_size;
  if (es != 1 && es != 2 && es != 4) return Status::kInvalidArgument;
  if (params.block_bytes == 0 || params.block_bytes > kMaxBlockBytes ||
      params.block_bytes % es != 0) {
    return Status::kInvalidArgument;
  }
  if (total_bytes % es != 0) return Status::kMisaligned;
  // Every offset of the stream (worst case: all blocks raw) must fit in u32.
  const uint64_t nb =
      (static_cast<uint64_t>(total_bytes) + params.block_bytes - 1) / params.block_bytes;
  const uint64_t worst = kStreamHeaderBytes +
                         nb * (kIndexEntryBytes + BlockOverheadBytes(params.block_crc)) +
                         total_bytes;
  if (worst > 0xFFFFFFFFull || worst > static_cast<uint64_t>(SIZE_MAX)) {
    return Status::kOutOfRange;
  }
  return Status::kOk;
}

size_t NumBlocks(size_t total_bytes, uint32_t block_bytes) {
  if (block_bytes == 0) return 0;
  return (total_bytes + block_bytes - 1) / block_bytes;
}

size_t StreamMetaBytes(size_t num_blocks) {
  return kStreamHeaderBytes + num_blocks * kIndexEntryBytes;
}

size_t WorstCaseEncodedSize(size_t total_bytes, const CodecParams& params) {
  if (!Ok(ValidateCodecParams(total_bytes, params))) return 0;
  const size_t nb = NumBlocks(total_bytes, params.block_bytes);
  return StreamMetaBytes(nb) + nb * BlockOverheadBytes(params.block_crc) + total_bytes;
}

Status MeasureEncodedSize(const uint8_t* data, size_t size, const CodecParams& params,
                          size_t* encoded_size) {
  if (encoded_size == nullptr || (data == nullptr && size != 0)) {
    return Status::kInvalidArgument;
  }
  TINYSEG_RETURN_IF_ERROR(ValidateCodecParams(size, params));
  const uint32_t es = params.elem_size;
  const size_t nb = NumBlocks(size, params.block_bytes);
  size_t total = StreamMetaBytes(nb);
  const size_t check = params.block_crc ? kBlockCrcBytes : 0;
  for (size_t b = 0; b < nb; ++b) {
    const size_t start = b * params.block_bytes;
    const size_t len = (size - start < params.block_bytes) ? size - start : params.block_bytes;
    total += PlanBlock(data + start, static_cast<uint32_t>(len / es), es).encoded + check;
  }
  *encoded_size = total;
  return Status::kOk;
}

Status Encode(const uint8_t* data, size_t size, const CodecParams& params, ByteSink& sink,
              EncodeStats* stats) {
  if (data == nullptr && size != 0) return Status::kInvalidArgument;
  TINYSEG_RETURN_IF_ERROR(ValidateCodecParams(size, params));
  const uint32_t es = params.elem_size;
  const uint32_t bb = params.block_bytes;
  const size_t nb = NumBlocks(size, bb);

  uint8_t hdr[kStreamHeaderBytes];
  PutStreamHeader(hdr, size, params);
  TINYSEG_RETURN_IF_ERROR(sink.Write(hdr, sizeof(hdr)));

  // Pass 1: block sizes -> index (streamed in chunks of offsets).
  const size_t check = params.block_crc ? kBlockCrcBytes : 0;
  size_t offset = StreamMetaBytes(nb);
  uint8_t idx[kChunk];
  size_t fill = 0;
  for (size_t b = 0; b < nb; ++b) {
    const size_t start = b * bb;
    const size_t len = (size - start < bb) ? size - start : bb;
    const BlockPlan p = PlanBlock(data + start, static_cast<uint32_t>(len / es), es);
    PutU32(idx + fill, static_cast<uint32_t>(offset));
    fill += kIndexEntryBytes;
    if (fill == kChunk) {
      TINYSEG_RETURN_IF_ERROR(sink.Write(idx, fill));
      fill = 0;
    }
    offset += p.encoded + check;
  }
  if (fill) TINYSEG_RETURN_IF_ERROR(sink.Write(idx, fill));

  // Pass 2: blocks.
  EncodeStats st;
  size_t at = StreamMetaBytes(nb);
  for (size_t b = 0; b < nb; ++b) {
    const size_t start = b * bb;
    const size_t len = (size - start < bb) ? size - start : bb;
    const uint32_t n = static_cast<uint32_t>(len / es);
    const BlockPlan p = PlanBlock(data + start, n, es);
    if (params.block_crc) {
      CrcTeeSink tee(sink, BlockCrcSeed(static_cast<uint32_t>(b), static_cast<uint32_t>(at)));
      TINYSEG_RETURN_IF_ERROR(WriteBlock(data + start, n, es, p, tee));
      TINYSEG_RETURN_IF_ERROR(tee.Finish());
    } else {
      TINYSEG_RETURN_IF_ERROR(WriteBlock(data + start, n, es, p, sink));
    }
    at += p.encoded + check;
    switch (p.mode) {
      case BlockMode::kRaw:
        ++st.raw_blocks;
        break;
      case BlockMode::kCompressed:
        ++st.compressed_blocks;
        break;
      case BlockMode::kConstant:
        ++st.constant_blocks;
        break;
    }
  }
  st.encoded_bytes = offset;
  if (stats) *stats = st;
  return Status::kOk;
}

Status EncodeStreamHeader(size_t total_bytes, const CodecParams& params,
                          uint8_t out[kStreamHeaderBytes]) {
  if (out == nullptr) return Status::kInvalidArgument;
  TINYSEG_RETURN_IF_ERROR(ValidateCodecParams(total_bytes, params));
  PutStreamHeader(out, total_bytes, params);
  return Status::kOk;
}

Status EncodeBlock(const uint8_t* data, size_t size, uint32_t elem_size, ByteSink& sink,
                   size_t* encoded) {
  return EncodeBlock(data, size, elem_size, 0, 0, false, sink, encoded);
}

Status EncodeBlock(const uint8_t* data, size_t size, uint32_t elem_size, uint32_t block,
                   uint32_t offset, bool check, ByteSink& sink, size_t* encoded) {
  if (data == nullptr || encoded == nullptr || size == 0 ||
      (elem_size != 1 && elem_size != 2 && elem_size != 4) || size % elem_size != 0 ||
      size > kMaxBlockBytes) {
    return Status::kInvalidArgument;
  }
  const uint32_t n = static_cast<uint32_t>(size / elem_size);
  const BlockPlan p = PlanBlock(data, n, elem_size);
  if (check) {
    CrcTeeSink tee(sink, BlockCrcSeed(block, offset));
    TINYSEG_RETURN_IF_ERROR(WriteBlock(data, n, elem_size, p, tee));
    TINYSEG_RETURN_IF_ERROR(tee.Finish());
    *encoded = p.encoded + kBlockCrcBytes;
    return Status::kOk;
  }
  TINYSEG_RETURN_IF_ERROR(WriteBlock(data, n, elem_size, p, sink));
  *encoded = p.encoded;
  return Status::kOk;
}

Status EncodeToBuffer(const uint8_t* data, size_t size, const CodecParams& params, uint8_t* out,
                      size_t capacity, size_t* out_len, EncodeStats* stats) {
  if (out == nullptr && capacity != 0) return Status::kInvalidArgument;
  MemorySink sink(out, capacity);
  TINYSEG_RETURN_IF_ERROR(Encode(data, size, params, sink, stats));
  if (out_len) *out_len = sink.size();
  return Status::kOk;
}

Status ReadStreamHeader(ByteSource& source, StreamHeader* header) {
  if (header == nullptr) return Status::kInvalidArgument;
  uint8_t hdr[kStreamHeaderBytes];
  if (source.Size() < kStreamHeaderBytes) return Status::kCorrupt;
  TINYSEG_RETURN_IF_ERROR(source.Read(0, hdr, sizeof(hdr)));
  if (Crc32(hdr, 16) != GetU32(hdr + 16)) return Status::kChecksumMismatch;
  if (GetU32(hdr) != kCodecMagic || hdr[13] != kCodecVersion || (hdr[14] & ~kFlagBlockCrc) != 0 ||
      hdr[15] != 0) {
    return Status::kCorrupt;
  }
  CodecParams p;
  p.elem_size = hdr[12];
  p.block_bytes = GetU32(hdr + 8);
  p.block_crc = (hdr[14] & kFlagBlockCrc) != 0;
  const uint32_t total = GetU32(hdr + 4);
  if (!Ok(ValidateCodecParams(total, p))) return Status::kCorrupt;
  const size_t nb = NumBlocks(total, p.block_bytes);
  const size_t min_size = StreamMetaBytes(nb) + nb * BlockOverheadBytes(p.block_crc);
  if (source.Size() < min_size) return Status::kCorrupt;
  header->total_bytes = total;
  header->block_bytes = p.block_bytes;
  header->elem_size = p.elem_size;
  header->num_blocks = static_cast<uint32_t>(nb);
  header->block_crc = p.block_crc;
  return Status::kOk;
}

Status StreamReader::Open(ByteSource& source) {
  source_ = nullptr;
  TINYSEG_RETURN_IF_ERROR(ReadStreamHeader(source, &header_));
  source_ = &source;
  return Status::kOk;
}

// Bitmap bytes [byte0, byte0 + nb) in buf: *s counts the set bits of
// elements before a, *m those in [a, b); each element of [a, b) gets in dst
// the representative (bit clear) or the placeholder `other` (bit set).
template <uint32_t kEs>
void MarkBits(const uint8_t* buf, size_t nb, size_t byte0, uint32_t a, uint32_t b, uint32_t rep,
              uint32_t other, uint8_t* dst, uint32_t* s, uint32_t* m) {
  for (size_t k = 0; k < nb; ++k) {
    const uint32_t e0 = static_cast<uint32_t>((byte0 + k) * 8);
    const uint32_t bits = buf[k];
    if (e0 + 8 <= a) {
      *s += PopCount8(buf[k]);
      continue;
    }
    const uint32_t lo = e0 < a ? a : e0;
    const uint32_t hi = e0 + 8 < b ? e0 + 8 : b;
    for (uint32_t e = e0; e < lo; ++e) *s += (bits >> (e - e0)) & 1u;
    for (uint32_t e = lo; e < hi; ++e) {
      const uint32_t set = (bits >> (e - e0)) & 1u;
      std::memcpy(dst + static_cast<size_t>(e - a) * kEs, set ? &other : &rep, kEs);
      *m += set;
    }
  }
}

// Puts the values vals[0, count) into the next placeholders of dst[0, n)
// (elements other than rep) from *next on; false when dst has too few.
template <uint32_t kEs>
bool FillPlaceholders(const uint8_t* vals, size_t count, uint32_t rep, uint8_t* dst, uint32_t n,
                      uint32_t* next) {
  uint32_t e = *next;
  for (size_t i = 0; i < count; ++i) {
    uint32_t v = rep;
    while (e < n) {
      std::memcpy(&v, dst + static_cast<size_t>(e) * kEs, kEs);
      if (v != rep) break;
      ++e;
    }
    if (e == n) return false;
    std::memcpy(dst + static_cast<size_t>(e) * kEs, vals + i * kEs, kEs);
    ++e;
  }
  *next = e;
  return true;
}

// Reads [off, off + len) through buf (kChunk bytes) only to run the check
// over it (bytes of a block outside the decoded range).
Status StreamReader::Skip(size_t off, size_t len, uint32_t* crc, uint8_t* buf) {
  for (size_t done = 0; done < len; done += kChunk) {
    const size_t n = (len - done < kChunk) ? len - done : kChunk;
    TINYSEG_RETURN_IF_ERROR(source_->Read(off + done, buf, n));
    *crc = Crc32Update(*crc, buf, n);
  }
  return Status::kOk;
}

// Elements [a, b) of a raw block: the bytes before and after them through the
// check only, the wanted bytes read once straight into dst and checked there.
Status StreamReader::DecodeRaw(size_t body, uint32_t n_blk, uint32_t a, uint32_t b, uint8_t* dst,
                               uint32_t* crc, uint8_t* buf) {
  const size_t es = header_.elem_size;
  if (crc) TINYSEG_RETURN_IF_ERROR(Skip(body, a * es, crc, buf));
  TINYSEG_RETURN_IF_ERROR(source_->Read(body + a * es, dst, (b - a) * es));
  if (crc) *crc = Crc32Update(*crc, dst, (b - a) * es);
  if (crc) TINYSEG_RETURN_IF_ERROR(Skip(body + b * es, (n_blk - b) * es, crc, buf));
  return Status::kOk;
}

// Bitmap of a compressed block, read once through buf in stored order (all of it when
// checked, else the bytes covering [0, b)): counts the set bits before a (*s)
// and in [a, b) (*m), and writes into dst the representative for a clear
// bit and, for a set bit, a placeholder that differs from it, so the packed
// values can be put in place later without keeping the bitmap.
Status StreamReader::ScanBitmap(size_t body, uint32_t n_blk, uint32_t a, uint32_t b,
                                const uint8_t* rep, uint8_t* dst, uint32_t* crc, uint8_t* buf,
                                uint32_t* s, uint32_t* m) {
  const uint32_t es = header_.elem_size;
  uint32_t rv = 0;
  std::memcpy(&rv, rep, es);
  const uint32_t other = ~rv;  // differs from rep in every byte
  const size_t len = crc ? (n_blk + 7) / 8 : (b + 7) / 8;
  *s = 0;
  *m = 0;
  for (size_t byte0 = 0; byte0 < len; byte0 += kChunk) {
    const size_t nb = (len - byte0 < kChunk) ? len - byte0 : kChunk;
    TINYSEG_RETURN_IF_ERROR(source_->Read(body + byte0, buf, nb));
    if (crc) *crc = Crc32Update(*crc, buf, nb);
    if (es == 1) {
      MarkBits<1>(buf, nb, byte0, a, b, rv, other, dst, s, m);
    } else if (es == 2) {
      MarkBits<2>(buf, nb, byte0, a, b, rv, other, dst, s, m);
    } else {
      MarkBits<4>(buf, nb, byte0, a, b, rv, other, dst, s, m);
    }
  }
  return Status::kOk;
}

// Elements [a, b) of a compressed block whose body starts at `body`, in one
// pass over the block in stored order (bitmap, then the packed values): each
// byte decoded is one the check (crc non-null) ran over. Packed values
// [s, s + m) go, through buf (kChunk bytes), to the placeholders ScanBitmap left
// in dst, in order; the others are only checked.
Status StreamReader::DecodeCompressed(size_t body, uint32_t n_blk, uint32_t count, uint32_t a,
                                      uint32_t b, const uint8_t* rep, uint8_t* dst, uint32_t* crc,
                                      uint8_t* buf) {
  const uint32_t es = header_.elem_size;
  uint32_t s = 0, m = 0;
  TINYSEG_RETURN_IF_ERROR(ScanBitmap(body, n_blk, a, b, rep, dst, crc, buf, &s, &m));
  if (static_cast<size_t>(s) + m > count) {
    return crc ? Status::kChecksumMismatch : Status::kCorrupt;
  }
  const bool whole = a == 0 && b == n_blk;
  if (crc && whole && m != count) return Status::kChecksumMismatch;  // bitmap disagrees
  const size_t packed = body + (n_blk + 7) / 8;
  if (crc) TINYSEG_RETURN_IF_ERROR(Skip(packed, static_cast<size_t>(s) * es, crc, buf));
  // kChunk is a multiple of es: no value straddles two reads.
  const size_t want = static_cast<size_t>(m) * es;
  uint32_t next = 0;  // the element of [a, b) the next placeholder search starts at
  for (size_t done = 0; done < want; done += kChunk) {
    const size_t nb = (want - done < kChunk) ? want - done : kChunk;
    TINYSEG_RETURN_IF_ERROR(source_->Read(packed + static_cast<size_t>(s) * es + done, buf, nb));
    if (crc) *crc = Crc32Update(*crc, buf, nb);
    uint32_t rv = 0;
    std::memcpy(&rv, rep, es);
    const size_t vals = nb / es;
    const bool placed = es == 1   ? FillPlaceholders<1>(buf, vals, rv, dst, b - a, &next)
                        : es == 2 ? FillPlaceholders<2>(buf, vals, rv, dst, b - a, &next)
                                  : FillPlaceholders<4>(buf, vals, rv, dst, b - a, &next);
    if (!placed) return Status::kCorrupt;  // unreachable: m placeholders were written
  }
  if (crc) {
    const size_t after = static_cast<size_t>(count - s - m) * es;
    TINYSEG_RETURN_IF_ERROR(Skip(packed + static_cast<size_t>(s + m) * es, after, crc, buf));
  }
  return Status::kOk;
}

// Reads and checks a block's index entry and header; *len is its encoded
// length without the check.
Status StreamReader::ReadBlockHeader(uint32_t block, size_t* off, uint8_t bh[kBlockHeaderBytes],
                                     size_t* len) {
  const uint32_t es = header_.elem_size;
  const uint32_t n_blk = BlockElems(header_, block);
  const Status bad = header_.block_crc ? Status::kChecksumMismatch : Status::kCorrupt;
  uint8_t ib[kIndexEntryBytes];
  TINYSEG_RETURN_IF_ERROR(source_->Read(
      kStreamHeaderBytes + static_cast<size_t>(block) * kIndexEntryBytes, ib, sizeof(ib)));
  *off = GetU32(ib);
  const size_t data_start = StreamMetaBytes(header_.num_blocks);
  const size_t size = source_->Size();
  if (*off < data_start || *off > size || size - *off < kBlockHeaderBytes) return bad;
  TINYSEG_RETURN_IF_ERROR(source_->Read(*off, bh, kBlockHeaderBytes));
  const uint8_t mode = bh[0];
  // Encoded length from the header; a header that makes no sense is corrupt.
  *len = kBlockHeaderBytes;
  if (bh[1] != 0) return bad;
  if (mode == static_cast<uint8_t>(BlockMode::kRaw)) {
    *len += static_cast<size_t>(n_blk) * es;
  } else if (mode == static_cast<uint8_t>(BlockMode::kCompressed)) {
    const uint32_t count = GetU16(bh + 2);
    if (count > n_blk) return bad;
    *len += (n_blk + 7) / 8 + static_cast<size_t>(count) * es;
  } else if (mode != static_cast<uint8_t>(BlockMode::kConstant)) {
    return bad;
  }
  if (size - *off < *len + (header_.block_crc ? kBlockCrcBytes : 0)) return bad;
  return Status::kOk;
}

// Elements [a, b) of one block. A checked block is read once, whole and in
// stored order, the check running over every byte read, and each decoded
// byte is taken from the read the check ran over: a bit that a read flips
// only once fails the check instead of reaching dst.
Status StreamReader::DecodeBlockPart(uint32_t block, uint32_t a, uint32_t b, uint8_t* dst) {
  const uint32_t es = header_.elem_size;
  const uint32_t n_blk = BlockElems(header_, block);
  size_t off = 0, len = 0;
  uint8_t bh[kBlockHeaderBytes];
  TINYSEG_RETURN_IF_ERROR(ReadBlockHeader(block, &off, bh, &len));
  const uint8_t mode = bh[0];
  const size_t body = off + kBlockHeaderBytes;
  uint32_t crc = 0;
  uint32_t* running = nullptr;
  if (header_.block_crc) {
    crc = Crc32Update(BlockCrcSeed(block, static_cast<uint32_t>(off)), bh, sizeof(bh));
    running = &crc;
  }
  uint8_t buf[kChunk];  // the one staging buffer of a block's decode
  if (mode == static_cast<uint8_t>(BlockMode::kRaw)) {
    TINYSEG_RETURN_IF_ERROR(DecodeRaw(body, n_blk, a, b, dst, running, buf));
  } else if (mode == static_cast<uint8_t>(BlockMode::kConstant)) {
    for (uint32_t i = 0; i < b - a; ++i) CopyElem(dst + i * es, bh + 4, es);
  } else {
    TINYSEG_RETURN_IF_ERROR(
        DecodeCompressed(body, n_blk, GetU16(bh + 2), a, b, bh + 4, dst, running, buf));
  }
  if (running) {
    uint8_t c[kBlockCrcBytes];
    TINYSEG_RETURN_IF_ERROR(source_->Read(off + len, c, sizeof(c)));
    if (Crc32Final(crc) != GetU32(c)) return Status::kChecksumMismatch;
  }
  return Status::kOk;
}

Status StreamReader::DecodeElements(uint32_t first, uint32_t last, uint8_t* dst) {
  const uint32_t es = header_.elem_size;
  const uint32_t per_block = header_.block_bytes / es;
  uint32_t e = first;
  while (e < last) {
    const uint32_t block = e / per_block;
    const uint32_t a = e - block * per_block;
    uint32_t b = per_block;
    if (last - block * per_block < b) b = last - block * per_block;
    TINYSEG_RETURN_IF_ERROR(DecodeBlockPart(block, a, b, dst));
    dst += static_cast<size_t>(b - a) * es;
    e += b - a;
  }
  return Status::kOk;
}

Status StreamReader::DecodeRange(size_t offset, size_t length, uint8_t* dst) {
  if (source_ == nullptr) return Status::kInvalidArgument;
  if (length == 0) return Status::kOk;
  if (dst == nullptr) return Status::kInvalidArgument;
  const size_t total = header_.total_bytes;
  if (offset > total || length > total - offset) return Status::kOutOfRange;
  const uint32_t es = header_.elem_size;
  size_t pos = offset;
  const size_t end = offset + length;
  // Leading partial element.
  if (pos % es != 0) {
    uint8_t tmp[4];
    const uint32_t e = static_cast<uint32_t>(pos / es);
    TINYSEG_RETURN_IF_ERROR(DecodeElements(e, e + 1, tmp));
    const size_t skip = pos % es;
    size_t take = es - skip;
    if (take > end - pos) take = end - pos;
    std::memcpy(dst, tmp + skip, take);
    dst += take;
    pos += take;
  }
  // Whole elements.
  const size_t whole_end = end - end % es;
  if (pos < whole_end) {
    TINYSEG_RETURN_IF_ERROR(DecodeElements(static_cast<uint32_t>(pos / es),
                                           static_cast<uint32_t>(whole_end / es), dst));
    dst += whole_end - pos;
    pos = whole_end;
  }
  // Trailing partial element.
  if (pos < end) {
    uint8_t tmp[4];
    const uint32_t e = static_cast<uint32_t>(pos / es);
    TINYSEG_RETURN_IF_ERROR(DecodeElements(e, e + 1, tmp));
    std::memcpy(dst, tmp, end - pos);
  }
  return Status::kOk;
}

Status DecodeRange(ByteSource& source, size_t offset, size_t length, uint8_t* dst) {
  StreamReader r;
  TINYSEG_RETURN_IF_ERROR(r.Open(source));
  return r.DecodeRange(offset, length, dst);
}

Status DecodeAll(ByteSource& source, uint8_t* dst, size_t capacity, size_t* out_len) {
  StreamReader r;
  TINYSEG_RETURN_IF_ERROR(r.Open(source));
  const size_t total = r.header().total_bytes;
  if (capacity < total) return Status::kBufferTooSmall;
  TINYSEG_RETURN_IF_ERROR(r.DecodeRange(0, total, dst));
  if (out_len) *out_len = total;
  return Status::kOk;
}

}  // namespace tinyseg
