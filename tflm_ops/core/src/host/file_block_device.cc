// Host-only file back-end (see file_block_device.h).
#include "tinyseg/host/file_block_device.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tinyseg {
namespace {

// `io` (::pread or ::pwrite) of all `len` bytes at `off`, retried where it moves fewer or is
// interrupted.
template <typename Byte, typename Io>
Status Transfer(Io io, int fd, Byte* p, size_t len, uint64_t off) {
  while (len > 0) {
    const ssize_t n = io(fd, p, len, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::kIoError;
    p += n;
    off += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  return Status::kOk;
}

Status WriteAll(int fd, const uint8_t* p, size_t len, uint64_t off) {
  return Transfer(::pwrite, fd, p, len, off);
}

}  // namespace

FileBlockDevice::~FileBlockDevice() { Close(); }

void FileBlockDevice::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status FileBlockDevice::Open(const char* path, bool format) {
  if (path == nullptr) return Status::kInvalidArgument;
  TINYSEG_RETURN_IF_ERROR(ValidateGeometry(g_));
  Close();
  fd_ = ::open(path, O_RDWR | O_CREAT, 0644);
  if (fd_ < 0) return Status::kIoError;
  if (format) {
    if (::ftruncate(fd_, 0) != 0) return Status::kIoError;
    uint8_t buf[4096];
    std::memset(buf, erased_value(), sizeof(buf));
    for (uint64_t off = 0; off < g_.total_size; off += sizeof(buf)) {
      const uint64_t left = g_.total_size - off;
      TINYSEG_RETURN_IF_ERROR(
          WriteAll(fd_, buf, left < sizeof(buf) ? static_cast<size_t>(left) : sizeof(buf), off));
    }
    return Status::kOk;
  }
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Status::kIoError;
  if (static_cast<uint64_t>(st.st_size) != g_.total_size) return Status::kInvalidArgument;
  return Status::kOk;
}

Status FileBlockDevice::Read(uint64_t addr, void* dst, size_t len) {
  if (fd_ < 0) return Status::kIoError;
  TINYSEG_RETURN_IF_ERROR(CheckAccess(g_, addr, len, g_.read_size));
  return Transfer(::pread, fd_, static_cast<uint8_t*>(dst), len, addr);
}

Status FileBlockDevice::Program(uint64_t addr, const void* src, size_t len) {
  if (fd_ < 0) return Status::kIoError;
  TINYSEG_RETURN_IF_ERROR(CheckAccess(g_, addr, len, g_.program_size));
  return WriteAll(fd_, static_cast<const uint8_t*>(src), len, addr);
}

Status FileBlockDevice::Erase(uint64_t addr, uint64_t len) {
  if (fd_ < 0) return Status::kIoError;
  TINYSEG_RETURN_IF_ERROR(CheckAccess(g_, addr, len, g_.erase_size));
  uint8_t buf[4096];
  std::memset(buf, erased_value(), sizeof(buf));
  while (len > 0) {
    const size_t n = len < sizeof(buf) ? static_cast<size_t>(len) : sizeof(buf);
    TINYSEG_RETURN_IF_ERROR(WriteAll(fd_, buf, n, addr));
    addr += n;
    len -= n;
  }
  return Status::kOk;
}

}  // namespace tinyseg
