#!/usr/bin/env bash
# Prints `export VAR=PATH` lines for the third-party trees the tests need, unpacked from the
# pinned snapshots in ../shared/third_party (see its README.md) into a build folder outside
# the source tree. Use: eval "$(bash scripts/third-party-env.sh)".
#
#   TFLM_DIR               tflm-90b983c               (TFLM tests, arena probes, Nicla kernels)
#   TFLITE_TOOLS_DIR       tflite-tools-08709f1       (tflite-tools patch tests)
#   ARDUINO_MBED_CORE_DIR  arduino-mbed-core-b4ad4e7  (Nicla Vision compile checks)
#
# A variable the user has set already is left alone (their tree wins) and nothing is
# unpacked for it. Without ../shared/third_party nothing is printed: those tests skip, each
# with its reason. Where things go:
#   TINYSEG_THIRD_PARTY   the snapshot folder (default: <repo>/../shared/third_party)
#   TINYSEG_BUILD_ROOT    the build folder (default: <repo>/../.tinyseg-build/<repo folder name>);
#                         the trees go to $TINYSEG_BUILD_ROOT/third_party. The arena probe builds
#                         TFLM in TFLM_DIR/gen/, so a second run reuses those objects.
# Messages go to stderr; a snapshot that fails its checksum is an error (exit 1).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tp="${TINYSEG_THIRD_PARTY:-$repo/../shared/third_party}"
build_root="${TINYSEG_BUILD_ROOT:-$(cd "$repo/.." && pwd)/.tinyseg-build/$(basename "$repo")}"

if [ ! -x "$tp/unpack.sh" ] && [ ! -f "$tp/unpack.sh" ]; then
  echo "third-party-env: no $tp/unpack.sh: tests needing TFLM, tflite-tools or the Arduino Mbed core skip" >&2
  exit 0
fi
tp=$(cd "$tp" && pwd)
dest="$build_root/third_party"

for pair in TFLM_DIR=tflm-90b983c TFLITE_TOOLS_DIR=tflite-tools-08709f1 \
            ARDUINO_MBED_CORE_DIR=arduino-mbed-core-b4ad4e7; do
  var=${pair%%=*}
  name=${pair#*=}
  if [ -n "${!var:-}" ]; then
    echo "third-party-env: $var=${!var} (set by the user, kept)" >&2
    continue
  fi
  path=$(bash "$tp/unpack.sh" "$name" "$dest")
  echo "third-party-env: $var=$path" >&2
  printf 'export %s=%q\n' "$var" "$path"
done
