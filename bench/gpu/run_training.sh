#!/usr/bin/env bash
# One GPU run for the training path (issue 30): the GPU corpus on sm_90a
# and sm_90 (failures only, then the totals), the Python GPU tests of the backward
# kernels against torch autograd, then bench/gpu/attention_bwd.py (pass
# "quick" for two shapes). Run from the repository root on the GPU machine
# after `source .gpu/unpack.sh`; prints the bench table last.
set -uo pipefail
cd "$(dirname "$0")/../.."
export KILN_CORPUS_DIR="$PWD/tests/compiler/corpus"
export KILN_LIBRARY=$(ls /tmp/gpu-bundle/lib*/libkiln.so* | head -1)
export KILN_BENCH_WORKER="$(command -v kiln-bench-worker || true)"
for target in sm_90a sm_90; do
  echo "== GPU corpus on $target"
  KILN_GPU_TARGET=$target gpu_corpus_tests --gtest_color=no 2>&1 |
    grep -E "^\[  (PASSED|FAILED) |Failure|first difference|error" | head -20
done
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_python_gpu.py \
  -k "${KILN_PYTEST_K:-backward or float64 or tilelang_mha or cross_entropy}" 2>&1 |
  grep -E "passed|failed|Error|assert" | tail -12
echo "== attention backward"
python3 bench/gpu/attention_bwd.py "$@" 2>&1 | grep -v "^(" | tail -40
