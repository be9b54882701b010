// TinySeg on the Arduino Nicla Vision, Cortex-M7: runs the TinySeg-optimized
// Tiny U-Net (Spill + FetchingConv2D) with the spill storage chosen at build
// time in tinyseg_config.h, and prints the latency of every inference.
//
//   internal flash  bank 2 of the STM32H747 (last 512 KB, "1MB M7 + 1MB M4" split)
//   QSPI flash      last 1 MB of the 16 MB AT25QL128A
//   remote          a host running `tinyseg remote-host --port /dev/ttyACM0`
// With TINYSEG_ASYNC_ERASE the M4 (sketch tinyseg_erase_m4) erases flash
// sectors in the background (paper section 5.2).
//
// Needs: the Arduino Mbed OS Nicla boards core, the Arduino_TensorFlowLite
// library with TinySeg installed into it (examples/nicla_vision/README.md),
// and model_data.h from make_model_header.py.
#include "tinyseg_config.h"

#include <Arduino.h>
// The Mbed core's Arduino.h (which the IDE also puts before line 1) defines
// abs() as a one-argument macro; TFLM's headers call std::abs, which that
// macro breaks. Nothing below needs the macro.
#undef abs
#include <RPC.h>
// No <TensorFlowLite.h>: in Arduino_TensorFlowLite it pulls in src/peripherals,
// which is for the Nano 33 BLE only (#error "unsupported board" elsewhere). The
// TFLM includes below are enough for arduino-cli to find the library.

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

#include "model_data.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_runtime.h"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/erase_ring.h"
#include "tinyseg/remote_protocol.h"
#include "tinyseg/spill_manager.h"
// The plan's RAM storage regions, when the model keeps slots in free RAM beside the flash:
// `tinyseg optimize ... --board nicla-vision --storage-header tinyseg_storage.h` next to this file.
#if __has_include("tinyseg_storage.h")
#include "tinyseg_storage.h"
#define TINYSEG_STORAGE_REGIONS 1
// TINYSEG_STORAGE_REGIONS_REQUIRED: the model names RAM regions, so do not build without them.
#elif defined(TINYSEG_STORAGE_REGIONS_REQUIRED)
#error "tinyseg_storage.h is missing: write it with tinyseg optimize --storage-header"
#else
#define TINYSEG_STORAGE_REGIONS 0
#endif
#include "tinyseg_nicla/arduino_serial_stream.h"
#include "tinyseg_nicla/hsem_ring_platform.h"
#include "tinyseg_nicla/internal_flash_block_device.h"
#include "tinyseg_nicla/nicla_layout.h"
#include "tinyseg_nicla/qspi_flash_block_device.h"
#if TINYSEG_CAMERA
#include "camera_row_source.h"
#endif

