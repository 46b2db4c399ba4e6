#!/usr/bin/env bash
# One GPU run for the MLA decode work (issue 26): the GPU corpus cases of
# mla_decode.tile on sm_90a and sm_90, the Python DSL kernel against torch,
# then bench/gpu/mla.py. Run from the repository root on the GPU machine
# after `source .gpu/unpack.sh` (bundle: gpu_corpus_tests, libkiln.so,
# kiln-bench-worker). Prints the bench table last.
set -uo pipefail
cd "$(dirname "$0")/../.."
export KILN_CORPUS_DIR="$PWD/tests/compiler/corpus"
lib=$(command -v libkiln.so 2>/dev/null || find /tmp/gpu-bundle -name libkiln.so | head -1)
export KILN_LIBRARY=$lib
gpu_corpus_tests --gtest_color=no --gtest_filter='*mla*' 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK) |Failure|first difference" | head -20
KILN_GPU_TARGET=sm_90 gpu_corpus_tests --gtest_color=no --gtest_filter='*mla*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |Failure|first difference" | head -20
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_python_gpu.py -k mla 2>&1 | tail -5
python3 bench/gpu/mla.py "$@"
