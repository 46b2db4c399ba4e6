#!/usr/bin/env bash
# install.example: `cmake --install` into a temporary prefix installs kilnd,
# kiln, the client headers and libraries, KilnConfig.cmake and kiln.pc; an
# outside project (example/) builds against that prefix with
# find_package(Kiln CONFIG) and with pkg-config, and runs: a clean error with
# no daemon, and a Capabilities call to the installed kilnd.
# Usage: check_install.sh BUILD_DIR CXX_COMPILER GENERATOR
set -euo pipefail
build=$1 cxx=$2 generator=$3
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=../support/kilnd_test_lib.sh
source "$here/../support/kilnd_test_lib.sh"
kiln_test_setup install

prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" ||
  { cat "$tmp/install.log" >&2; fail "cmake --install"; }

config=$(find "$prefix" -path '*/cmake/Kiln/KilnConfig.cmake')
pc=$(find "$prefix" -path '*/pkgconfig/kiln.pc')
for f in "$prefix/bin/kilnd" "$prefix/bin/kiln" \
         "$prefix/include/kiln/client/client.h" \
         "$prefix/include/kiln/client/kiln.h" \
         "$prefix/include/kiln/runtime/launch_args.h" \
         "$prefix/include/kiln/proto/kiln.pb.h" "$config" \
         "$(dirname "$config")/KilnConfigVersion.cmake" "$pc"; do
  [ -f "$f" ] || fail "not installed: ${f:-KilnConfig.cmake or kiln.pc}"
done
libdir=$(dirname "$(dirname "$pc")")
for lib in libkiln_client.a libkiln_proto.a libkiln_runtime.a libkiln.so; do
  [ -f "$libdir/$lib" ] || fail "not installed: $libdir/$lib"
done
echo "ok: installed under $prefix"

# 1. find_package(Kiln CONFIG REQUIRED).
cmake -S "$here/example" -B "$tmp/example" -G "$generator" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_STANDARD=20 \
  -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log" >&2; fail "configuring the example"; }
cmake --build "$tmp/example" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log" >&2; fail "building the example with CMake"; }
"$tmp/example/kiln_example" || fail "example (CMake build), no daemon"

# 2. pkg-config --cflags --libs kiln.
pc_dir=$(dirname "$pc")
export PKG_CONFIG_PATH="$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# shellcheck disable=SC2046  # word splitting of the flags is wanted
"$cxx" -std=c++20 -o "$tmp/example_pc" "$here/example/main.cc" \
  $(pkg-config --cflags --libs kiln) ||
  fail "building the example with pkg-config"
"$tmp/example_pc" || fail "example (pkg-config build), no daemon"

# 3. Both against the installed kilnd.
sock="$tmp/run/kilnd.sock"
start_kilnd "$tmp/kilnd.log" "$prefix/bin/kilnd" --socket "$sock" \
  --cache-dir "$tmp/cache"
"$tmp/example/kiln_example" "unix:$sock" || fail "example (CMake build) vs kilnd"
"$tmp/example_pc" "unix:$sock" || fail "example (pkg-config build) vs kilnd"
"$prefix/bin/kiln" status --address "unix:$sock" || fail "installed kiln status"
stop_kilnd "$tmp/kilnd.log"
echo "ok: installed client, kiln and kilnd work together"
