// Simplification and bounds-check elimination.
//
// 1. Facts in scope: every symbol is >= 0, every block index lies in
//    [0, grid extent), every `assume` holds; inside a loop its variable lies
//    in [start, stop); inside `if c` the condition holds (else its negation);
//    after `let x = e` of an index expression, x == e.
// 2. Expressions are simplified (simplify_expr.h) with those facts.
// 3. An `if` whose condition is proven true or false is replaced by the
//    branch that runs; of a conjunction, the conjuncts proven true are
//    dropped. This is what removes edge guards of copies when static dims or
//    `assume` facts show every access in range.
// 4. A loop proven to run zero times is removed.
#include "compiler/arith/prover.h"
#include "compiler/arith/simplify_expr.h"
#include "compiler/passes/kernel_facts.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

Expr Not(Expr e) { return Expr::Unary(UnaryOp::kNot, std::move(e)); }

void SplitAnd(const Expr& e, std::vector<Expr>* out) {
  if (e.kind == ExprKind::kBinary && e.binary_op == BinaryOp::kAnd &&
      e.args.size() == 2) {
    SplitAnd(e.args[0], out);
    SplitAnd(e.args[1], out);
  } else {
    out->push_back(e);
  }
}

class Simplifier {
 public:
  explicit Simplifier(Prover* prover) : prover_(prover) {}

  void Run(Kernel& k) {
    prover_->Push();
    AddSymbolFacts(k, prover_, &names_);
    for (Expr& a : k.assumptions) {
      a = Simp(a);
      prover_->AddFact(a);
    }
    for (Expr& g : k.grid) g = Simp(g);
    AddBlockRanges(k, prover_, &names_);
    SimplifyBlock(k.body);
    prover_->Pop();
  }

 private:
  Expr Simp(const Expr& e) { return SimplifyExpr(e, names_, prover_); }

  void SimplifyBlock(Block& block) {
    Block out;
    prover_->Push();  // lets are visible to the end of their block
    for (Stmt& s : block) SimplifyStmt(std::move(s), &out);
    prover_->Pop();
    block = std::move(out);
  }

  void Splice(Block&& body, Block* out) {
    SimplifyBlock(body);
    if (body.empty()) return;
    for (Stmt& s : body) out->push_back(std::move(s));
  }

  void SimplifyStmt(Stmt s, Block* out) {
    if (auto* f = std::get_if<ForStmt>(&s.node)) {
      Expr start = f->start ? Simp(*f->start) : Expr::Int(0);
      f->stop = Simp(f->stop);
      if (f->start) f->start = start;
      if (prover_->CanProve(Expr::Binary(BinaryOp::kLe, f->stop, start))) {
        return;  // never runs
      }
      prover_->Push();
      names_.insert(f->var);
      prover_->AddRange(f->var, start, f->stop);
      SimplifyBlock(f->body);
      prover_->Pop();
      out->push_back(std::move(s));
      return;
    }
    if (auto* i = std::get_if<IfStmt>(&s.node)) {
      std::vector<Expr> parts;
      SplitAnd(Simp(i->cond), &parts);
      Expr cond = Expr::Bool(true);
      bool is_false = false;
      for (Expr& p : parts) {
        if (p.kind == ExprKind::kBool && p.bool_value) continue;
        if (p.kind == ExprKind::kBool && !p.bool_value) is_false = true;
        if (IsIndexExpr(p, names_) && prover_->CanProve(p)) continue;
        cond =
            cond.kind == ExprKind::kBool
                ? std::move(p)
                : Expr::Binary(BinaryOp::kAnd, std::move(cond), std::move(p));
      }
      if (is_false) {
        Splice(std::move(i->else_body), out);
        return;
      }
      if (cond.kind == ExprKind::kBool) {
        Splice(std::move(i->then_body), out);
        return;
      }
      i->cond = cond;
      prover_->Push();
      prover_->AddFact(cond);
      SimplifyBlock(i->then_body);
      prover_->Pop();
      prover_->Push();
      prover_->AddFact(Not(cond));
      SimplifyBlock(i->else_body);
      prover_->Pop();
      if (i->else_body.empty()) i->has_else = false;
      out->push_back(std::move(s));
      return;
    }
    if (auto* p = std::get_if<ParallelStmt>(&s.node)) {
      // (Parallel extents are constants after specialisation: no range
      // bears on their simplification.)
      prover_->Push();
      for (size_t v = 0; v < p->vars.size() && v < p->extents.size(); ++v) {
        p->extents[v] = Simp(p->extents[v]);
      }
      AddParallelRanges(*p, prover_, &names_);
      SimplifyBlock(p->body);
      prover_->Pop();
      out->push_back(std::move(s));
      return;
    }
    if (auto* l = std::get_if<LetStmt>(&s.node)) {
      l->value = Simp(l->value);
      AddLetFact(l->name, l->value, prover_, &names_);
      out->push_back(std::move(s));
      return;
    }
    if (auto* st = std::get_if<StoreStmt>(&s.node)) {
      for (Expr& e : st->indices) e = Simp(e);
      st->value = Simp(st->value);
    }
    out->push_back(std::move(s));
  }

  Prover* prover_;
  IndexNames names_;
};

class SimplifyPass : public Pass {
 public:
  std::string_view name() const override { return "simplify"; }
  absl::Status Run(Kernel& k, PassContext& ctx) override {
    Simplifier(ctx.prover).Run(k);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Pass> CreateSimplifyPass() {
  return std::make_unique<SimplifyPass>();
}

}  // namespace kiln::compiler
