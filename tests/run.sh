#!/usr/bin/env bash
# The single test command: installs the dependencies, builds everything into
# build/ (clang, Ninja, -j2) and runs every test with CTest. The last line
# printed is CTest's summary; the exit status is non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/build.sh

cd build
set +e
ctest --output-on-failure 2>&1 | tee ctest.log
status=${PIPESTATUS[0]}
set -e
# CTest prints its timing after the summary; repeat the summary last.
echo
grep -E '^[0-9]+% tests passed' ctest.log | tail -n 1
exit "$status"
