// TinySeg dynamic tensor compression (paper section 5.1), block-wise.
//
// A tensor is cut into fixed-size blocks (block_bytes, a multiple of the
// element size). Each block is encoded on its own as
//   * constant:   header only (every element equals the representative value),
//   * compressed: header + bitmap (1 bit per element, set = "not the
//                 representative value", LSB first) + the other values in order,
//   * raw:        header + the block bytes, used whenever compression would
//                 not be smaller, so a block never grows by more than its header.
// An index of block offsets follows the stream header, so a byte range (for
// example a band of rows) is decoded by reading only the blocks it touches.
//
// Stream layout (all integers little-endian):
//   stream header, 20 bytes:
//     u32 magic "TSC1" | u32 total_bytes | u32 block_bytes |
//     u8 elem_size | u8 version(2) | u8 flags | u8 reserved(0) |
//     u32 CRC-32 of the 16 bytes before it (always present)
//     flags bit 0 (kFlagBlockCrc): every block ends with its check
//   index: num_blocks x u32, absolute offset of each block in the stream
//   blocks, each with an 8-byte header:
//     u8 mode | u8 reserved(0) | u16 others_count | u8[4] representative
//     (first elem_size bytes used, rest zero)
//     then the body, then (kFlagBlockCrc) u32 check
//
// Block check: CRC-32 (crc32.h, the zlib crc32) over u32 block number,
// u32 block offset and the block's header and body, so a flipped bit in the
// block or its check, and an index entry that points elsewhere (flipped, or
// at another block) all fail it. The encoder computes it from the bytes it
// writes anyway (no extra pass); the decoder verifies every block it reads.
// It reads a checked block once, whole and in stored order, through at most a
// 128-byte stack buffer, and takes every decoded byte from the read the check
// ran over (a range that covers part of a block reads the rest of the block
// for the check only): a bit that a single read returns flipped (a marginal
// QSPI read, read disturb, a noisy link) fails the check like a stored one,
// and is never decoded as data. A mismatch (or a stream header whose own CRC
// fails) is Status::kChecksumMismatch; dst then holds unspecified bytes.
// A stream written without block checks (CodecParams::block_crc false) has
// only its header checked.
//
// Elements are compared bit-exactly (memcmp), so float32 tensors round-trip
// exactly (-0.0, NaN payloads included). The representative value is the exact
// mode for 1-byte elements (histogram); for 2- and 4-byte elements it is the
// most frequent of up to 8 Misra-Gries candidates (exact for any value that
// covers more than 1/9 of the block, which is the case the paper targets).
//
// No heap: the encoder streams into a ByteSink, the decoder reads from a
// ByteSource at offsets and writes straight into the caller's buffer.
#ifndef TINYSEG_CODEC_H_
#define TINYSEG_CODEC_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/status.h"

namespace tinyseg {

constexpr uint32_t kCodecMagic = 0x31435354u;  // "TSC1" read as little-endian u32
constexpr uint8_t kCodecVersion = 2;
constexpr size_t kStreamHeaderBytes = 20;
constexpr size_t kIndexEntryBytes = 4;
constexpr size_t kBlockHeaderBytes = 8;
constexpr size_t kBlockCrcBytes = 4;  // trailer of every block of a checked stream
constexpr uint8_t kFlagBlockCrc = 0x01;

// Bytes a block adds besides its data's encoding: header and check.
constexpr size_t BlockOverheadBytes(bool block_crc) {
  return kBlockHeaderBytes + (block_crc ? kBlockCrcBytes : 0);
}
constexpr uint32_t kMaxBlockBytes = 32768;  // others_count fits in u16

enum class BlockMode : uint8_t { kRaw = 0, kCompressed = 1, kConstant = 2 };

struct CodecParams {
  uint32_t elem_size = 1;       // 1, 2 or 4 bytes
  uint32_t block_bytes = 1024;  // multiple of elem_size, <= kMaxBlockBytes
  bool block_crc = true;        // every block carries a CRC-32
};

struct StreamHeader {
  uint32_t total_bytes = 0;
  uint32_t block_bytes = 0;
  uint32_t elem_size = 0;
  uint32_t num_blocks = 0;
  bool block_crc = false;
};

struct EncodeStats {
  size_t encoded_bytes = 0;
  uint32_t raw_blocks = 0;
  uint32_t compressed_blocks = 0;
  uint32_t constant_blocks = 0;
};

// Destination of an encoded stream; Write is called with consecutive pieces.
class ByteSink {
 public:
  virtual Status Write(const uint8_t* data, size_t len) = 0;

 protected:
  ~ByteSink() = default;
};

// Random-access origin of an encoded stream.
class ByteSource {
 public:
  virtual size_t Size() const = 0;
  virtual Status Read(size_t offset, uint8_t* dst, size_t len) = 0;

