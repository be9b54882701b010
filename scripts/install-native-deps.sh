#!/usr/bin/env bash
# Debian packages the whole suite needs: python3-venv (make setup, the tflite-tools test's
# venv), git, patch and xz-utils (the third-party snapshots and patches), host build, ccache (the
# TFLM builds of one run share objects), sanitizers,
# libFuzzer, the Cortex-M7 cross toolchain (gcc-arm-none-eabi with newlib and its libstdc++),
# clang-format (the style check), qemu-system-arm (mps2-an500 runs of the core tests) and qemu-user 10 from bookworm-backports
# (qemu-arm runs TFLM's cortex_m_qemu tests; Debian 12's own qemu-arm 7.2 aborts on them).
# Installs only what is missing; adds the bookworm-backports source itself when needed.
# A busy package manager (another apt-get holding the dpkg lock) is waited for, not failed on.
# Without root (or without apt-get) it says what is missing and exits 0: the tests that need
# those tools then skip, each with its reason.
set -eu

pkgs="python3-venv git patch xz-utils cmake make g++ ccache clang clang-format libclang-rt-14-dev gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm"
qemu_user_major=10

missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

# qemu-user: version 10 or newer (bookworm-backports), not Debian 12's 7.2.
qemu_ok() {
  command -v qemu-arm >/dev/null 2>&1 || return 1
  local v
  v=$(qemu-arm --version 2>/dev/null | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p' | head -n1)
  [ -n "$v" ] && [ "$v" -ge "$qemu_user_major" ]
}
need_qemu_user=0
qemu_ok || need_qemu_user=1

[ -z "$missing" ] && [ "$need_qemu_user" = 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  [ "$need_qemu_user" = 1 ] && missing="$missing qemu-user(>=$qemu_user_major, bookworm-backports)"
  echo "install-native-deps: not root (or no apt-get); missing:$missing" >&2
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# Wait up to 10 minutes for another apt-get/dpkg to release its locks instead of failing.
APT_WAIT="-o DPkg::Lock::Timeout=600"

# apt-get update takes the lists lock; DPkg::Lock::Timeout covers it on apt >= 2.x, and the
# retry loop covers a lock held for longer or a transient mirror error.
apt_update() {
  local i
  for i in 1 2 3 4 5 6; do
    # shellcheck disable=SC2086
    if apt-get $APT_WAIT update -qq; then return 0; fi
    echo "install-native-deps: apt-get update failed (attempt $i), retrying in 20 s" >&2
    sleep 20
  done
  echo "install-native-deps: apt-get update kept failing" >&2
  return 1
}

apt_install() {  # apt_install [APT-GET OPTIONS] PACKAGES...
  local i
  for i in 1 2 3; do
    # shellcheck disable=SC2086
    if apt-get $APT_WAIT install -y -qq --no-install-recommends "$@" >/dev/null; then return 0; fi
    echo "install-native-deps: apt-get install $* failed (attempt $i), retrying in 20 s" >&2
    sleep 20
  done
  return 1
}

# bookworm-backports, in the style this machine's sources already use (deb822 .sources or
# one-line .list), unless some source already names it.
add_backports() {
  if grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    return 0
  fi
  if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
    cat > /etc/apt/sources.list.d/bookworm-backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  else
    echo "deb http://deb.debian.org/debian bookworm-backports main" \
      > /etc/apt/sources.list.d/bookworm-backports.list
  fi
  echo "install-native-deps: added the bookworm-backports apt source" >&2
}

if [ "$need_qemu_user" = 1 ]; then
  . /etc/os-release 2>/dev/null || true
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    add_backports
  fi
fi
apt_update
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086
  apt_install $missing
fi
if [ "$need_qemu_user" = 1 ]; then
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    apt_install -t bookworm-backports qemu-user
  else
    apt_install qemu-user
  fi
  if qemu_ok; then
    echo "install-native-deps: $(qemu-arm --version | head -n1)" >&2
  else
    echo "install-native-deps: qemu-arm is not version $qemu_user_major or newer: $(qemu-arm --version 2>&1 | head -n1)" >&2
  fi
fi
