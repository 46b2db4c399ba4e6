#!/usr/bin/env bash
# One Nsight Compute profile of one launch of a kernel that a bench script
# runs: speed of light, warp stalls, occupancy and launch figures.
#   bash bench/gpu/ncu_kernel.sh KERNEL_REGEX SCRIPT.py [ARGS...]
# e.g. bash bench/gpu/ncu_kernel.sh split bench/gpu/mla.py quick
# Run from the repository root on the GPU machine after
# `source .gpu/unpack.sh` (bundle: libkiln.so, kiln-bench-worker). Skips the
# first 3 matching launches (warm-up) and profiles the next.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 KERNEL_REGEX SCRIPT.py [ARGS...]" >&2
  exit 2
fi
regex=$1
shift
cd "$(dirname "$0")/../.."
lib=$(command -v libkiln.so 2>/dev/null || find /tmp/gpu-bundle -name libkiln.so | head -1)
export KILN_LIBRARY=$lib
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
"$ncu" --target-processes all -k "regex:$regex" --launch-skip 3 \
  --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section Occupancy --section LaunchStats python3 "$@" 2>&1 |
  grep -vE '^==PROF==|^[[:space:]]*$'
