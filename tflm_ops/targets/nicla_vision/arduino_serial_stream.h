// tinyseg::remote::ByteStream over an Arduino Stream: the Nicla Vision's USB
// CDC `Serial` (the remote-spilling link to `tinyseg remote-host`) or a UART
// (`Serial1`). The remote client in tflm_ops/core does framing, CRC, retries
// and timeouts on top of it.
#ifndef TINYSEG_TARGETS_NICLA_VISION_ARDUINO_SERIAL_STREAM_H_
#define TINYSEG_TARGETS_NICLA_VISION_ARDUINO_SERIAL_STREAM_H_

#include <Arduino.h>

#include "tinyseg/remote_protocol.h"

namespace tinyseg_nicla {

class ArduinoSerialStream final : public tinyseg::remote::ByteStream {
 public:
  explicit ArduinoSerialStream(Stream& s) : s_(s) {}
  // Blocks until the driver took every byte (USB CDC: until the host reads;
  // a host that never reads shows up as the client's timeout on the reply).
  tinyseg::Status Write(const uint8_t* data, size_t len) override;
  tinyseg::Status Read(uint8_t* dst, size_t len, uint32_t timeout_ms, size_t* got) override;
  uint32_t NowMs() override { return millis(); }

 private:
  Stream& s_;
};

}  // namespace tinyseg_nicla

#endif  // TINYSEG_TARGETS_NICLA_VISION_ARDUINO_SERIAL_STREAM_H_
