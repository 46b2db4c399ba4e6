// Translation of integer IR expressions to Z3 and one query per call.
//
// 1. Integer expressions map to Z3 integers: + - * (any), floor / and % by a
//    positive constant (SMT-LIB div/mod are Euclidean, which agrees with
//    floor semantics for a positive divisor), min/max as ite, ceildiv by a
//    positive constant. Comparisons and && || ! map to Z3 booleans.
// 2. Anything else (loads, floats, calls, shifts) is untranslatable.
// 3. A query asserts the ranges, facts and the negated condition inside a
//    push/pop scope and asks for unsat (a proof) or for a model (a
//    counterexample: the values of the query's variables, from a second
//    solver that keeps models).
#include "compiler/arith/z3_backend.h"

#include <z3++.h>

#include <map>
#include <optional>
#include <set>

namespace kiln::compiler {

struct Z3Backend::Impl {
  explicit Impl(unsigned limit) : solver(ctx), rlimit(limit) {
    z3::params p(ctx);
    p.set("rlimit", limit);
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
        used.insert(e.name);
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

  // Asserts the ranges, the facts and !cond in a scope and checks; with
  // `model`, a satisfying assignment's integer variables go there.
  z3::check_result Query(const std::vector<RangeFact>& ranges,
                         const std::vector<Expr>& facts, const Expr& cond,
                         std::map<std::string, int64_t>* model) {
    try {
      used.clear();
      auto goal = Bool(cond, 0);
      if (!goal) return z3::unknown;
      z3::solver& s = model ? Modelling() : solver;
      s.push();
      for (const RangeFact& r : ranges) {
        auto v = Int(Expr::Var(r.var), 0);
        auto lo = Int(*r.lo, 0);
        auto hi = Int(*r.hi, 0);
        if (v && lo) s.add(*lo <= *v);
        if (v && hi) s.add(*v < *hi);
      }
      for (const Expr& f : facts) {
        if (auto b = Bool(f, 0)) s.add(*b);
      }
      s.add(!*goal);
      const z3::check_result r = s.check();
      if (r == z3::sat && model) {
        const z3::model m = s.get_model();
        for (const std::string& name : used) {
          int64_t x = 0;
          if (m.eval(vars.at(name), true).is_numeral_i64(x)) {
            (*model)[name] = x;
          }
        }
      }
      s.pop();
      return r;
    } catch (const z3::exception&) {
      solver.reset();
      if (modelling) modelling->reset();
      return z3::unknown;
    }
  }

  // The solver that keeps models (counterexamples), made on first use.
  z3::solver& Modelling() {
    if (!modelling) {
      modelling.emplace(ctx);
      z3::params p(ctx);
      p.set("rlimit", rlimit);
      p.set("model", true);
      p.set("random_seed", 42u);
      modelling->set(p);
    }
    return *modelling;
  }

  static bool PositiveConst(const Expr& e) {
    return e.kind == ExprKind::kInt && e.int_value > 0;
  }

  z3::context ctx;
  z3::solver solver;
  unsigned rlimit;
  std::optional<z3::solver> modelling;
  std::map<std::string, z3::expr> vars;
  std::set<std::string> used;  // the variables of the current query
};

Z3Backend::Z3Backend(unsigned rlimit) : impl_(std::make_unique<Impl>(rlimit)) {}
Z3Backend::~Z3Backend() = default;

bool Z3Backend::Prove(const std::vector<RangeFact>& ranges,
                      const std::vector<Expr>& facts, const Expr& cond) {
  return impl_->Query(ranges, facts, cond, nullptr) == z3::unsat;
}

std::optional<std::map<std::string, int64_t>> Z3Backend::Counterexample(
    const std::vector<RangeFact>& ranges, const std::vector<Expr>& facts,
    const Expr& cond) {
  std::map<std::string, int64_t> values;
  if (impl_->Query(ranges, facts, cond, &values) != z3::sat) {
    return std::nullopt;
  }
  return values;
}

}  // namespace kiln::compiler
