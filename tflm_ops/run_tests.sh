#!/usr/bin/env bash
# Builds and tests the TinySeg runtime core in every configuration:
#   1. host          default C++ compiler, ctest
#   2. sanitize      ASan+UBSan (clang if it has its sanitizer runtime, else g++), ctest
#   3. tsan          ThreadSanitizer on the threaded erase-worker test
#   4. fuzz          libFuzzer codec target for TINYSEG_FUZZ_SECONDS (clang only)
#   5. cortex-m7     arm-none-eabi cross build, tests run in qemu-system-arm mps2-an500
# A step whose tools are missing is skipped with a message; any failure makes
# the script exit non-zero (after running the remaining steps).
#
# Environment: TINYSEG_BUILD_DIR (default: <this dir>/build),
#              TINYSEG_FUZZ_SECONDS (default 30), TINYSEG_JOBS (default 2).
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${TINYSEG_BUILD_DIR:-$here/build}"
jobs="${TINYSEG_JOBS:-2}"
fuzz_seconds="${TINYSEG_FUZZ_SECONDS:-30}"
mkdir -p "$build"

declare -a summary=()
failed=0

have() { command -v "$1" >/dev/null 2>&1; }

# run_step NAME CMD...: runs CMD, records status and wall time.
run_step() {
  local name="$1"; shift
  local t0 t1 rc
  echo "=== [$name] $*"
  t0=$(date +%s)
  "$@"
  rc=$?
  t1=$(date +%s)
  if [ "$rc" -eq 0 ]; then
    summary+=("$(printf '%-10s PASS  %4ss' "$name" $((t1 - t0)))")
  else
    summary+=("$(printf '%-10s FAIL  %4ss (exit %s)' "$name" $((t1 - t0)) "$rc")")
    failed=1
  fi
}

skip_step() {
  echo "=== [$1] SKIPPED: $2"
  summary+=("$(printf '%-10s SKIP  %s' "$1" "$2")")
}

configure_build_test() {  # DIR CTEST_ARGS CMAKE_ARGS...  (fresh build dir)
  local dir="$1" ctest_args="$2"; shift 2
  rm -rf "$dir"
  cmake -S "$here" -B "$dir" "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j "$jobs" || return 1
  # shellcheck disable=SC2086
  ctest --test-dir "$dir" --output-on-failure $ctest_args
}

# Can this clang compile and link with the given -fsanitize list?
clang_can() {
  local tmp
  tmp="$(mktemp -d)"
  printf '%s\n' 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
    > "$tmp/probe.cc"
  if [ "$1" != "fuzzer" ]; then printf 'int main() { return 0; }\n' >> "$tmp/probe.cc"; fi
  clang++ -fsanitize="$1" "$tmp/probe.cc" -o "$tmp/probe" >/dev/null 2>&1
  local rc=$?
  rm -rf "$tmp"
  return $rc
}

if ! have cmake || ! have ctest; then
  echo "cmake/ctest not found: install cmake" >&2
  exit 1
fi

# 1. host build with the default compiler.
if have c++ || have g++; then
  run_step host configure_build_test "$build/host" "" -DTINYSEG_FUZZ=OFF
  # The storage-fault suite's counts (ctest shows a passing test's output only on failure).
  if [ -x "$build/host/test_storage_faults" ]; then
    "$build/host/test_storage_faults" 2>/dev/null | grep -E "^(all devices|ram, checks off):" \
      | sed 's/^/storage faults, /' || true
  fi
else
  skip_step host "no host C++ compiler"
fi

# 2./4. sanitizer build (clang preferred: it also builds the fuzzer).
san_cc="" ; san_cxx="" ; fuzz=OFF
if have clang++ && clang_can address,undefined; then
  san_cc=clang ; san_cxx=clang++
  if clang_can fuzzer; then fuzz=ON; fi
elif have g++; then
  san_cc=gcc ; san_cxx=g++
fi
if [ -n "$san_cxx" ]; then
  san_step() (
    export CC="$san_cc" CXX="$san_cxx"
    configure_build_test "$build/asan" "-LE fuzz" -DTINYSEG_SANITIZE=address,undefined \
      -DTINYSEG_FUZZ="$fuzz" -DTINYSEG_FUZZ_SECONDS="$fuzz_seconds"
  )
  run_step sanitize san_step
else
  skip_step sanitize "no compiler with ASan/UBSan runtime"
fi

# 3. ThreadSanitizer on the one multi-threaded test.
if have g++ || have clang++; then
  tsan_step() {
    local dir="$build/tsan"
    rm -rf "$dir"
    cmake -S "$here" -B "$dir" -DTINYSEG_SANITIZE=thread -DTINYSEG_FUZZ=OFF \
      >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; return 1; }
    cmake --build "$dir" -j "$jobs" --target test_host_async || return 1
    TSAN_OPTIONS="halt_on_error=1" ctest --test-dir "$dir" --output-on-failure -R test_host_async
  }
  run_step tsan tsan_step
else
  skip_step tsan "no host compiler"
fi

# 4. fuzzer (built by the clang sanitizer build).
if [ "$fuzz" = ON ] && [ -x "$build/asan/fuzz_codec" ]; then
  run_step fuzz ctest --test-dir "$build/asan" --output-on-failure -L fuzz
elif [ "$fuzz" = ON ]; then
  run_step fuzz false  # sanitizer build failed before producing the fuzzer
else
  skip_step fuzz "clang with libFuzzer runtime not found (apt: clang libclang-rt-14-dev)"
fi

# 5. Cortex-M7 cross build, tests in QEMU.
if have arm-none-eabi-g++; then
  if have qemu-system-arm; then
    run_step cortex-m7 configure_build_test "$build/m7" "" \
      -DCMAKE_TOOLCHAIN_FILE="$here/cmake/arm-none-eabi-cortex-m7.cmake"
  else
    run_step cortex-m7-build bash -c "cmake -S '$here' -B '$build/m7' \
      -DCMAKE_TOOLCHAIN_FILE='$here/cmake/arm-none-eabi-cortex-m7.cmake' >/dev/null && cmake --build '$build/m7' -j $jobs"
    skip_step cortex-m7 "qemu-system-arm not found: cross build only, tests not run"
  fi
else
  skip_step cortex-m7 "arm-none-eabi-g++ not found (apt: gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib)"
fi

echo
echo "=== summary"
for line in "${summary[@]}"; do echo "$line"; done
exit $failed
