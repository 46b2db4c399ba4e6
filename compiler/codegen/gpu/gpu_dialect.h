// What the shared GPU lowering (kernel_source.h, fragment_plan.h) needs to
// know about one vendor: the narrow interface between the target-independent
// emitter and a back end (cuda/cuda_codegen.cc, hip/hip_codegen.cc). Both
// device libraries offer the same API (kiln::AccLayout, kiln::RowLayout,
// kiln::gemm_ss, kiln::g2s_tile_async, kiln::warp_reduce, ...), each with
// its vendor's implementation, so the emitter emits the same calls and only
// the numbers and spellings below differ.
#ifndef KILN_COMPILER_CODEGEN_GPU_GPU_DIALECT_H_
#define KILN_COMPILER_CODEGEN_GPU_GPU_DIALECT_H_

#include <cstdint>
#include <string>

namespace kiln::compiler::gpu {

// The register layout of the matrix instruction's f32 accumulator, per
// wave: the tile one instruction produces and how its elements spread over
// the lanes. A lane holds `rows_per_lane` rows of `cols_per_row` adjacent
// columns each, in registers (row-major within the lane); the lanes holding
// one row are `row_group_lanes` consecutive lanes.
//   mma.sync m16n8k16 (CUDA): 16 x 8, 4 regs, 2 rows x 2 columns, 4 lanes.
//   v_mfma_f32_16x16x16 (HIP): 16 x 16, 4 regs, 4 rows x 1 column, 16 lanes.
struct AccumulatorShape {
  int tile_m = 16;
  int tile_n = 8;
  int regs_per_tile = 4;
  int rows_per_lane = 2;
  int cols_per_row = 2;
  int row_group_lanes = 4;
};

struct GpuDialect {
  std::string vendor;  // "CUDA", "HIP": in error messages
  int wave_size = 32;  // threads per warp / wavefront
  AccumulatorShape acc;
  // The accumulator layout of one GEMM is the A-operand layout of the next
  // (mma.sync: two 16x8 C tiles are one 16x16 A tile), so an f16 fragment
  // copied from an accumulator can feed a GEMM from registers
  // (kiln::acc_to_a_operand / kiln::gemm_rs). MFMA's C layout is the
  // transpose of its A layout: no.
  bool acc_feeds_a_operand = true;
  // A lane's accumulator registers come in pairs of adjacent columns, and
  // the device library stores whole accumulators to global memory with
  // kiln::r2g_acc (paired stores).
  bool acc_pair_stores = false;
  // The device library reduces the lanes of an accumulator row group with
  // this function (kiln/reduce).
  std::string row_group_reduce = "kiln::quad_reduce";
  // The device library's umbrella header ("kiln/kiln.cuh").
  std::string device_include = "kiln/kiln.cuh";
  // The second __launch_bounds__ argument is "minimum blocks per
  // multiprocessor" (CUDA); HIP's means waves per execution unit, so it is
  // left out there.
  bool launch_bounds_min_blocks = true;
  // Name of the pipelined ring in comments: "cp.async" where the copies
  // into it run asynchronously; on targets without async copies the
  // library's g2s_tile_async completes at issue and its cp_async_commit /
  // cp_async_wait are no-ops (the emitter emits the same ring either way).
  std::string ring_name = "cp.async";
  // A pipelined cp.async loop gets a second version, taken when every copy
  // into its ring is a whole aligned tile at each iteration, whose copies
  // are straight-line code (kiln::g2s_tile_async<..., true>): no test or
  // branch between the ring's copies and the loop's gemms, so the
  // instruction scheduler can interleave them.
  bool whole_tile_loops = false;
  // Hopper warpgroup MMA (CUDA sm_90a): GEMMs whose operands are 16-bit
  // shared tiles and whose accumulator fits 64-row tiles per warpgroup
  // lower to wgmma.mma_async (kiln/wgmma.cuh) instead of the per-warp
  // instruction; their operand tiles take the wgmma swizzled layout.
  bool warpgroup_mma = false;
  // Bulk tensor copies (TMA, kiln/tma.cuh) with mbarriers, named barriers
  // and setmaxnreg: a pipelined wgmma main loop fed by whole-tile copies
  // becomes warp-specialised (cuda/hopper/tma_loop.cc).
  bool tma = false;
  // Dynamic plus static shared memory a block may use (bytes); 0: not
  // known to the emitter (render.cc checks the total either way).
  int64_t max_shared_bytes = 0;
};

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_GPU_DIALECT_H_
