#!/usr/bin/env bash
# Installs every build and test dependency of Kiln from Debian 12 packages.
# Idempotent: when everything is present it only checks and returns (about a second).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev
  llvm-14-dev liblld-14-dev libz3-dev
  libsqlite3-dev libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev
  libhiredis-dev libssl-dev libzstd-dev zlib1g-dev
  redis-server openssl
  clang clang-format libclang-rt-14-dev
  python3 python3-numpy python3-pytest python3-yaml python3-torch
  libamdhip64-dev libhiprtc-builtins5
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
