#!/usr/bin/env bash
# `make test`: the whole suite.
#   1. Debian packages the native and TFLM tests need (scripts/install-native-deps.sh; root only,
#      waits for a busy dpkg lock).
#   2. TFLM_DIR, TFLITE_TOOLS_DIR, ARDUINO_MBED_CORE_DIR from ../shared/third_party unless set
#      (scripts/third-party-env.sh; build folder outside the source tree); with those, also
#      TINYSEG_FORK_PROBE (the Arduino library built on the host). TINYSEG_CACHE_DIR (the
#      real-kernel check's TFLM build) defaults to the build folder.
#   3. The style check (scripts/style.sh: ruff, clang-format).
#   4. The C++ core (tflm_ops/run_tests.sh), built in $TINYSEG_BUILD_ROOT/native.
#   5. The Python suite (pytest), whatever steps 3 and 4 gave: the arena probes first, then the
#      rest on pytest-xdist workers.
# Exit status: non-zero when either suite failed (or step 2 failed).
# Environment: PYTHON_BIN (default .venv/bin/python), PYTEST_ARGS (extra pytest arguments),
#   PYTEST_WORKERS (pytest-xdist workers for all but the arena probes; default 2, 0 for none).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
py="${PYTHON_BIN:-$repo/.venv/bin/python}"
export TINYSEG_BUILD_ROOT="${TINYSEG_BUILD_ROOT:-$(cd "$repo/.." && pwd)/.tinyseg-build/$(basename "$repo")}"
t0=$(date +%s)

bash scripts/install-native-deps.sh || echo "test: installing Debian packages failed; tests needing them will skip or fail" >&2

env_rc=0
tp_env=$(bash scripts/third-party-env.sh) || env_rc=$?
if [ "$env_rc" -ne 0 ]; then
  echo "test: unpacking the third-party snapshots failed (exit $env_rc)" >&2
else
  eval "$tp_env"
  if [ -n "$tp_env" ]; then
    # The Arduino library's TFLM built on the host for the `arduino` runtime profile's check
    # (tests/test_runtime_profiles.py), kept in the build folder so a second run reuses it.
    export TINYSEG_FORK_PROBE="${TINYSEG_FORK_PROBE:-$TINYSEG_BUILD_ROOT/arduino-probe}"
  fi
fi
# The suite builds TFLM several times (reference and CMSIS-NN kernels, host and Cortex-M7, each in
# its own gen folder). Through ccache in preprocessor mode, a file whose preprocessed text is the
# same in two builds is compiled once: -D and -I flags that do not change the text do not count,
# and TFLM's make passes paths relative to the tree, so copies of a tree share too. No base_dir:
# absolute paths stay absolute, so a compiler warning still names the file the way the tests that
# attribute warnings expect. In front of g++ and arm-none-eabi-g++, scripts/tflm-pch-cxx.sh gives
# each TFLM source TFLM's make compiles a precompiled header of the flatbuffers schema, which is
# most of what the compiler reads (a third of the time per source; the same objects).
cc_bin="$TINYSEG_BUILD_ROOT/compilers"
mkdir -p "$cc_bin"
if command -v ccache >/dev/null 2>&1; then
  for c in gcc cc c++ arm-none-eabi-gcc; do
    ln -sf "$(command -v ccache)" "$cc_bin/$c"
  done
  export CCACHE_DIR="${CCACHE_DIR:-$TINYSEG_BUILD_ROOT/ccache}"
  export CCACHE_NODIRECT=1 CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=10G
  ccache -z >/dev/null
fi
for c in g++ arm-none-eabi-g++; do
  ln -sf "$repo/scripts/tflm-pch-cxx.sh" "$cc_bin/$c"
