// The Z3 fallback of the Prover (prover.h). Only this pair of files includes
// Z3's headers.
#ifndef KILN_COMPILER_ARITH_Z3_BACKEND_H_
#define KILN_COMPILER_ARITH_Z3_BACKEND_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

class Z3Backend {
 public:
  struct RangeFact {
    std::string var;
    const Expr* lo;
    const Expr* hi;  // exclusive
  };

  // Creates the Z3 context and solver; `rlimit` bounds each query.
  explicit Z3Backend(unsigned rlimit);
  ~Z3Backend();

  // True when `cond` follows from the ranges and facts (the negation is
  // unsatisfiable within the resource limit). Untranslatable facts are
  // dropped; an untranslatable condition, "unknown" or any Z3 error is
  // false.
  bool Prove(const std::vector<RangeFact>& ranges,
             const std::vector<Expr>& facts, const Expr& cond);

  // Values of the variables (by name) under which the ranges and facts
  // hold and `cond` does not; nullopt when there are none, or Z3 cannot
  // tell within the limit, or `cond` is untranslatable.
  std::optional<std::map<std::string, int64_t>> Counterexample(
      const std::vector<RangeFact>& ranges, const std::vector<Expr>& facts,
      const Expr& cond);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_ARITH_Z3_BACKEND_H_
