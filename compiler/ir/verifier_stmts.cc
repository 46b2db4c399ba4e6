// Verifier rules for statements other than tile ops: alloc, parallel, for,
// if, let, stores and rasterize (tile-ir.md §6.7, §6.8, §6.15-§6.17), and
// the statement walk that dispatches every statement to its check.
#include <type_traits>
#include <utility>
#include <variant>

#include "compiler/ir/assign_op.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/verifier_internal.h"

namespace kiln::compiler::verifier_internal {
namespace {

// The statement's keyword, for "'X' is not allowed inside 'parallel'".
std::string_view StmtKeyword(const Stmt& stmt) {
  struct Visitor {
    std::string_view operator()(const AllocStmt&) { return "alloc"; }
    std::string_view operator()(const CopyStmt&) { return "copy"; }
    std::string_view operator()(const FillStmt& f) {
      return f.is_clear ? "clear" : "fill";
    }
    std::string_view operator()(const GemmStmt&) { return "gemm"; }
    std::string_view operator()(const ReduceStmt&) { return "reduce"; }
    std::string_view operator()(const CumsumStmt&) { return "cumsum"; }
    std::string_view operator()(const AtomicAddStmt&) { return "atomic_add"; }
    std::string_view operator()(const ParallelStmt&) { return "parallel"; }
    std::string_view operator()(const ForStmt& f) { return LoopName(f.loop); }
    std::string_view operator()(const IfStmt&) { return "if"; }
    std::string_view operator()(const LetStmt&) { return "let"; }
    std::string_view operator()(const StoreStmt&) { return "store"; }
    std::string_view operator()(const RasterizeStmt&) { return "rasterize"; }
  };
  return std::visit(Visitor{}, stmt.node);
}

// Statements a `parallel` body may hold (§6.16).
bool AllowedInParallel(const Stmt& stmt) {
  if (const auto* f = std::get_if<ForStmt>(&stmt.node)) {
    return f->loop != LoopKind::kPipelined;
  }
  return std::holds_alternative<LetStmt>(stmt.node) ||
         std::holds_alternative<StoreStmt>(stmt.node) ||
         std::holds_alternative<IfStmt>(stmt.node);
}

}  // namespace

// ------------------------------------------------------------- statements

void KernelVerifier::CheckBlock(const Block& block, const StmtContext& ctx) {
  PushScope();
  CheckStmts(block, ctx);
  PopScope();
}

void KernelVerifier::CheckStmts(const Block& block, const StmtContext& ctx) {
  for (const Stmt& stmt : block) CheckStmt(stmt, ctx);
}

void KernelVerifier::CheckStmt(const Stmt& stmt, const StmtContext& ctx) {
  if (ctx.depth > kMaxNestingDepth) {
    Report(stmt.loc, StrCat("statements nest deeper than the limit of ",
                            kMaxNestingDepth, " levels"));
    return;
  }
  if (ctx.in_parallel && !AllowedInParallel(stmt)) {
    Report(stmt.loc, StrCat("'", StmtKeyword(stmt),
                            "' is not allowed inside 'parallel'; its "
                            "body holds only let, stores, if and "
                            "serial/unroll loops"));
  }
  std::visit(
      [&](const auto& node) {
        using T = std::decay_t<decltype(node)>;
        if constexpr (std::is_same_v<T, AllocStmt>) {
          CheckAlloc(stmt, node);
        } else if constexpr (std::is_same_v<T, CopyStmt>) {
          CheckCopy(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, FillStmt>) {
          CheckFill(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, GemmStmt>) {
          CheckGemm(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, ReduceStmt>) {
          CheckReduce(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, CumsumStmt>) {
          CheckCumsum(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, AtomicAddStmt>) {
          CheckAtomicAdd(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, ParallelStmt>) {
          CheckParallel(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          CheckFor(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          CheckIf(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, LetStmt>) {
          CheckLet(stmt, node, ctx);
        } else if constexpr (std::is_same_v<T, StoreStmt>) {
          CheckStore(stmt, node, ctx);
        } else {
          CheckRasterize(stmt, node, ctx);
        }
      },
      stmt.node);
}

void KernelVerifier::CheckAlloc(const Stmt& stmt, const AllocStmt& a) {
  NameInfo info;
  info.kind = NameKind::kTile;
  info.loc = stmt.loc;
  info.type = Type::Of(a.dtype);
  info.scope = a.scope;
  info.shape = a.shape;
  if (a.scope == Scope::kGlobal) {
    Report(stmt.loc, StrCat("tile '", a.name,
                            "' cannot be global; alloc shared, fragment "
                            "or local tiles"));
    info.valid = false;
  }
  if (a.shape.empty()) {
    Report(stmt.loc, StrCat("tile '", a.name, "' has no dims"));
    info.valid = false;
  }
  const ExprRules rules = CompileTimeRules("a tile dim");
  for (size_t i = 0; i < a.shape.size(); ++i) {
    const Expr& d = a.shape[i];
    std::optional<int64_t> v;
    if (!CheckIntExpr(d, rules, "a tile dim", &v)) {
      info.valid = false;
    } else if (v && *v <= 0) {
      Report(d.loc, StrCat("dim ", i, " of tile '", a.name, "' is ", *v,
                           "; tile dims are positive"));
      info.valid = false;
    } else if (v && i + 1 == a.shape.size() && *v % 2 != 0 &&
               (a.dtype == DType::kI4 || a.dtype == DType::kU4)) {
      Report(d.loc,
             StrCat("last dim of ", DTypeName(a.dtype), " tile '", a.name,
                    "' is ", *v, "; packed 4-bit dims must be even"));
      info.valid = false;
    }
  }
  if (a.layout.kind != Layout::Kind::kNone && a.scope != Scope::kShared) {
    Report(stmt.loc, StrCat("layout applies to shared tiles only; '", a.name,
                            "' is ", ScopeName(a.scope)));
  } else if (a.layout.kind == Layout::Kind::kSwizzle && a.layout.param != 32 &&
             a.layout.param != 64 && a.layout.param != 128) {
    Report(stmt.loc, StrCat("swizzle(", a.layout.param,
                            ") is not supported; expected swizzle(32), "
                            "swizzle(64) or swizzle(128)"));
  } else if (a.layout.kind == Layout::Kind::kPadded && a.layout.param < 0) {
    Report(stmt.loc, StrCat("padded(", a.layout.param,
                            ") is negative; padding is 0 or more "
                            "elements"));
  }
  Declare(a.name, std::move(info));
}

void KernelVerifier::CheckParallel(const Stmt& stmt, const ParallelStmt& p,
                                   const StmtContext& ctx) {
  if (p.vars.empty() || p.vars.size() != p.extents.size()) {
    Report(stmt.loc, StrCat("parallel binds ", p.vars.size(),
                            " variables but gives ", p.extents.size(),
                            " extents; expected one extent per "
                            "variable (at least one)"));
  }
  ExprRules rules = CompileTimeRules("a parallel extent");
  rules.in_parallel = ctx.in_parallel;
  for (const Expr& e : p.extents) {
    std::optional<int64_t> v;
    if (CheckIntExpr(e, rules, "a parallel extent", &v) && v && *v <= 0) {
      Report(e.loc, StrCat("parallel extent ", *v, " must be positive"));
    }
  }
  PushScope();
  for (const std::string& v : p.vars) {
    NameInfo info;
    info.kind = NameKind::kParallelVar;
    info.loc = stmt.loc;
    info.type = Type::Int();
    Declare(v, std::move(info));
  }
  StmtContext inner{
      .in_parallel = true, .top_level = false, .depth = ctx.depth + 1};
  CheckStmts(p.body, inner);
  PopScope();
}

void KernelVerifier::CheckFor(const Stmt& stmt, const ForStmt& f,
                              const StmtContext& ctx) {
  ExprRules rules = BodyRules(ctx);
  if (f.start) CheckIntExpr(*f.start, rules, "a loop bound", nullptr);
  CheckIntExpr(f.stop, rules, "a loop bound", nullptr);
  if (f.loop == LoopKind::kPipelined) {
    if (!f.stages) {
      Report(stmt.loc, "a pipelined loop needs 'stages='");
    } else {
      ExprRules stage_rules = CompileTimeRules("'stages'");
      stage_rules.in_parallel = ctx.in_parallel;
      std::optional<int64_t> v;
      if (CheckIntExpr(*f.stages, stage_rules, "'stages'", &v) && v &&
          (*v < 1 || *v > 8)) {
        Report(f.stages->loc, StrCat("stages=", *v,
                                     " is out of range; expected 1 "
                                     "to 8"));
      }
    }
  } else if (f.stages) {
    Report(f.stages->loc, StrCat("'stages' applies to pipelined loops "
                                 "only; this loop is ",
                                 LoopName(f.loop)));
  }
  PushScope();
  NameInfo info;
  info.kind = NameKind::kLoopVar;
  info.loc = stmt.loc;
  info.type = Type::Int();
  Declare(f.var, std::move(info));
  StmtContext inner = ctx;
  inner.top_level = false;
  inner.depth = ctx.depth + 1;
  CheckStmts(f.body, inner);
  PopScope();
}

void KernelVerifier::CheckIf(const Stmt& stmt, const IfStmt& s,
                             const StmtContext& ctx) {
  CheckBoolExpr(s.cond, BodyRules(ctx), "an 'if' condition");
  StmtContext inner = ctx;
  inner.top_level = false;
  inner.depth = ctx.depth + 1;
  CheckBlock(s.then_body, inner);
  CheckBlock(s.else_body, inner);
}

void KernelVerifier::CheckLet(const Stmt& stmt, const LetStmt& l,
                              const StmtContext& ctx) {
  Type t = checker_.Check(l.value, BodyRules(ctx));
  NameInfo info;
  info.kind = NameKind::kLet;
  info.loc = stmt.loc;
  info.type = t;
  info.valid = !t.IsError();
  Declare(l.name, std::move(info));
}

void KernelVerifier::CheckStore(const Stmt& stmt, const StoreStmt& s,
                                const StmtContext& ctx) {
  ExprRules rules = BodyRules(ctx);
  const NameInfo* info = Lookup(s.name);
  bool ok = true;
  if (info == nullptr) {
    checker_.ReportUnknown(s.name, stmt.loc);
    ok = false;
  } else if (info->kind == NameKind::kTensor && !ctx.in_parallel) {
    Report(stmt.loc, StrCat("cannot store into tensor '", s.name,
                            "' outside 'parallel'; store tensor elements in "
                            "a 'parallel' body, or write tensors with copy "
                            "or atomic_add"));
    ok = false;
  } else if (info->kind == NameKind::kTensor && s.op != AssignOp::kSet &&
             !HasAtomicForm(s.op)) {
    Report(stmt.loc,
           StrCat("'", AssignOpSpelling(s.op), "' into tensor '", s.name,
                  "': elements of a 'parallel' may race; '=', and the "
                  "atomic '+=', 'max=' and 'min=', are the stores into a "
                  "tensor element"));
    ok = false;
  } else if (info->kind != NameKind::kTile && info->kind != NameKind::kTensor) {
    Report(stmt.loc, StrCat("cannot store into '", s.name, "', a ",
                            NameKindName(info->kind),
                            "; only tile elements can be stored"));
    ok = false;
  } else if (!ctx.in_parallel && info->scope == Scope::kShared) {
    Report(stmt.loc, StrCat("shared tile '", s.name,
                            "' is stored outside 'parallel'; outside "
                            "'parallel' only local tiles and fragments may "
                            "be stored"));
    ok = false;
  }
  if (ok) {
    ok = checker_.CheckIndices(s.name, *info, s.indices, stmt.loc, rules);
  } else {
    for (const Expr& index : s.indices) checker_.Check(index, rules);
  }
  Type value = checker_.Check(s.value, rules);
  if (!ok || !info->valid || value.IsError() || s.op == AssignOp::kSet) return;
  if (s.op == AssignOp::kMax || s.op == AssignOp::kMin) {
    if (!info->type.IsNumber() || !value.IsNumber()) {
      Report(stmt.loc,
             StrCat("'", AssignOpSpelling(s.op), "' on ", info->type.ToString(),
                    " tile '", s.name, "': needs numbers; found ",
                    info->type.ToString(), " and ", value.ToString()));
    }
    return;
  }
  const BinaryOp op = *CompoundBinaryOp(s.op);
  std::string error;
  BinaryResultType(op, info->type, value, &error);
  if (!error.empty()) {
    Report(stmt.loc,
           StrCat("'", AssignOpSpelling(s.op), "' on ", info->type.ToString(),
                  " tile '", s.name, "': ", error));
  } else if (op == BinaryOp::kDiv && info->type.IsInteger() &&
             value.IsInteger()) {
    std::optional<int64_t> divisor = FoldInt(s.value);
    if (divisor && *divisor == 0) Report(s.value.loc, "division by zero");
  }
}

void KernelVerifier::CheckRasterize(const Stmt& stmt, const RasterizeStmt& r,
                                    const StmtContext& ctx) {
  if (!ctx.in_parallel) {
    if (!ctx.top_level) {
      Report(stmt.loc, "rasterize must be at the top level of the kernel body");
    } else if (rasterize_loc_) {
      Report(stmt.loc, StrCat("rasterize appears again (first at ",
                              LocString(*rasterize_loc_),
                              "); a kernel rasterizes at most once"));
    } else {
      rasterize_loc_ = stmt.loc;
    }
  }
  std::optional<int64_t> v;
  if (CheckIntExpr(r.panel, BodyRules(ctx), "the rasterize panel", &v) && v &&
      *v <= 0) {
    Report(r.panel.loc, StrCat("rasterize panel ", *v, " must be positive"));
  }
}

}  // namespace kiln::compiler::verifier_internal
