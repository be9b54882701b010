// Host-only asynchronous erase queue: a std::thread worker plays the second
// core of paper section 5.2. Not part of the portable core (uses threads and
// allocates its request ring once, in the constructor).
#ifndef TINYSEG_HOST_THREAD_ERASE_QUEUE_H_
#define TINYSEG_HOST_THREAD_ERASE_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "tinyseg/erase_queue.h"

namespace tinyseg {

class ThreadEraseQueue final : public EraseQueue {
 public:
  // capacity: queued erases before Submit returns kBusy.
  // ns_scale: the worker sleeps ModelledNs(erase) * ns_scale nanoseconds per
  // erase (0 = no sleep), so host runs see erases overlap real work.
  ThreadEraseQueue(BlockDevice& device, size_t capacity, double ns_scale = 0.0);
  ~ThreadEraseQueue();
  ThreadEraseQueue(const ThreadEraseQueue&) = delete;
  ThreadEraseQueue& operator=(const ThreadEraseQueue&) = delete;

  Status Submit(uint64_t addr, uint64_t len, EraseTicket* ticket) override;
  Status Wait(EraseTicket ticket) override;
  bool IsDone(EraseTicket ticket) override;
  Status Drain() override;

  // Number of Wait calls that actually had to block (spill path stalls).
  uint64_t blocking_waits() const;

 private:
  struct Request {
    uint64_t addr;
    uint64_t len;
    EraseTicket ticket;
  };
  void Run();

  BlockDevice& dev_;
  const double ns_scale_;
  std::vector<Request> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  EraseTicket issued_ = 0;
  EraseTicket completed_ = 0;
  FailedTickets failed_;
  uint64_t blocking_waits_ = 0;
  bool stop_ = false;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::thread worker_;
};

}  // namespace tinyseg

#endif  // TINYSEG_HOST_THREAD_ERASE_QUEUE_H_
