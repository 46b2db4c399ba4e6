// reuse-loads: a copy of a tensor region into a whole tile that already
// holds exactly that region is dropped. TileLang's online softmax loads a
// row tile in its log-sum-exp loop and loads it again in its write loop;
// with the row in one tile both loops run once, and the second load reads
// the same bytes into the same tile:
//
//   for i in serial(0, 1) {                for i in serial(0, 1) {
//     copy X[r, i * BN:+BN] -> x             copy X[r, i * BN:+BN] -> x
//     ...reads x...                 =>       ...reads x...
//   }                                      }
//   for i2 in serial(0, 1) {               for i2 in serial(0, 1) {
//     copy X[r, i2 * BN:+BN] -> x            ...reads x...
//     ...reads x...                        }
//   }
//
// 1. Eligible copies: the destination is a whole tile, the source a tensor
//    the kernel never writes (so no block changes it while the kernel
//    runs), every extent a constant, every start naming only block
//    indices, scalar parameters, shape symbols and the variables of loops
//    that run exactly once (taken at their start).
// 2. The body is walked in order with the map tile -> region it holds.
//    An eligible copy whose region (starts substituted and folded) is the
//    one its tile holds is removed; otherwise it records its region. Any
//    other write to a tile (a store, fill, reduction, gemm, an ineligible
//    copy) forgets what it held.
// 3. A loop that runs exactly once is walked as straight-line code, its
//    variable bound to its start. Any other loop, and each branch of an
//    `if`, first forgets every tile written anywhere in it; what is learnt
//    inside is dropped at its end (it may run zero times or many).
// The meaning is the same on every target: the tile holds the same values
// either way (out-of-range elements read zero both times).
#include <map>
#include <optional>
#include <set>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/expr_uses.h"
#include "compiler/ir/rewrite.h"
#include "compiler/ir/written_buffers.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

// The names an expression reads (variables and loaded buffers).
void Names(const Expr& e, std::set<std::string>* out) {
  if (e.kind == ExprKind::kVar || e.kind == ExprKind::kLoad) {
    out->insert(e.name);
  }
  for (const Expr& a : e.args) Names(a, out);
}

struct Held {
  std::string tensor;
  std::vector<Slice> slices;  // substituted and folded
  bool operator==(const Held&) const = default;
};

class ReuseLoads {
 public:
  explicit ReuseLoads(const Kernel& k) {
    AddWrittenBuffers(k.body, &written_);
    for (const std::string& v : k.block_vars) fixed_.insert(v);
    for (const Param& p : k.params) {
      if (p.is_tensor) {
        tensors_.insert(p.name);
        for (const Expr& d : p.shape) Names(d, &fixed_);
        for (const Expr& d : p.strides) Names(d, &fixed_);
      } else {
        fixed_.insert(p.name);
      }
    }
  }

  void Walk(Block& b, std::map<std::string, Held>& held,
            const std::map<std::string, Expr>& once) {
    for (size_t i = 0; i < b.size();) {
      Stmt& s = b[i];
      if (auto* c = std::get_if<CopyStmt>(&s.node)) {
        if (!tensors_.count(c->dst.name)) {
          std::optional<Held> h = Eligible(*c, once);
          if (h) {
            auto it = held.find(c->dst.name);
            if (it != held.end() && it->second == *h) {
              b.erase(b.begin() + static_cast<std::ptrdiff_t>(i));
              continue;
            }
            held[c->dst.name] = std::move(*h);
          } else {
            held.erase(c->dst.name);
          }
        }
      } else if (auto* f = std::get_if<ForStmt>(&s.node)) {
        const Expr start = f->start ? FoldConstants(*f->start) : Expr::Int(0);
        const std::optional<int64_t> lo = FoldInt(start);
        const std::optional<int64_t> hi = FoldInt(FoldConstants(f->stop));
        if (lo && hi && *hi - *lo == 1) {
          std::map<std::string, Expr> inner = once;
          inner[f->var] = Expr::Int(*lo);
          Walk(f->body, held, inner);
        } else {
          Scoped(f->body, held, once);
        }
      } else if (auto* br = std::get_if<IfStmt>(&s.node)) {
        Block both = br->then_body;
        both.insert(both.end(), br->else_body.begin(), br->else_body.end());
        Forget(both, held);
        std::map<std::string, Held> a = held, e = held;
        Walk(br->then_body, a, once);
        Walk(br->else_body, e, once);
      } else if (auto* a = std::get_if<AllocStmt>(&s.node)) {
        held.erase(a->name);
      } else if (std::holds_alternative<RasterizeStmt>(s.node)) {
        held.clear();  // the block indices mean other blocks after it
      } else {
        Forget(Block{s}, held);
      }
      ++i;
    }
  }

 private:
  // A loop of any other trip count: what it writes is forgotten before it
  // (later iterations see earlier ones' writes) and what it learns after.
  void Scoped(Block& body, std::map<std::string, Held>& held,
              const std::map<std::string, Expr>& once) {
    Forget(body, held);
    std::map<std::string, Held> inner = held;
    Walk(body, inner, once);
  }

  static void Forget(const Block& b, std::map<std::string, Held>& held) {
    std::set<std::string> w;
    AddWrittenBuffers(b, &w);
    for (const std::string& n : w) held.erase(n);
  }

  std::optional<Held> Eligible(const CopyStmt& c,
                               const std::map<std::string, Expr>& once) const {
    if (!tensors_.count(c.src.name) || written_.count(c.src.name)) {
      return std::nullopt;
    }
    for (const Slice& s : c.dst.slices) {
      if (s.kind != Slice::Kind::kFull) return std::nullopt;
    }
    Held h{c.src.name, {}};
    for (const Slice& s : c.src.slices) {
      Slice t = s;
      if (s.kind != Slice::Kind::kFull) {
        t.start = FoldConstants(Substitute(s.start, once));
        std::set<std::string> used;
        Names(t.start, &used);
        for (const std::string& n : used) {
          if (!fixed_.count(n)) return std::nullopt;
        }
      }
      if (s.kind == Slice::Kind::kRange) {
        t.extent = FoldConstants(s.extent);
        if (!FoldInt(t.extent)) return std::nullopt;
      }
      h.slices.push_back(std::move(t));
    }
    return h;
  }

  std::set<std::string> written_, tensors_, fixed_;
};

class ReuseLoadsPass : public Pass {
 public:
  std::string_view name() const override { return "reuse-loads"; }
  absl::Status Run(Kernel& k, PassContext&) override {
    std::map<std::string, Held> held;
    ReuseLoads(k).Walk(k.body, held, {});
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Pass> CreateReuseLoadsPass() {
  return std::make_unique<ReuseLoadsPass>();
}

}  // namespace kiln::compiler
