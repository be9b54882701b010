// Arduino Stream transport for remote spilling (see the header).
#include "arduino_serial_stream.h"

namespace tinyseg_nicla {

using tinyseg::Status;

Status ArduinoSerialStream::Write(const uint8_t* data, size_t len) {
  size_t done = 0;
  const uint32_t start = millis();
  while (done < len) {
    const size_t n = s_.write(data + done, len - done);
    done += n;
    if (n == 0) {
      if (millis() - start > 5000) return Status::kIoError;  // port closed for good
      yield();
    }
  }
  return Status::kOk;
}

Status ArduinoSerialStream::Read(uint8_t* dst, size_t len, uint32_t timeout_ms, size_t* got) {
  *got = 0;
  const uint32_t start = millis();
  int avail = s_.available();
  while (avail <= 0) {
    if (millis() - start >= timeout_ms) return Status::kOk;  // timeout: nothing read
    yield();
    avail = s_.available();
  }
  size_t n = static_cast<size_t>(avail) < len ? static_cast<size_t>(avail) : len;
  for (size_t i = 0; i < n; ++i) {
    const int c = s_.read();
    if (c < 0) {
      n = i;
      break;
    }
    dst[i] = static_cast<uint8_t>(c);
  }
  *got = n;
  return Status::kOk;
}

}  // namespace tinyseg_nicla
