// The Kiln device library: everything generated CUDA kernels include.
// Files are named by what moves where (global_to_shared, shared_to_register,
// register_to_global) or what they compute (mma, reduce), destination first
// in every operand list.
#ifndef KILN_DEVICE_KILN_CUH_
#define KILN_DEVICE_KILN_CUH_

#include "kiln/global_to_shared.cuh"
#include "kiln/memory.cuh"
#include "kiln/mma.cuh"
#include "kiln/owned.cuh"
#include "kiln/reduce.cuh"
#include "kiln/register_to_global.cuh"
#include "kiln/scalar.cuh"
#include "kiln/shared_layout.cuh"
#include "kiln/shared_to_register.cuh"

#endif  // KILN_DEVICE_KILN_CUH_
