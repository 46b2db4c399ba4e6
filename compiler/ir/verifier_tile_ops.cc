// Verifier rules for regions and tile ops (tile-ir.md §6.9-§6.14).
//
// Every op first checks its regions (names, slices, ranges), then the scopes
// and dtypes its operands need, then their shapes. Shape rules compare the
// region shapes (range and full dims; index dims dropped) statically with
// CompareShapes (const_fold.h). When two operands disagree the second one in
// source order is reported, saying what it has and what was expected.
#include <functional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"
#include "compiler/ir/verifier_internal.h"

namespace kiln::compiler::verifier_internal {
namespace {

// The copy rule (§6.9): unit dims are ignored unless both sides are whole
// buffers, which must have equal shapes.
DimCompare CompareOperandShapes(const Region& ra, const RegionInfo& a,
                                const Region& rb, const RegionInfo& b) {
  if (!ra.has_slices && !rb.has_slices) return CompareShapes(a.shape, b.shape);
  return CompareShapes(DropUnitDims(a.shape), DropUnitDims(b.shape));
}

// "; expected [..] to match <what>" or, when not provable, a note saying so.
std::string Expectation(DimCompare c, std::span<const Expr> expected,
                        std::string_view what) {
  std::string out =
      StrCat("; expected ", ShapeToString(expected), " to match ", what);
  if (c == DimCompare::kUnproven) {
    StrAppend(&out, " (the dims cannot be proven equal)");
  }
  return out;
}

std::string Quoted(std::string_view name) { return StrCat("'", name, "'"); }

bool IsGemmInput(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kI8:
    case DType::kF32:
    case DType::kF64:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::optional<RegionInfo> KernelVerifier::CheckRegion(const Region& region,
                                                      const StmtContext& ctx) {
  ExprRules rules = BodyRules(ctx);
  const NameInfo* info = checker_.LookupBuffer(region.name, region.loc);
  bool check_dims = info != nullptr && info->valid;
  if (check_dims && region.has_slices &&
      region.slices.size() != info->shape.size()) {
    Report(region.loc, StrCat("region of '", region.name, "' has ",
                              region.slices.size(), " slices; '", region.name,
                              "' has ", info->shape.size(), " dims"));
    check_dims = false;
  }
  RegionInfo out;
  out.buffer = info;
  out.shape_known = check_dims;
  if (!region.has_slices) {
    if (info != nullptr) out.shape = info->shape;
    return info == nullptr ? std::nullopt : std::optional<RegionInfo>(out);
  }
  bool is_tensor = info != nullptr && info->kind == NameKind::kTensor;
  for (size_t i = 0; i < region.slices.size(); ++i) {
    const Slice& s = region.slices[i];
    std::optional<int64_t> dim;
    if (check_dims) dim = FoldInt(info->shape[i]);
    auto where = [&] {
      return StrCat(" for dim ", i, " of '", region.name, "' (size ",
                    dim.value_or(0), ")");
    };
    if (s.kind == Slice::Kind::kFull) {
      if (check_dims) out.shape.push_back(info->shape[i]);
      continue;
    }
    std::optional<int64_t> start, extent;
    bool start_ok = CheckIntExpr(s.start, rules, "a slice start", &start);
    if (start_ok && start && dim && (*start < 0 || *start >= *dim)) {
      Report(s.start.loc,
             StrCat("slice start ", *start, " is out of range", where()));
      out.shape_known = false;
    }
    if (!start_ok) out.shape_known = false;
    if (s.kind == Slice::Kind::kIndex) continue;
    if (!CheckIntExpr(s.extent, rules, "a slice extent", &extent)) {
      out.shape_known = false;
    } else if (extent && *extent <= 0) {
      Report(s.extent.loc, StrCat("slice extent ", *extent, " of '",
                                  region.name, "' must be positive"));
      out.shape_known = false;
    } else if (extent && dim && *extent > *dim && !is_tensor) {
      // A tensor region may be larger than a constant dim (a block tile
      // over a small tensor): the overhang is out of range, as at a
      // ragged edge.
      Report(s.extent.loc,
             StrCat("slice extent ", *extent, " exceeds the size", where()));
      out.shape_known = false;
    } else if (extent && dim && start && !is_tensor && *start >= 0 &&
               *start<*dim&& * extent> * dim - *start) {
      // Tensor regions may overhang the end (out-of-range elements are
      // skipped); tile regions may not.
      Report(s.extent.loc, StrCat("slice ", *start, ":+", *extent,
                                  " runs past the end", where()));
      out.shape_known = false;
    }
    if (check_dims) out.shape.push_back(s.extent);
  }
  if (info == nullptr) return std::nullopt;
  return out;
}

void KernelVerifier::CheckCompileTimeExtents(const Region& region,
                                             std::string_view op) {
  std::function<bool(const Expr&)> report_run_time = [&](const Expr& e) {
    if (e.kind == ExprKind::kVar) {
      const NameInfo* info = Lookup(e.name);
      // (An unknown name was reported by CheckRegion.)
      if (!info || info->kind == NameKind::kTunable) return false;
      Report(e.loc, StrCat("'", e.name, "' is a ", NameKindName(info->kind),
                           "; a ", op,
                           " region extent may use only tunables and "
                           "constants (a copy, fill or atomic_add may have a "
                           "run-time extent)"));
      return true;
    }
    if (e.kind == ExprKind::kLoad) {
      Report(e.loc, StrCat("a ", op,
                           " region extent may use only tunables "
                           "and constants; found a load of '",
                           e.name, "'"));
      return true;
    }
    for (const Expr& a : e.args) {
      if (report_run_time(a)) return true;
    }
    return false;
  };
  for (const Slice& s : region.slices) {
    if (s.kind == Slice::Kind::kRange) report_run_time(s.extent);
  }
}

void KernelVerifier::CheckCopy(const Stmt& stmt, const CopyStmt& c,
                               const StmtContext& ctx) {
  std::optional<RegionInfo> src = CheckRegion(c.src, ctx);
  std::optional<RegionInfo> dst = CheckRegion(c.dst, ctx);
  if (!src || !dst) return;
  if (src->buffer->scope == Scope::kGlobal &&
      dst->buffer->scope == Scope::kGlobal) {
    Report(stmt.loc,
           StrCat("copy from global '", c.src.name, "' to global '", c.dst.name,
                  "'; at most one operand of a copy may be global "
                  "(stage it through a shared or fragment tile)"));
    return;
  }
  if (!src->shape_known || !dst->shape_known) return;
  DimCompare cmp = CompareOperandShapes(c.src, *src, c.dst, *dst);
  if (cmp == DimCompare::kEqual) return;
  Report(c.dst.loc, StrCat("copy destination '", c.dst.name, "' has shape ",
                           ShapeToString(dst->shape),
                           Expectation(cmp, src->shape,
                                       StrCat("source '", c.src.name, "'"))));
}

void KernelVerifier::CheckFill(const Stmt& stmt, const FillStmt& f,
                               const StmtContext& ctx) {
  std::optional<RegionInfo> dst = CheckRegion(f.dst, ctx);
  std::string_view op = f.is_clear ? "clear" : "fill";
  if (dst && dst->buffer->scope == Scope::kGlobal) {
    Report(f.dst.loc, StrCat(op, " destination '", f.dst.name, "' is ",
                             DescribeBuffer(*dst->buffer),
                             "; expected a shared, fragment or local tile"));
  }
  if (f.is_clear) return;
  Type t = checker_.Check(f.value, BodyRules(ctx));
  if (!t.IsError() && !t.IsNumber() && !t.IsBool()) {
    Report(f.value.loc, StrCat("fill value must be a number or bool; "
                               "found ",
                               t.ToString()));
  }
}

void KernelVerifier::CheckGemm(const Stmt& stmt, const GemmStmt& g,
                               const StmtContext& ctx) {
  std::optional<RegionInfo> a = CheckRegion(g.a, ctx);
  std::optional<RegionInfo> b = CheckRegion(g.b, ctx);
  std::optional<RegionInfo> c = CheckRegion(g.c, ctx);
  CheckCompileTimeExtents(g.a, "gemm");
  CheckCompileTimeExtents(g.b, "gemm");
  CheckCompileTimeExtents(g.c, "gemm");
  bool ok = a && b && c;
  // Scopes and ranks.
  for (auto [region, info] : {std::pair{&g.a, &a}, std::pair{&g.b, &b}}) {
    if (!*info) continue;
    Scope s = (*info)->buffer->scope;
    if (s != Scope::kShared && s != Scope::kFragment) {
      Report(region->loc, StrCat("gemm operand '", region->name, "' is ",
                                 DescribeBuffer(*(*info)->buffer),
                                 "; expected a shared or fragment tile"));
      ok = false;
    } else if ((*info)->shape_known && (*info)->shape.size() != 2) {
      Report(region->loc, StrCat("gemm operand '", region->name, "' has rank ",
                                 (*info)->shape.size(), "; expected rank 2"));
      ok = false;
    }
  }
  if (c && c->buffer->scope != Scope::kFragment) {
    Report(g.c.loc,
           StrCat("gemm accumulator '", g.c.name, "' is ",
                  DescribeBuffer(*c->buffer), "; expected a fragment tile"));
    ok = false;
  } else if (c && c->shape_known && c->shape.size() != 2) {
    Report(g.c.loc, StrCat("gemm accumulator '", g.c.name, "' has rank ",
                           c->shape.size(), "; expected rank 2"));
    ok = false;
  }
  if (!ok) return;
  // Dtypes.
  DType ta = a->buffer->type.dtype, tb = b->buffer->type.dtype;
  DType tc = c->buffer->type.dtype;
  if (!IsGemmInput(ta)) {
    Report(g.a.loc,
           StrCat("gemm operand '", g.a.name, "' has dtype ", DTypeName(ta),
                  "; expected f16, bf16, f8e4m3, f8e5m2, i8, f32 "
                  "or f64"));
  } else if (ta != tb) {
    Report(g.b.loc,
           StrCat("gemm operand '", g.b.name, "' has dtype ", DTypeName(tb),
                  "; expected ", DTypeName(ta), " to match '", g.a.name, "'"));
  } else {
    // f64 accumulates in f64 only (gradient checks need its precision).
    bool acc_ok =
        ta == DType::kI8 ? tc == DType::kI32
        : ta == DType::kF64
            ? tc == DType::kF64
            : tc == DType::kF32 || (ta == DType::kF16 && tc == DType::kF16);
    if (!acc_ok) {
      std::string_view want = ta == DType::kI8    ? "i32"
                              : ta == DType::kF16 ? "f32 or f16"
                              : ta == DType::kF64 ? "f64"
                                                  : "f32";
      Report(g.c.loc, StrCat("gemm accumulator '", g.c.name, "' has dtype ",
                             DTypeName(tc), "; expected ", want, " for ",
                             DTypeName(ta), " inputs"));
    }
  }
  // Shapes: op(A) is [M, K], op(B) is [K, N], C is [M, N].
  if (!a->shape_known || !b->shape_known || !c->shape_known) return;
  const Expr& m = a->shape[g.transpose_a ? 1 : 0];
  const Expr& k = a->shape[g.transpose_a ? 0 : 1];
  const Expr& kb = b->shape[g.transpose_b ? 1 : 0];
  const Expr& n = b->shape[g.transpose_b ? 0 : 1];
  bool b_ok = true;
  if (DimCompare cmp = CompareDims(k, kb); cmp != DimCompare::kEqual) {
    std::vector<Expr> want = g.transpose_b ? std::vector<Expr>{c->shape[1], k}
                                           : std::vector<Expr>{k, c->shape[1]};
    Report(g.b.loc, StrCat("gemm operand '", g.b.name, "' has shape ",
                           ShapeToString(b->shape),
                           Expectation(cmp, want,
                                       StrCat(Quoted(g.a.name), " ",
                                              ShapeToString(a->shape)))));
    b_ok = false;
  }
  DimCompare cm = CompareDims(c->shape[0], m);
  DimCompare cn = b_ok ? CompareDims(c->shape[1], n) : DimCompare::kEqual;
  if (cm != DimCompare::kEqual || cn != DimCompare::kEqual) {
    DimCompare cmp = (cm == DimCompare::kDiffer || cn == DimCompare::kDiffer)
                         ? DimCompare::kDiffer
                         : DimCompare::kUnproven;
    std::vector<Expr> want{m, b_ok ? n : c->shape[1]};
    Report(g.c.loc, StrCat("gemm accumulator '", g.c.name, "' has shape ",
                           ShapeToString(c->shape),
                           Expectation(cmp, want,
                                       StrCat(Quoted(g.a.name), " ",
                                              ShapeToString(a->shape), " and ",
                                              Quoted(g.b.name), " ",
                                              ShapeToString(b->shape)))));
  }
}

void KernelVerifier::CheckReduce(const Stmt& stmt, const ReduceStmt& r,
                                 const StmtContext& ctx) {
  std::optional<RegionInfo> src = CheckRegion(r.src, ctx);
  std::optional<RegionInfo> dst = CheckRegion(r.dst, ctx);
  CheckCompileTimeExtents(r.src, "reduce");
  CheckCompileTimeExtents(r.dst, "reduce");
  bool ok = src && dst;
  for (auto [region, info, role] : {std::tuple{&r.src, &src, "source"},
                                    std::tuple{&r.dst, &dst, "destination"}}) {
    if (*info && (*info)->buffer->scope != Scope::kFragment) {
      Report(region->loc, StrCat("reduce ", role, " '", region->name, "' is ",
                                 DescribeBuffer(*(*info)->buffer),
                                 "; expected a fragment tile"));
      ok = false;
    }
  }
  if (!ok || !src->shape_known) return;
  int64_t rank = static_cast<int64_t>(src->shape.size());
  if (r.dim < 0 || r.dim >= rank) {
    Report(stmt.loc, StrCat("reduce dim=", r.dim,
                            " is out of range for source '", r.src.name,
                            "' of rank ", rank, "; expected 0 to ", rank - 1));
    return;
  }
  if (!dst->shape_known) return;
  std::vector<Expr> want = src->shape;
  want.erase(want.begin() + r.dim);
  DimCompare cmp = CompareShapes(DropUnitDims(want), DropUnitDims(dst->shape));
  if (cmp == DimCompare::kEqual) return;
  Report(r.dst.loc, StrCat("reduce destination '", r.dst.name, "' has shape ",
                           ShapeToString(dst->shape),
                           Expectation(cmp, want,
                                       StrCat("source '", r.src.name, "' ",
                                              ShapeToString(src->shape),
                                              " without dim ", r.dim))));
}

void KernelVerifier::CheckCumsum(const Stmt& stmt, const CumsumStmt& c,
                                 const StmtContext& ctx) {
  std::optional<RegionInfo> src = CheckRegion(c.src, ctx);
  std::optional<RegionInfo> dst = CheckRegion(c.dst, ctx);
  CheckCompileTimeExtents(c.src, "cumsum");
  CheckCompileTimeExtents(c.dst, "cumsum");
  bool ok = src && dst;
  for (auto [region, info, role] : {std::tuple{&c.src, &src, "source"},
                                    std::tuple{&c.dst, &dst, "destination"}}) {
    if (!*info) continue;
    Scope s = (*info)->buffer->scope;
    if (s != Scope::kFragment && s != Scope::kShared) {
      Report(region->loc, StrCat("cumsum ", role, " '", region->name, "' is ",
                                 DescribeBuffer(*(*info)->buffer),
                                 "; expected a fragment or shared "
                                 "tile"));
      ok = false;
    }
  }
  if (!ok || !src->shape_known) return;
  int64_t rank = static_cast<int64_t>(src->shape.size());
  if (c.dim < 0 || c.dim >= rank) {
    Report(stmt.loc, StrCat("cumsum dim=", c.dim,
                            " is out of range for source '", c.src.name,
                            "' of rank ", rank, "; expected 0 to ", rank - 1));
    return;
  }
  if (!dst->shape_known) return;
  DimCompare cmp =
      CompareShapes(DropUnitDims(src->shape), DropUnitDims(dst->shape));
  if (cmp == DimCompare::kEqual) return;
  Report(c.dst.loc, StrCat("cumsum destination '", c.dst.name, "' has shape ",
                           ShapeToString(dst->shape),
                           Expectation(cmp, src->shape,
                                       StrCat("source '", c.src.name, "'"))));
}

void KernelVerifier::CheckAtomicAdd(const Stmt& stmt, const AtomicAddStmt& a,
                                    const StmtContext& ctx) {
  std::optional<RegionInfo> dst = CheckRegion(a.dst, ctx);
  std::optional<RegionInfo> src = CheckRegion(a.src, ctx);
  bool ok = src && dst;
  if (dst && dst->buffer->scope != Scope::kGlobal) {
    Report(a.dst.loc, StrCat("atomic_add destination '", a.dst.name, "' is ",
                             DescribeBuffer(*dst->buffer),
                             "; expected a global tensor region"));
    ok = false;
  }
  if (src && src->buffer->scope == Scope::kGlobal) {
    Report(a.src.loc, StrCat("atomic_add source '", a.src.name,
                             "' is a global tensor; expected a tile"));
    ok = false;
  }
  if (!ok || !src->shape_known || !dst->shape_known) return;
  DimCompare cmp = CompareOperandShapes(a.dst, *dst, a.src, *src);
  if (cmp == DimCompare::kEqual) return;
  Report(a.src.loc,
         StrCat("atomic_add source '", a.src.name, "' has shape ",
                ShapeToString(src->shape),
                Expectation(cmp, dst->shape,
                            StrCat("destination '", a.dst.name, "'"))));
}

}  // namespace kiln::compiler::verifier_internal
