// Synchronous and modelled-asynchronous erase queues (see erase_queue.h).
#include "tinyseg/erase_queue.h"

namespace tinyseg {

void FailedTickets::Record(EraseTicket ticket, Status status) {
  if (ticket_[next_] != 0 && ticket_[next_] > dropped_upto_) dropped_upto_ = ticket_[next_];
  ticket_[next_] = ticket;
  status_[next_] = status;
  next_ = (next_ + 1) % kSlots;
}

Status FailedTickets::Of(EraseTicket ticket) const {
  for (size_t i = 0; i < kSlots; ++i) {
    if (ticket_[i] == ticket && ticket != 0) return status_[i];
  }
  return ticket <= dropped_upto_ ? Status::kIoError : Status::kOk;
}

Status SyncEraseQueue::Submit(uint64_t addr, uint64_t len, EraseTicket* ticket) {
  if (ticket == nullptr) return Status::kInvalidArgument;
  const Status s = dev_.Erase(addr, len);
  if (clock_ && Ok(s)) {
    const uint64_t ns = dev_.ModelledNs(Op::kErase, addr, len);
    clock_->Advance(ns);
    clock_->erase_wait_ns += ns;
  }
  *ticket = ++issued_;
  if (!Ok(s)) failed_.Record(*ticket, s);
  return Status::kOk;
}

Status SyncEraseQueue::Wait(EraseTicket ticket) {
  if (ticket > issued_) return Status::kInvalidArgument;
  return failed_.Of(ticket);
}

void ModelledEraseQueue::Retire() {
  while (count_ > 0 && rec_[head_].end_ns <= clock_.now_ns) {
    head_ = (head_ + 1) % cap_;
    --count_;
  }
}

void ModelledEraseQueue::WaitUntil(uint64_t t) {
  if (t > clock_.now_ns) {
    clock_.erase_wait_ns += t - clock_.now_ns;
    clock_.now_ns = t;
  }
}

Status ModelledEraseQueue::Submit(uint64_t addr, uint64_t len, EraseTicket* ticket) {
  if (ticket == nullptr || rec_ == nullptr || cap_ == 0) return Status::kInvalidArgument;
  Retire();
  if (count_ == cap_) return Status::kBusy;
  const Status s = dev_.Erase(addr, len);
  const uint64_t dur = Ok(s) ? dev_.ModelledNs(Op::kErase, addr, len) : 0;
  const uint64_t start = clock_.now_ns > engine_free_ns_ ? clock_.now_ns : engine_free_ns_;
  engine_free_ns_ = start + dur;
  busy_ns_ += dur;
  EraseRecord& r = rec_[(head_ + count_) % cap_];
  r.addr = addr;
  r.len = len;
  r.start_ns = start;
  r.end_ns = start + dur;
  r.ticket = ++issued_;
  ++count_;
  *ticket = r.ticket;
  if (!Ok(s)) failed_.Record(r.ticket, s);
  return Status::kOk;
}

bool ModelledEraseQueue::IsDone(EraseTicket ticket) {
  if (ticket > issued_) return false;
  for (size_t i = 0; i < count_; ++i) {
    const EraseRecord& r = rec_[(head_ + i) % cap_];
    if (r.ticket == ticket) return r.end_ns <= clock_.now_ns;
  }
  return true;  // retired
}

Status ModelledEraseQueue::Wait(EraseTicket ticket) {
  if (ticket > issued_) return Status::kInvalidArgument;
  for (size_t i = 0; i < count_; ++i) {
    const EraseRecord& r = rec_[(head_ + i) % cap_];
    if (r.ticket == ticket) {
      WaitUntil(r.end_ns);
      break;
    }
  }
  Retire();
  return failed_.Of(ticket);
}

Status ModelledEraseQueue::AwaitBankIdle(uint64_t addr, uint64_t len) {
  if (len == 0) return Status::kOk;
  const uint32_t b0 = dev_.BankOf(addr);
  const uint32_t b1 = dev_.BankOf(addr + len - 1);
  bool waited = true;
  while (waited) {  // a following erase may start on the same bank
    waited = false;
    Retire();
    for (size_t i = 0; i < count_; ++i) {
      const EraseRecord& r = rec_[(head_ + i) % cap_];
      if (r.len == 0 || r.start_ns > clock_.now_ns || r.end_ns <= clock_.now_ns) continue;
      const uint32_t rb0 = dev_.BankOf(r.addr);
      const uint32_t rb1 = dev_.BankOf(r.addr + r.len - 1);
      if (rb0 <= b1 && b0 <= rb1) {
        WaitUntil(r.end_ns);
        waited = true;
        break;
      }
    }
  }
  return Status::kOk;
}

}  // namespace tinyseg