namespace {

// ------------------------------------------------------------------ arena
#ifdef TINYSEG_ARENA_BYTES
constexpr size_t kArenaBytes = TINYSEG_ARENA_BYTES;
#else
constexpr size_t kArenaBytes = g_tinyseg_model_arena_bytes;  // from make_model_header.py --report
#endif
alignas(16) uint8_t tensor_arena[kArenaBytes];

// ------------------------------------------------------------------ storage
constexpr uint32_t kSpillSlots = 4;
tinyseg::SpillSlot spill_slots[kSpillSlots];
// No staging buffer here: the Spill kernel stages the encoded stream through
// its own arena scratch (SpillManager::Spill's `staging` argument), and every
// storage below reads bytes (read_size 1), so no read bounce either.

#if TINYSEG_STORAGE == TINYSEG_STORAGE_INTERNAL
constexpr uint32_t kSectors = tinyseg_nicla::kInternalRegionSize / tinyseg_nicla::kInternalSector;
tinyseg_nicla::InternalFlashBlockDevice flash_device;
tinyseg_nicla::HsemRingPlatform platform(tinyseg_nicla::kHsemInternalBase);
#elif TINYSEG_STORAGE == TINYSEG_STORAGE_QSPI
constexpr uint32_t kSectors = tinyseg_nicla::kQspiRegionSize / 4096;
tinyseg_nicla::QspiFlashBlockDevice flash_device;
tinyseg_nicla::HsemRingPlatform platform(tinyseg_nicla::kHsemQspi);
#elif TINYSEG_STORAGE == TINYSEG_STORAGE_REMOTE
constexpr uint32_t kRemoteBytes = 512 * 1024;  // one host slot seen as a block device
constexpr uint32_t kSectors = kRemoteBytes / 4096;
tinyseg_nicla::ArduinoSerialStream serial_stream(Serial);
uint8_t client_buffer[tinyseg::remote::ClientBufferBytes(TINYSEG_REMOTE_PAYLOAD)];
uint8_t link_cache[TINYSEG_REMOTE_PAYLOAD];  // read-ahead / write-behind of the remote device
tinyseg::remote::RemoteClient* remote_client = nullptr;
tinyseg::remote::RemoteBlockDevice* remote_device = nullptr;
alignas(tinyseg::remote::RemoteClient) uint8_t client_mem[sizeof(tinyseg::remote::RemoteClient)];
alignas(tinyseg::remote::RemoteBlockDevice) uint8_t
    device_mem[sizeof(tinyseg::remote::RemoteBlockDevice)];
#else
#error "TINYSEG_STORAGE must be TINYSEG_STORAGE_INTERNAL, _QSPI or _REMOTE"
#endif
tinyseg::SectorInfo spill_sectors[kSectors];

#define TINYSEG_USES_RING (TINYSEG_ASYNC_ERASE && TINYSEG_STORAGE != TINYSEG_STORAGE_REMOTE)

// The objects below depend on the choices above; they live in static
// storage and are constructed in setup() (placement new, no heap).
tinyseg::BlockDevice* device = nullptr;  // what the SpillManager writes to
tinyseg::EraseQueue* erase_queue = nullptr;
tinyseg::SpillManager* spill = nullptr;
alignas(tinyseg::SpillManager) uint8_t spill_mem[sizeof(tinyseg::SpillManager)];
#if TINYSEG_USES_RING
alignas(tinyseg::BankLockedDevice) uint8_t locked_mem[sizeof(tinyseg::BankLockedDevice)];
alignas(tinyseg::RingEraseQueue) uint8_t ring_queue_mem[sizeof(tinyseg::RingEraseQueue)];
#else
alignas(tinyseg::SyncEraseQueue) uint8_t sync_queue_mem[sizeof(tinyseg::SyncEraseQueue)];
#endif

// ------------------------------------------------------------------ model
constexpr int kOps = 5 + tflite::kTinySegOpCount;
tflite::MicroMutableOpResolver<kOps> resolver;
tflite::MicroInterpreter* interpreter = nullptr;
alignas(tflite::MicroInterpreter) uint8_t interpreter_mem[sizeof(tflite::MicroInterpreter)];
tinyseg::Runtime runtime;
bool ready = false;

// Console: USB Serial, except in remote mode where USB carries the protocol
// and lines go to the host as LOG frames (printed by `tinyseg remote-host`).
void Log(const char* fmt, ...) {
  char line[160];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  const size_t len = n < 0 ? 0 : (static_cast<size_t>(n) < sizeof(line) ? n : sizeof(line) - 1);
#if TINYSEG_STORAGE == TINYSEG_STORAGE_REMOTE
  if (remote_client != nullptr) remote_client->Log(line, len);
#else
  Serial.write(reinterpret_cast<const uint8_t*>(line), len);
  Serial.write('\n');
#endif
}

#if !__has_include("tensorflow/lite/micro/micro_common.h")
// TFLM's log sink. The Arduino_TensorFlowLite library (TFLM of 2023-02) defines
// DebugLog only for the Nano 33 BLE (system_setup.cpp excludes its code on
// other boards), so the sketch gives it one; newer TFLM trees bring their own
// (with another signature), hence the guard.
extern "C" void DebugLog(const char* s) {
#if TINYSEG_STORAGE == TINYSEG_STORAGE_REMOTE
  if (remote_client != nullptr) remote_client->Log(s, strlen(s));
#else
  Serial.print(s);
#endif
}
#endif

const char* StorageName() {
#if TINYSEG_STORAGE == TINYSEG_STORAGE_INTERNAL
  return "internal flash";
#elif TINYSEG_STORAGE == TINYSEG_STORAGE_QSPI
  return "QSPI flash";
#else
  return "remote";
#endif
}

bool Fail(const char* what, tinyseg::Status s) {
  Log("tinyseg: %s failed: %s", what, tinyseg::StatusName(s));
  return false;
}

bool SetUpStorage() {
  tinyseg::SpillConfig cfg;
  cfg.codec_block_bytes = 1024;
#if TINYSEG_STORAGE == TINYSEG_STORAGE_REMOTE
  tinyseg::remote::ClientConfig cc;
  cc.timeout_ms = TINYSEG_REMOTE_TIMEOUT_MS;
  cc.max_payload = TINYSEG_REMOTE_PAYLOAD;
  remote_client = new (client_mem)
      tinyseg::remote::RemoteClient(serial_stream, cc, client_buffer, sizeof(client_buffer));
  tinyseg::Status s = remote_client->Init();
  if (!tinyseg::Ok(s)) return false;
  // Wait for `tinyseg remote-host` (nothing can be printed before it answers).
  while (!tinyseg::Ok(s = remote_client->Hello())) delay(500);
  tinyseg::Geometry g;
  g.erase_size = 4096;
  g.total_size = kRemoteBytes;
  remote_device = new (device_mem) tinyseg::remote::RemoteBlockDevice(
      *remote_client, 0, g, tinyseg::remote::LinkModel(), link_cache, sizeof(link_cache));
  if (!tinyseg::Ok(s = remote_device->Init())) return Fail("remote device", s);
  device = remote_device;
  cfg.region_size = kRemoteBytes;
  cfg.assume_erased = true;   // Init erased the host slot
  cfg.pre_erase_sectors = 0;  // host erases are one frame each, not worth queueing
  erase_queue = new (sync_queue_mem) tinyseg::SyncEraseQueue(*device);
#else
  tinyseg::Status s = flash_device.Init();
  if (!tinyseg::Ok(s)) return Fail("flash init", s);
  cfg.region_size = flash_device.geometry().total_size;
#if TINYSEG_USES_RING
  platform.Init();
  auto* locked = new (locked_mem) tinyseg::BankLockedDevice(flash_device, platform);
  device = locked;
  auto* ring = new (ring_queue_mem)
      tinyseg::RingEraseQueue(tinyseg_nicla::SharedEraseRing(), platform, *locked);
  ring->Init();  // before the M4 boots and attaches
  // SRAM4 is still cacheable here: push the ring out to memory before
  // RPC.begin() remaps it (and boots the M4); nothing touches it in between.
  tinyseg_nicla::WriteBackSharedEraseRing();
  erase_queue = ring;
  // RPC.begin() boots the M4 (sketch tinyseg_erase_m4) and maps SRAM4,
  // where the ring lives, non-cacheable on the M7.
  if (!RPC.begin()) Log("tinyseg: RPC.begin() failed: is the M4 sketch flashed?");
  if (!tinyseg::Ok(s = ring->WaitForWorker(200000))) return Fail("M4 erase worker", s);
  cfg.pre_erase_sectors = 2;
#else
  device = &flash_device;
  erase_queue = new (sync_queue_mem) tinyseg::SyncEraseQueue(flash_device);
  cfg.pre_erase_sectors = 0;  // a synchronous pre-erase only moves the wait
#endif
#endif
  tinyseg::SpillMemory mem;
  mem.slots = spill_slots;
  mem.num_slots = kSpillSlots;
  mem.sectors = spill_sectors;
  mem.num_sectors = kSectors;
  spill = new (spill_mem) tinyseg::SpillManager(*device, *erase_queue, cfg, mem);
  if (!tinyseg::Ok(s = spill->Init())) return Fail("spill manager", s);
  return true;
}

bool SetUpModel() {
  const tflite::Model* model = tflite::GetModel(g_tinyseg_model);
  if (model->version() != TFLITE_SCHEMA_VERSION) {
    Log("tinyseg: model schema %lu, TFLM expects %d", static_cast<unsigned long>(model->version()),
        TFLITE_SCHEMA_VERSION);
    return false;
  }
  // The operators of the optimized Tiny U-Net, plus TinySeg's three.
  resolver.AddConv2D();
  resolver.AddTransposeConv();
  resolver.AddConcatenation();
  resolver.AddMaxPool2D();
  resolver.AddQuantize();
  if (tflite::AddTinySegOps(resolver) != kTfLiteOk) return false;
  interpreter =
      new (interpreter_mem) tflite::MicroInterpreter(model, resolver, tensor_arena, kArenaBytes);
  runtime.spill = spill;
#if TINYSEG_STORAGE_REGIONS
  if (!tinyseg_regions::Attach(runtime)) return false;
#endif
#if TINYSEG_CAMERA
  runtime.sources[0] = {camera::ReadRow, nullptr};     // graph input 0: the camera's rows
  runtime.sinks[0] = {camera::WriteMaskRow, nullptr};  // graph output 0: the mask's rows
#endif
  if (tinyseg::AttachRuntime(*interpreter, runtime) != kTfLiteOk) return false;
  if (interpreter->AllocateTensors() != kTfLiteOk) {
    Log("tinyseg: AllocateTensors failed (arena %u bytes)", static_cast<unsigned>(kArenaBytes));
    return false;
  }
  Log("tinyseg: arena used %u of %u bytes", static_cast<unsigned>(interpreter->arena_used_bytes()),
      static_cast<unsigned>(kArenaBytes));
  return true;
}

#if !TINYSEG_CAMERA
// A deterministic, image-like input (smooth gradients and a bright ellipse):
// activations then look like a real scene's, which matters for compression.
void FillInput(TfLiteTensor* input, uint32_t frame) {
  const int h = input->dims->data[1], w = input->dims->data[2], c = input->dims->data[3];
  uint8_t* px = input->data.uint8;  // the model's input is uint8 (QUANTIZE follows)
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const int dx = x - w / 2 - static_cast<int>(frame % 9), dy = y - h / 2;
      const bool car = dx * dx * 4 + dy * dy * 9 < w * w;
      for (int k = 0; k < c; ++k) {
        const int v = car ? 200 - (dx * dx + dy * dy) / 40 + 10 * k : (x * 2 + y + 40 * k) / 3;
        *px++ = static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
      }
    }
  }
}
#endif

}  // namespace

