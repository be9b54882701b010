// The camera as the row source of a `--stream-io` model's graph input 0, and the mask's row sink
// (TINYSEG_CAMERA=1 in tinyseg_config.h). Compiled against the Arduino Mbed core, not yet run on a
// board: examples/nicla_vision/README.md, "Camera rows", says what to check.
//
// The DCMI captures continuously (DMA in circular mode) into a ring of kRingLines lines in AXI
// SRAM (the linker script's NOLOAD .uninitialized section: the DMA reaches it, unlike the DTCM);
// the line interrupt (HAL_DCMI_LineEventCallback) counts the lines delivered. The sensor sends
// kSensorWidth x kSensorHeight RGB565 and the DCMI crops the centre kWidth x kHeight, the model's
// input. ReadRow(row) waits until line `row` of a frame is in the ring, converts it to the
// model's UINT8 RGB, and checks that the DMA did not overwrite it meanwhile. A row already gone
// (the model computes slower than the camera sends lines) is taken from the next frame, so
// one inference's rows may come from several consecutive frames (a rolling shutter at the
// model's pace) and every row waits at most about one frame.
#ifndef TINYSEG_CAMERA_ROW_SOURCE_H_
#define TINYSEG_CAMERA_ROW_SOURCE_H_

#include <Arduino.h>

#include <cstdint>
#include <cstdio>

#include "stm32h7xx_hal.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_runtime.h"

// The application's camera bring-up: the GC2145 set to kSensorWidth x kSensorHeight RGB565 (e.g.
// with the core's Camera library), the DCMI initialised (HAL_DCMI_Init) with its DMA stream
// linked in circular mode, and the DCMI and DMA interrupts calling HAL_DCMI_IRQHandler and
// HAL_DMA_IRQHandler. Null when the camera does not start.
DCMI_HandleTypeDef* TinySegCameraInit();

