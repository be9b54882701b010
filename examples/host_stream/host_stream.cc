// host_stream: a frame streamed into a `tinyseg optimize --stream-io` model through a row source
// and its mask streamed out through a row sink, beside the original model run whole on the same
// frame; the two masks must be identical.
//
// Usage: host_stream ORIGINAL.tflite STREAMED.tflite FRAME.ppm WHOLE.pgm STREAMED.pgm
//   ORIGINAL   the model as trained: one UINT8 input 1xHxWx3, one INT8 or UINT8 output 1xHxWxC
//   STREAMED   the same model after `tinyseg optimize --stream-io` (graph input 0 comes from
//              Runtime::sources[0], graph output 0 goes to Runtime::sinks[0])
//   FRAME      a binary PPM (P6, maxval 255) of the original's input size, W x H
//   WHOLE      the original's output, its bytes as they are, as a PGM (P5) of W*C x H
//   STREAMED   the streamed model's output as its row sink received it, in the same format
// The row source reads the frame file one row per call (the frame is never whole in memory: its
// rows go straight into the kernel's row buffer); the row sink writes each mask row to the PGM
// as it comes and compares it with the whole run's row. Spilled rows (a model optimized with
// --target) go to a RAM storage region of kStorageBytes.
// Prints one line per model (arena bytes used, rows in and out) and "masks identical" or
// "masks differ: N bytes"; exit 0 when identical, 1 with one line on stderr on bad input or a
// failed step, 2 when the masks differ. Memory: static arrays only (no heap).
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_runtime.h"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tinyseg/block_device.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/spill_manager.h"

namespace {

constexpr size_t kModelBytes = 4u << 20;    // each model file at most
constexpr size_t kArenaBytes = 2u << 20;    // one arena, used by one interpreter at a time
constexpr size_t kMaskBytes = 1u << 20;     // the whole run's output
constexpr size_t kStorageBytes = 4u << 20;  // RAM standing in for the spill flash
constexpr uint32_t kSector = 4096;
constexpr size_t kSlots = 32;

alignas(16) uint8_t g_original[kModelBytes];
alignas(16) uint8_t g_streamed[kModelBytes];
alignas(16) uint8_t g_arena[kArenaBytes];
uint8_t g_mask[kMaskBytes];
uint8_t g_storage[kStorageBytes];
tinyseg::SpillSlot g_slots[kSlots];
tinyseg::SectorInfo g_sectors[kStorageBytes / kSector];

using Resolver = tflite::MicroMutableOpResolver<16 + tflite::kTinySegOpCount>;

int Fail(const char* what, const char* detail = "") {
  fprintf(stderr, "host_stream: %s%s\n", what, detail);
  return 1;
}

// The builtins of the example U-Nets (examples/models/build.py) and TinySeg's operators.
bool AddOps(Resolver& r) {
  const TfLiteStatus statuses[] = {
      r.AddAdd(),           r.AddAveragePool2D(),    r.AddConcatenation(),
      r.AddConv2D(),        r.AddDepthwiseConv2D(),  r.AddDequantize(),
      r.AddLogistic(),      r.AddMaxPool2D(),        r.AddMul(),
      r.AddPad(),           r.AddQuantize(),         r.AddRelu(),
      r.AddReshape(),       r.AddResizeBilinear(),   r.AddResizeNearestNeighbor(),
      r.AddTransposeConv(), tflite::AddTinySegOps(r)};
  for (TfLiteStatus s : statuses) {
    if (s != kTfLiteOk) return false;
  }
  return true;
}

// A whole file into `dst` (`capacity` bytes); false when it cannot be read or does not fit.
bool ReadModel(const char* path, uint8_t* dst, size_t capacity) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return false;
  const size_t n = fread(dst, 1, capacity, f);
  const bool whole = n > 0 && n < capacity && feof(f) != 0;
  fclose(f);
  return whole;
}

// A PPM header field: decimal digits after whitespace and '#' comments; -1 if none.
long PpmNumber(FILE* f) {
  int c = fgetc(f);
  while (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#') {
    if (c == '#') {
      while (c != '\n' && c != EOF) c = fgetc(f);
    }
    c = fgetc(f);
  }
  long v = -1;
  for (; c >= '0' && c <= '9' && v < 100000; c = fgetc(f)) v = (v < 0 ? 0 : v * 10) + (c - '0');
  return v;
}

// The frame: a P6 PPM of `width` x `height`, maxval 255, positioned at its first pixel row.
struct Frame {
  FILE* file = nullptr;
  long width = 0, height = 0;
  long pixels_at = 0;    // file offset of row 0
  int32_t next_row = 0;  // the row the source hands over next
};

