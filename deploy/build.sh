#!/usr/bin/env bash
# Installs the dependencies, configures build/ (clang + Ninja) when needed,
# and builds the given targets (everything when none are given) with -j2.
# Idempotent: on a built tree it only checks, in a few seconds.
# Usage: deploy/build.sh [TARGET...]
# KILN_COMPILER=gcc builds with Debian's g++ instead, into build/gcc/ (or
# KILN_BUILD_DIR); tests/run.sh builds and tests both.
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh

compiler=${KILN_COMPILER:-clang}
case $compiler in
  clang) cc=clang cxx=clang++ default_dir=build ;;
  gcc) cc=gcc cxx=g++ default_dir=build/gcc ;;
  *) echo "build: KILN_COMPILER must be clang or gcc, not '$compiler'" >&2; exit 2 ;;
esac
build_dir=${KILN_BUILD_DIR:-$default_dir}
cache="$build_dir/CMakeCache.txt"
# A build directory made by another generator or compiler cannot be reused:
# start over.
if [ -f "$cache" ] &&
  ! { grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache" &&
    grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=.*/$cxx\$" "$cache"; }; then
  echo "build: $build_dir/ was configured differently; reconfiguring from scratch"
  rm -rf "$build_dir"
fi
if [ ! -f "$build_dir/build.ninja" ]; then
  CC=$cc CXX=$cxx cmake -S . -B "$build_dir" -G Ninja
fi

targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j2 "${targets[@]}"
