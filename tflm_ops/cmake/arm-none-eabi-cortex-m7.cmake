# Toolchain file: bare-metal Cortex-M7 with double-precision FPU (STM32H7 M7 core)
# using Debian's gcc-arm-none-eabi + libnewlib-arm-none-eabi.
#
#   cmake -S tflm_ops -B build/m7 -DCMAKE_TOOLCHAIN_FILE=tflm_ops/cmake/arm-none-eabi-cortex-m7.cmake
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(TINYSEG_ARM_PREFIX arm-none-eabi- CACHE STRING "Cross tool prefix")
set(CMAKE_C_COMPILER ${TINYSEG_ARM_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${TINYSEG_ARM_PREFIX}g++)
set(CMAKE_ASM_COMPILER ${TINYSEG_ARM_PREFIX}gcc)
set(CMAKE_AR ${TINYSEG_ARM_PREFIX}ar CACHE FILEPATH "")
set(CMAKE_RANLIB ${TINYSEG_ARM_PREFIX}ranlib CACHE FILEPATH "")
set(CMAKE_OBJCOPY ${TINYSEG_ARM_PREFIX}objcopy CACHE FILEPATH "")
set(CMAKE_SIZE ${TINYSEG_ARM_PREFIX}size CACHE FILEPATH "")

# No OS: compiler checks link a static library instead of an executable.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(TINYSEG_M7_FLAGS "-mcpu=cortex-m7 -mthumb -mfpu=fpv5-d16 -mfloat-abi=hard -ffunction-sections -fdata-sections")
set(CMAKE_C_FLAGS_INIT "${TINYSEG_M7_FLAGS}")
set(CMAKE_CXX_FLAGS_INIT "${TINYSEG_M7_FLAGS} -fno-exceptions -fno-rtti -fno-threadsafe-statics")
set(CMAKE_ASM_FLAGS_INIT "${TINYSEG_M7_FLAGS}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${TINYSEG_M7_FLAGS}")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