const char* OpenFrame(const char* path, Frame* frame) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return "cannot read the frame ";
  frame->file = f;
  if (fgetc(f) != 'P' || fgetc(f) != '6') return "the frame is not a binary PPM (P6): ";
  frame->width = PpmNumber(f);
  frame->height = PpmNumber(f);
  const long maxval = PpmNumber(f);  // PpmNumber consumed the one whitespace after it
  if (frame->width < 1 || frame->height < 1 || maxval != 255) {
    return "the frame's PPM header is not WIDTH HEIGHT 255: ";
  }
  frame->pixels_at = ftell(f);
  if (fseek(f, 0, SEEK_END) != 0 ||
      ftell(f) != frame->pixels_at + frame->width * frame->height * 3 ||
      fseek(f, frame->pixels_at, SEEK_SET) != 0) {
    return "the frame's pixel bytes are not WIDTH*HEIGHT*3: ";
  }
  return nullptr;
}

// Runtime::sources[0]: row `row` of the frame, read from the file into the kernel's row buffer.
tinyseg::Status ReadFrameRow(void* user, int32_t input, int32_t row, uint8_t* dst, size_t capacity,
                             size_t* written) {
  Frame& frame = *static_cast<Frame*>(user);
  *written = 0;
  if (input != 0 || row != frame.next_row || row >= frame.height ||
      capacity != static_cast<size_t>(frame.width) * 3) {
    return tinyseg::Status::kOutOfRange;
  }
  if (fread(dst, 1, capacity, frame.file) != capacity) return tinyseg::Status::kIoError;
  ++frame.next_row;
  *written = capacity;
  return tinyseg::Status::kOk;
}

// The mask going out: a PGM file written row by row, each row compared with the whole run's.
struct Mask {
  FILE* file = nullptr;
  size_t row_bytes = 0;
  int32_t rows = 0;
  int32_t next_row = 0;
  const uint8_t* whole = nullptr;
  size_t differing = 0;  // bytes unlike the whole run's
};

// Runtime::sinks[0]: row `row` of the mask into the PGM.
tinyseg::Status WriteMaskRow(void* user, int32_t output, int32_t row, const uint8_t* src,
                             size_t bytes) {
  Mask& mask = *static_cast<Mask*>(user);
  if (output != 0 || row != mask.next_row || row >= mask.rows || bytes != mask.row_bytes) {
    return tinyseg::Status::kOutOfRange;
  }
  const uint8_t* expected = mask.whole + static_cast<size_t>(row) * bytes;
  for (size_t i = 0; i < bytes; ++i) {
    mask.differing += src[i] != expected[i];
  }
  if (fwrite(src, 1, bytes, mask.file) != bytes) return tinyseg::Status::kIoError;
  ++mask.next_row;
  return tinyseg::Status::kOk;
}

bool WritePgmHeader(FILE* f, const Mask& mask) {
  return fprintf(f, "P5\n%zu %ld\n255\n", mask.row_bytes, static_cast<long>(mask.rows)) > 0;
}

// The original's mask shape, checked against the frame: null, or why the pair does not fit.
const char* CheckOriginal(tflite::MicroInterpreter& in, const Frame& frame, Mask* mask) {
  const TfLiteTensor* x = in.input(0);
  const TfLiteTensor* y = in.output(0);
  if (in.inputs_size() != 1 || in.outputs_size() != 1)
    return "the original must have one input and one output";
  if (x->type != kTfLiteUInt8 || x->dims->size != 4 || x->dims->data[3] != 3) {
    return "the original's input is not a UINT8 1xHxWx3 frame";
  }
  if (x->dims->data[1] != frame.height || x->dims->data[2] != frame.width) {
    return "the frame's size differs from the original's input (HxW)";
  }
  if ((y->type != kTfLiteInt8 && y->type != kTfLiteUInt8) || y->dims->size != 4 ||
      y->bytes > kMaskBytes || y->dims->data[1] < 1) {
    return "the original's output is not an INT8 or UINT8 1xHxWxC mask";
  }
  mask->rows = y->dims->data[1];
  mask->row_bytes = y->bytes / static_cast<size_t>(mask->rows);
  return nullptr;
}