namespace camera {

constexpr int kSensorWidth = TINYSEG_CAMERA_SENSOR_WIDTH;
constexpr int kSensorHeight = TINYSEG_CAMERA_SENSOR_HEIGHT;
constexpr int kWidth = TINYSEG_CAMERA_WIDTH;  // the model's input, W x H x 3 UINT8
constexpr int kHeight = TINYSEG_CAMERA_HEIGHT;
constexpr int kRingLines = 4;
constexpr size_t kLineBytes = static_cast<size_t>(kWidth) * 2;  // RGB565
constexpr uint32_t kLineTimeoutMs = 1000;                       // no line: the camera stopped
constexpr int kAttempts = 3;  // frames a row may be retried from when overwritten while copied
static_assert(kHeight % kRingLines == 0, "line r of every frame must land in ring slot r % 4");
static_assert(sizeof(uint8_t[kRingLines * kLineBytes]) % 32 == 0, "whole D-cache lines");
static_assert(kWidth <= kSensorWidth && kHeight <= kSensorHeight, "the crop is in the frame");

alignas(32) __attribute__((section(".uninitialized"))) uint8_t g_ring[kRingLines * kLineBytes];
volatile uint32_t g_lines = 0;  // lines delivered since Start
volatile bool g_lost_sync = false;

// The crop, capture and interrupts; false when the HAL refuses.
bool Start(DCMI_HandleTypeDef* dcmi) {
  if (dcmi == nullptr) return false;
  // Crop in pixel clocks (two per RGB565 pixel) and lines, minus one as the register counts.
  const uint32_t x0 = static_cast<uint32_t>(kSensorWidth - kWidth);  // (W - w) / 2 pixels * 2
  const uint32_t y0 = static_cast<uint32_t>(kSensorHeight - kHeight) / 2;
  if (HAL_DCMI_ConfigCrop(dcmi, x0, y0, kLineBytes - 1, kHeight - 1) != HAL_OK ||
      HAL_DCMI_EnableCrop(dcmi) != HAL_OK) {
    return false;
  }
  g_lines = 0;
  g_lost_sync = false;
  __HAL_DCMI_ENABLE_IT(dcmi, DCMI_IT_LINE | DCMI_IT_VSYNC);
  return HAL_DCMI_Start_DMA(dcmi, DCMI_MODE_CONTINUOUS, reinterpret_cast<uint32_t>(g_ring),
                            sizeof(g_ring) / 4) == HAL_OK;
}

// Line `line` (RGB565, high byte first unless TINYSEG_CAMERA_SWAP_BYTES) as UINT8 RGB.
void ConvertRow(const uint8_t* line, uint8_t* dst) {
  for (int x = 0; x < kWidth; ++x) {
    const uint8_t a = line[2 * x], b = line[2 * x + 1];
    const uint16_t v = TINYSEG_CAMERA_SWAP_BYTES ? (b << 8 | a) : (a << 8 | b);
    const uint8_t r = v >> 11, g = (v >> 5) & 0x3F, bl = v & 0x1F;
    dst[3 * x] = static_cast<uint8_t>(r << 3 | r >> 2);
    dst[3 * x + 1] = static_cast<uint8_t>(g << 2 | g >> 4);
    dst[3 * x + 2] = static_cast<uint8_t>(bl << 3 | bl >> 2);
  }
}

// Waits until global line `line` has been delivered; false when the camera stopped or lost sync.
bool WaitFor(uint32_t line) {
  const uint32_t t0 = millis();
  while (g_lines <= line) {
    if (g_lost_sync || millis() - t0 > kLineTimeoutMs) return false;
  }
  return !g_lost_sync;
}

// Runtime::sources[0]: row `row` of the camera frame into the kernel's row buffer.
tinyseg::Status ReadRow(void*, int32_t input, int32_t row, uint8_t* dst, size_t capacity,
                        size_t* written) {
  *written = 0;
  if (input != 0 || row < 0 || row >= kHeight || capacity != static_cast<size_t>(kWidth) * 3) {
    return tinyseg::Status::kOutOfRange;
  }
  const uint8_t* slot = g_ring + static_cast<size_t>(row % kRingLines) * kLineBytes;
  uint32_t line = g_lines / kHeight * kHeight + static_cast<uint32_t>(row);
  if (line + kRingLines <= g_lines) line += kHeight;  // gone from the ring: the next frame's
  for (int attempt = 0; attempt < kAttempts; ++attempt, line += kHeight) {
    if (!WaitFor(line)) return tinyseg::Status::kIoError;
    const uintptr_t first = reinterpret_cast<uintptr_t>(slot) & ~uintptr_t{31};
    const uintptr_t end = (reinterpret_cast<uintptr_t>(slot) + kLineBytes + 31) & ~uintptr_t{31};
    SCB_InvalidateDCache_by_Addr(reinterpret_cast<void*>(first), static_cast<int32_t>(end - first));
    ConvertRow(slot, dst);
    if (g_lines < line + kRingLines) {  // the DMA has not reached this slot again
      *written = capacity;
      return tinyseg::Status::kOk;
    }
  }
  return tinyseg::Status::kIoError;
}

// Runtime::sinks[0]: a mask row to Serial as "mask ROW" and its bytes in hex.
tinyseg::Status WriteMaskRow(void*, int32_t output, int32_t row, const uint8_t* src, size_t bytes) {
  if (output != 0) return tinyseg::Status::kOutOfRange;
  char hex[3];
  Serial.print("mask ");
  Serial.print(row);
  Serial.print(' ');
  for (size_t i = 0; i < bytes; ++i) {
    snprintf(hex, sizeof(hex), "%02x", src[i]);
    Serial.print(hex);
  }
  Serial.println();
  return tinyseg::Status::kOk;
}

}  // namespace camera

// DCMI interrupt callbacks (the HAL's weak ones replaced): a line delivered; a frame boundary
// that is not after a whole number of frames means lines were lost and the ring's slots no
// longer match the rows.
extern "C" void HAL_DCMI_LineEventCallback(DCMI_HandleTypeDef*) {
  camera::g_lines = camera::g_lines + 1;
}
extern "C" void HAL_DCMI_VsyncEventCallback(DCMI_HandleTypeDef*) {
  if (camera::g_lines % camera::kHeight != 0) camera::g_lost_sync = true;
}

#endif  // TINYSEG_CAMERA_ROW_SOURCE_H_