done
export PATH="$cc_bin:$PATH" TINYSEG_PCH_DIR="${TINYSEG_PCH_DIR:-$TINYSEG_BUILD_ROOT/pch}"
rm -rf "$TINYSEG_PCH_DIR/memo"  # the header texts it remembers are for this run's trees
# The real-kernel check's cached TFLM build goes to the build folder, not ~/.cache: each clone
# starts from its own, so the suite measures what a fresh machine does.
export TINYSEG_CACHE_DIR="${TINYSEG_CACHE_DIR:-$TINYSEG_BUILD_ROOT/cache}"

# The Arduino library's TFLM (tests/test_runtime_profiles.py) builds on its own tree, apart from
# every other build: start it now, at the lowest priority, so it fills the core the Python suite's
# single-threaded tests leave idle; the test waits for it (a lock in the build folder).
if [ -n "${TINYSEG_FORK_PROBE:-}" ] && [ "$TINYSEG_FORK_PROBE" != 1 ]; then
  tp="${TINYSEG_THIRD_PARTY:-$repo/../shared/third_party}"
  mkdir -p "$TINYSEG_FORK_PROBE"
  (
    src=$(bash "$tp/unpack.sh" tflite-micro-arduino-examples-7948b85 "$TINYSEG_FORK_PROBE") &&
      nice -n 19 "$py" tests/fork_probe/build_fork_probe.py "$src/src" "$TINYSEG_FORK_PROBE/build"
  ) >"$TINYSEG_BUILD_ROOT/fork-probe-build.log" 2>&1 &
fi

echo "=== style (scripts/style.sh)"
PYTHON_BIN="$py" bash scripts/style.sh
style_rc=$?

echo "=== native suite (tflm_ops/run_tests.sh)"
t1=$(date +%s)
TINYSEG_BUILD_DIR="${TINYSEG_BUILD_DIR:-$TINYSEG_BUILD_ROOT/native}" bash tflm_ops/run_tests.sh
native_rc=$?
t2=$(date +%s)

echo "=== Python suite (pytest)"
# Temporary files (copies of the TFLM and tflite-tools trees) under the build folder: pytest
# empties it at the start of each run, and no other pytest run on the machine rotates it away.
# First the arena probes, alone: they build TFLM's microlite in TFLM_DIR/gen/ for each kernel set and
# target with make -j2, and every later copy of TFLM_DIR keeps those objects (tests/conftest.py).
# Then the rest on two pytest-xdist workers, a test file to a worker, so the core a single-threaded
# test leaves idle runs the next file. PYTEST_WORKERS=0 runs them in this process.
builds=(
  "tests/test_kernel_rules.py::test_cmsis_nn_head_matches_real_builds"
  "tests/test_kernel_rules.py::test_reference_tail_matches_real_builds"
)
deselect=()
for b in "${builds[@]}"; do deselect+=(--deselect "$b"); done
"$py" -m pytest -q -rfEs --basetemp="$TINYSEG_BUILD_ROOT/pytest-builds" "${builds[@]}"
builds_rc=$?
workers="${PYTEST_WORKERS:-2}"
xdist=()
if [ "$workers" != 0 ]; then xdist=(-n "$workers" --dist loadfile); fi
# shellcheck disable=SC2086
"$py" -m pytest -q -rfEs --durations=15 --basetemp="$TINYSEG_BUILD_ROOT/pytest" "${xdist[@]}" \
  "${deselect[@]}" ${PYTEST_ARGS:-}
python_rc=$?
[ "$builds_rc" -eq 0 ] || python_rc=$builds_rc
t3=$(date +%s)

echo
echo "=== make test summary"
printf 'style         exit %s\n' "$style_rc"
printf 'native suite  exit %s  %5ss\n' "$native_rc" $((t2 - t1))
printf 'python suite  exit %s  %5ss\n' "$python_rc" $((t3 - t2))
printf 'total wall time       %5ss\n' $((t3 - t0))
command -v ccache >/dev/null 2>&1 && ccache -s | grep -Ei "hits|misses" | sed 's/^/ccache: /' 
[ "$env_rc" -eq 0 ] && [ "$style_rc" -eq 0 ] && [ "$native_rc" -eq 0 ] && [ "$python_rc" -eq 0 ]
