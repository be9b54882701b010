// A NorFlashSim together with the memory it simulates, for tests.
#ifndef TINYSEG_TESTS_SIM_BOX_H_
#define TINYSEG_TESTS_SIM_BOX_H_

#include <cstdint>
#include <vector>

#include "tinyseg/nor_flash_sim.h"

struct SimBox {
  std::vector<uint8_t> mem;
  std::vector<uint32_t> counts;
  std::vector<uint8_t> flags;
  tinyseg::NorFlashSim sim;
  explicit SimBox(const tinyseg::NorFlashConfig& c)
      : mem(static_cast<size_t>(c.geometry.total_size)),
        counts(c.geometry.num_sectors()),
        flags(tinyseg::NorFlashSim::ProgramFlagBytes(c)),
        sim(c, mem.data(), counts.data(), flags.data()) {}
};

#endif  // TINYSEG_TESTS_SIM_BOX_H_
