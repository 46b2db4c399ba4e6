// Lowering of tile ops to loops over element accesses (the lowered form,
// tile-ir.md §8), for targets where one thread runs a whole block (CPU).
//
// 1. Collect every buffer (tensor parameters, allocs) with its scope, dtype
//    and shape.
// 2. Describe each operand region as an access: per dim either a fixed index
//    or `start + iv` over a loop variable; unit-extent dims take no loop.
// 3. Emit loop nests:
//    copy        dst(ivs) = src(ivs), edge-guarded on global operands
//                (out-of-range reads give 0, out-of-range writes are skipped)
//    fill/clear  dst(ivs) = value
//    gemm        for i, k: let a = A(i, k); for j: C(i, j) += a * B(k, j)
//                (j innermost, so the inner loop runs along rows of B and C
//                and vectorises)
//    reduce      init (when clear), then dst(o) = combine(dst(o), src(o, r))
//    cumsum      dst(.., t) = dst(.., t - 1) + src(.., t), in place safe
//    atomic_add  dst(ivs) += src(ivs) on global memory (atomic by §8)
//    parallel    nested serial loops over its index space
//    rasterize   dropped: block order is not observable on the CPU
// 4. Guards are emitted naively; the simplify pass removes those it proves.
#include <functional>
#include <map>

#include "absl/status/statusor.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/format.h"
#include "compiler/ir/rewrite.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/region_access.h"

namespace kiln::compiler {
namespace {

using Buffer = RegionBuffer;

using Access = RegionAccess;

Stmt MakeStmt(auto node, Loc loc) {
  Stmt s;
  s.loc = loc;
  s.node = std::move(node);
  return s;
}

Stmt Store(const std::string& name, std::vector<Expr> idx, Expr value,
           AssignOp op, Loc loc) {
  StoreStmt st;
  st.name = name;
  st.indices = std::move(idx);
  st.value = std::move(value);
  st.op = op;
  return MakeStmt(std::move(st), loc);
}

class Lowerer {
 public:
  explicit Lowerer(Kernel& k) : kernel_(k), names_(CollectNames(k)) {
    for (const Param& p : k.params) {
      if (p.is_tensor) buffers_[p.name] = {Scope::kGlobal, p.dtype, p.shape};
    }
  }

  absl::Status Run() { return LowerBlock(kernel_.body, &kernel_.body); }

 private:
  absl::Status LowerBlock(const Block& in, Block* out_ptr) {
    Block out;
    for (const Stmt& s : in) {
      absl::Status st = std::visit(
          [&](const auto& node) { return Lower(node, s.loc, &out); }, s.node);
      if (!st.ok()) return st;
    }
    *out_ptr = std::move(out);
    return absl::OkStatus();
  }

  absl::StatusOr<Access> MakeAccess(const Region& r) {
    auto it = buffers_.find(r.name);
    if (it == buffers_.end()) {
      return LocatedError(r.loc, StrCat("unknown buffer '", r.name, "'"));
    }
    return Access(r, &it->second);
  }

  // Wraps `body` in serial loops over `extents`, giving the loop variables.
  Stmt Nest(const std::vector<Expr>& extents, const std::string& base,
            const std::function<Block(const std::vector<Expr>&)>& body,
            Loc loc) {
    std::vector<std::string> vars;
    std::vector<Expr> ivs;
    for (size_t i = 0; i < extents.size(); ++i) {
      vars.push_back(names_.Fresh(StrCat(base, i)));
      ivs.push_back(Expr::Var(vars.back()));
    }
    Block inner = body(ivs);
    for (size_t i = extents.size(); i-- > 0;) {
      ForStmt f;
      f.var = vars[i];
      f.loop = LoopKind::kSerial;
      f.stop = extents[i];
      f.body = std::move(inner);
      inner.clear();
      inner.push_back(MakeStmt(std::move(f), loc));
    }
    if (inner.size() == 1) return std::move(inner[0]);
    IfStmt wrap;  // no loops at all: run the body once
    wrap.cond = Expr::Bool(true);
    wrap.then_body = std::move(inner);
    return MakeStmt(std::move(wrap), loc);
  }

