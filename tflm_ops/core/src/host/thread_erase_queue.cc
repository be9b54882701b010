// Host-only std::thread erase worker (see thread_erase_queue.h).
#include "tinyseg/host/thread_erase_queue.h"

#include <chrono>

namespace tinyseg {

ThreadEraseQueue::ThreadEraseQueue(BlockDevice& device, size_t capacity, double ns_scale)
    : dev_(device), ns_scale_(ns_scale), ring_(capacity ? capacity : 1) {
  worker_ = std::thread([this] { Run(); });
}

ThreadEraseQueue::~ThreadEraseQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

Status ThreadEraseQueue::Submit(uint64_t addr, uint64_t len, EraseTicket* ticket) {
  if (ticket == nullptr) return Status::kInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == ring_.size()) return Status::kBusy;
    Request& r = ring_[(head_ + count_) % ring_.size()];
    r.addr = addr;
    r.len = len;
    r.ticket = ++issued_;
    ++count_;
    *ticket = r.ticket;
  }
  work_cv_.notify_one();
  return Status::kOk;
}

void ThreadEraseQueue::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || count_ > 0; });
    if (count_ == 0) return;  // stop requested and nothing left
    const Request r = ring_[head_];
    lock.unlock();
    const Status s = dev_.Erase(r.addr, r.len);
    if (ns_scale_ > 0.0 && Ok(s)) {
      const double ns = static_cast<double>(dev_.ModelledNs(Op::kErase, r.addr, r.len)) * ns_scale_;
      std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<int64_t>(ns)));
    }
    lock.lock();
    head_ = (head_ + 1) % ring_.size();
    --count_;
    completed_ = r.ticket;
    if (!Ok(s)) failed_.Record(r.ticket, s);
    done_cv_.notify_all();
  }
}

Status ThreadEraseQueue::Wait(EraseTicket ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ticket > issued_) return Status::kInvalidArgument;
  if (completed_ < ticket) {
    ++blocking_waits_;
    done_cv_.wait(lock, [this, ticket] { return completed_ >= ticket; });
  }
  return failed_.Of(ticket);
}

bool ThreadEraseQueue::IsDone(EraseTicket ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  return ticket <= issued_ && completed_ >= ticket;
}

Status ThreadEraseQueue::Drain() {
  EraseTicket last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = issued_;
  }
  return Wait(last);
}

uint64_t ThreadEraseQueue::blocking_waits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocking_waits_;
}

}  // namespace tinyseg
