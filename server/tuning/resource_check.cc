#include "server/tuning/resource_check.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/target.h"
#include "runtime/kernel_metadata.h"

namespace kiln::server::tuning {
namespace {

struct Limits {
  int64_t shared_bytes;  // opt-in maximum per block
  int64_t registers_per_thread = 255;
  int64_t registers_per_block = 65536;
  int64_t threads_per_block = 1024;
};

// Per architecture, from the target table; false for the CPU and unknown
// targets. (HIP metadata carries no register count yet.)
bool LimitsOf(const std::string& target, Limits* limits) {
  const compiler::Target* t = compiler::FindTarget(target);
  if (t == nullptr || t->kind == compiler::TargetKind::kCpu) return false;
  *limits = {t->max_shared_bytes, t->max_registers_per_thread,
             t->max_registers_per_block, t->max_threads_per_block};
  return true;
}

}  // namespace

std::string ResourceExcess(std::string_view metadata_text,
                           const std::string& target) {
  Limits limits;
  if (!LimitsOf(target, &limits)) return "";
  absl::StatusOr<runtime::KernelMetadata> m =
      runtime::ParseKernelMetadata(metadata_text);
  if (!m.ok()) {
    return absl::StrCat("launch metadata does not parse: ",
                        m.status().message());
  }
  const int64_t shared = m->shared_bytes + m->ptxas.static_shared_bytes;
  if (shared > limits.shared_bytes) {
    return absl::StrCat("needs ", shared, " bytes of shared memory per block; ",
                        target, " allows ", limits.shared_bytes);
  }
  int64_t threads = 1;
  for (const runtime::IntExpr& e : m->block) {
    threads *= e.AsConstant().value_or(1);
  }
  if (threads > limits.threads_per_block) {
    return absl::StrCat(threads, " threads per block; ", target, " allows ",
                        limits.threads_per_block);
  }
  const int64_t regs = m->ptxas.registers;
  if (regs > limits.registers_per_thread) {
    return absl::StrCat("needs ", regs, " registers per thread; ", target,
                        " allows ", limits.registers_per_thread);
  }
  if (regs > 0 && regs * threads > limits.registers_per_block) {
    return absl::StrCat("needs ", regs * threads, " registers per block (",
                        regs, " x ", threads, " threads); ", target, " allows ",
                        limits.registers_per_block);
  }
  return "";
}

std::string SpillReport(std::string_view metadata_text) {
  absl::StatusOr<runtime::KernelMetadata> m =
      runtime::ParseKernelMetadata(metadata_text);
  if (!m.ok() || (m->ptxas.spill_stores == 0 && m->ptxas.spill_loads == 0)) {
    return "";
  }
  return absl::StrCat(
      "spills registers to local memory (ptxas: ", m->ptxas.spill_stores,
      " bytes of spill stores, ", m->ptxas.spill_loads, " of spill loads, ",
      m->ptxas.stack_bytes, "-byte stack)");
}

}  // namespace kiln::server::tuning
