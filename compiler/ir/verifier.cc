// The verifier: every rule of compiler/docs/tile-ir.md §6.
//
// 1. Kernel names are checked across the program; each kernel is then
//    checked on its own by a KernelVerifier.
// 2. The kernel's interface is declared in source order (parameters and
//    their symbols, tunables, block indices), then the headers are checked:
//    strides, `where`, `assume`, the launch.
// 3. The body is walked once, in order, with a stack of scopes: a name is
//    visible from its declaration to the end of its block, and a name is
//    declared at most once in a kernel (no shadowing, and no reuse in a later
//    block either). Statements are checked in verifier_stmts.cc, regions and
//    tile ops in verifier_tile_ops.cc, expressions by ExprChecker
//    (type_check.h).
// 4. Diagnostics are sorted by location (stable, so that errors at one token
//    keep their discovery order).
//
// Cascades are avoided by error types (type_check.h), NameInfo::valid for a
// declaration with an error, and by reporting an unknown name once.
#include "compiler/ir/verifier.h"

#include <algorithm>
#include <set>
#include <utility>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"
#include "compiler/ir/lexer.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/verifier_internal.h"

namespace kiln::compiler {
namespace verifier_internal {

std::string LocString(const Loc& loc) { return StrCat(loc.line, ":", loc.col); }

ExprRules Rules(NameKindSet allowed, std::string_view context,
                std::string_view allowed_text) {
  ExprRules r;
  r.allowed = allowed;
  r.context = context;
  r.allowed_text = allowed_text;
  return r;
}

ExprRules LaunchRules(std::string_view context) {
  return Rules({NameKind::kSymbol, NameKind::kTunable}, context,
               "symbols, tunables and constants");
}

// A grid is evaluated at launch from the arguments, so it may also use
// integer scalar parameters (TileLang sizes a varlen kernel's grid by
// `max_seqlen_q: T.int32`); the integer check rejects float scalars.
ExprRules GridRules() {
  return Rules({NameKind::kSymbol, NameKind::kScalarParam, NameKind::kTunable},
               "a grid extent",
               "symbols, integer scalar parameters, tunables and constants");
}

ExprRules CompileTimeRules(std::string_view context) {
  return Rules({NameKind::kTunable}, context, "tunables and constants");
}

std::string DescribeBuffer(const NameInfo& info) {
  if (info.kind == NameKind::kTensor) return "a global tensor";
  return StrCat("a ", ScopeName(info.scope), " tile");
}

KernelVerifier::KernelVerifier(const Kernel& kernel, Diagnostics* diags)
    : kernel_(kernel), diags_(diags), checker_(this, diags) {}

// ------------------------------------------------------------ names, scopes

const NameInfo* KernelVerifier::Lookup(std::string_view name) const {
  auto it = visible_.find(name);
  return it == visible_.end() ? nullptr : &it->second;
}

std::optional<Loc> KernelVerifier::DeclaredElsewhere(
    std::string_view name) const {
  auto it = body_decls_.find(name);
  if (it == body_decls_.end()) return std::nullopt;
  return it->second;
}

void KernelVerifier::Report(const Loc& loc, std::string message) {
  diags_->push_back({loc, std::move(message)});
}

void KernelVerifier::PushScope() { frames_.emplace_back(); }

void KernelVerifier::PopScope() {
  if (frames_.empty()) return;
  for (const std::string& name : frames_.back()) visible_.erase(name);
  frames_.pop_back();
}

bool KernelVerifier::Declare(const std::string& name, NameInfo info) {
  std::string_view kind = NameKindName(info.kind);
  if (name.empty() || IsKeyword(name) || ParseDType(name)) {
    Report(info.loc, StrCat("'", name, "' cannot name a ", kind,
                            ": it is a keyword or a dtype name"));
    return false;
  }
  if (auto prev = declared_.find(name); prev != declared_.end()) {
    Report(info.loc, StrCat("'", name, "' is already declared as a ",
                            NameKindName(prev->second.kind), " at ",
                            LocString(prev->second.loc),
                            "; names are unique within a kernel"));
    // A reuse in a later block still binds its uses there (no follow-on
    // "not in scope"); a shadowing declaration leaves the first visible.
    if (Lookup(name) == nullptr && !frames_.empty()) {
      frames_.back().push_back(name);
      visible_.emplace(name, std::move(info));
    }
    return false;
  }
  if (frames_.empty()) PushScope();
  frames_.back().push_back(name);
  declared_.emplace(name, info);
  visible_.emplace(name, std::move(info));
  return true;
}

void KernelVerifier::PrescanBlock(const Block& block, int depth) {
  if (depth > kMaxNestingDepth) return;
  for (const Stmt& stmt : block) {
    auto note = [&](const std::string& name) {
      body_decls_.emplace(name, stmt.loc);
    };
    if (const auto* a = std::get_if<AllocStmt>(&stmt.node)) note(a->name);
    if (const auto* l = std::get_if<LetStmt>(&stmt.node)) note(l->name);
    if (const auto* f = std::get_if<ForStmt>(&stmt.node)) {
      note(f->var);
      PrescanBlock(f->body, depth + 1);
    }
    if (const auto* p = std::get_if<ParallelStmt>(&stmt.node)) {
      for (const std::string& v : p->vars) note(v);
      PrescanBlock(p->body, depth + 1);
    }
    if (const auto* s = std::get_if<IfStmt>(&stmt.node)) {
      PrescanBlock(s->then_body, depth + 1);
      PrescanBlock(s->else_body, depth + 1);
    }
  }
}

bool KernelVerifier::CheckIntExpr(const Expr& e, const ExprRules& rules,
                                  std::string_view what,
                                  std::optional<int64_t>* value) {
  Type t = checker_.Check(e, rules);
  if (t.IsError()) return false;
  if (!t.IsInteger()) {
    Report(e.loc, StrCat(what, " must be an integer; found ", t.ToString()));
    return false;
  }
  if (value != nullptr) *value = FoldInt(e);
  return true;
}

void KernelVerifier::CheckBoolExpr(const Expr& e, const ExprRules& rules,
                                   std::string_view what) {
  Type t = checker_.Check(e, rules);
  if (t.IsError() || t.IsBool()) return;
  Report(e.loc, StrCat(what, " must be bool; found ", t.ToString()));
}

ExprRules KernelVerifier::BodyRules(const StmtContext& ctx) const {
  ExprRules r;
  r.in_parallel = ctx.in_parallel;
  return r;
}

// ---------------------------------------------------------------- headers

void KernelVerifier::Run() {
  PushScope();
  PrescanBlock(kernel_.body, 1);
  // The whole interface is declared before any header expression is checked,
  // so that a misplaced name is told what it is rather than "unknown".
  DeclareParams();
  DeclareTunables();
  DeclareBlockIndices();
  CheckHeaders();
  CheckLaunch();
  StmtContext ctx;
  CheckStmts(kernel_.body, ctx);
  PopScope();
}

void KernelVerifier::DeclareParams() {
  for (const Param& p : kernel_.params) {
    NameInfo info;
    info.kind = p.is_tensor ? NameKind::kTensor : NameKind::kScalarParam;
    info.loc = p.loc;
    info.type = Type::Of(p.dtype);
    info.scope = Scope::kGlobal;
    info.shape = p.shape;
    if (p.is_tensor && p.shape.empty()) {
      Report(p.loc, StrCat("tensor '", p.name, "' has no dims"));
      info.valid = false;
    }
    if (!p.is_tensor && !p.shape.empty()) {
      Report(p.loc,
             StrCat("scalar parameter '", p.name, "' cannot have a shape"));
    }
    for (size_t i = 0; i < p.shape.size(); ++i) {
      const Expr& d = p.shape[i];
      if (d.kind == ExprKind::kInt) {
        if (d.int_value <= 0) {
          Report(d.loc, StrCat("dim ", i, " of '", p.name, "' is ", d.int_value,
                               "; tensor dims are positive"));
          info.valid = false;
        }
      } else if (d.kind == ExprKind::kVar) {
        const NameInfo* prev = Lookup(d.name);
        if (prev != nullptr && prev->kind == NameKind::kSymbol) continue;
        NameInfo sym;
        sym.kind = NameKind::kSymbol;
        sym.loc = d.loc;
        sym.type = Type::Int();
        if (!Declare(d.name, std::move(sym))) info.valid = false;
      } else {
        Report(d.loc, StrCat("dim ", i, " of '", p.name,
                             "' must be an integer or a symbol"));
        info.valid = false;
      }
    }
    if ((p.dtype == DType::kI4 || p.dtype == DType::kU4) && !p.shape.empty()) {
      const Expr& last = p.shape.back();
      if (last.kind == ExprKind::kInt && last.int_value > 0 &&
          last.int_value % 2 != 0) {
        Report(last.loc, StrCat("last dim of ", DTypeName(p.dtype), " tensor '",
                                p.name, "' is ", last.int_value,
                                "; packed 4-bit dims must be even"));
        info.valid = false;
      }
    }
    Declare(p.name, std::move(info));
  }
}

void KernelVerifier::DeclareTunables() {
  for (const Tunable& t : kernel_.tunables) {
    NameInfo info;
    info.kind = NameKind::kTunable;
    info.loc = t.loc;
    info.type = Type::Int();
    Declare(t.name, std::move(info));
    if (t.candidates.empty()) {
      Report(t.loc, StrCat("tunable '", t.name, "' has no candidates"));
    }
    std::set<int64_t> seen;
    for (int64_t c : t.candidates) {
      if (!seen.insert(c).second) {
        Report(t.loc,
               StrCat("tunable '", t.name, "' lists ", c, " more than once"));
        break;
      }
    }
  }
}

void KernelVerifier::DeclareBlockIndices() {
  // Block index names carry no location of their own: `kernel` stands in.
  for (const std::string& name : kernel_.block_vars) {
    NameInfo info;
    info.kind = NameKind::kBlockIndex;
    info.loc = kernel_.loc;
    info.type = Type::Int();
    Declare(name, std::move(info));
  }
}

void KernelVerifier::CheckHeaders() {
  // Strides may name a symbol of any parameter.
  const ExprRules stride_rules =
      Rules({NameKind::kSymbol}, "a stride", "symbols and constants");
  for (const Param& p : kernel_.params) {
    if (p.strides.empty()) continue;
    if (p.strides.size() != p.shape.size()) {
      Report(p.loc, StrCat("'", p.name, "' has ", p.shape.size(),
                           " dims; found ", p.strides.size(), " strides"));
    }
    for (const Expr& s : p.strides) {
      CheckIntExpr(s, stride_rules, "a stride", nullptr);
    }
  }
  const ExprRules where = CompileTimeRules("a 'where' constraint");
  for (const Expr& e : kernel_.constraints) {
    CheckBoolExpr(e, where, "a 'where' constraint");
  }
  const ExprRules assume =
      Rules({NameKind::kSymbol, NameKind::kScalarParam}, "an 'assume' fact",
            "symbols, scalar parameters and constants");
  for (const Expr& e : kernel_.assumptions) {
    size_t before = diags_count();
    CheckBoolExpr(e, assume, "an 'assume' fact");
    if (diags_count() == before) CheckIntegerFact(e);
  }
}

// Assumptions are integer facts: the runtime checks them at launch with its
// integer evaluator and the prover uses them to drop bounds checks; a float
// fact could do neither.
void KernelVerifier::CheckIntegerFact(const Expr& e) {
  if (e.kind == ExprKind::kFloat) {
    Report(e.loc, "an 'assume' fact is over integers; found a float literal");
    return;
  }
  if (e.kind == ExprKind::kCast && IsFloat(e.dtype)) {
    Report(e.loc, StrCat("an 'assume' fact is over integers; found a cast to ",
                         DTypeName(e.dtype)));
    return;
  }
  if (e.kind == ExprKind::kVar) {
    const NameInfo* info = Lookup(e.name);
    if (info && info->kind == NameKind::kScalarParam &&
        !info->type.IsInteger() && !info->type.IsBool()) {
      Report(e.loc,
             StrCat("an 'assume' fact is over integers; '", e.name, "' is a ",
                    info->type.ToString(), " scalar parameter"));
    }
    return;
  }
  for (const Expr& a : e.args) CheckIntegerFact(a);
}

void KernelVerifier::CheckLaunch() {
  if (kernel_.grid.empty() || kernel_.grid.size() > 3) {
    Report(kernel_.loc, StrCat("the grid has ", kernel_.grid.size(),
                               " extents; expected 1 to 3"));
  }
  for (const Expr& e : kernel_.grid) {
    std::optional<int64_t> v;
    if (CheckIntExpr(e, GridRules(), "a grid extent", &v) && v && *v <= 0) {
      Report(e.loc, StrCat("grid extent ", *v, " must be positive"));
    }
  }
  std::optional<int64_t> threads;
  if (CheckIntExpr(kernel_.threads, LaunchRules("'threads'"), "'threads'",
                   &threads) &&
      threads && (*threads < 1 || *threads > 1024)) {
    Report(kernel_.threads.loc, StrCat("threads(", *threads,
                                       ") is out of range; expected 1 "
                                       "to 1024"));
  }
  if (!kernel_.cluster.empty() && kernel_.cluster.size() != 3) {
    Report(kernel_.cluster[0].loc,
           StrCat("a cluster has 3 extents; found ", kernel_.cluster.size()));
  }
  for (const Expr& e : kernel_.cluster) {
    std::optional<int64_t> v;
    if (CheckIntExpr(e, LaunchRules("a cluster extent"), "a cluster extent",
                     &v) &&
        v && *v <= 0) {
      Report(e.loc, StrCat("cluster extent ", *v, " must be positive"));
    }
  }
  if (kernel_.block_vars.size() != kernel_.grid.size() &&
      !kernel_.grid.empty() && kernel_.grid.size() <= 3) {
    Report(kernel_.loc,
           StrCat("the launch binds ", kernel_.block_vars.size(),
                  " block index names for ", kernel_.grid.size(),
                  " grid extents; expected one name per grid extent"));
  }
}

}  // namespace verifier_internal

Diagnostics Verify(const Program& program) {
  Diagnostics diags;
  if (program.kernels.empty()) {
    diags.push_back({Loc{}, "a program holds at least one kernel; found none"});
  }
  std::map<std::string, Loc, std::less<>> kernel_names;
  for (const Kernel& kernel : program.kernels) {
    auto [it, inserted] = kernel_names.emplace(kernel.name, kernel.loc);
    if (!inserted) {
      diags.push_back(
          {kernel.loc,
           StrCat("kernel '", kernel.name, "' is already defined at ",
                  verifier_internal::LocString(it->second),
                  "; kernel names are unique in a program")});
    }
    const size_t before = diags.size();
    verifier_internal::KernelVerifier(kernel, &diags).Run();
    if (diags.size() == before) {
      verifier_internal::CheckPrivateLocals(kernel, &diags);
    }
  }
  std::stable_sort(diags.begin(), diags.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     if (a.loc.line != b.loc.line)
                       return a.loc.line < b.loc.line;
                     return a.loc.col < b.loc.col;
                   });
  return diags;
}

}  // namespace kiln::compiler
