// The Kiln device library for HIP (AMD gfx9 with MFMA: gfx908, gfx90a,
// gfx942): everything generated HIP kernels include. The API is the CUDA
// library's (cuda/device/kiln/*.cuh), name for name, so the shared emitter
// (compiler/codegen/gpu/) calls the same functions; only the implementation
// is AMD's: 64-lane wavefronts, LDS, v_mfma matrix instructions. Files are
// named by what moves where or what they compute, destination first in
// every operand list.
#ifndef KILN_DEVICE_KILN_HIP_H_
#define KILN_DEVICE_KILN_HIP_H_

#include "kiln/global_to_shared.hip.h"
#include "kiln/memory.hip.h"
#include "kiln/mma.hip.h"
#include "kiln/owned.hip.h"
#include "kiln/reduce.hip.h"
#include "kiln/register_to_global.hip.h"
#include "kiln/scalar.hip.h"
#include "kiln/shared_layout.hip.h"
#include "kiln/shared_to_register.hip.h"

#endif  // KILN_DEVICE_KILN_HIP_H_
