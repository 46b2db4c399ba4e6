#!/usr/bin/env bash
# Kernels for bench/gpu/moe.py: the grouped GEMMs and the tile map of
# tests/compiler/corpus/moe_gemm.tile compiled for TARGET (default sm_90a)
# into .gpu/bench-kernels/ (KILN_BENCH_KERNELS overrides) as
# moe_bf16_*, moe_fp8_* and moe_map.{cubin,meta}, one per tile shape.
# Usage: bench/gpu/make_moe.sh [path/to/kiln] [TARGET]
set -euo pipefail
cd "$(dirname "$0")/../.."
kiln=${1:-build/client/kiln}
target=${2:-sm_90a}
out=${KILN_BENCH_KERNELS:-.gpu/bench-kernels}
mkdir -p "$out"
file=tests/compiler/corpus/moe_gemm.tile
build() {  # NAME KERNEL DEFINES...
  local name=$1 kernel=$2; shift 2
  local defs=() x
  for x in "$@"; do defs+=(-D "$x"); done
  "$kiln" compile "$file" --target "$target" --kernel "$kernel" "${defs[@]}" \
    -o "$out/$name.cubin" --emit metadata > "$out/$name.meta"
  echo "$name: $(grep ptxas "$out/$name.meta")"
}
build moe_map moe_tile_map BM=128 EP=64 TP=64
build moe_map64 moe_tile_map BM=64 EP=64 TP=64
build moe_bf16_128x256s3 moe_gemm BM=128 BN=256 BK=64 STAGES=3
build moe_bf16_128x256s4 moe_gemm BM=128 BN=256 BK=64 STAGES=4
build moe_bf16_128x128s4 moe_gemm BM=128 BN=128 BK=64 STAGES=4
build moe_bf16_64x256s4 moe_gemm BM=64 BN=256 BK=64 STAGES=4
build moe_fp8_128x256s3 moe_gemm_fp8 BM=128 BN=256 BK=128 STAGES=3
build moe_fp8_128x128s4 moe_gemm_fp8 BM=128 BN=128 BK=128 STAGES=4
# The same GEMM as a TileLang author writes it (tests/python/kernels.py
# moe_gemm: the epilogue an element store under `if i < rows` in a
# T.Parallel), with DeepSeek-V3's expert shapes fixed (64 x [4096, 7168]).
"$kiln" compile tests/python/goldens/moe_gemm.tile --target "$target" \
  -o "$out/moedsl_bf16_128x256s3.cubin" --emit metadata > "$out/moedsl_bf16_128x256s3.meta"
echo "moedsl_bf16_128x256s3: $(grep ptxas "$out/moedsl_bf16_128x256s3.meta")"
