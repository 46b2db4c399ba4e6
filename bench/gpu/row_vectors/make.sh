#!/usr/bin/env bash
# The row-vector experiment (bench/gpu/NOTES.md step 32): the DSL softmax as
# Kiln compiles it (A), with __launch_bounds__ giving no minimum of blocks
# (A2), and by hand with its row vectors in registers (B, B2: without the
# minimum) and with a register prefetch besides (C). Builds the cubins here
# (NVRTC, no GPU) into .gpu/row-vectors/; on the GPU host run
#   cd .gpu/row-vectors && python3 run.py
# Usage: bench/gpu/row_vectors/make.sh [path/to/kiln]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
kiln=${1:-build/client/kiln}
out=.gpu/row-vectors
mkdir -p "$out"
"$kiln" compile tests/python/goldens/softmax.tile --target sm_90a --local \
  --emit source > "$out/A.cu"
# The first kernel line names the bounds; A2 drops the minimum, whatever A has.
sed -E 's/__launch_bounds__\(128, [0-9]+\)/__launch_bounds__(128)/' "$out/A.cu" > "$out/A2.cu"
sed -E 's/__launch_bounds__\(128\)/__launch_bounds__(128, 1)/' "$out/A.cu" > "$out/A1.cu"
cp "$here/B.cu" "$out/B.cu"
sed 's/__launch_bounds__(128, 1)/__launch_bounds__(128)/' "$here/B.cu" > "$out/B2.cu"
cp "$here/C.cu" "$here/run.py" "$out/"
g++ -O1 -std=c++20 "$here/nvrtc_cubins.cc" -I/usr/local/cuda/include \
  -L/usr/local/cuda/lib64 -lnvrtc -Wl,-rpath,/usr/local/cuda/lib64 \
  -o "$out/nvrtc_cubins"
(cd "$out" && ./nvrtc_cubins "$OLDPWD/compiler/codegen/cuda/device/kiln" \
  A1.cu A2.cu B.cu B2.cu C.cu | grep -E "rc=|registers")
