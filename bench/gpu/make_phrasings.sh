#!/usr/bin/env bash
# Kernels for bench.py's `phrasing` case: one causal and one full attention
# (head dim 128, 128x128 tiles over two consumer warpgroups, two stages,
# f16) in three spellings each, compiled for TARGET (default sm_90a) into
# .gpu/bench-kernels/ph_{causal,full}_SPELLING.{cubin,meta}:
#   corpus    the corpus program (symbolic shapes, inline bound, sm_scale)
#   tilelang  TileLang's wording through the Python DSL (constant shapes
#             from Python, the bound as T.min of T.ceildivs bound to a
#             name), at bench.py's shape: batch 4, 16 heads, 4096 tokens
#   letsym    symbolic shapes with the bound let-bound
#             (tests/codegen/phrasings)
# and the GEMM (f16, 128x128x32 tiles, 3 stages), softmax (f16) and RMSNorm
# (bf16) of tests/codegen/phrasings/NAME/*.tile, with the Python DSL's IR
# (tests/python/goldens/) as spelling `dsl`: ph_NAME_SPELLING.
# Usage: bench/gpu/make_phrasings.sh [path/to/kiln] [TARGET]
set -euo pipefail
cd "$(dirname "$0")/../.."
kiln=${1:-build/client/kiln}
target=${2:-sm_90a}
out=${KILN_BENCH_KERNELS:-.gpu/bench-kernels}
mkdir -p "$out"
corpus=tests/compiler/corpus
build() {  # NAME FILE [--kernel K] [DEFINES...]
  local name=$1 file=$2; shift 2
  local defs=() x
  for x in "$@"; do
    case $x in --kernel=*) defs+=(--kernel "${x#--kernel=}") ;; *) defs+=(-D "$x") ;; esac
  done
  "$kiln" compile "$file" --target "$target" "${defs[@]}" \
    -o "$out/$name.cubin" --emit metadata > "$out/$name.meta"
  echo "$name: $(grep ptxas "$out/$name.meta")"
}
sed -e 's/threads(128)/threads(256)/' -e 's/BM \* BN <= 8192/BM * BN <= 16384/' \
  $corpus/flash_attention_fwd.tile > "$out/ph_corpus.tile"
for c in causal full; do
  kernel=flash_attention_fwd$([ $c = causal ] && echo _causal || true)
  build ph_${c}_corpus "$out/ph_corpus.tile" --kernel=$kernel BM=128 BN=128 STAGES=2
  PYTHONPATH=client/python:tests/python python3 - "$c" > "$out/ph_${c}_tilelang.tile" <<'PY'
import sys
import kernels
print(kernels.flashattn_tilelang(4, 16, 4096, 128, sys.argv[1] == "causal",
                                 block_M=128, block_N=128, num_stages=2,
                                 threads=256).ir, end="")
PY
  build ph_${c}_tilelang "$out/ph_${c}_tilelang.tile"
  src=tests/codegen/phrasings/attention$([ $c = causal ] && echo _causal || true)
  spelling=$([ $c = causal ] && echo symbolic_let_min_ceildiv || echo symbolic_let)
  build ph_${c}_letsym "$src/$spelling.tile"
done
for pair in gemm:gemm softmax:softmax rmsnorm:rms_norm; do
  name=${pair%%:*}
  build ph_${name}_dsl tests/python/goldens/${pair#*:}.tile
  for f in tests/codegen/phrasings/$name/*.tile; do
    build ph_${name}_$(basename "$f" .tile) "$f"
  done
done