  static Block Guarded(Expr guard, Stmt then_stmt,
                       std::optional<Stmt> else_stmt, Loc loc) {
    Block b;
    if (guard.kind == ExprKind::kBool && guard.bool_value) {
      b.push_back(std::move(then_stmt));
      return b;
    }
    IfStmt s;
    s.cond = std::move(guard);
    s.then_body.push_back(std::move(then_stmt));
    if (else_stmt) {
      s.has_else = true;
      s.else_body.push_back(std::move(*else_stmt));
    }
    b.push_back(MakeStmt(std::move(s), loc));
    return b;
  }

  absl::Status Lower(const AllocStmt& a, Loc loc, Block* out) {
    buffers_[a.name] = {a.scope, a.dtype, a.shape};
    out->push_back(MakeStmt(a, loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const CopyStmt& c, Loc loc, Block* out) {
    auto src = MakeAccess(c.src);
    auto dst = MakeAccess(c.dst);
    if (!src.ok()) return src.status();
    if (!dst.ok()) return dst.status();
    out->push_back(Nest(
        dst->FreeExtents(true), "i",
        [&](const auto& ivs) {
          std::vector<Expr> si = src->Indices(ivs, true);
          std::vector<Expr> di = dst->Indices(ivs, true);
          Expr guard = src->Guard(si);
          Expr dguard = dst->Guard(di);
          if (src->buffer->scope == Scope::kGlobal) {
            // Out-of-range reads are not performed: the element is zero.
            return Guarded(
                std::move(guard),
                Store(dst->name, di, Expr::Load(src->name, si), AssignOp::kSet,
                      loc),
                Store(dst->name, di, Expr::Int(0), AssignOp::kSet, loc), loc);
          }
          return Guarded(std::move(dguard),
                         Store(dst->name, di, Expr::Load(src->name, si),
                               AssignOp::kSet, loc),
                         std::nullopt, loc);
        },
        loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const FillStmt& f, Loc loc, Block* out) {
    auto dst = MakeAccess(f.dst);
    if (!dst.ok()) return dst.status();
    out->push_back(Nest(
        dst->FreeExtents(true), "i",
        [&](const auto& ivs) {
          Block b;
          b.push_back(Store(dst->name, dst->Indices(ivs, true), f.value,
                            AssignOp::kSet, loc));
          return b;
        },
        loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const GemmStmt& g, Loc loc, Block* out) {
    auto a = MakeAccess(g.a);
    auto b = MakeAccess(g.b);
    auto c = MakeAccess(g.c);
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    if (!c.ok()) return c.status();
    std::vector<Expr> ce = c->FreeExtents(false), ae = a->FreeExtents(false);
    if (ce.size() != 2 || ae.size() != 2 || b->FreeExtents(false).size() != 2) {
      return LocatedError(loc, "gemm needs rank-2 operands",
                          absl::StatusCode::kUnimplemented);
    }
    const DType acc = c->buffer->dtype;
    Expr m = ce[0], n = ce[1], kdim = g.transpose_a ? ae[0] : ae[1];
    if (g.clear_accum) {
      out->push_back(Nest(
          ce, "i",
          [&](const auto& ivs) {
            Block blk;
            blk.push_back(Store(c->name, c->Indices(ivs, false), Expr::Int(0),
                                AssignOp::kSet, loc));
            return blk;
          },
          loc));
    }
    std::string a_val = names_.Fresh("a");
    out->push_back(Nest(
        {m, kdim}, "g",
        [&](const auto& mk) {
          const Expr& i = mk[0];
          const Expr& kk = mk[1];
          Block blk;
          LetStmt let;
          let.name = a_val;
          let.value =
              Expr::Cast(acc, a->Load(g.transpose_a ? std::vector<Expr>{kk, i}
                                                    : std::vector<Expr>{i, kk},
                                      false));
          blk.push_back(MakeStmt(std::move(let), loc));
          blk.push_back(Nest(
              {n}, "j",
              [&](const auto& jv) {
                const Expr& j = jv[0];
                Expr bv = Expr::Cast(
                    acc, b->Load(g.transpose_b ? std::vector<Expr>{j, kk}
                                               : std::vector<Expr>{kk, j},
                                 false));
                Block inner;
                inner.push_back(
                    Store(c->name, c->Indices({i, j}, false),
                          Expr::Binary(BinaryOp::kMul, Expr::Var(a_val),
                                       std::move(bv)),
                          AssignOp::kAdd, loc));
                return inner;
              },
              loc));
          return blk;
        },
        loc));
    return absl::OkStatus();
  }

  static Expr ReduceInit(ReduceKind op, DType t) {
    bool is_float = IsFloat(t);
    switch (op) {
      case ReduceKind::kSum:
      case ReduceKind::kAbsMax:
        return Expr::Int(0);
      case ReduceKind::kMax:
        return is_float
                   ? Expr::Unary(UnaryOp::kNeg, Expr::Float(__builtin_inf()))
                   : Expr::Int(IsSigned(t) ? -(int64_t{1} << (DTypeBits(t) - 1))
                                           : 0);
      case ReduceKind::kMin:
        return is_float
                   ? Expr::Float(__builtin_inf())
                   : Expr::Int(IsSigned(t)
                                   ? (int64_t{1} << (DTypeBits(t) - 1)) - 1
                                   : (DTypeBits(t) >= 64
                                          ? INT64_MAX
                                          : (int64_t{1} << DTypeBits(t)) - 1));
    }
    return Expr::Int(0);
  }

  absl::Status Lower(const ReduceStmt& r, Loc loc, Block* out) {
    auto src = MakeAccess(r.src);
    auto dst = MakeAccess(r.dst);
    if (!src.ok()) return src.status();
    if (!dst.ok()) return dst.status();
    std::vector<Expr> se = src->FreeExtents(false);
    if (r.dim < 0 || r.dim >= static_cast<int64_t>(se.size())) {
      return LocatedError(loc, StrCat("reduce dim ", r.dim, " out of range"));
    }
    auto without_dim = [&](const std::vector<Expr>& v) {
      std::vector<Expr> o;
      for (size_t d = 0; d < v.size(); ++d) {
        if (static_cast<int64_t>(d) != r.dim) o.push_back(v[d]);
      }
      return o;
    };
    if (r.clear) {
      Expr init = ReduceInit(r.op, dst->buffer->dtype);
      out->push_back(Nest(
          without_dim(se), "i",
          [&](const auto& ivs) {
            Block b;
            b.push_back(Store(dst->name, dst->Indices(ivs, false), init,
                              AssignOp::kSet, loc));
            return b;
          },
          loc));
    }
    out->push_back(Nest(
        se, "r",
        [&](const auto& ivs) {
          std::vector<Expr> di = dst->Indices(without_dim(ivs), false);
          Expr s = src->Load(ivs, false);
          Block b;
          if (r.op == ReduceKind::kSum) {
            b.push_back(
                Store(dst->name, di, std::move(s), AssignOp::kAdd, loc));
            return b;
          }
          Expr cur = Expr::Load(dst->name, di);
          if (r.op == ReduceKind::kAbsMax)
            s = Expr::Call("abs", {std::move(s)});
          std::string fn = r.op == ReduceKind::kMin ? "min" : "max";
          b.push_back(Store(dst->name, di,
                            Expr::Call(fn, {std::move(cur), std::move(s)}),
                            AssignOp::kSet, loc));
          return b;
        },
        loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const CumsumStmt& c, Loc loc, Block* out) {
    auto src = MakeAccess(c.src);
    auto dst = MakeAccess(c.dst);
    if (!src.ok()) return src.status();
    if (!dst.ok()) return dst.status();
    std::vector<Expr> se = src->FreeExtents(false);
    if (c.dim < 0 || c.dim >= static_cast<int64_t>(se.size())) {
      return LocatedError(loc, StrCat("cumsum dim ", c.dim, " out of range"));
    }
    const Expr n = se[c.dim];
    std::vector<Expr> others;
    for (size_t d = 0; d < se.size(); ++d) {
      if (static_cast<int64_t>(d) != c.dim) others.push_back(se[d]);
    }
    // Indices with the scan position `t` inserted at `dim`.
    auto with_t = [&](const std::vector<Expr>& o, Expr t) {
      std::vector<Expr> ivs = o;
      ivs.insert(ivs.begin() + c.dim, std::move(t));
      return ivs;
    };
    auto sub = [](Expr a, int64_t b) {
      return FoldConstants(
          Expr::Binary(BinaryOp::kSub, std::move(a), Expr::Int(b)));
    };
    out->push_back(Nest(
        others, "i",
        [&](const auto& o) {
          Block b;
          // First element: the scan starts at index 0 (or n-1 when reversed).
          Expr first = c.reverse ? sub(n, 1) : Expr::Int(0);
          b.push_back(Store(dst->name, dst->Indices(with_t(o, first), false),
                            src->Load(with_t(o, first), false), AssignOp::kSet,
                            loc));
          b.push_back(Nest(
              {sub(n, 1)}, "t",
              [&](const auto& uv) {
                // Forward: t = u + 1, prev = u. Reverse: t = n - 2 - u, prev =
                // t + 1.
                Expr t = c.reverse ? FoldConstants(Expr::Binary(
                                         BinaryOp::kSub, sub(n, 2), uv[0]))
                                   : FoldConstants(Expr::Binary(
                                         BinaryOp::kAdd, uv[0], Expr::Int(1)));
                Expr prev = c.reverse ? FoldConstants(Expr::Binary(
                                            BinaryOp::kAdd, t, Expr::Int(1)))
                                      : uv[0];
                Block inner;
                inner.push_back(
                    Store(dst->name, dst->Indices(with_t(o, t), false),
                          Expr::Binary(
                              BinaryOp::kAdd,
                              Expr::Load(dst->name,
                                         dst->Indices(with_t(o, prev), false)),
                              src->Load(with_t(o, t), false)),
                          AssignOp::kSet, loc));
                return inner;
              },
              loc));
          return b;
        },
        loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const AtomicAddStmt& a, Loc loc, Block* out) {
    auto src = MakeAccess(a.src);
    auto dst = MakeAccess(a.dst);
    if (!src.ok()) return src.status();
    if (!dst.ok()) return dst.status();
    out->push_back(Nest(
        dst->FreeExtents(true), "i",
        [&](const auto& ivs) {
          std::vector<Expr> di = dst->Indices(ivs, true);
          return Guarded(
              dst->Guard(di),
              Store(dst->name, di, src->Load(ivs, true), AssignOp::kAdd, loc),
              std::nullopt, loc);
        },
        loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const ParallelStmt& p, Loc loc, Block* out) {
    Block body;
    absl::Status st = LowerBlock(p.body, &body);
    if (!st.ok()) return st;
    for (size_t i = p.vars.size(); i-- > 0;) {
      ForStmt f;
      f.var = p.vars[i];
      f.loop = LoopKind::kSerial;
      f.stop = p.extents[i];
      f.body = std::move(body);
      body.clear();
      body.push_back(MakeStmt(std::move(f), loc));
    }
    for (Stmt& s : body) out->push_back(std::move(s));
    return absl::OkStatus();
  }

  absl::Status Lower(const ForStmt& f, Loc loc, Block* out) {
    if (f.loop == LoopKind::kPipelined) {
      return LocatedError(
          loc,
          "pipelined loop reached lowering (pipeline-loops must run first)",
          absl::StatusCode::kInternal);
    }
    ForStmt copy = f;
    absl::Status st = LowerBlock(f.body, &copy.body);
    if (!st.ok()) return st;
    out->push_back(MakeStmt(std::move(copy), loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const IfStmt& s, Loc loc, Block* out) {
    IfStmt copy = s;
    absl::Status st = LowerBlock(s.then_body, &copy.then_body);
    if (st.ok()) st = LowerBlock(s.else_body, &copy.else_body);
    if (!st.ok()) return st;
    out->push_back(MakeStmt(std::move(copy), loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const LetStmt& l, Loc loc, Block* out) {
    out->push_back(MakeStmt(l, loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const StoreStmt& s, Loc loc, Block* out) {
    out->push_back(MakeStmt(s, loc));
    return absl::OkStatus();
  }

  absl::Status Lower(const RasterizeStmt&, Loc, Block*) {
    return absl::OkStatus();  // block order is not observable on the CPU
  }

  Kernel& kernel_;
  NameGenerator names_;
  std::map<std::string, Buffer> buffers_;
};

class LowerTileOpsPass : public Pass {
 public:
  std::string_view name() const override { return "lower-tile-ops"; }
  absl::Status Run(Kernel& k, PassContext& ctx) override {
    if (ctx.target != "cpu") {
      return absl::UnimplementedError(
          StrCat("target '", ctx.target, "' has no tile-op lowering yet"));
    }
    return Lowerer(k).Run();
  }
};

}  // namespace

std::unique_ptr<Pass> CreateLowerTileOpsPass() {
  return std::make_unique<LowerTileOpsPass>();
}

}  // namespace kiln::compiler
