#!/usr/bin/env bash
# Installs the dependencies, configures build/ (clang + Ninja) when needed,
# and builds the given targets (everything when none are given) with -j2.
# Idempotent: on a built tree it only checks, in a few seconds.
# Usage: deploy/build.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh

build_dir=build
cache="$build_dir/CMakeCache.txt"
# A build/ made by another generator or compiler cannot be reused: start over.
if [ -f "$cache" ] &&
  ! { grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache" &&
    grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$cache"; }; then
  echo "build: $build_dir/ was configured differently; reconfiguring from scratch"
  rm -rf "$build_dir"
fi
if [ ! -f "$build_dir/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja
fi

targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j2 "${targets[@]}"
