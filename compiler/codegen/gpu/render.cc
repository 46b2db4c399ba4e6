#include "compiler/codegen/gpu/render.h"

#include <optional>

#include "compiler/codegen/gpu/fragment_plan.h"
#include "compiler/codegen/gpu/kernel_source.h"
#include "compiler/codegen/gpu/plan_kernel.h"
#include "compiler/codegen/metadata_writer.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::gpu {

absl::StatusOr<RenderedKernel> RenderKernel(const Kernel& k,
                                            const GpuDialect& dialect,
                                            const RenderOptions& o) {
  for (const Expr& c : k.cluster) {
    auto v = FoldInt(c);
    if ((!v || *v != 1) && !o.clusters_need.empty()) {
      return LocatedError(k.loc, StrCat("cluster(...) needs ", o.clusters_need,
                                        "; the target is ", o.target));
    }
  }
  // The plan: the pipeline's, else one made here (without the TMA
  // producer where asked), changed as the options say.
  const KernelPlan* given = o.warp_specialise ? o.plan : nullptr;
  std::optional<KernelPlan> own;
  if (given == nullptr) {
    GpuDialect d = dialect;
    d.tma = d.tma && o.warp_specialise;
    absl::StatusOr<KernelPlan> planned = PlanKernel(k, d);
    if (!planned.ok()) return planned.status();
    own = *std::move(planned);
  }
  if (o.producer_regs > 0) {
    if (!own) own = *given;
    own->launch.producer_regs = o.producer_regs;
  }
  const KernelPlan& plan = own ? *own : *given;
  auto src = EmitKernelSource(k, plan, dialect);
  if (!src.ok()) return src.status();
  if (src->shared_bytes + src->static_shared_bytes > o.max_shared_bytes) {
    return LocatedError(
        k.loc, StrCat("the kernel needs ",
                      src->shared_bytes + src->static_shared_bytes,
                      " bytes of shared memory per block; ", o.arch, " allows ",
                      o.max_shared_bytes, " (choose smaller tiles)"));
  }
  RenderedKernel out;
  out.source = std::move(src->source);
  out.entry = src->entry;
  out.shared_bytes = src->shared_bytes;
  out.warp_specialised = plan.WarpSpecialised();
  if (plan.WarpSpecialised() && src->launch_threads > 256) {
    out.producer_regs = ProducerRegs(plan.launch);
  }
  for (const auto& [tile, layout] : plan.fragments.Describe()) {
    StrAppend(&out.layouts, tile, ": ", layout, "\n");
  }
  out.plan = PrintPlan(plan);
  MetadataOptions mo;
  mo.target = o.target;
  mo.entry = out.entry;
  mo.shared_bytes = out.shared_bytes;
  if (src->launch_threads != src->threads) {
    mo.block_threads = src->launch_threads;
  }
  mo.tensor_maps = src->tensor_maps;
  mo.persistent = src->persistent;
  // Blocks are clustered only where the kernel uses it (a multicast pair);
  // elsewhere a program's cluster(...) asks for nothing the kernel needs.
  mo.cluster = std::array<int64_t, 3>{src->cluster_x, 1, 1};
  auto md = WriteKernelMetadata(k, mo);
  if (!md.ok()) return md.status();
  out.metadata = std::move(*md);
  return out;
}

}  // namespace kiln::compiler::gpu
