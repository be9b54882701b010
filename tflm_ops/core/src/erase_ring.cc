// Shared-memory erase ring between two cores (see erase_ring.h).
#include "tinyseg/erase_ring.h"

namespace tinyseg {
namespace {

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRel = std::memory_order_release;
constexpr auto kRlx = std::memory_order_relaxed;

EraseRingEntry& EntryFor(EraseRingShared& r, EraseTicket t) {
  return r.entries[(t - 1) % kEraseRingCapacity];
}

}  // namespace

// ---------------------------------------------------------------- main core

Status RingEraseQueue::Init() {
  ring_.magic.store(0, kRlx);
  // Shared RAM keeps its contents across a reset of the main core: a stale stamp
  // would let WaitForWorker pass before the worker has seen this ring.
  ring_.worker_state.store(0, kRlx);
  ring_.submitted.store(0, kRlx);
  ring_.completed.store(0, kRlx);
  ring_.erasing_bank.store(0, kRlx);
  ring_.first_error_ticket.store(0, kRlx);
  ring_.first_error_status.store(0, kRlx);
  ring_.erases_done.store(0, kRlx);
  ring_.busy_us.store(0, kRlx);
  for (uint32_t i = 0; i < kEraseRingCapacity; ++i) ring_.entries[i] = EraseRingEntry{0, 0, 0, 0};
  issued_ = 0;
  failed_.Clear();
  ring_.magic.store(kEraseRingMagic, kRel);
  return Status::kOk;
}

Status RingEraseQueue::WaitForWorker(uint32_t max_relax_calls) {
  for (uint32_t i = 0; i <= max_relax_calls; ++i) {
    if (ring_.worker_state.load(kAcq) == kEraseWorkerAlive) return Status::kOk;
    pf_.Relax();
  }
  return Status::kIoError;
}

Status RingEraseQueue::Submit(uint64_t addr, uint64_t len, EraseTicket* ticket) {
  if (ticket == nullptr || len == 0) return Status::kInvalidArgument;
  if (addr > 0xFFFFFFFFull || len > 0xFFFFFFFFull - addr) return Status::kOutOfRange;
  if (ring_.magic.load(kRlx) != kEraseRingMagic) return Status::kInvalidArgument;
  if (issued_ - ring_.completed.load(kAcq) >= kEraseRingCapacity) return Status::kBusy;
  const EraseTicket t = issued_ + 1;
  EraseRingEntry& e = EntryFor(ring_, t);
  // The entry's previous ticket is complete (checked above): keep a failure.
  if (e.ticket != 0 && e.status != static_cast<int32_t>(Status::kOk)) {
    failed_.Record(e.ticket, static_cast<Status>(e.status));
  }
  e.addr = static_cast<uint32_t>(addr);
  e.len = static_cast<uint32_t>(len);
  e.status = static_cast<int32_t>(Status::kOk);
  e.ticket = t;
  ring_.submitted.store(t, kRel);  // publishes the entry
  issued_ = t;
  *ticket = t;
  pf_.Notify();
  return Status::kOk;
}

Status RingEraseQueue::Wait(EraseTicket ticket) {
  if (ticket > issued_) return Status::kInvalidArgument;
  if (ring_.completed.load(kAcq) < ticket) {
    ++blocking_waits_;
    while (ring_.completed.load(kAcq) < ticket) pf_.Relax();
  }
  if (ticket == 0) return Status::kOk;
  const EraseRingEntry& e = EntryFor(ring_, ticket);
  if (e.ticket == ticket) return static_cast<Status>(e.status);
  return failed_.Of(ticket);  // entry reused since: its failure, if any, was kept
}

bool RingEraseQueue::IsDone(EraseTicket ticket) {
  return ticket <= issued_ && ring_.completed.load(kAcq) >= ticket;
}

Status RingEraseQueue::AwaitBankIdle(uint64_t addr, uint64_t len) {
  // Taking and dropping the bank lock waits for the erase running there;
  // BankLockedDevice holds the lock during the access itself.
  const uint32_t first = dev_.BankOf(addr);
  const uint32_t last = dev_.BankOf(len ? addr + len - 1 : addr);
  for (uint32_t b = first; b <= last && b < kMaxRingBanks; ++b) {
    pf_.LockBank(b);
    pf_.UnlockBank(b);
  }
  return Status::kOk;
}

// ---------------------------------------------------------------- second core

bool RingEraseWorker::Attach() {
  if (ring_.magic.load(kAcq) != kEraseRingMagic) return false;
  ring_.worker_state.store(kEraseWorkerAlive, kRel);
  return true;
}

bool RingEraseWorker::Poll() {
  if (ring_.magic.load(kAcq) != kEraseRingMagic) return false;
  // Re-stamp after the main core re-initialised the ring under a running worker.
  if (ring_.worker_state.load(kRlx) != kEraseWorkerAlive)
    ring_.worker_state.store(kEraseWorkerAlive, kRel);
  const uint32_t done = ring_.completed.load(kRlx);  // we are its only writer
  if (ring_.submitted.load(kAcq) == done) return false;
  const EraseTicket t = done + 1;
  const EraseRingEntry e = EntryFor(ring_, t);
  Status s = Status::kOk;
  if (e.ticket != t) {
    s = Status::kCorrupt;  // the main core overwrote an entry still queued
  } else {
    const uint32_t bank = dev_.BankOf(e.addr);
    const uint32_t t0 = pf_.NowUs();
    pf_.LockBank(bank);
    ring_.erasing_bank.store(bank + 1, kRlx);
    s = dev_.Erase(e.addr, e.len);
    ring_.erasing_bank.store(0, kRlx);
    pf_.UnlockBank(bank);
    ring_.busy_us.store(ring_.busy_us.load(kRlx) + (pf_.NowUs() - t0), kRlx);
    if (Ok(s)) {
      const uint32_t sector = dev_.geometry().erase_size ? dev_.geometry().erase_size : 1;
      ring_.erases_done.store(ring_.erases_done.load(kRlx) + e.len / sector, kRlx);
    }
  }
  if (e.ticket == t) EntryFor(ring_, t).status = static_cast<int32_t>(s);
  if (!Ok(s) && ring_.first_error_ticket.load(kRlx) == 0) {
    ring_.first_error_status.store(static_cast<int32_t>(s), kRlx);
    ring_.first_error_ticket.store(t, kRlx);
  }
  ring_.completed.store(t, kRel);  // publishes the error words too
  return true;
}

// ---------------------------------------------------------------- bank locks

bool BankLockedDevice::Banks(uint64_t addr, uint64_t len, uint32_t* first, uint32_t* last) const {
  const uint64_t size = in_.geometry().total_size;
  if (addr > size || len > size - addr) return false;  // out of range: nothing to lock
  *first = in_.BankOf(addr);
  *last = in_.BankOf(len ? addr + len - 1 : addr);
  return *first <= *last && *last < kMaxRingBanks;
}

void BankLockedDevice::Lock(uint32_t first, uint32_t last) {
  for (uint32_t b = first; b <= last; ++b) pf_.LockBank(b);  // ascending: no deadlock
}

void BankLockedDevice::Unlock(uint32_t first, uint32_t last) {
  for (uint32_t b = last + 1; b-- > first;) pf_.UnlockBank(b);
}

Status BankLockedDevice::Read(uint64_t addr, void* dst, size_t len) {
  uint32_t f, l;
  if (!Banks(addr, len, &f, &l)) return in_.Read(addr, dst, len);  // let it report the error
  Lock(f, l);
  const Status s = in_.Read(addr, dst, len);
  Unlock(f, l);
  return s;
}

Status BankLockedDevice::Program(uint64_t addr, const void* src, size_t len) {
  uint32_t f, l;
  if (!Banks(addr, len, &f, &l)) return in_.Program(addr, src, len);
  Lock(f, l);
  const Status s = in_.Program(addr, src, len);
  Unlock(f, l);
  return s;
}

Status BankLockedDevice::Erase(uint64_t addr, uint64_t len) {
  uint32_t f, l;
  if (!Banks(addr, len, &f, &l)) return in_.Erase(addr, len);
  Lock(f, l);
  const Status s = in_.Erase(addr, len);
  Unlock(f, l);
  return s;
}

}  // namespace tinyseg
