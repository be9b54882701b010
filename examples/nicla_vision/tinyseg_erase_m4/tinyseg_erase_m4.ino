// TinySeg on the Arduino Nicla Vision, Cortex-M4: the asynchronous block
// erase worker of paper section 5.2. Build it for "M4 Co-processor" with the
// "1MB M7 + 1MB M4" flash split, and with the same storage choice as the M7
// sketch (tinyseg_unet_m7/tinyseg_config.h).
//
// The M7 queues sector erases in a ring in SRAM4 and keeps computing; this
// core erases them one by one, holding the bank's hardware semaphore while
// it does, and publishes a completed-ticket counter the M7 polls.
#define TINYSEG_STORAGE_INTERNAL 1
#define TINYSEG_STORAGE_QSPI 2
#define TINYSEG_STORAGE_REMOTE 3
#ifndef TINYSEG_STORAGE
#define TINYSEG_STORAGE TINYSEG_STORAGE_INTERNAL  // must match the M7 sketch
#endif

#include <Arduino.h>
#include <RPC.h>

#include "tinyseg_nicla/hsem_ring_platform.h"
#include "tinyseg_nicla/internal_flash_block_device.h"
#include "tinyseg_nicla/m4_erase_worker.h"
#include "tinyseg_nicla/nicla_layout.h"
#include "tinyseg_nicla/qspi_flash_block_device.h"

#if TINYSEG_STORAGE == TINYSEG_STORAGE_INTERNAL
tinyseg_nicla::InternalFlashBlockDevice device;  // this core's own FlashIAP
tinyseg_nicla::HsemRingPlatform platform(tinyseg_nicla::kHsemInternalBase);
#elif TINYSEG_STORAGE == TINYSEG_STORAGE_QSPI
tinyseg_nicla::QspiFlashBlockDevice device;  // this core's own QSPIF driver
tinyseg_nicla::HsemRingPlatform platform(tinyseg_nicla::kHsemQspi);
#endif

void setup() {
  RPC.begin();  // the M7's RPC.begin() waits for this core's endpoints
#if TINYSEG_STORAGE == TINYSEG_STORAGE_INTERNAL || TINYSEG_STORAGE == TINYSEG_STORAGE_QSPI
  platform.Init();
#if TINYSEG_STORAGE == TINYSEG_STORAGE_QSPI
  // The QSPI driver's init talks to the chip: keep the M7 off it meanwhile.
  platform.LockBank(0);
  const tinyseg::Status s = device.Init();
  platform.UnlockBank(0);
#else
  // Also checks that this image ends below the spill region.
  const tinyseg::Status s = device.Init();
#endif
  if (!tinyseg::Ok(s)) {
    RPC.print("tinyseg M4: storage init failed: ");
    RPC.println(tinyseg::StatusName(s));
    return;  // the M7 times out waiting for the worker and says so
  }
  tinyseg_nicla::RunEraseWorker(device, platform);  // never returns
#endif
}

void loop() { delay(1000); }  // remote storage: nothing to erase
