#!/usr/bin/env bash
# One GPU run for one kernel family: its GPU corpus cases on sm_90a and
# sm_90, its Python DSL tests against torch, then its bench script.
#   bash bench/gpu/run_kernel.sh CORPUS_FILTER PYTEST_K BENCH.py [ARGS...]
# e.g. bash bench/gpu/run_kernel.sh '*mla*' mla bench/gpu/mla.py quick
# Run from the repository root on the GPU machine after
# `source .gpu/unpack.sh` (bundle: gpu_corpus_tests, libkiln.so,
# kiln-bench-worker). Prints the bench table last.
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 CORPUS_FILTER PYTEST_K BENCH.py [ARGS...]" >&2
  exit 2
fi
filter=$1 pyk=$2 bench=$3
shift 3
cd "$(dirname "$0")/../.."
export KILN_CORPUS_DIR="$PWD/tests/compiler/corpus"
lib=$(command -v libkiln.so 2>/dev/null || find /tmp/gpu-bundle -name libkiln.so | head -1)
export KILN_LIBRARY=$lib
for target in sm_90a sm_90; do
  echo "== GPU corpus $filter on $target"
  KILN_GPU_TARGET=$target gpu_corpus_tests --gtest_color=no --gtest_filter="$filter" 2>&1 |
    grep -E "^\[  (PASSED|FAILED|  OK) |Failure|first difference" | head -20
done
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_python_gpu.py -k "$pyk" 2>&1 | tail -5
python3 "$bench" "$@"