// The original, whole: the frame into its input tensor, its output into g_mask and WHOLE.
int RunWhole(const Resolver& resolver, Frame& frame, Mask* mask, const char* whole_path) {
  tflite::MicroInterpreter in(tflite::GetModel(g_original), resolver, g_arena, kArenaBytes);
  if (in.AllocateTensors() != kTfLiteOk) return Fail("the original does not allocate");
  if (const char* refusal = CheckOriginal(in, frame, mask)) return Fail(refusal);
  if (fread(in.input(0)->data.raw, 1, in.input(0)->bytes, frame.file) != in.input(0)->bytes) {
    return Fail("cannot read the frame's pixels");
  }
  if (in.Invoke() != kTfLiteOk) return Fail("the original's Invoke failed");
  const size_t n = in.output(0)->bytes;
  memcpy(g_mask, in.output(0)->data.raw, n);
  FILE* f = fopen(whole_path, "wb");
  if (f == nullptr) return Fail("cannot write ", whole_path);
  const bool ok = WritePgmHeader(f, *mask) && fwrite(g_mask, 1, n, f) == n;
  if (fclose(f) != 0 || !ok) return Fail("cannot write ", whole_path);
  printf("whole:    arena %zu B, input %zu B in the arena\n", in.arena_used_bytes(),
         in.input(0)->bytes);
  return 0;
}

// The RAM storage region 0 (Runtime::spill) for models that spill rows.
struct Storage {
  tinyseg::Geometry geometry;
  tinyseg::RamBlockDevice device;
  tinyseg::SyncEraseQueue queue;
  tinyseg::SpillManager manager;
  static tinyseg::Geometry Make() {
    tinyseg::Geometry g;
    g.erase_size = kSector;
    g.total_size = kStorageBytes;
    return g;
  }
  static tinyseg::SpillConfig Config() {
    tinyseg::SpillConfig c;
    c.region_size = kStorageBytes;
    c.codec_block_bytes = 1024;
    return c;
  }
  static tinyseg::SpillMemory Memory() {
    tinyseg::SpillMemory m;
    m.slots = g_slots;
    m.num_slots = kSlots;
    m.sectors = g_sectors;
    m.num_sectors = kStorageBytes / kSector;
    return m;
  }
  Storage()
      : geometry(Make()),
        device(geometry, g_storage),
        queue(device),
        manager(device, queue, Config(), Memory()) {}
  bool Init() { return tinyseg::Ok(device.Init()) && tinyseg::Ok(manager.Init()); }
};

// The streamed model: rows in from the frame file, rows out to STREAMED through the sink.
int RunStreamed(const Resolver& resolver, Frame& frame, Mask& mask, const char* path) {
  Storage storage;
  if (!storage.Init()) return Fail("the RAM spill storage does not start");
  tinyseg::Runtime runtime;
  runtime.spill = &storage.manager;
  runtime.sources[0] = {ReadFrameRow, &frame};
  runtime.sinks[0] = {WriteMaskRow, &mask};
  tflite::MicroInterpreter in(tflite::GetModel(g_streamed), resolver, g_arena, kArenaBytes);
  if (tinyseg::AttachRuntime(in, runtime) != kTfLiteOk) return Fail("cannot attach the runtime");
  if (in.AllocateTensors() != kTfLiteOk) {
    return Fail("the streamed model does not allocate (not written with --stream-io?)");
  }
  mask.file = fopen(path, "wb");
  if (mask.file == nullptr || !WritePgmHeader(mask.file, mask)) return Fail("cannot write ", path);
  frame.next_row = 0;
  const bool ran = fseek(frame.file, frame.pixels_at, SEEK_SET) == 0 && in.Invoke() == kTfLiteOk;
  const bool closed = fclose(mask.file) == 0;
  if (!ran || frame.next_row != frame.height || mask.next_row != mask.rows || !closed) {
    remove(path);  // no half-written mask
    return Fail(ran ? "the streamed model did not take every frame row or give every mask row"
                    : "the streamed model's Invoke failed");
  }
  storage.manager.EndInference();
  printf("streamed: arena %zu B, %d rows in from the source, %d rows out to the sink\n",
         in.arena_used_bytes(), static_cast<int>(frame.next_row), static_cast<int>(mask.next_row));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    return Fail(
        "usage: host_stream ORIGINAL.tflite STREAMED.tflite FRAME.ppm WHOLE.pgm "
        "STREAMED.pgm");
  }
  if (!ReadModel(argv[1], g_original, kModelBytes)) return Fail("cannot read the model ", argv[1]);
  if (!ReadModel(argv[2], g_streamed, kModelBytes)) return Fail("cannot read the model ", argv[2]);
  Frame frame;
  if (const char* refusal = OpenFrame(argv[3], &frame)) return Fail(refusal, argv[3]);
  Resolver resolver;
  if (!AddOps(resolver)) return Fail("the op resolver is too small");
  Mask mask;
  mask.whole = g_mask;
  if (int failed = RunWhole(resolver, frame, &mask, argv[4])) return failed;
  if (int failed = RunStreamed(resolver, frame, mask, argv[5])) return failed;
  fclose(frame.file);
  if (mask.differing != 0) {
    printf("masks differ: %zu bytes\n", mask.differing);
    return 2;
  }
  printf("masks identical: %zu bytes\n", mask.row_bytes * static_cast<size_t>(mask.rows));
  return 0;
}
