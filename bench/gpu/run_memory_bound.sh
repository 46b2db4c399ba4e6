#!/usr/bin/env bash
# One GPU run for the memory-bound TileLang examples (issue 27): the GPU
# corpus on sm_90a and sm_90, the Python DSL tests of norms and softmax
# against torch, then bench/gpu/memory_bound.py with the bundled libkiln
# and, when the bundle has oldlib/libkiln.so (a build before a change),
# with that one first: before and after on one machine in one call.
# Run from the repository root on the GPU machine after
# `source .gpu/unpack.sh`. Prints the bench tables last.
set -uo pipefail
cd "$(dirname "$0")/../.."
export KILN_CORPUS_DIR="$PWD/tests/compiler/corpus"
lib=$(ls /tmp/gpu-bundle/lib*/libkiln.so* | head -1)
export KILN_BENCH_WORKER="$(command -v kiln-bench-worker || true)"
for target in sm_90a sm_90; do
  echo "== GPU corpus on $target"
  KILN_GPU_TARGET=$target gpu_corpus_tests --gtest_color=no 2>&1 |
    grep -E "^\[  (PASSED|FAILED) |Failure|first difference" | head -20
done
KILN_LIBRARY=$lib python3 -m pytest -q -p no:cacheprovider \
  tests/gpu/test_python_gpu.py -k "${KILN_PYTEST_K:-norm or softmax}" 2>&1 | tail -5
old=/tmp/gpu-bundle/oldlib/libkiln.so
if [ -f "$old" ]; then
  echo "== before (oldlib)"
  KILN_LIBRARY=$old python3 bench/gpu/memory_bound.py "$@" | sed -n '/^| case/,$p'
fi
echo "== after"
KILN_LIBRARY=$lib python3 bench/gpu/memory_bound.py "$@" | sed -n '/^| case/,$p'
