// Prover: cheap interval rules, then the lazily created Z3 backend.
//
// 1. Fold the condition; a constant answers at once.
// 2. A condition equal to a fact in scope is proven.
// 3. Comparisons are decided from constant intervals: every index variable
//    in scope has a range whose ends are themselves bounded recursively.
// 4. Whatever is left goes to Z3 with every range and fact in scope.
#include "compiler/arith/prover.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "compiler/arith/z3_backend.h"
#include "compiler/ir/const_fold.h"

namespace kiln::compiler {
namespace {

constexpr int kMaxDepth = 32;

std::optional<int64_t> Add(std::optional<int64_t> a, std::optional<int64_t> b) {
  int64_t r;
  if (!a || !b || __builtin_add_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> Sub(std::optional<int64_t> a, std::optional<int64_t> b) {
  int64_t r;
  if (!a || !b || __builtin_sub_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> Mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

bool IsCompare(BinaryOp op) {
  return op == BinaryOp::kLt || op == BinaryOp::kLe || op == BinaryOp::kGt ||
         op == BinaryOp::kGe || op == BinaryOp::kEq || op == BinaryOp::kNe;
}

}  // namespace

Prover::Prover(ProverOptions options) : options_(options) {}
Prover::~Prover() = default;

void Prover::Push() { scopes_.push_back({ranges_.size(), facts_.size()}); }

void Prover::Pop() {
  if (scopes_.empty()) return;
  ranges_.resize(scopes_.back().first);
  facts_.resize(scopes_.back().second);
  scopes_.pop_back();
}

void Prover::AddRange(const std::string& var, const Expr& lo, const Expr& hi) {
  ranges_.push_back({var, FoldConstants(lo), FoldConstants(hi)});
}

void Prover::AddFact(const Expr& cond) {
  Expr folded = FoldConstants(cond);
  // Split conjunctions so that each part can match a query on its own.
  if (folded.kind == ExprKind::kBinary && folded.binary_op == BinaryOp::kAnd &&
      folded.args.size() == 2) {
    AddFact(folded.args[0]);
    AddFact(folded.args[1]);
    return;
  }
  facts_.push_back(std::move(folded));
}

const Prover::Range* Prover::FindRange(const std::string& var) const {
  for (auto it = ranges_.rbegin(); it != ranges_.rend(); ++it) {
    if (it->var == var) return &*it;
  }
  return nullptr;
}

std::optional<int64_t> Prover::Lower(const Expr& e, int depth) const {
  return Bound(e, depth).lo;
}

std::optional<int64_t> Prover::Upper(const Expr& e, int depth) const {
  return Bound(e, depth).hi;
}

std::optional<std::pair<int64_t, int64_t>> Prover::Interval(const Expr& e,
                                                            int depth) const {
  HalfBounds b = Bound(e, depth);
  if (!b.lo || !b.hi) return std::nullopt;
  return std::pair<int64_t, int64_t>{*b.lo, *b.hi};
}

// Each end is tracked on its own, so `0 <= by * 64 + i` is decided from lower
// bounds alone even when the upper ends are symbolic.
Prover::HalfBounds Prover::Bound(const Expr& e, int depth) const {
  using Opt = std::optional<int64_t>;
  if (depth > kMaxDepth) return {};
  if (auto v = FoldInt(e)) return {*v, *v};
  switch (e.kind) {
    case ExprKind::kVar: {
      const Range* r = FindRange(e.name);
      if (!r) return {};
      return {Lower(r->lo, depth + 1),
              Sub(Upper(r->hi, depth + 1), int64_t{1})};
    }
    case ExprKind::kUnary: {
      if (e.unary_op != UnaryOp::kNeg || e.args.size() != 1) return {};
      HalfBounds a = Bound(e.args[0], depth + 1);
      return {Sub(int64_t{0}, a.hi), Sub(int64_t{0}, a.lo)};
    }
    case ExprKind::kBinary: {
      if (e.args.size() != 2) return {};
      HalfBounds a = Bound(e.args[0], depth + 1);
      HalfBounds b = Bound(e.args[1], depth + 1);
      auto c = FoldInt(e.args[1]);
      switch (e.binary_op) {
        case BinaryOp::kAdd:
          return {Add(a.lo, b.lo), Add(a.hi, b.hi)};
        case BinaryOp::kSub:
          return {Sub(a.lo, b.hi), Sub(a.hi, b.lo)};
        case BinaryOp::kMul: {
          if (c && *c >= 0) {  // x * c, c >= 0: ends scale independently
            return {a.lo ? Mul(*a.lo, *c) : Opt{},
                    a.hi ? Mul(*a.hi, *c) : Opt{}};
          }
          auto ca = FoldInt(e.args[0]);
          if (ca && *ca >= 0) {
            return {b.lo ? Mul(*b.lo, *ca) : Opt{},
                    b.hi ? Mul(*b.hi, *ca) : Opt{}};
          }
          if (!a.lo || !a.hi || !b.lo || !b.hi) return {};
          int64_t p[4];
          int64_t xs[2] = {*a.lo, *a.hi}, ys[2] = {*b.lo, *b.hi};
          for (int i = 0; i < 4; ++i) {
            auto m = Mul(xs[i / 2], ys[i % 2]);
            if (!m) return {};
            p[i] = *m;
          }
          return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
        }
        case BinaryOp::kDiv:
          if (!c || *c <= 0) return {};
          return {a.lo ? FloorDiv(*a.lo, *c) : Opt{},
                  a.hi ? FloorDiv(*a.hi, *c) : Opt{}};
        case BinaryOp::kMod:
          if (!c || *c <= 0) return {};
          if (a.lo && a.hi && *a.lo >= 0 && *a.hi < *c) return a;
          return {int64_t{0}, *c - 1};
        case BinaryOp::kShr: {  // arithmetic: floor division by 2^c
          if (!c || *c < 0 || *c > 62) return {};
          const int64_t p = int64_t{1} << *c;
          return {a.lo ? FloorDiv(*a.lo, p) : Opt{},
                  a.hi ? FloorDiv(*a.hi, p) : Opt{}};
        }
        case BinaryOp::kShl: {  // x * 2^c
          if (!c || *c < 0 || *c > 62) return {};
          const int64_t p = int64_t{1} << *c;
          return {a.lo ? Mul(*a.lo, p) : Opt{}, a.hi ? Mul(*a.hi, p) : Opt{}};
        }
        case BinaryOp::kBitAnd: {
          // With a mask m >= 0 the result keeps only m's bits: in [0, m],
          // and no larger than a non-negative other side.
          auto m = c ? c : FoldInt(e.args[0]);
          if (!m || *m < 0) return {};
          const HalfBounds& x = c ? a : b;
          if (x.lo && x.hi && *x.lo >= 0) {
            return {int64_t{0}, std::min(*x.hi, *m)};
          }
          return {int64_t{0}, *m};
        }
        default:
          return {};
      }
    }
    case ExprKind::kCall: {
      if (e.args.size() != 2) return {};
      HalfBounds a = Bound(e.args[0], depth + 1);
      HalfBounds b = Bound(e.args[1], depth + 1);
      auto both = [](Opt x, Opt y, bool take_min) -> Opt {
        if (!x || !y) return std::nullopt;
        return take_min ? std::min(*x, *y) : std::max(*x, *y);
      };
      if (e.name == "min") {
        // min(a, b) <= either upper end; >= the smaller lower end.
        Opt hi = a.hi && b.hi ? both(a.hi, b.hi, true) : (a.hi ? a.hi : b.hi);
        return {both(a.lo, b.lo, true), hi};
      }
      if (e.name == "max") {
        Opt lo = a.lo && b.lo ? both(a.lo, b.lo, false) : (a.lo ? a.lo : b.lo);
        return {lo, both(a.hi, b.hi, false)};
      }
      auto c = FoldInt(e.args[1]);
      if (e.name == "ceildiv" && c && *c > 0) {
        return {a.lo ? CeilDiv(*a.lo, *c) : Opt{},
                a.hi ? CeilDiv(*a.hi, *c) : Opt{}};
      }
      return {};
    }
    default:
      return {};
  }
}

std::optional<std::pair<int64_t, int64_t>> Prover::Bounds(const Expr& e) const {
  return Interval(FoldConstants(e), 0);
}

std::optional<bool> Prover::DecideByRules(const Expr& cond) const {
  if (cond.kind == ExprKind::kBool) return cond.bool_value;
  for (const Expr& f : facts_) {
    if (f == cond) return true;
  }
  if (cond.kind == ExprKind::kUnary && cond.unary_op == UnaryOp::kNot &&
      cond.args.size() == 1) {
    auto inner = DecideByRules(cond.args[0]);
    if (inner) return !*inner;
    return std::nullopt;
  }
  if (cond.kind != ExprKind::kBinary || cond.args.size() != 2) {
    return std::nullopt;
  }
  const BinaryOp op = cond.binary_op;
  if (op == BinaryOp::kAnd || op == BinaryOp::kOr) {
    auto a = DecideByRules(cond.args[0]);
    auto b = DecideByRules(cond.args[1]);
    bool is_and = op == BinaryOp::kAnd;
    if (a && b) return is_and ? (*a && *b) : (*a || *b);
    if ((a && *a == !is_and) || (b && *b == !is_and)) return !is_and;
    return std::nullopt;
  }
  if (!IsCompare(op)) return std::nullopt;
  // Decide `a OP b` from the bounds of a - b (one subtraction keeps shared
  // terms, such as by * 64 on both sides, from widening the bounds).
  Expr diff =
      FoldConstants(Expr::Binary(BinaryOp::kSub, cond.args[0], cond.args[1]));
  HalfBounds d = Bound(diff, 0);
  constexpr int64_t kMin = INT64_MIN, kMax = INT64_MAX;
  int64_t lo = d.lo.value_or(kMin), hi = d.hi.value_or(kMax);
  switch (op) {
    case BinaryOp::kLt:
      if (hi < 0) return true;
      if (lo >= 0) return false;
      break;
    case BinaryOp::kLe:
      if (hi <= 0) return true;
      if (lo > 0) return false;
      break;
    case BinaryOp::kGt:
      if (lo > 0) return true;
      if (hi <= 0) return false;
      break;
    case BinaryOp::kGe:
      if (lo >= 0) return true;
      if (hi < 0) return false;
      break;
    case BinaryOp::kEq:
      if (lo == 0 && hi == 0) return true;
      if (lo > 0 || hi < 0) return false;
      break;
    case BinaryOp::kNe:
      if (lo > 0 || hi < 0) return true;
      if (lo == 0 && hi == 0) return false;
      break;
    default:
      break;
  }
  return std::nullopt;
}

Z3Backend& Prover::Z3() {
  if (!z3_) {
    z3_ = std::make_unique<Z3Backend>(options_.z3_rlimit);
    stats_.z3_created = true;
  }
  return *z3_;
}

std::vector<Z3Backend::RangeFact> Prover::RangeFacts() const {
  std::vector<Z3Backend::RangeFact> out;
  out.reserve(ranges_.size());
  for (const Range& r : ranges_) out.push_back({r.var, &r.lo, &r.hi});
  return out;
}

bool Prover::CanProve(const Expr& cond) {
  ++stats_.queries;
  Expr folded = FoldConstants(cond);
  if (auto decided = DecideByRules(folded)) {
    if (*decided) ++stats_.proved_by_rules;
    return *decided;
  }
  if (!options_.use_z3) return false;
  auto start = std::chrono::steady_clock::now();
  ++stats_.z3_queries;
  bool proved = Z3().Prove(RangeFacts(), facts_, folded);
  if (proved) ++stats_.z3_proved;
  stats_.z3_ms += std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  return proved;
}

std::optional<std::map<std::string, int64_t>> Prover::Counterexample(
    const Expr& cond) {
  if (!options_.use_z3) return std::nullopt;
  return Z3().Counterexample(RangeFacts(), facts_, FoldConstants(cond));
}

}  // namespace kiln::compiler
