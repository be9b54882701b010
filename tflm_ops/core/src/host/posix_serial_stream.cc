// Host-only POSIX serial / pty ByteStream (see posix_serial_stream.h).
#include "tinyseg/host/posix_serial_stream.h"

#include <cerrno>
#include <ctime>

#include <fcntl.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

namespace tinyseg {
namespace {

speed_t BaudConstant(uint32_t baud) {
  switch (baud) {
    case 9600:
      return B9600;
    case 19200:
      return B19200;
    case 38400:
      return B38400;
    case 57600:
      return B57600;
    case 115200:
      return B115200;
    case 230400:
      return B230400;
#ifdef B460800
    case 460800:
      return B460800;
#endif
#ifdef B921600
    case 921600:
      return B921600;
#endif
#ifdef B1000000
    case 1000000:
      return B1000000;
#endif
#ifdef B2000000
    case 2000000:
      return B2000000;
#endif
    default:
      return 0;
  }
}

}  // namespace

PosixSerialStream::~PosixSerialStream() { Close(); }

void PosixSerialStream::Close() {
  if (fd_ >= 0 && owned_) ::close(fd_);
  fd_ = -1;
  owned_ = false;
}

Status PosixSerialStream::Adopt(int fd, bool owned) {
  if (fd < 0) return Status::kInvalidArgument;
  Close();
  fd_ = fd;
  owned_ = owned;
  return Status::kOk;
}

Status PosixSerialStream::Open(const char* path, uint32_t baud) {
  if (path == nullptr) return Status::kInvalidArgument;
  const int fd = ::open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return Status::kIoError;
  termios t;
  if (::tcgetattr(fd, &t) == 0) {
    ::cfmakeraw(&t);
    t.c_cflag |= CLOCAL | CREAD;
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (baud != 0) {
      const speed_t sp = BaudConstant(baud);
      if (sp == 0) {
        ::close(fd);
        return Status::kUnsupported;
      }
      ::cfsetispeed(&t, sp);
      ::cfsetospeed(&t, sp);
    }
    if (::tcsetattr(fd, TCSANOW, &t) != 0) {
      ::close(fd);
      return Status::kIoError;
    }
  }
  return Adopt(fd, true);
}

Status PosixSerialStream::Write(const uint8_t* data, size_t len) {
  if (fd_ < 0) return Status::kInvalidArgument;
  size_t done = 0;
  while (done < len) {
    const ssize_t n = ::write(fd_, data + done, len - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    return Status::kIoError;
  }
  return Status::kOk;
}

Status PosixSerialStream::Read(uint8_t* dst, size_t len, uint32_t timeout_ms, size_t* got) {
  *got = 0;
  if (fd_ < 0) return Status::kInvalidArgument;
  pollfd p{fd_, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(timeout_ms));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return Status::kIoError;
  if (r == 0) return Status::kOk;                          // timeout
  if ((p.revents & POLLIN) == 0) return Status::kIoError;  // hang-up or error only
  const ssize_t n = ::read(fd_, dst, len);
  if (n > 0) {
    *got = static_cast<size_t>(n);
    return Status::kOk;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Status::kOk;
  return Status::kIoError;  // EOF or EIO: the other end went away
}

uint32_t PosixSerialStream::NowMs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint32_t>(static_cast<uint64_t>(ts.tv_sec) * 1000u +
                               static_cast<uint64_t>(ts.tv_nsec) / 1000000u);
}

}  // namespace tinyseg
