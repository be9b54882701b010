// Host-only block device backed by a file (POSIX pread/pwrite, so the erase
// worker thread and the spill path can use it concurrently on different
// sectors). Keeps spilled data across process runs; no NOR rules.
#ifndef TINYSEG_HOST_FILE_BLOCK_DEVICE_H_
#define TINYSEG_HOST_FILE_BLOCK_DEVICE_H_

#include "tinyseg/block_device.h"

namespace tinyseg {

class FileBlockDevice final : public BlockDevice {
 public:
  explicit FileBlockDevice(const Geometry& g) : g_(g) {}
  ~FileBlockDevice();
  FileBlockDevice(const FileBlockDevice&) = delete;
  FileBlockDevice& operator=(const FileBlockDevice&) = delete;

  // Opens (creating if needed) `path`. With format=true the file is resized
  // to total_size and filled with the erased value; otherwise it must already
  // have exactly total_size bytes.
  Status Open(const char* path, bool format);
  void Close();

  const Geometry& geometry() const override { return g_; }
  Status Read(uint64_t addr, void* dst, size_t len) override;
  Status Program(uint64_t addr, const void* src, size_t len) override;
  Status Erase(uint64_t addr, uint64_t len) override;

 private:
  Geometry g_;
  int fd_ = -1;
};

}  // namespace tinyseg

#endif  // TINYSEG_HOST_FILE_BLOCK_DEVICE_H_
