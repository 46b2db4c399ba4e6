// Integer S-expressions of the launch metadata (compiler/docs/
// kernel-handle.md, "Expressions"): parsed once when the metadata is read,
// evaluated at every launch over the values of the dynamic symbols (and
// integer scalar parameters).
#ifndef KILN_RUNTIME_EXPR_EVAL_H_
#define KILN_RUNTIME_EXPR_EVAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::runtime {

// Values of the names an expression may use.
using NameValues = std::map<std::string, int64_t, std::less<>>;

// An integer literal, a name, or `(OP ARG...)` with OP one of
// `+ - * / % min max ceildiv neg == != < <= > >= && || !`. `+ * min max &&
// ||` take two or more arguments, `neg !` one, the others two. `/` and `%`
// are floor division and floor modulo; comparisons and `&& || !` give 0/1.
class IntExpr {
 public:
  // The constant 0.
  IntExpr();
  static IntExpr Constant(int64_t value);

  // Parses `text`. InvalidArgument saying what is wrong and where (byte
  // offset) for bad syntax, an unknown operator, a wrong argument count, a
  // literal outside int64 or nesting deeper than 256.
  static absl::StatusOr<IntExpr> Parse(std::string_view text);

  // The value with every name bound by `values`. InvalidArgument for a name
  // `values` lacks, division or modulo by zero, and any int64 overflow (the
  // message quotes the expression).
  absl::StatusOr<int64_t> Evaluate(const NameValues& values) const;

  // The names used, each once, in order of first appearance.
  std::vector<std::string> Names() const;
  // The value when the expression uses no names and evaluates cleanly.
  std::optional<int64_t> AsConstant() const;
  // The text the expression was parsed from (a literal for Constant()).
  const std::string& text() const { return text_; }

 private:
  enum class Op {
    kAdd,
    kSub,
    kMul,
    kDiv,
    kMod,
    kMin,
    kMax,
    kCeilDiv,
    kNeg,
    kEq,
    kNe,
    kLt,
    kLe,
    kGt,
    kGe,
    kAnd,
    kOr,
    kNot,
  };
  struct Node {
    enum class Kind { kInt, kName, kOp } kind = Kind::kInt;
    int64_t value = 0;
    std::string name;
    Op op = Op::kAdd;
    std::vector<int> args;  // indices into nodes_
  };
  class Parser;

  absl::StatusOr<int64_t> Eval(int node, const NameValues& values) const;
  absl::Status Overflow() const;

  std::vector<Node> nodes_;
  int root_ = 0;
  std::string text_;
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_EXPR_EVAL_H_
