// Asynchronous block erase (paper section 5.2).
//
// The spill path submits sector erases to an EraseQueue and gets a ticket
// back; it only waits on a ticket when it is about to program a sector whose
// erase has not finished. Tickets are issued in increasing order (first is 1)
// and erases complete in FIFO order, so "ticket t done" means every ticket
// <= t is done -- a single monotonic counter in shared memory is enough for a
// second core to report progress.
//
// Implementations:
//   SyncEraseQueue          erases inside Submit (single-core targets).
//   ModelledEraseQueue      erases inside Submit but books the time on a
//                           VirtualClock as if a second core ran them: the
//                           deterministic model used by tests and benchmarks.
//   ThreadEraseQueue        host only (thread_erase_queue.h): std::thread worker.
//   (board, later)          Cortex-M4 worker over RPC in tflm_ops/targets/:
//                           Submit posts {ticket, addr, len} to a shared ring,
//                           Wait/IsDone poll the M4's completed-ticket counter,
//                           AwaitBankIdle polls the bank it is erasing.
#ifndef TINYSEG_ERASE_QUEUE_H_
#define TINYSEG_ERASE_QUEUE_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/block_device.h"
#include "tinyseg/status.h"

namespace tinyseg {

using EraseTicket = uint32_t;  // 0 means "no erase"

// Modelled time of the main core, advanced by flash operations on the
// critical path and by waits for erases.
struct VirtualClock {
  uint64_t now_ns = 0;
  uint64_t erase_wait_ns = 0;  // part of now_ns spent waiting for erases
  void Advance(uint64_t ns) { now_ns += ns; }
};

class EraseQueue {
 public:
  // Queues an erase of [addr, addr + len) (whole sectors). Does not wait for
  // it; returns kBusy when the queue is full (Wait on an older ticket, retry).
  virtual Status Submit(uint64_t addr, uint64_t len, EraseTicket* ticket) = 0;
  // Blocks until `ticket` (and so every earlier ticket) has completed.
  // Returns that erase's own result: a failed erase does not make later
  // tickets fail, so the caller can re-erase the sector and carry on.
  virtual Status Wait(EraseTicket ticket) = 0;
  // Non-blocking completion test.
  virtual bool IsDone(EraseTicket ticket) = 0;
  // Blocks until every submitted erase has completed; returns the result of
  // the last one (Wait on each ticket for theirs).
  virtual Status Drain() = 0;
  // Blocks until no erase is running on a bank holding [addr, addr + len):
  // a NOR bank that is erasing cannot be read or programmed.
  virtual Status AwaitBankIdle(uint64_t addr, uint64_t len) {
    (void)addr;
    (void)len;
    return Status::kOk;
  }

 protected:
  ~EraseQueue() = default;
};

// A queue that hands out its tickets itself: issued_ is the last one, and
// every erase submitted is done once it is, so draining is waiting for it.
class NumberingEraseQueue : public EraseQueue {
 public:
  Status Drain() override { return Wait(issued_); }

 protected:
  ~NumberingEraseQueue() = default;
  EraseTicket issued_ = 0;
};

// The failed erases a queue still remembers, so Wait can report each
// ticket's own result. Fixed size, no heap: failures are rare, and a ticket
// older than a failure the table has dropped reports kIoError (the caller
// re-erases that sector: conservative, never an unerased sector as erased).
class FailedTickets {
 public:
  static constexpr size_t kSlots = 8;
  void Record(EraseTicket ticket, Status status);
  Status Of(EraseTicket ticket) const;
  void Clear() { *this = FailedTickets(); }

 private:
  EraseTicket ticket_[kSlots] = {};
  Status status_[kSlots] = {};
  size_t next_ = 0;
  EraseTicket dropped_upto_ = 0;  // highest failed ticket no longer in the table
};

// Erases synchronously inside Submit; with a clock, the erase time is booked
// on the critical path.
class SyncEraseQueue final : public NumberingEraseQueue {
 public:
  explicit SyncEraseQueue(BlockDevice& device, VirtualClock* clock = nullptr)
      : dev_(device), clock_(clock) {}
  Status Submit(uint64_t addr, uint64_t len, EraseTicket* ticket) override;
  Status Wait(EraseTicket ticket) override;
  bool IsDone(EraseTicket ticket) override { return ticket <= issued_; }

 private:
  BlockDevice& dev_;
  VirtualClock* clock_;
  FailedTickets failed_;
};

// One record per in-flight erase of a ModelledEraseQueue (caller memory).
struct EraseRecord {
  uint64_t addr = 0;
  uint64_t len = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  EraseTicket ticket = 0;
};

// Models a second core erasing in the background: a FIFO erase engine whose
// busy time runs on `clock` in parallel with the caller. The device is erased
// at Submit time (its contents are not observed before Wait), the time cost
// appears only when the caller waits for a ticket or touches a busy bank.
// Approximation: each erase's start time is fixed when it is submitted
// (start = max(now, engine free)); the engine never yields a bank to the
// main core once an erase has started there.
class ModelledEraseQueue final : public NumberingEraseQueue {
 public:
  ModelledEraseQueue(BlockDevice& device, VirtualClock& clock, EraseRecord* records,
                     size_t capacity)
      : dev_(device), clock_(clock), rec_(records), cap_(capacity) {}
  Status Submit(uint64_t addr, uint64_t len, EraseTicket* ticket) override;
  Status Wait(EraseTicket ticket) override;
  bool IsDone(EraseTicket ticket) override;
  Status AwaitBankIdle(uint64_t addr, uint64_t len) override;
  uint64_t engine_busy_ns() const { return busy_ns_; }

 private:
  void Retire();
  void WaitUntil(uint64_t t);

  BlockDevice& dev_;
  VirtualClock& clock_;
  EraseRecord* rec_;
  size_t cap_;
  size_t head_ = 0;   // oldest live record
  size_t count_ = 0;  // live records
  uint64_t engine_free_ns_ = 0;
  uint64_t busy_ns_ = 0;
  FailedTickets failed_;
};

}  // namespace tinyseg

#endif  // TINYSEG_ERASE_QUEUE_H_
