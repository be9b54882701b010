// RAM block device, simulated NOR flash rules, counters and timing profiles.
#include <cstring>
#include <initializer_list>
#include <vector>

#include "tinyseg/block_device.h"
#include "tinyseg/flash_profiles.h"
#include "tinyseg/nor_flash_sim.h"
#include "tinytest.h"
#include "sim_box.h"

using namespace tinyseg;

namespace {

NorFlashConfig SmallNor() {
  NorFlashConfig c;
  c.geometry = Geometry{1, 16, 256, 4096};
  c.timing.program_unit_bytes = 16;
  return c;
}

}  // namespace

TEST(RamDeviceBasics) {
  std::vector<uint8_t> mem(4096);
  RamBlockDevice ram(Geometry{1, 4, 512, 4096}, mem.data());
  CHECK_OK(ram.Init());
  uint8_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CHECK_OK(ram.Program(8, buf, 8));
  CHECK_OK(ram.Program(8, buf, 8));  // RAM: no NOR rules
  uint8_t out[8];
  CHECK_OK(ram.Read(8, out, 8));
  CHECK(std::memcmp(out, buf, 8) == 0);
  CHECK_STATUS(ram.Program(6, buf, 8), Status::kMisaligned);
  CHECK_STATUS(ram.Program(4092, buf, 8), Status::kOutOfRange);
  CHECK_STATUS(ram.Erase(100, 512), Status::kMisaligned);
  CHECK_OK(ram.Erase(0, 512));
  CHECK_OK(ram.Read(8, out, 1));
  CHECK_EQ(out[0], 0xFF);
  std::vector<uint8_t> m2(1000);
  RamBlockDevice bad(Geometry{1, 4, 512, 1000}, m2.data());
  CHECK_STATUS(bad.Init(), Status::kInvalidArgument);
}

TEST(NorProgramWithoutEraseFails) {
  SimBox b(SmallNor());
  CHECK_OK(b.sim.Init());
  uint8_t a[16], z[16], out[16];
  std::memset(a, 0xF0, 16);
  std::memset(z, 0x0F, 16);
  CHECK_OK(b.sim.Program(32, a, 16));                          // erased: ok
  CHECK_STATUS(b.sim.Program(32, z, 16), Status::kNotErased);  // 0->1 needed
  CHECK_OK(b.sim.Read(32, out, 16));
  CHECK(std::memcmp(out, a, 16) == 0);  // rejected program changed nothing
  uint8_t c[16];
  std::memset(c, 0x30, 16);  // only clears bits of 0xF0
  CHECK_OK(b.sim.Program(32, c, 16));
  CHECK_OK(b.sim.Erase(0, 256));
  CHECK_OK(b.sim.Program(32, z, 16));  // after erase: ok
  CHECK_EQ(b.sim.access_stats().rejected_programs, 1u);
}

TEST(NorMisalignedProgramAndEraseFail) {
  SimBox b(SmallNor());
  CHECK_OK(b.sim.Init());
  uint8_t d[32];
  std::memset(d, 0, sizeof(d));
  CHECK_STATUS(b.sim.Program(8, d, 16), Status::kMisaligned);
  CHECK_STATUS(b.sim.Program(16, d, 8), Status::kMisaligned);
  CHECK_STATUS(b.sim.Program(4096 - 16, d, 32), Status::kOutOfRange);
  CHECK_STATUS(b.sim.Erase(128, 256), Status::kMisaligned);
  CHECK_STATUS(b.sim.Erase(0, 100), Status::kMisaligned);
  CHECK_STATUS(b.sim.Erase(3840, 512), Status::kOutOfRange);
  CHECK_EQ(b.sim.erase_stats().rejected_erases, 3u);
  CHECK_EQ(b.sim.erase_stats().erases, 0u);
}

