#!/usr/bin/env bash
# Compiles the benchmark kernels with the kiln CLI (no GPU needed) for
# TARGET (default sm_90a, the Hopper path; sm_90 gives the sm_80-style
# mma.sync path): .gpu/bench-kernels[-TARGET]/NAME.cubin + NAME.meta
# (KILN_BENCH_KERNELS overrides), read by bench.py on the GPU machine. bf16
# and head-dim-64/256 variants of the corpus kernels are made by
# substitution into that folder; bench.py times every kernel of a case's
# name prefix. KILN_BENCH_SUFFIX is appended to every kernel name (for A/B
# builds from two compilers into one folder).
# Usage: bench/gpu/make_kernels.sh [path/to/kiln] [TARGET]
set -euo pipefail
cd "$(dirname "$0")/../.."
kiln=${1:-build-cuda/client/kiln}
target=${2:-sm_90a}
default_out=.gpu/bench-kernels
[ "$target" = sm_90a ] || default_out=.gpu/bench-kernels-$target
out=${KILN_BENCH_KERNELS:-$default_out}
mkdir -p "$out"
corpus=tests/compiler/corpus
sed 's/f16/bf16/g' $corpus/gemm.tile > $out/gemm_bf16.tile
sed 's/f16/bf16/g' $corpus/flash_attention_fwd.tile > $out/fa_bf16_d128.tile
# 8 warps per block (two blocks per SM: four mma.sync warps per scheduler).
sed 's/threads(128)/threads(256)/' $corpus/gemm.tile > $out/gemm_f16_t256.tile
sed 's/threads(128)/threads(256)/' $out/gemm_bf16.tile > $out/gemm_bf16_t256.tile
sed -e 's/f16/bf16/g' -e 's/, 128\]/, 64]/g' -e 's/(BM, 128)/(BM, 64)/g' \
  -e 's/in \[64, 64\]/in [64, 128]/' -e 's/in \[32, 64, 64\]/in [32, 64, 128]/' \
  $corpus/flash_attention_fwd.tile > $out/fa_bf16_d64.tile
build() {  # NAME FILE KERNEL DEFINES...
  local name=$1 file=$2 kernel=$3; shift 3
  local defs=()
  local x
  for x in "$@"; do defs+=(-D "$x"); done
  name=$name${KILN_BENCH_SUFFIX:-}
  "$kiln" compile "$file" --target "$target" --kernel "$kernel" "${defs[@]}" \
    -o "$out/$name.cubin" --emit metadata > "$out/$name.meta"
  echo "$name: $(grep ptxas "$out/$name.meta")"
}
g="BM=128 BN=128 BK=32 STAGES=4"
build gemm_f16 $corpus/gemm.tile gemm $g
build gemm_bf16 $out/gemm_bf16.tile gemm $g
build gemm_f16_bk64 $corpus/gemm.tile gemm BM=128 BN=128 BK=64 STAGES=3
build gemm_bf16_bk64 $out/gemm_bf16.tile gemm BM=128 BN=128 BK=64 STAGES=3
build gemm_f16_t256 $out/gemm_f16_t256.tile gemm BM=128 BN=128 BK=64 STAGES=3
build gemm_bf16_t256 $out/gemm_bf16_t256.tile gemm BM=128 BN=128 BK=64 STAGES=3
build gemm_f16_t256bk32 $out/gemm_f16_t256.tile gemm BM=128 BN=128 BK=32 STAGES=4
build gemm_bf16_t256bk32 $out/gemm_bf16_t256.tile gemm BM=128 BN=128 BK=32 STAGES=4
build gemm_f16_256x128 $out/gemm_f16_t256.tile gemm BM=256 BN=128 BK=32 STAGES=3
build gemm_bf16_256x128 $out/gemm_bf16_t256.tile gemm BM=256 BN=128 BK=32 STAGES=3
if [ "$target" != sm_90a ]; then
  # CUTLASS's sm_80 shape: 8 warps of 64x64 over a 256x128 / 128x256 tile,
  # 64 deep, 3 or 4 stages (144 / 192 KiB: one block per SM), above the
  # corpus's 96 KiB bound.
  for t in f16 bf16; do
    sed 's/<= 98304/<= 196608/' $out/gemm_${t}_t256.tile > $out/gemm_${t}_t256wide.tile
    build gemm_${t}_256x128bk64 $out/gemm_${t}_t256wide.tile gemm BM=256 BN=128 BK=64 STAGES=3
    build gemm_${t}_256x128bk64s4 $out/gemm_${t}_t256wide.tile gemm BM=256 BN=128 BK=64 STAGES=4
    build gemm_${t}_128x256bk64 $out/gemm_${t}_t256wide.tile gemm BM=128 BN=256 BK=64 STAGES=3
  done
