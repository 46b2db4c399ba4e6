#!/usr/bin/env bash
# The single test command: installs the dependencies, builds everything into
# build/ (clang, Ninja, -j2) and runs every test with CTest; then builds the
# same tree with Debian's g++ into build/gcc/ and runs every test there too
# (the tree must build and pass with both compilers; KILN_SKIP_GCC=1 skips
# the g++ pass, saying so, for a quicker local run). The last lines printed
# are CTest's summaries; the exit status is non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# run_ctest DIR: every test of the tree in DIR; its summary in $DIR/summary.
run_ctest() {
  local dir=$1 status
  set +e
  (cd "$dir" && ctest --output-on-failure 2>&1 | tee ctest.log; exit "${PIPESTATUS[0]}")
  status=$?
  set -e
  # CTest prints its timing after the summary; keep the summary for the end.
  grep -E '^[0-9]+% tests passed' "$dir/ctest.log" | tail -n 1 >"$dir/summary" || true
  return "$status"
}

bash deploy/build.sh
clang_status=0
run_ctest build || clang_status=$?

gcc_status=0
if [ "${KILN_SKIP_GCC:-0}" = 1 ]; then
  echo "g++: skipped (KILN_SKIP_GCC=1)" >build/gcc-summary
else
  if KILN_COMPILER=gcc bash deploy/build.sh; then
    run_ctest build/gcc || gcc_status=$?
    echo "g++: $(cat build/gcc/summary)" >build/gcc-summary
  else
    gcc_status=1
    echo "g++: the build failed" >build/gcc-summary
  fi
fi
echo
echo "clang: $(cat build/summary)"
cat build/gcc-summary
[ "$clang_status" -eq 0 ] && [ "$gcc_status" -eq 0 ]
