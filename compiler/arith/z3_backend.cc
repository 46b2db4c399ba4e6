// Translation of integer IR expressions to Z3 and one query per call.
//
// 1. Integer expressions map to Z3 integers: + - * (any), floor / and % by a
//    positive constant (SMT-LIB div/mod are Euclidean, which agrees with
//    floor semantics for a positive divisor), min/max as ite, ceildiv by a
//    positive constant. Comparisons and && || ! map to Z3 booleans.
// 2. Anything else (loads, floats, calls, shifts) is untranslatable.
// 3. A query asserts the ranges, facts and the negated condition inside a
//    push/pop scope and asks for unsat.
#include "compiler/arith/z3_backend.h"

#include <z3++.h>

#include <map>
#include <optional>

namespace kiln::compiler {

struct Z3Backend::Impl {
  explicit Impl(unsigned rlimit) : solver(ctx) {
    z3::params p(ctx);
    p.set("rlimit", rlimit);
    p.set("model", false);
    p.set("random_seed", 42u);
    solver.set(p);
  }

  std::optional<z3::expr> Int(const Expr& e, int depth) {
    if (depth > 64) return std::nullopt;
    switch (e.kind) {
      case ExprKind::kInt:
        return ctx.int_val(static_cast<int64_t>(e.int_value));
      case ExprKind::kVar: {
        auto it = vars.find(e.name);
        if (it == vars.end()) {
          it = vars.emplace(e.name, ctx.int_const(e.name.c_str())).first;
        }
        return it->second;
      }
      case ExprKind::kUnary: {
        if (e.unary_op != UnaryOp::kNeg || e.args.size() != 1) break;
        auto a = Int(e.args[0], depth + 1);
        if (!a) break;
        return -*a;
      }
      case ExprKind::kBinary: {
        if (e.args.size() != 2) break;
        auto a = Int(e.args[0], depth + 1);
        auto b = Int(e.args[1], depth + 1);
        if (!a || !b) break;
        switch (e.binary_op) {
          case BinaryOp::kAdd:
            return *a + *b;
          case BinaryOp::kSub:
            return *a - *b;
          case BinaryOp::kMul:
            return *a * *b;
          case BinaryOp::kDiv:
            if (!PositiveConst(e.args[1])) break;
            return z3::expr(ctx, Z3_mk_div(ctx, *a, *b));
          case BinaryOp::kMod:
            if (!PositiveConst(e.args[1])) break;
            return z3::mod(*a, *b);
          default:
            break;
        }
        break;
      }
      case ExprKind::kCall: {
        if (e.args.size() != 2) break;
        auto a = Int(e.args[0], depth + 1);
        auto b = Int(e.args[1], depth + 1);
        if (!a || !b) break;
        if (e.name == "min") return z3::ite(*a <= *b, *a, *b);
        if (e.name == "max") return z3::ite(*a >= *b, *a, *b);
        if (e.name == "ceildiv" && PositiveConst(e.args[1])) {
          return z3::expr(ctx, Z3_mk_div(ctx, *a + *b - 1, *b));
        }
        break;
      }
      default:
        break;
    }
    return std::nullopt;
  }

  std::optional<z3::expr> Bool(const Expr& e, int depth) {
    if (depth > 64) return std::nullopt;
    if (e.kind == ExprKind::kBool) return ctx.bool_val(e.bool_value);
    if (e.kind == ExprKind::kUnary && e.unary_op == UnaryOp::kNot &&
        e.args.size() == 1) {
      auto a = Bool(e.args[0], depth + 1);
      if (!a) return std::nullopt;
      return !*a;
    }
    if (e.kind != ExprKind::kBinary || e.args.size() != 2) return std::nullopt;
    if (e.binary_op == BinaryOp::kAnd || e.binary_op == BinaryOp::kOr) {
      auto a = Bool(e.args[0], depth + 1);
      auto b = Bool(e.args[1], depth + 1);
      if (!a || !b) return std::nullopt;
      return e.binary_op == BinaryOp::kAnd ? (*a && *b) : (*a || *b);
    }
    auto a = Int(e.args[0], depth + 1);
    auto b = Int(e.args[1], depth + 1);
    if (!a || !b) return std::nullopt;
    switch (e.binary_op) {
      case BinaryOp::kLt:
        return *a < *b;
      case BinaryOp::kLe:
        return *a <= *b;
      case BinaryOp::kGt:
        return *a > *b;
      case BinaryOp::kGe:
        return *a >= *b;
      case BinaryOp::kEq:
        return *a == *b;
      case BinaryOp::kNe:
        return *a != *b;
      default:
        return std::nullopt;
    }
  }

  static bool PositiveConst(const Expr& e) {
    return e.kind == ExprKind::kInt && e.int_value > 0;
  }

  z3::context ctx;
  z3::solver solver;
  std::map<std::string, z3::expr> vars;
};

Z3Backend::Z3Backend(unsigned rlimit) : impl_(std::make_unique<Impl>(rlimit)) {}
Z3Backend::~Z3Backend() = default;

bool Z3Backend::Prove(const std::vector<RangeFact>& ranges,
                      const std::vector<Expr>& facts, const Expr& cond) {
  try {
    auto goal = impl_->Bool(cond, 0);
    if (!goal) return false;
    z3::solver& s = impl_->solver;
    s.push();
    for (const RangeFact& r : ranges) {
      auto v = impl_->Int(Expr::Var(r.var), 0);
      auto lo = impl_->Int(*r.lo, 0);
      auto hi = impl_->Int(*r.hi, 0);
      if (v && lo) s.add(*lo <= *v);
      if (v && hi) s.add(*v < *hi);
    }
    for (const Expr& f : facts) {
      if (auto b = impl_->Bool(f, 0)) s.add(*b);
    }
    s.add(!*goal);
    z3::check_result r = s.check();
    s.pop();
    return r == z3::unsat;
  } catch (const z3::exception&) {
    impl_->solver.reset();
    return false;
  }
}

}  // namespace kiln::compiler
