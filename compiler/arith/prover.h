// Arithmetic prover for index expressions: decides whether an integer
// condition holds for every value the variables in scope may take.
//
// Cheap rules run first (constant folding, interval bounds from the ranges of
// loop, block and parallel indices); a Z3-backed solver is the fallback for
// what they cannot decide (symbolic dims, divisibility facts from `assume`).
// The solver is created lazily, on the first query the cheap rules cannot
// answer, and each query runs under a deterministic resource limit, so the
// prover can never dominate compile time (cf. TileLang, where Z3 set-up took
// 40% of compile time). Not thread-safe: one prover per compile.
#ifndef KILN_COMPILER_ARITH_PROVER_H_
#define KILN_COMPILER_ARITH_PROVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/arith/z3_backend.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

struct ProverOptions {
  // Z3's deterministic resource limit per query ("rlimit"); a query over the
  // limit is "not proven".
  unsigned z3_rlimit = 20000;
  // Disables the Z3 fallback (cheap rules only).
  bool use_z3 = true;
};

struct ProverStats {
  int queries = 0;
  int proved_by_rules = 0;
  int z3_queries = 0;
  int z3_proved = 0;
  bool z3_created = false;
  double z3_ms = 0;  // creation and queries
};

class Prover {
 public:
  explicit Prover(ProverOptions options = {});
  ~Prover();
  Prover(const Prover&) = delete;
  Prover& operator=(const Prover&) = delete;

  // Facts are scoped: Pop() forgets every fact added since the matching
  // Push().
  void Push();
  void Pop();

  // `lo <= var < hi` (the range of a loop, block or parallel index).
  void AddRange(const std::string& var, const Expr& lo, const Expr& hi);
  // A boolean fact over integers (an `assume`, a branch condition). Facts
  // the prover cannot translate are ignored (they only weaken proofs).
  void AddFact(const Expr& cond);

  // True when `cond` provably holds under the facts in scope. False means
  // "not proven", never "proven false".
  bool CanProve(const Expr& cond);

  // Values of the variables under which the facts in scope hold and
  // `cond` does not (Z3; nullopt when it finds none within the limit, or
  // without Z3). Facts Z3 cannot translate are left out, so a
  // counterexample may break one of them.
  std::optional<std::map<std::string, int64_t>> Counterexample(
      const Expr& cond);

  // The constant interval [lo, hi] of an integer expression under the
  // ranges in scope, when both ends are known.
  std::optional<std::pair<int64_t, int64_t>> Bounds(const Expr& e) const;

  const ProverStats& stats() const { return stats_; }

 private:
  struct Range {
    std::string var;
    Expr lo, hi;  // hi exclusive
  };
  struct HalfBounds {
    std::optional<int64_t> lo, hi;  // inclusive; absent when unknown
  };
  HalfBounds Bound(const Expr& e, int depth) const;
  std::optional<int64_t> Lower(const Expr& e, int depth) const;
  std::optional<int64_t> Upper(const Expr& e, int depth) const;
  std::optional<std::pair<int64_t, int64_t>> Interval(const Expr& e,
                                                      int depth) const;
  // Cheap rules: nullopt when they cannot decide.
  std::optional<bool> DecideByRules(const Expr& cond) const;
  const Range* FindRange(const std::string& var) const;
  Z3Backend& Z3();  // made on first use
  std::vector<Z3Backend::RangeFact> RangeFacts() const;

  ProverOptions options_;
  ProverStats stats_;
  std::vector<Range> ranges_;
  std::vector<Expr> facts_;
  std::vector<std::pair<size_t, size_t>> scopes_;  // sizes at Push()
  std::unique_ptr<Z3Backend> z3_;
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_ARITH_PROVER_H_
