// Host-only ByteStream over a POSIX file descriptor: a serial device
// (/dev/ttyACM0, set to raw 8N1 at the given baud rate) or a pseudo-terminal,
// so the remote-spilling client of remote_protocol.h runs against the Python
// host (`tinyseg remote-host`) on one machine.
#ifndef TINYSEG_HOST_POSIX_SERIAL_STREAM_H_
#define TINYSEG_HOST_POSIX_SERIAL_STREAM_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/remote_protocol.h"

namespace tinyseg {

class PosixSerialStream final : public remote::ByteStream {
 public:
  PosixSerialStream() = default;
  ~PosixSerialStream();
  PosixSerialStream(const PosixSerialStream&) = delete;
  PosixSerialStream& operator=(const PosixSerialStream&) = delete;

  // Opens a tty and sets raw mode; baud 0 keeps the current speed.
  Status Open(const char* path, uint32_t baud);
  // Uses an open descriptor (e.g. a pty master); closed on destruction if owned.
  Status Adopt(int fd, bool owned);
  void Close();
  int fd() const { return fd_; }

  Status Write(const uint8_t* data, size_t len) override;
  Status Read(uint8_t* dst, size_t len, uint32_t timeout_ms, size_t* got) override;
  uint32_t NowMs() override;

 private:
  int fd_ = -1;
  bool owned_ = false;
};

}  // namespace tinyseg

#endif  // TINYSEG_HOST_POSIX_SERIAL_STREAM_H_