TEST(NorEraseCountsPerSector) {
  SimBox b(SmallNor());
  CHECK_OK(b.sim.Init());
  CHECK_OK(b.sim.Erase(0, 256));
  CHECK_OK(b.sim.Erase(0, 768));
  CHECK_OK(b.sim.Erase(3840, 256));
  CHECK_EQ(b.sim.erase_count(0), 2u);
  CHECK_EQ(b.sim.erase_count(1), 1u);
  CHECK_EQ(b.sim.erase_count(2), 1u);
  CHECK_EQ(b.sim.erase_count(3), 0u);
  CHECK_EQ(b.sim.erase_count(15), 1u);
  CHECK_EQ(b.sim.max_erase_count(), 2u);
  CHECK_EQ(b.sim.min_erase_count(), 0u);
  CHECK_EQ(b.sim.erase_stats().erases, 5u);
  uint8_t d[64];
  std::memset(d, 0x11, sizeof(d));
  CHECK_OK(b.sim.Program(256, d, 64));
  CHECK_OK(b.sim.Read(250, d, 20));
  CHECK_EQ(b.sim.access_stats().bytes_programmed, 64u);
  CHECK_EQ(b.sim.access_stats().bytes_read, 20u);
  CHECK_EQ(b.sim.access_stats().program_ops, 1u);
}

TEST(H7FlashWordProgramsOncePerErase) {
  SimBox b(Resized(Stm32h757InternalFlash(), 256 * 1024));
  CHECK_OK(b.sim.Init());
  CHECK_EQ(b.sim.geometry().program_size, 32u);
  CHECK_EQ(b.sim.geometry().erase_size, 128u * 1024);
  uint8_t w[32];
  std::memset(w, 0xFF, sizeof(w));
  CHECK_OK(b.sim.Program(64, w, 32));
  std::memset(w, 0x00, sizeof(w));
  // Clearing bits would be legal on plain NOR, not on ECC flash words.
  CHECK_STATUS(b.sim.Program(64, w, 32), Status::kNotErased);
  CHECK_STATUS(b.sim.Program(48, w, 32), Status::kMisaligned);
  CHECK_OK(b.sim.Erase(0, 128 * 1024));
  CHECK_OK(b.sim.Program(64, w, 32));
}

TEST(TimingProfiles) {
  const NorFlashConfig h7 = Stm32h757InternalFlash(H7Parallelism::kX32);
  CHECK_EQ(h7.geometry.total_size, 2u * 1024 * 1024);
  CHECK_EQ(h7.bank_size, 1024u * 1024);
  SimBox b(Resized(h7, 256 * 1024));
  CHECK_OK(b.sim.Init());
  // 1 KB = 32 flash words of 130 us; one 128 KB sector erase = 1.1 s.
  CHECK_EQ(b.sim.ModelledNs(Op::kProgram, 0, 1024), 32u * 130000u);
  CHECK_EQ(b.sim.ModelledNs(Op::kErase, 0, 128 * 1024), 1100000000u);
  CHECK_EQ(Stm32h757InternalFlash(H7Parallelism::kX8).timing.program_unit_ns, 290000u);

  const NorFlashConfig q = NiclaVisionQspiFlash();
  CHECK_EQ(q.geometry.total_size, 16u * 1024 * 1024);
  CHECK_EQ(q.geometry.erase_size, 4096u);
  SimBox bq(Resized(q, 64 * 1024));
  CHECK_OK(bq.sim.Init());
  // One page at 40 MHz, 1-1-1: 640 us (SFDP) + 40 clocks + 256 x 8 clocks.
  CHECK_EQ(bq.sim.ModelledNs(Op::kProgram, 0, 256), 640000u + 1000u + 51200u);
  // Unaligned 256 bytes touch two pages.
  CHECK_EQ(bq.sim.ModelledNs(Op::kProgram, 128, 256), 2u * 641000u + 51200u);
  CHECK_EQ(bq.sim.ModelledNs(Op::kRead, 0, 1000), 500u + 50000u);
  CHECK_EQ(bq.sim.ModelledNs(Op::kErase, 0, 8192), 2u * 64000000u);
  uint8_t page[256];
  std::memset(page, 0, sizeof(page));
  CHECK_OK(bq.sim.Program(0, page, 256));
  CHECK_EQ(bq.sim.access_stats().program_ns, 692200u);
  CHECK_OK(bq.sim.Erase(0, 4096));
  CHECK_EQ(bq.sim.erase_stats().erase_ns, 64000000u);
  CHECK_EQ(bq.sim.BankOf(60000), 0u);
}

TINYTEST_MAIN("block_device")
