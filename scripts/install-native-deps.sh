#!/usr/bin/env bash
# Debian packages the native (C++) tests need: host build, sanitizers, libFuzzer,
# the Cortex-M7 cross toolchain and qemu-system-arm (mps2-an500). Installs only what is missing;
# without root it says what to install and leaves tflm_ops/run_tests.sh to skip those steps.
set -eu
pkgs="cmake make g++ clang libclang-rt-14-dev gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-native-deps: not root (or no apt-get); missing:$missing" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