fi
build gemm_f16_64x128 $corpus/gemm.tile gemm BM=64 BN=128 BK=64 STAGES=3
build gemm_bf16_64x128 $out/gemm_bf16.tile gemm BM=64 BN=128 BK=64 STAGES=3
build gemm_f16_128x64 $corpus/gemm.tile gemm BM=128 BN=64 BK=64 STAGES=4
build gemm_bf16_128x64 $out/gemm_bf16.tile gemm BM=128 BN=64 BK=64 STAGES=4
if [ "$target" = sm_90a ]; then
  # wgmma tiles: 64x256 per warpgroup (128 accumulator registers), deeper
  # rings than the corpus's 96 KiB bound allows.
  for t in f16 bf16; do
    big='s/<= 98304/<= 229376/; s/STAGES in \[2, 3, 4\]/STAGES in [2, 3, 4, 5, 6]/'
    sed "$big" $out/gemm_${t}_t256.tile > $out/gemm_${t}_t256big.tile
    sed "$big" $corpus/gemm.tile | sed "s/f16/$t/g" > $out/gemm_${t}_big.tile
    build gemm_${t}_wg128x128s4 $out/gemm_${t}_big.tile gemm BM=128 BN=128 BK=64 STAGES=4
    build gemm_${t}_wg64x256s4 $out/gemm_${t}_big.tile gemm BM=64 BN=256 BK=64 STAGES=4
    build gemm_${t}_wg128x256s3 $out/gemm_${t}_t256big.tile gemm BM=128 BN=256 BK=64 STAGES=3
    build gemm_${t}_wg256x128s3 $out/gemm_${t}_t256big.tile gemm BM=256 BN=128 BK=64 STAGES=3
    build gemm_${t}_wg256x128s4 $out/gemm_${t}_t256big.tile gemm BM=256 BN=128 BK=64 STAGES=4
    build gemm_${t}_wg128x256s4 $out/gemm_${t}_t256big.tile gemm BM=128 BN=256 BK=64 STAGES=4
    build gemm_${t}_wg128x128s6 $out/gemm_${t}_big.tile gemm BM=128 BN=128 BK=64 STAGES=6
  done
fi
# FP8 (e4m3) GEMM: the corpus program (B stored [N, K]; on sm_90a its
# cluster(2, 1, 1) pairs blocks that multicast A), and (`nc`) without the
# cluster.
build gemm_fp8_128x128s3 $corpus/gemm_fp8.tile gemm_fp8 BM=128 BN=128 BK=128 STAGES=3
build gemm_fp8_128x128s4 $corpus/gemm_fp8.tile gemm_fp8 BM=128 BN=128 BK=128 STAGES=4
sed 's/ cluster(2, 1, 1)//' $corpus/gemm_fp8.tile > $out/gemm_fp8_nc.tile
build gemm_fp8_128x128s4nc $out/gemm_fp8_nc.tile gemm_fp8 BM=128 BN=128 BK=128 STAGES=4
if [ "$target" = sm_90a ]; then
  # (256-deep tiles, which promote every 256 of K, are left out: the
  # reference promotes every 128 and the bar compares like with like; at
  # BK = 128 our results are bit-identical to cuBLASLt's.)
  # Deeper rings (cuBLASLt's FP8 kernel runs 128x128x128 tiles 6 stages
  # deep); 6 stages leave just room for the TMA-store staging.
  sed 's/tune STAGES in \[3, 4\]/tune STAGES in [3, 4, 5, 6]/' $out/gemm_fp8_nc.tile > $out/gemm_fp8_deep.tile
  build gemm_fp8_128x128s5nc $out/gemm_fp8_deep.tile gemm_fp8 BM=128 BN=128 BK=128 STAGES=5
  build gemm_fp8_128x128s6nc $out/gemm_fp8_deep.tile gemm_fp8 BM=128 BN=128 BK=128 STAGES=6
  # 128x256 tiles (the product promoted 128 columns at a time): a quarter
  # less L2 traffic per flop than 128x128.
  build gemm_fp8_128x256s3nc $out/gemm_fp8_nc.tile gemm_fp8 BM=128 BN=256 BK=128 STAGES=3
  build gemm_fp8_128x256s4nc $out/gemm_fp8_nc.tile gemm_fp8 BM=128 BN=256 BK=128 STAGES=4
  build gemm_fp8_128x256s4 $corpus/gemm_fp8.tile gemm_fp8 BM=128 BN=256 BK=128 STAGES=4
  # 128x192 tiles: each warpgroup's whole product fits beside its
  # accumulator (96 + 96 registers), so A is read once per stage.
  build gemm_fp8_128x192s4nc $out/gemm_fp8_nc.tile gemm_fp8 BM=128 BN=192 BK=128 STAGES=4
  build gemm_fp8_128x192s4 $corpus/gemm_fp8.tile gemm_fp8 BM=128 BN=192 BK=128 STAGES=4
