#!/usr/bin/env bash
# Prewarm throughput (bench/NOTES.md, "Prewarm"): N distinct CPU kernels in
# one manifest, through a running kilnd:
#   cold      every kernel compiled (kernels per second, per core)
#   warm      the same manifest again: every kernel a hit
#   cluster   two daemons sharing one redis-server prewarm the same new
#             manifest at once: compiles in the cluster (goal: N, not 2N)
# Usage: bench/service/prewarm_bench.sh [BUILD_DIR] [N] [TARGET]
# (TARGET: cpu by default; sm_90a etc. need NVRTC, not a GPU)
set -euo pipefail
build=${1:-build}
n=${2:-500}
target=${3:-cpu}
kiln=$build/client/kiln
kilnd=$build/server/kilnd
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# N distinct kernels: the scale kernel under N names, one file each.
manifest() {  # manifest PREFIX FILE
  local prefix=$1 out=$2
  mkdir -p "$work/$prefix"
  {
    echo "{\"target\": \"$target\", \"kernels\": ["
    for ((i = 0; i < n; i++)); do
      cat >"$work/$prefix/k$i.tile" <<EOF
kernel ${prefix}$i(X: f32[N], Y: f32[N], a: f32)
  grid(ceildiv(N, 64)) threads(32) (bx) {
  alloc fragment T: f32[64]
  copy X[bx * 64:+64] -> T
  parallel (i) in (64) {
    T[i] = T[i] * a + $i.0
  }
  copy T -> Y[bx * 64:+64]
}
EOF
      sep=$([[ $i -lt $((n - 1)) ]] && echo , || true)
      echo "  {\"file\": \"$prefix/k$i.tile\"}$sep"
    done
    echo ']}'
  } >"$out"
}

start_kilnd() {  # start_kilnd NAME ARGS...
  local name=$1
  shift
  "$kilnd" --socket "$work/$name.sock" --cache-dir "$work/$name-cache" \
    "$@" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 200); do
    [[ -S $work/$name.sock ]] && return
    sleep 0.05
  done
  echo "kilnd $name did not start:" >&2
  cat "$work/$name.log" >&2
  exit 1
}

seconds() {  # seconds COMMAND...: wall seconds of the command
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$work/last.out" 2>&1 || { cat "$work/last.out" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk "BEGIN{print $t1 - $t0}"
}

cores=$(nproc)
manifest a "$work/a.json"
start_kilnd one
cold=$(seconds "$kiln" prewarm "$work/a.json" --daemon "unix:$work/one.sock")
cold_line=$(head -2 "$work/last.out" | tail -1)
warm=$(seconds "$kiln" prewarm "$work/a.json" --daemon "unix:$work/one.sock")
warm_line=$(head -2 "$work/last.out" | tail -1)

cluster=skipped
if command -v redis-server >/dev/null; then
  redis-server --port 0 --unixsocket "$work/redis.sock" --save '' \
    --appendonly no >"$work/redis.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [[ -S $work/redis.sock ]] && break; sleep 0.05; done
  echo "bench-cluster-secret-0123456789" >"$work/secret"
  shared=(--redis-url "redis+unix://$work/redis.sock" --redis-secret-file
          "$work/secret")
  start_kilnd x "${shared[@]}"
  start_kilnd y "${shared[@]}"
  manifest b "$work/b.json"
  t0=$(date +%s.%N)
  "$kiln" prewarm "$work/b.json" --daemon "unix:$work/x.sock" >"$work/x.out" &
  px=$!
  "$kiln" prewarm "$work/b.json" --daemon "unix:$work/y.sock" >"$work/y.out"
  wait $px
  t1=$(date +%s.%N)
  cluster=$(awk "BEGIN{print $t1 - $t0}")
  compiles=0
  for d in x y; do
    c=$("$kiln" status --address "$work/$d.sock" |
        sed -n 's/.* misses, \([0-9]*\) compiles.*/\1/p')
    compiles=$((compiles + c))
  done
  waits=$("$kiln" status --address "$work/y.sock" |
          sed -n 's/^cluster: \([0-9]*\) waits.*/\1/p')
fi

echo
printf '%-9s %8s %10s %14s  %s\n' run kernels "wall s" "kernels/s/core" \
  "report"
printf '%-9s %8d %10.2f %14.1f  %s\n' cold "$n" "$cold" \
  "$(awk "BEGIN{print $n / $cold / $cores}")" "$cold_line"
printf '%-9s %8d %10.2f %14.1f  %s\n' warm "$n" "$warm" \
  "$(awk "BEGIN{print $n / $warm / $cores}")" "$warm_line"
if [[ $cluster != skipped ]]; then
  printf '%-9s %8d %10.2f %14.1f  2 daemons, %d compiles in all (goal %d), %s waits on y\n' \
    cluster "$n" "$cluster" "$(awk "BEGIN{print $n / $cluster / $cores}")" \
    "$compiles" "$n" "${waits:-0}"
fi
echo "($cores cores, target $target)"