void setup() {
#if TINYSEG_STORAGE == TINYSEG_STORAGE_REMOTE
  Serial.begin(TINYSEG_REMOTE_BAUD);
#else
  Serial.begin(115200);
#endif
  const uint32_t t0 = millis();
  while (!Serial && millis() - t0 < 5000) {
  }
  if (!SetUpStorage() || !SetUpModel()) return;
#if TINYSEG_CAMERA
  if (!camera::Start(TinySegCameraInit())) {
    Log("tinyseg: the camera does not start");
    return;
  }
#endif
  Log("tinyseg: Tiny U-Net on %s, %s erase", StorageName(),
      TINYSEG_USES_RING ? "asynchronous (M4)" : "synchronous");
  ready = true;
}

void loop() {
  static uint32_t n = 0;
  if (!ready || n > TINYSEG_INFERENCES) {
    delay(1000);
    return;
  }
#if !TINYSEG_CAMERA  // with the camera, input(0) is the one-byte token
  FillInput(interpreter->input(0), n);
#endif
  const tinyseg::SpillStats before = spill->stats();
  const uint32_t t0 = micros();
  const TfLiteStatus st = interpreter->Invoke();
  const uint32_t us = micros() - t0;
  if (st != kTfLiteOk) {
    Log("tinyseg: inference %lu failed", static_cast<unsigned long>(n));
    ready = false;
    return;
  }
  spill->EndInference();
#if TINYSEG_STORAGE_REGIONS
  tinyseg_regions::EndInference();
#endif
  const tinyseg::SpillStats& s = spill->stats();
  Log("inference %lu%s: %lu.%03lu ms, spilled %lu -> %lu B, fetched %lu B, erase waits %lu",
      static_cast<unsigned long>(n), n == 0 ? " (warm-up)" : "",
      static_cast<unsigned long>(us / 1000), static_cast<unsigned long>(us % 1000),
      static_cast<unsigned long>(s.raw_bytes_spilled - before.raw_bytes_spilled),
      static_cast<unsigned long>(s.encoded_bytes - before.encoded_bytes),
      static_cast<unsigned long>(s.bytes_read - before.bytes_read),
      static_cast<unsigned long>(s.erase_waits - before.erase_waits));
  if (n == TINYSEG_INFERENCES) {
    const tinyseg::WearReport w = spill->Wear();
    Log("tinyseg: %lu erases, max %lu per sector, projected %lu inferences to the endurance limit",
        static_cast<unsigned long>(w.total_erases), static_cast<unsigned long>(w.max_sector_erases),
        static_cast<unsigned long>(w.projected_inferences));
  }
  ++n;
}
