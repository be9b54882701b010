// The tables a SpillManager works in (slots, sectors, an optional read bounce) and the staging
// buffer a test lends to every Spill call, for tests; and a region known erased.
#ifndef TINYSEG_TESTS_SPILL_TABLES_H_
#define TINYSEG_TESTS_SPILL_TABLES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tinyseg/spill_manager.h"

struct SpillTables {
  std::vector<tinyseg::SpillSlot> slots;
  std::vector<tinyseg::SectorInfo> sectors;
  std::vector<uint8_t> staging;
  std::vector<uint8_t> bounce;
  SpillTables(size_t n_slots, size_t n_sectors, size_t staging_bytes, size_t bounce_bytes = 0)
      : slots(n_slots), sectors(n_sectors), staging(staging_bytes), bounce(bounce_bytes) {}
  tinyseg::SpillMemory memory() {
    tinyseg::SpillMemory m;
    m.slots = slots.data();
    m.num_slots = slots.size();
    m.sectors = sectors.data();
    m.num_sectors = sectors.size();
    m.read_bounce = bounce.empty() ? nullptr : bounce.data();
    m.read_bounce_bytes = bounce.size();
    return m;
  }
  tinyseg::ByteSpan span() { return tinyseg::ByteSpan{staging.data(), staging.size()}; }
};

// A region of `size` bytes from the device's start, known erased (a fresh remote slot).
inline tinyseg::SpillConfig ErasedRegion(uint64_t size) {
  tinyseg::SpillConfig cfg;
  cfg.region_size = size;
  cfg.assume_erased = true;
  return cfg;
}

// Fetches `slot` whole into `out`: true when the fetch succeeds and its first t.size() bytes are
// `t`.
inline bool FetchesBack(tinyseg::SpillManager& m, uint32_t slot, const std::vector<uint8_t>& t,
                        std::vector<uint8_t>& out) {
  return tinyseg::Ok(m.Fetch(slot, out.data(), out.size())) &&
         std::memcmp(out.data(), t.data(), t.size()) == 0;
}

// FetchesBack, then releases the slot: true when both succeed (a tensor's last read).
inline bool FetchesBackAndReleases(tinyseg::SpillManager& m, uint32_t slot,
                                   const std::vector<uint8_t>& t, std::vector<uint8_t>& out) {
  return FetchesBack(m, slot, t, out) && tinyseg::Ok(m.Release(slot));
}

// Fetches `len` bytes of `slot` from `offset` into `out`: true when they are t[offset, +len).
inline bool FetchesRange(tinyseg::SpillManager& m, uint32_t slot, size_t offset, size_t len,
                         const std::vector<uint8_t>& t, std::vector<uint8_t>& out) {
  return tinyseg::Ok(m.FetchRange(slot, offset, len, out.data())) &&
         std::memcmp(out.data(), &t[offset], len) == 0;
}

#endif  // TINYSEG_TESTS_SPILL_TABLES_H_
