// Asynchronous erase on a second core through a shared-memory ring (paper
// section 5.2, Figure 10): the board-independent half of the Nicla Vision's
// Cortex-M4 erase worker (tflm_ops/targets/nicla_vision/).
//
//   main core (M7)  RingEraseQueue : EraseQueue
//     Submit  writes {ticket, addr, len} into the next free entry, then
//             publishes `submitted` (release) and calls Notify().
//     Wait    polls `completed` (acquire) until it reaches the ticket.
//   second core (M4)  RingEraseWorker
//     Poll    takes the oldest unfinished entry, erases it on its own
//             BlockDevice while holding that bank's lock, writes the result
//             into the entry's `status`, then publishes `completed`.
//     Wait    returns the result of that ticket's own erase (a failure is
//             not sticky: the spill manager re-erases and carries on).
//
// One writer per word: only the M7 writes `submitted` and the entries, only
// the M4 writes `completed`, `erasing_bank`, the error words and the
// `status` of an entry it has taken (the M7 reuses an entry only after
// `completed` has passed it, and keeps failed results it overwrites), so plain
// 32-bit atomic loads/stores (LDR/STR + DMB on Cortex-M) suffice; no
// read-modify-write crosses cores. The ring must live in memory both cores
// see uncached (SRAM4 on the STM32H747/H757; Arduino's RPC.begin() maps it
// non-cacheable on the M7).
//
// Bank exclusion: a NOR bank that is erasing cannot be read or programmed.
// The worker holds RingPlatform::LockBank(bank) for the duration of an erase;
// the main core wraps its device in BankLockedDevice, which takes the same
// lock around every read and program, so it waits only while an erase is
// actually running on that bank (queued erases do not block it). On the
// board the lock is a hardware semaphore (HSEM); on the host a mutex.
#ifndef TINYSEG_ERASE_RING_H_
#define TINYSEG_ERASE_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tinyseg/block_device.h"
#include "tinyseg/erase_queue.h"
#include "tinyseg/status.h"

namespace tinyseg {

constexpr uint32_t kEraseRingMagic = 0x52455354u;    // "TSER"
constexpr uint32_t kEraseWorkerAlive = 0x564C4941u;  // "AILV"
constexpr uint32_t kEraseRingCapacity = 32;
constexpr uint32_t kMaxRingBanks = 8;

struct EraseRingEntry {
  uint32_t ticket;
  uint32_t addr;
  uint32_t len;
  int32_t status;  // M4: tinyseg::Status of this erase, written before `completed`
};

// Layout shared by both cores (both are little-endian 32-bit; 560 bytes).
struct EraseRingShared {
  std::atomic<uint32_t> magic;               // M7: kEraseRingMagic once initialised
  std::atomic<uint32_t> worker_state;        // M4: kEraseWorkerAlive when polling
  std::atomic<uint32_t> submitted;           // M7: last published ticket
  std::atomic<uint32_t> completed;           // M4: last finished ticket
  std::atomic<uint32_t> erasing_bank;        // M4: bank + 1 of the running erase, 0 idle
  std::atomic<uint32_t> first_error_ticket;  // M4: 0 = none (diagnostics only)
  std::atomic<int32_t> first_error_status;   // M4: tinyseg::Status of that erase
  std::atomic<uint32_t> erases_done;         // M4: sectors erased (statistics)
  std::atomic<uint32_t> busy_us;             // M4: time spent erasing (if it has a clock)
  uint32_t reserved[7];
  EraseRingEntry entries[kEraseRingCapacity];
};
static_assert(sizeof(std::atomic<uint32_t>) == 4, "ring words must be plain 32-bit");
static_assert(sizeof(EraseRingShared) == 64 + 16 * kEraseRingCapacity, "shared layout");

// What each core provides: the inter-core bank lock, a doorbell and a pause.
class RingPlatform {
 public:
  virtual void LockBank(uint32_t bank) = 0;  // blocks until owned
  virtual void UnlockBank(uint32_t bank) = 0;
  virtual void Notify() {}                // wake the worker (optional)
  virtual void Relax() {}                 // called in every wait loop
  virtual uint32_t NowUs() { return 0; }  // for busy_us (optional)

 protected:
  ~RingPlatform() = default;
};

// Main-core side.
class RingEraseQueue final : public NumberingEraseQueue {
 public:
  // `device` gives BankOf() for AwaitBankIdle; the ring memory is zeroed and
  // stamped with the magic by Init().
  RingEraseQueue(EraseRingShared& ring, RingPlatform& platform, const BlockDevice& device)
      : ring_(ring), pf_(platform), dev_(device) {}
  // Resets the shared words; call before the worker starts polling.
  Status Init();
  // Waits up to max_relax_calls Relax() calls for the worker's alive stamp.
  Status WaitForWorker(uint32_t max_relax_calls);

  Status Submit(uint64_t addr, uint64_t len, EraseTicket* ticket) override;
  Status Wait(EraseTicket ticket) override;
  bool IsDone(EraseTicket ticket) override;
  Status AwaitBankIdle(uint64_t addr, uint64_t len) override;

  EraseTicket issued() const { return issued_; }
  uint64_t blocking_waits() const { return blocking_waits_; }

 private:
  EraseRingShared& ring_;
  RingPlatform& pf_;
  const BlockDevice& dev_;
  uint64_t blocking_waits_ = 0;
  FailedTickets failed_;  // failures of entries reused since
};

// Second-core side.
class RingEraseWorker {
 public:
  RingEraseWorker(EraseRingShared& ring, RingPlatform& platform, BlockDevice& device)
      : ring_(ring), pf_(platform), dev_(device) {}
  // True once the main core has initialised the ring; stamps worker_state.
  bool Attach();
  // Runs at most one queued erase; returns true if it did.
  bool Poll();

 private:
  EraseRingShared& ring_;
  RingPlatform& pf_;
  BlockDevice& dev_;
};

// Takes the bank lock(s) of [addr, addr + len) around every operation of the
// wrapped device. Both cores use one over the same physical flash.
class BankLockedDevice final : public BlockDevice {
 public:
  BankLockedDevice(BlockDevice& inner, RingPlatform& platform) : in_(inner), pf_(platform) {}
  const Geometry& geometry() const override { return in_.geometry(); }
  Status Read(uint64_t addr, void* dst, size_t len) override;
  Status Program(uint64_t addr, const void* src, size_t len) override;
  Status Erase(uint64_t addr, uint64_t len) override;
  uint8_t erased_value() const override { return in_.erased_value(); }
  uint64_t ModelledNs(Op op, uint64_t addr, uint64_t len) const override {
    return in_.ModelledNs(op, addr, len);
  }
  uint32_t BankOf(uint64_t addr) const override { return in_.BankOf(addr); }
  bool IsRam() const override { return in_.IsRam(); }

 private:
  bool Banks(uint64_t addr, uint64_t len, uint32_t* first, uint32_t* last) const;
  void Lock(uint32_t first, uint32_t last);
  void Unlock(uint32_t first, uint32_t last);
  BlockDevice& in_;
  RingPlatform& pf_;
};

}  // namespace tinyseg

#endif  // TINYSEG_ERASE_RING_H_