fi
sed -e 's/f16/bf16/g' -e 's/H, 128\]/H, 256]/g' -e 's/\(B[MN]\), 128\]/\1, 256]/g' \
  -e 's/(BM, 128)/(BM, 256)/g' $corpus/flash_attention_fwd.tile > $out/fa_bf16_d256.tile
for d in 64 128 256; do
  for c in "" _causal; do
    build fa${c}_d${d}_bm64 $out/fa_bf16_d$d.tile flash_attention_fwd$c \
      BM=64 BN=64 STAGES=2
    if [ $d = 256 ]; then  # (larger tiles do not fit in shared memory)
      sed 's/threads(128)/threads(256)/' $out/fa_bf16_d256.tile > $out/fa_bf16_d256_t256.tile
      build fa${c}_d256_t256bn32 $out/fa_bf16_d256_t256.tile flash_attention_fwd$c \
        BM=128 BN=32 STAGES=2
      continue
    fi
    build fa${c}_d${d}_bm128 $out/fa_bf16_d$d.tile flash_attention_fwd$c \
      BM=128 BN=64 STAGES=2
    build fa${c}_d${d}_bn128 $out/fa_bf16_d$d.tile flash_attention_fwd$c \
      BM=64 BN=128 STAGES=2
    # Two warpgroups over 128 query rows (sm_90a: two consumer warpgroups
    # beside the TMA producer); 128x128 needs the score-tile bound raised.
    sed -e 's/threads(128)/threads(256)/' -e 's/BM \* BN <= 8192/BM * BN <= 16384/' \
      $out/fa_bf16_d$d.tile > $out/fa_bf16_d${d}_t256.tile
    build fa${c}_d${d}_t256 $out/fa_bf16_d${d}_t256.tile flash_attention_fwd$c \
      BM=128 BN=64 STAGES=2
    build fa${c}_d${d}_t256bn128 $out/fa_bf16_d${d}_t256.tile flash_attention_fwd$c \
      BM=128 BN=128 STAGES=2
    if [ $d = 128 ] && [ "$target" = sm_90a ]; then
      # Longer key tiles (FlashAttention-3 takes 176 at head dim 128; here
      # 160 is the most that fits two stages beside Q with P in registers).
      sed -e 's/tune BN in \[32, 64, 128\]/tune BN in [32, 64, 128, 144, 160]/' \
        -e 's/BM \* BN <= 16384/BM * BN <= 20480/' \
        $out/fa_bf16_d${d}_t256.tile > $out/fa_bf16_d${d}_t256long.tile
      for bn in 144 160; do
        build fa${c}_d${d}_t256bn$bn $out/fa_bf16_d${d}_t256long.tile \
          flash_attention_fwd$c BM=128 BN=$bn STAGES=2
      done
    fi
  done
done
