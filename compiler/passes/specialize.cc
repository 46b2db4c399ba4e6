// Specialisation: bind tunables and compile-time symbols, fold constants.
//
// 1. Every tunable must be bound, to one of its candidates.
// 2. Bindings for names that are neither tunables nor symbols are errors (a
//    typo must not silently compile something else).
// 3. Substitute every bound name everywhere (param shapes included), fold.
// 4. Every `where` constraint must now fold to true; assumptions that fold to
//    false are compile errors, to true are dropped.
#include <set>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/format.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/rewrite.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

class SpecializePass : public Pass {
 public:
  std::string_view name() const override { return "specialize"; }

  absl::Status Run(Kernel& k, PassContext& ctx) override {
    std::set<std::string> symbols;
    for (const Param& p : k.params) {
      for (const Expr& d : p.shape) {
        if (d.kind == ExprKind::kVar) symbols.insert(d.name);
      }
    }
    std::map<std::string, Expr> values;
    for (const Tunable& t : k.tunables) {
      auto it = ctx.bindings.find(t.name);
      if (it == ctx.bindings.end()) {
        return LocatedError(
            t.loc, StrCat("tunable '", t.name, "' of kernel '", k.name,
                          "' has no value; choose one of [",
                          StrJoin(t.candidates, ", "), "] (e.g. -D ", t.name,
                          "=", t.candidates.front(), ") or autotune"));
      }
      bool ok = false;
      for (int64_t c : t.candidates) ok |= c == it->second;
      if (!ok) {
        return LocatedError(t.loc,
                            StrCat("tunable '", t.name, "' = ", it->second,
                                   " is not one of its candidates [",
                                   StrJoin(t.candidates, ", "), "]"));
      }
      values[t.name] = Expr::Int(it->second);
    }
    for (const auto& [name, value] : ctx.bindings) {
      if (values.count(name)) continue;
      if (!symbols.count(name)) {
        return absl::InvalidArgumentError(
            StrCat("'", name, "' is neither a tunable nor a symbol of kernel '",
                   k.name, "'"));
      }
      if (value < 0) {
        return absl::InvalidArgumentError(
            StrCat("symbol '", name, "' = ", value, " must not be negative"));
      }
      values[name] = Expr::Int(value);
    }
    std::vector<std::string> constraint_text, assumption_text;
    for (const Expr& c : k.constraints) constraint_text.push_back(Print(c));
    for (const Expr& a : k.assumptions) assumption_text.push_back(Print(a));
    ForEachExpr(k, [&](Expr& e) { e = FoldConstants(Substitute(e, values)); });

    for (size_t i = 0; i < k.constraints.size(); ++i) {
      auto v = FoldBool(k.constraints[i]);
      if (!v || !*v) {
        return LocatedError(
            k.constraints[i].loc,
            StrCat("constraint '", constraint_text[i], "' does not hold for ",
                   BindingText(ctx.bindings)));
      }
    }
    // Launch dims that became constants are range-checked as the verifier
    // checks literal ones.
    if (auto threads = FoldInt(k.threads);
        threads && (*threads < 1 || *threads > 1024)) {
      return LocatedError(k.threads.loc, StrCat("threads = ", *threads, " for ",
                                                BindingText(ctx.bindings),
                                                "; expected 1 to 1024"));
    }
    for (const Expr& e : k.grid) {
      if (auto v = FoldInt(e); v && *v <= 0) {
        return LocatedError(
            e.loc, StrCat("grid extent ", *v, " for ",
                          BindingText(ctx.bindings), " must be positive"));
      }
    }
    k.constraints.clear();
    k.tunables.clear();
    std::vector<Expr> kept;
    for (size_t i = 0; i < k.assumptions.size(); ++i) {
      Expr& a = k.assumptions[i];
      auto v = FoldBool(a);
      if (v && !*v) {
        return LocatedError(
            a.loc, StrCat("assumption '", assumption_text[i], "' is false for ",
                          BindingText(ctx.bindings)));
      }
      if (!v) kept.push_back(std::move(a));
    }
    k.assumptions = std::move(kept);
    return absl::OkStatus();
  }

 private:
  static std::string BindingText(const std::map<std::string, int64_t>& b) {
    std::vector<std::string> parts;
    for (const auto& [name, value] : b)
      parts.push_back(StrCat(name, "=", value));
    return parts.empty() ? "this configuration" : StrJoin(parts, ", ");
  }
};

}  // namespace

std::unique_ptr<Pass> CreateSpecializePass() {
  return std::make_unique<SpecializePass>();
}

}  // namespace kiln::compiler
