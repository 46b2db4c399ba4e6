#!/usr/bin/env bash
# Runs the GPU tests on the GPU machine from the bundle (builds nothing):
#   here:  cmake --build build --target gpu_corpus_tests client_gpu_tests kilnd
#          ../shared/tools/gpu-bundle.sh .gpu build/tests/gpu/gpu_corpus_tests \
#            build/tests/gpu/client_gpu_tests build/server/kilnd
#   there: source .gpu/unpack.sh && tests/gpu/run.sh
# Prints device discovery, one line per failing or skipped case and the
# GPU-vs-CPU table; exits non-zero when a case fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
export KILN_CORPUS_DIR="$PWD/tests/compiler/corpus"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
log=${TMPDIR:-/tmp}/kiln_gpu_tests.log
gpu_corpus_tests --gtest_color=no "$@" > "$log" 2>&1
rc=$?
grep -E "^device |Failure|first difference|Skipped|^\[  (FAILED|SKIPPED) " "$log" | head -60
sed -n '/^kernel  /,/^GPU vs CPU/p' "$log"
grep -E "^\[  PASSED|^\[==========\]|FAILED TEST" "$log"
# On Hopper the default target is sm_90a (wgmma); the sm_80-style path
# (mma.sync) runs there too, as sm_90.
if nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | grep -q '^9\.'; then
  KILN_GPU_TARGET=sm_90 gpu_corpus_tests --gtest_color=no "$@" > "$log.sm90" 2>&1
  sm90_rc=$?
  grep -E "Failure|first difference|^\[  FAILED " "$log.sm90" | head -30
  sed -n '/^kernel  /,/^GPU vs CPU/p' "$log.sm90" | tail -3
  grep -E "^\[  PASSED|FAILED TEST" "$log.sm90"
  [ "$sm90_rc" -eq 0 ] || rc=$sm90_rc
fi

# The C++ client through kilnd (when bundled): compile the GEMM for the GPU,
# launch it from the client, check it.
if command -v client_gpu_tests >/dev/null && command -v kilnd >/dev/null; then
  export KILN_KILND="$(command -v kilnd)"
  client_gpu_tests --gtest_color=no > "$log.client" 2>&1
  client_rc=$?
  grep -E "^gpu |^gemm |Failure|Skipped|^\[  (PASSED|FAILED|SKIPPED) " "$log.client" | head -20
  [ "$client_rc" -eq 0 ] || rc=$client_rc
fi

# The Python package against torch on CUDA (when libkiln is bundled and
# python3 has torch).
lib=$(ls /tmp/gpu-bundle/lib*/libkiln.so* 2>/dev/null | head -1)
# Tuning from Python (embedded) runs the bundled benchmark worker.
if command -v kiln-bench-worker >/dev/null; then
  export KILN_BENCH_WORKER="$(command -v kiln-bench-worker)"
fi
if [ -n "$lib" ] && python3 -c "import torch, pytest" 2>/dev/null; then
  KILN_LIBRARY="$lib" python3 -m pytest tests/gpu/test_python_gpu.py -q \
    -p no:cacheprovider -rs 2>&1 | tail -8
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi
exit $rc