 protected:
  ~ByteSource() = default;
};

// Sink writing into a caller buffer; fails with kBufferTooSmall when full.
class MemorySink final : public ByteSink {
 public:
  MemorySink(uint8_t* buffer, size_t capacity) : buf_(buffer), cap_(capacity) {}
  Status Write(const uint8_t* data, size_t len) override;
  size_t size() const { return len_; }

 private:
  uint8_t* buf_;
  size_t cap_;
  size_t len_ = 0;
};

// Source over a caller buffer.
class MemorySource final : public ByteSource {
 public:
  MemorySource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t Size() const override { return size_; }
  Status Read(size_t offset, uint8_t* dst, size_t len) override;

 private:
  const uint8_t* data_;
  size_t size_;
};

// Checks elem_size, block_bytes and that total_bytes is a whole number of
// elements that fits the u32 header field.
Status ValidateCodecParams(size_t total_bytes, const CodecParams& params);

size_t NumBlocks(size_t total_bytes, uint32_t block_bytes);

// Bytes before the first block of an Encode stream: header + index.
size_t StreamMetaBytes(size_t num_blocks);

// Upper bound of the encoded size (header + index + every block raw).
// Returns 0 if the parameters are invalid.
size_t WorstCaseEncodedSize(size_t total_bytes, const CodecParams& params);

// Exact encoded size without producing output (the encoder's first pass).
Status MeasureEncodedSize(const uint8_t* data, size_t size, const CodecParams& params,
                          size_t* encoded_size);

// Streams the encoding of data[0, size) into sink. Two passes over the input
// (sizes for the index, then blocks), no buffering beyond a few hundred bytes
// of stack. stats may be null.
Status Encode(const uint8_t* data, size_t size, const CodecParams& params, ByteSink& sink,
              EncodeStats* stats);

// Pieces of Encode for writers that produce a stream block by block (the
// spill manager's row streams): the stream header, and one block
// (data[0, size), size a multiple of elem_size and at most block_bytes),
// whose encoded size is returned in *encoded (check included); `check`
// appends the block check for index entry `block` written at stream offset
// `offset`. The stream layout is Encode's; a block may start anywhere after
// the index, so a writer can leave a gap between the index and the first
// block.
Status EncodeStreamHeader(size_t total_bytes, const CodecParams& params,
                          uint8_t out[kStreamHeaderBytes]);
Status EncodeBlock(const uint8_t* data, size_t size, uint32_t elem_size, ByteSink& sink,
                   size_t* encoded);
Status EncodeBlock(const uint8_t* data, size_t size, uint32_t elem_size, uint32_t block,
                   uint32_t offset, bool check, ByteSink& sink, size_t* encoded);

// Convenience wrapper around Encode + MemorySink.
Status EncodeToBuffer(const uint8_t* data, size_t size, const CodecParams& params, uint8_t* out,
                      size_t capacity, size_t* out_len, EncodeStats* stats);

// Reads and validates the stream header.
Status ReadStreamHeader(ByteSource& source, StreamHeader* header);

// Decoder that caches the stream header between range requests.
class StreamReader {
 public:
  // Reads and validates the header of the stream in source.
  Status Open(ByteSource& source);
  const StreamHeader& header() const { return header_; }

  // Decodes original bytes [offset, offset + length) into dst. Any byte
  // range is allowed; only the blocks touching it are read.
  Status DecodeRange(size_t offset, size_t length, uint8_t* dst);

 private:
  Status DecodeElements(uint32_t first, uint32_t last, uint8_t* dst);
  Status DecodeBlockPart(uint32_t block, uint32_t a, uint32_t b, uint8_t* dst);
  Status ReadBlockHeader(uint32_t block, size_t* off, uint8_t bh[kBlockHeaderBytes], size_t* len);
  Status DecodeRaw(size_t body, uint32_t n_blk, uint32_t a, uint32_t b, uint8_t* dst, uint32_t* crc,
                   uint8_t* buf);
  Status ScanBitmap(size_t body, uint32_t n_blk, uint32_t a, uint32_t b, const uint8_t* rep,
                    uint8_t* dst, uint32_t* crc, uint8_t* buf, uint32_t* s, uint32_t* m);
  Status DecodeCompressed(size_t body, uint32_t n_blk, uint32_t count, uint32_t a, uint32_t b,
                          const uint8_t* rep, uint8_t* dst, uint32_t* crc, uint8_t* buf);
  Status Skip(size_t off, size_t len, uint32_t* crc, uint8_t* buf);

  ByteSource* source_ = nullptr;
  StreamHeader header_;
};

// One-shot helpers (re-read the header every call).
Status DecodeRange(ByteSource& source, size_t offset, size_t length, uint8_t* dst);
Status DecodeAll(ByteSource& source, uint8_t* dst, size_t capacity, size_t* out_len);

}  // namespace tinyseg

#endif  // TINYSEG_CODEC_H_
