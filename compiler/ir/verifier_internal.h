// Internal to the verifier: the per-kernel checker shared by verifier.cc
// (names, scopes, headers, control statements) and verifier_tile_ops.cc
// (regions and tile ops). Not a public interface.
#ifndef KILN_COMPILER_IR_VERIFIER_INTERNAL_H_
#define KILN_COMPILER_IR_VERIFIER_INTERNAL_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/diagnostic.h"
#include "compiler/ir/ir.h"
#include "compiler/ir/type_check.h"

namespace kiln::compiler::verifier_internal {

// Where a statement sits.
struct StmtContext {
  bool in_parallel = false;
  bool top_level = true;  // directly in the kernel body
  int depth = 1;          // statement nesting, 1 for the kernel body
};

// A checked region operand.
struct RegionInfo {
  const NameInfo* buffer = nullptr;  // never nullptr in a returned RegionInfo
  std::vector<Expr> shape;           // range and full dims; index dims dropped
  bool shape_known = true;  // false after an error: skip shape comparisons
};

// verifier_locals.cc: a local tile stored inside `parallel` is read only
// where the same iteration stored the element (tile-ir.md §6, rule 8).
void CheckPrivateLocals(const Kernel& kernel, Diagnostics* diags);

class KernelVerifier : public NameTable {
 public:
  KernelVerifier(const Kernel& kernel, Diagnostics* diags);

  // Checks the whole kernel, appending to the diagnostics.
  void Run();

  // NameTable.
  const NameInfo* Lookup(std::string_view name) const override;
  std::optional<Loc> DeclaredElsewhere(std::string_view name) const override;

 private:
  // ---- names and scopes (verifier.cc)
  void PushScope();
  void PopScope();
  // Declares `name`; reports a redeclaration (and keeps the first) or an
  // invalid name. Returns false on error.
  bool Declare(const std::string& name, NameInfo info);
  void PrescanBlock(const Block& block, int depth);
  void Report(const Loc& loc, std::string message);

  // An integer expression with restricted names; reports a non-integer type
  // as "<what> must be an integer; found T". Returns the folded constant
  // value when there is one, via *value. False on error.
  bool CheckIntExpr(const Expr& e, const ExprRules& rules,
                    std::string_view what, std::optional<int64_t>* value);
  // A bool expression ("<what> must be bool; found T").
  // Reports float literals, float casts and float scalar parameters in an
  // `assume` fact (assumptions are integer facts).
  void CheckIntegerFact(const Expr& e);
  size_t diags_count() const { return diags_->size(); }
  void CheckBoolExpr(const Expr& e, const ExprRules& rules,
                     std::string_view what);
  ExprRules BodyRules(const StmtContext& ctx) const;

  // ---- kernel headers (verifier.cc)
  void DeclareParams();
  void DeclareTunables();
  void DeclareBlockIndices();
  void CheckHeaders();  // strides, `where`, `assume`
  void CheckLaunch();

  // ---- statements (verifier.cc)
  void CheckBlock(const Block& block, const StmtContext& ctx);
  void CheckStmts(const Block& block, const StmtContext& ctx);
  void CheckStmt(const Stmt& stmt, const StmtContext& ctx);
  void CheckAlloc(const Stmt& stmt, const AllocStmt& a);
  void CheckParallel(const Stmt& stmt, const ParallelStmt& p,
                     const StmtContext& ctx);
  void CheckFor(const Stmt& stmt, const ForStmt& f, const StmtContext& ctx);
  void CheckIf(const Stmt& stmt, const IfStmt& s, const StmtContext& ctx);
  void CheckLet(const Stmt& stmt, const LetStmt& l, const StmtContext& ctx);
  void CheckStore(const Stmt& stmt, const StoreStmt& s, const StmtContext& ctx);
  void CheckRasterize(const Stmt& stmt, const RasterizeStmt& r,
                      const StmtContext& ctx);

  // ---- regions and tile ops (verifier_tile_ops.cc)
  std::optional<RegionInfo> CheckRegion(const Region& region,
                                        const StmtContext& ctx);
  void CheckCopy(const Stmt& stmt, const CopyStmt& c, const StmtContext& ctx);
  void CheckFill(const Stmt& stmt, const FillStmt& f, const StmtContext& ctx);
  // A gemm, reduce or cumsum operand: its region extents are compile-time
  // (tunables and constants; those ops have no clipped element form).
  void CheckCompileTimeExtents(const Region& region, std::string_view op);
  void CheckGemm(const Stmt& stmt, const GemmStmt& g, const StmtContext& ctx);
  void CheckReduce(const Stmt& stmt, const ReduceStmt& r,
                   const StmtContext& ctx);
  void CheckCumsum(const Stmt& stmt, const CumsumStmt& c,
                   const StmtContext& ctx);
  void CheckAtomicAdd(const Stmt& stmt, const AtomicAddStmt& a,
                      const StmtContext& ctx);

  const Kernel& kernel_;
  Diagnostics* diags_;
  ExprChecker checker_;
  std::map<std::string, NameInfo, std::less<>> visible_;
  std::vector<std::vector<std::string>> frames_;  // names declared per block
  // Every name declared so far, visible or not: names are unique per kernel.
  std::map<std::string, NameInfo, std::less<>> declared_;
  std::map<std::string, Loc, std::less<>> body_decls_;  // every body binder
  std::optional<Loc> rasterize_loc_;
};

// "a global tensor", "a shared tile", "a fragment tile", "a local tile".
std::string DescribeBuffer(const NameInfo& info);

// "LINE:COL".
std::string LocString(const Loc& loc);

// Expression rules allowing only `allowed` names (and constants), described
// in messages as "<context> may use only <allowed_text>".
ExprRules Rules(NameKindSet allowed, std::string_view context,
                std::string_view allowed_text);
// Symbols, tunables and constants: the launch.
ExprRules LaunchRules(std::string_view context);
ExprRules GridRules();
// Tunables and constants: tile dims, parallel extents, stages, `where`.
ExprRules CompileTimeRules(std::string_view context);

}  // namespace kiln::compiler::verifier_internal

#endif  // KILN_COMPILER_IR_VERIFIER_INTERNAL_H_
