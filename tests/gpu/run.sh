#!/usr/bin/env bash
# Runs the GPU tests on the GPU machine from the bundle (builds nothing):
#   here:  cmake --build build --target gpu_corpus_tests client_gpu_tests kilnd kiln
#          ../shared/tools/gpu-bundle.sh .gpu build/tests/gpu/gpu_corpus_tests \
#            build/tests/gpu/client_gpu_tests build/server/kilnd build/client/kiln
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

# On Hopper, with the kiln CLI bundled and cuobjdump at hand: the corpus
# GEMMs compiled for sm_90a run wgmma (HGMMA for f16, QGMMA for fp8) fed by
# TMA (UTMALDG), issued in groups (serialised wgmma would put a
# WARPGROUP.DEPBAR after each one).
if nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | grep -q '^9\.' &&
   command -v kiln >/dev/null && command -v cuobjdump >/dev/null; then
  sass_check() {  # FILE KERNEL INSTRUCTION DEFINES...
    local file=$1 kernel=$2 want=$3
    shift 3
    local defs=() d
    for d in "$@"; do defs+=(-D "$d"); done
    local cubin=${TMPDIR:-/tmp}/kiln_sass_$kernel.cubin
    if ! kiln compile "tests/compiler/corpus/$file" --target sm_90a \
        --kernel "$kernel" "${defs[@]}" -o "$cubin" --emit metadata > /dev/null; then
      echo "sass $kernel: FAILED to compile"
      return 1
    fi
    local sass n bars tma
    sass=$(cuobjdump -sass "$cubin")
    n=$(grep -c "$want" <<< "$sass")
    bars=$(grep -c "WARPGROUP.DEPBAR" <<< "$sass")
    tma=$(grep -c "UTMALDG" <<< "$sass")
    if [ "$n" -gt 0 ] && [ "$tma" -gt 0 ] && [ $((bars * 2)) -lt "$n" ]; then
      echo "sass $kernel: $n $want, $bars WARPGROUP.DEPBAR, $tma UTMALDG"
    else
      echo "sass $kernel: FAILED: $n $want, $bars WARPGROUP.DEPBAR, $tma UTMALDG"
      return 1
    fi
  }
  sass_check gemm.tile gemm HGMMA BM=128 BN=128 BK=64 STAGES=3 || rc=1
  sass_check gemm_fp8.tile gemm_fp8 QGMMA BM=128 BN=192 BK=128 STAGES=4 || rc=1
  sass_check gemm_fp8.tile gemm_fp8 QGMMA BM=128 BN=256 BK=128 STAGES=3 || rc=1
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
