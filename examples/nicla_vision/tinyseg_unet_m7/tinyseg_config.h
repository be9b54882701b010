// Build-time choices of the TinySeg Nicla Vision example (Cortex-M7 sketch).
// The M4 sketch (tinyseg_erase_m4) must be built with the same
// TINYSEG_STORAGE and TINYSEG_ASYNC_ERASE.
#ifndef TINYSEG_EXAMPLE_CONFIG_H_
#define TINYSEG_EXAMPLE_CONFIG_H_

#define TINYSEG_STORAGE_INTERNAL 1  // bank 2 of the STM32H747 flash (paper: "internal")
#define TINYSEG_STORAGE_QSPI 2      // 16 MB AT25QL128A QSPI NOR (paper: "external")
#define TINYSEG_STORAGE_REMOTE \
  3  // a host over the USB serial (paper: "remote"), `tinyseg remote-host`

#ifndef TINYSEG_STORAGE
#define TINYSEG_STORAGE TINYSEG_STORAGE_INTERNAL
#endif

// 1: the M4 erases flash sectors in the background (paper section 5.2);
// 0: the M7 erases synchronously. Ignored for remote storage (no erase).
#ifndef TINYSEG_ASYNC_ERASE
#define TINYSEG_ASYNC_ERASE 1
#endif

// Remote spilling link (USB CDC ignores the baud rate; a UART does not).
#ifndef TINYSEG_REMOTE_BAUD
#define TINYSEG_REMOTE_BAUD 921600
#endif
#ifndef TINYSEG_REMOTE_TIMEOUT_MS
#define TINYSEG_REMOTE_TIMEOUT_MS 1000
#endif
#ifndef TINYSEG_REMOTE_PAYLOAD
#define TINYSEG_REMOTE_PAYLOAD 4096  // bytes per frame; the host accepts up to 4096
#endif

#ifndef TINYSEG_INFERENCES
#define TINYSEG_INFERENCES 10  // timed inferences after one warm-up
#endif

// 1: the model is written with --stream-io and its frame comes from the camera row by row
// (camera_row_source.h: DCMI line ring, compiled but not yet run on a board), its mask goes to
// Serial row by row; 0: a generated frame in the input tensor.
#ifndef TINYSEG_CAMERA
#define TINYSEG_CAMERA 0
#endif
#define TINYSEG_CAMERA_SENSOR_WIDTH 160  // what TinySegCameraInit sets the GC2145 to
#define TINYSEG_CAMERA_SENSOR_HEIGHT 120
#define TINYSEG_CAMERA_WIDTH 120  // the model's input, cropped from the sensor's centre
#define TINYSEG_CAMERA_HEIGHT 80
#ifndef TINYSEG_CAMERA_SWAP_BYTES
#define TINYSEG_CAMERA_SWAP_BYTES 0  // 1 when the sensor sends RGB565's low byte first
#endif

#endif  // TINYSEG_EXAMPLE_CONFIG_H_
