// The one table of compile targets: every architecture Kiln compiles for,
// with the limits and features that the verifier, the passes, the planners,
// the back ends, the autotuner's resource check and the daemon's
// capabilities read. A target is added here and nowhere else decides what
// it is.
#ifndef KILN_COMPILER_TARGET_H_
#define KILN_COMPILER_TARGET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::compiler {

enum class TargetKind { kCpu, kCuda, kHip };

struct Target {
  std::string_view name;  // as requests, the CLI and cache keys spell it
  TargetKind kind = TargetKind::kCpu;
  // CUDA: compute capability (80, 90); its NVRTC architecture is `name`.
  int compute_capability = 0;
  std::string_view products;  // "A100", "H100, H200", "MI200"
  // Shared memory (LDS) a block may use, dynamic and static together,
  // with the opt-in carve-out; 0: no such limit (CPU).
  int64_t max_shared_bytes = 0;
  int64_t max_threads_per_block = 1024;
  int64_t max_registers_per_thread = 255;
  int64_t max_registers_per_block = 65536;
  bool clusters = false;       // thread block clusters (sm_90)
  bool warpgroup_mma = false;  // wgmma.mma_async (sm_90a)
  bool tma = false;  // bulk tensor copies, mbarriers, setmaxnreg (sm_90a)
  // HIP: the oldest ROCm whose hiprtc knows the architecture.
  int rocm_major = 0, rocm_minor = 0;
};

// Every target, CPU first, then CUDA and HIP in ascending order.
const std::vector<Target>& AllTargets();

// The target named `name`; nullptr for an unknown name.
const Target* FindTarget(std::string_view name);

// "cpu, sm_80, ..., gfx942": for help texts and errors.
std::string TargetNames();

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_TARGET_H_
