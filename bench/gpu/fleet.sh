#!/usr/bin/env bash
# Issue 28's figures on the GPU host, from the bundle (builds nothing):
#   here:  ../shared/tools/gpu-bundle.sh .gpu build/client/kiln build/server/kilnd \
#            build/server/kiln-bench-worker build/bench/service/kiln_service_bench
#   there: source .gpu/unpack.sh && bash bench/gpu/fleet.sh [all|tune]
# 1. prewarm of 500 distinct sm_90a kernels (bench/service/prewarm_bench.sh)
# 2. warm start: fetch and load 500 cached kernels (kiln_service_bench)
# 3. autotune wall time of the corpus GEMM at 4096^3 for sm_90a
set -uo pipefail
cd "$(dirname "$0")/../.."
b=$(mktemp -d)
mkdir -p "$b/client" "$b/server"
ln -s "$(command -v kiln)" "$b/client/kiln"
ln -s "$(command -v kilnd)" "$b/server/kilnd"
what=${1:-all}
if [[ $what == all ]]; then
  bash bench/service/prewarm_bench.sh "$b" 500 sm_90a > /tmp/prewarm.txt 2>&1
  kiln_service_bench --kilnd "$(command -v kilnd)" --kernels 500 --seconds 1 \
    > /tmp/service.txt 2>&1
fi
work=$(mktemp -d)
kilnd --socket "$work/s.sock" --cache-dir "$work/cache" 2> "$work/kilnd.log" &
pid=$!
for _ in $(seq 200); do [[ -S $work/s.sock ]] && break; sleep 0.05; done
t0=$(date +%s.%N)
kiln tune tests/compiler/corpus/gemm.tile --shape M=4096,N=4096,K=4096 \
  --target sm_90a --daemon "unix:$work/s.sock" > "$work/tune.txt" 2>&1
t1=$(date +%s.%N)
kiln tune tests/compiler/corpus/gemm.tile --shape M=4096,N=4096,K=4096 \
  --target sm_90a --daemon "unix:$work/s.sock" --force > "$work/tune2.txt" 2>&1
t2=$(date +%s.%N)
kill $pid
echo "== autotune GEMM 4096^3 sm_90a"
grep -E "^result|^chosen" "$work/tune.txt" "$work/tune2.txt"
grep -cE "^[A-Z0-9=,]+ +(ok|wrong|failed|pruned)" "$work/tune.txt" || true
awk "BEGIN{printf \"cold tuning %.1f s wall; again with --force (candidates cached) %.1f s\n\", $t1 - $t0, $t2 - $t1}"
if [[ $what == all ]]; then
  echo "== service (warm start, cache-hit latency)"
  tail -16 /tmp/service.txt
  echo "== prewarm"
  tail -6 /tmp/prewarm.txt
fi
