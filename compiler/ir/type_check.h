// Expression typing of the tile IR (compiler/docs/tile-ir.md §3): the type
// lattice, the result type of every operator and builtin, and a checker that
// walks an expression against a table of the names in scope.
//
// The verifier uses ExprChecker with a diagnostics sink; later passes, which
// only see verified programs, call InferType() to learn an expression's type.
#ifndef KILN_COMPILER_IR_TYPE_CHECK_H_
#define KILN_COMPILER_IR_TYPE_CHECK_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/diagnostic.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

// The type of a scalar expression.
struct Type {
  enum class Kind {
    kError,  // the expression has an error already reported: no follow-ons
    kInt,    // untyped integer (literals, symbols, tunables, indices, ...)
    kFloat,  // untyped float literal: takes the float type it meets (f32 alone)
    kDType,  // a concrete dtype (`dtype`), bool included
  };
  Kind kind = Kind::kError;
  DType dtype = DType::kF32;  // meaningful for kDType only

  static Type Error() { return {Kind::kError, DType::kF32}; }
  static Type Int() { return {Kind::kInt, DType::kI64}; }
  static Type Float() { return {Kind::kFloat, DType::kF32}; }
  static Type Of(DType t) { return {Kind::kDType, t}; }

  bool IsError() const { return kind == Kind::kError; }
  bool IsBool() const { return kind == Kind::kDType && dtype == DType::kBool; }
  // int, or an integer dtype (i8..u32, i4, u4).
  bool IsInteger() const;
  // float, or a float dtype.
  bool IsFloat() const;
  bool IsNumber() const { return IsInteger() || IsFloat(); }

  // "int", "float", a dtype name, or "<error>".
  std::string ToString() const;

  bool operator==(const Type& o) const {
    return kind == o.kind && (kind != Kind::kDType || dtype == o.dtype);
  }
};

// The §3 rule for two numbers meeting in arithmetic: int adopts the other
// side; untyped float adopts a float dtype; two float dtypes give the wider
// (two different 16/8-bit floats give f32); an integer dtype meeting a float
// converts to it; two integer dtypes give the wider (the unsigned on a tie).
// Error when either side is an error or not a number.
Type UnifyNumbers(Type a, Type b);

// Result type of one operator application, given the operand types. On a
// type error returns Type::Error() and sets *error to a message saying what
// was found and what was expected; when an operand is already an error,
// returns Type::Error() and leaves *error empty (no cascade).
Type UnaryResultType(UnaryOp op, Type a, std::string* error);
Type BinaryResultType(BinaryOp op, Type a, Type b, std::string* error);
// Builtins (ceildiv min max abs exp exp2 log log2 sqrt rsqrt tanh sigmoid erf
// floor ceil round trunc fma select bits from_bits_DTYPE; if_then_else is
// accepted as select).
// Unknown names and wrong argument counts are errors.
Type CallResultType(std::string_view name, std::span<const Type> args,
                    std::string* error);

// True for the builtin function names above.
bool IsBuiltin(std::string_view name);
// The float dtype of a `from_bits_DTYPE` builtin (`from_bits_f32`), else
// nullopt.
std::optional<DType> FromBitsDType(std::string_view name);

// ------------------------------------------------------------------ names

// What a name in scope denotes.
enum class NameKind {
  kSymbol,       // a tensor dim bound at launch
  kScalarParam,  // `alpha: f32`
  kTensor,       // a global tensor parameter
  kTunable,
  kBlockIndex,
  kTile,  // an `alloc`
  kLoopVar,
  kParallelVar,
  kLet,
};

// "symbol", "scalar parameter", "tensor", "tunable", "block index", "tile",
// "loop variable", "parallel variable", "let".
std::string_view NameKindName(NameKind k);

// A set of NameKinds.
class NameKindSet {
 public:
  constexpr NameKindSet() = default;
  constexpr NameKindSet(std::initializer_list<NameKind> kinds) {
    for (NameKind k : kinds) bits_ |= Bit(k);
  }
  static constexpr NameKindSet All() {
    NameKindSet s;
    s.bits_ = ~uint32_t{0};
    return s;
  }
  constexpr bool Contains(NameKind k) const { return (bits_ & Bit(k)) != 0; }

 private:
  static constexpr uint32_t Bit(NameKind k) {
    return uint32_t{1} << static_cast<int>(k);
  }
  uint32_t bits_ = 0;
};

// Everything the checker knows about a declared name.
struct NameInfo {
  NameKind kind = NameKind::kLet;
  Loc loc;    // the declaration
  Type type;  // scalars: the value type; tensors and tiles: the element dtype
  Scope scope = Scope::kGlobal;  // tensors (kGlobal) and tiles
  std::vector<Expr> shape;       // tensors and tiles
  // False when the declaration itself had an error: uses of the name then
  // skip checks that would only repeat it (shape comparisons, ranks).
  bool valid = true;

  bool IsBuffer() const {
    return kind == NameKind::kTensor || kind == NameKind::kTile;
  }
};

// The names visible at one point of a kernel.
class NameTable {
 public:
  virtual ~NameTable() = default;
  // The declaration of `name` visible here, or nullptr.
  virtual const NameInfo* Lookup(std::string_view name) const = 0;
  // Where `name` is declared elsewhere in the kernel (later, or in a block
  // that has ended), for a better "unknown name" message; nullopt if nowhere.
  virtual std::optional<Loc> DeclaredElsewhere(std::string_view name) const {
    return std::nullopt;
  }
};

// Where an expression appears, and which names it may use there.
struct ExprRules {
  NameKindSet allowed = NameKindSet::All();
  // Used in messages when a name of another kind appears: "'M' is a symbol;
  // <context> may use only <allowed_text>".
  std::string_view context = "this expression";
  std::string_view allowed_text = "";
  // Inside a `parallel` body fragments may be accessed element-wise (§6.15).
  bool in_parallel = false;
};

// Walks expressions, returning their type and reporting every error into a
// Diagnostics list. Keeps per-kernel state (names already reported as
// unknown) so that an undefined name is reported once; use one per kernel.
class ExprChecker {
 public:
  // Deepest expression tree checked; deeper subtrees are one error. Above
  // the parser's limit, which counts parentheses and unary operators but not
  // left-associative chains like `a + b + c`.
  static constexpr int kMaxDepth = 256;

  // `diags` may be nullptr to only infer types.
  ExprChecker(const NameTable* names, Diagnostics* diags)
      : names_(names), diags_(diags) {}

  // The type of `e`; Type::Error() when `e` has an error (reported here, or
  // earlier for a name that is unknown).
  Type Check(const Expr& e, const ExprRules& rules);

  // Resolves a name used as a tile or tensor (a region or a store target):
  // reports an unknown name (once) or a name that is not a buffer, and
  // returns nullptr in both cases.
  const NameInfo* LookupBuffer(std::string_view name, const Loc& loc);

  // Checks the indices of an element access `name[indices]` of `info` (a
  // buffer): one integer index per dim, constant indices in range. Reports
  // each problem; returns false if there was any.
  bool CheckIndices(std::string_view name, const NameInfo& info,
                    std::span<const Expr> indices, const Loc& loc,
                    const ExprRules& rules);

  // Reports `message` at `loc` (no-op without a sink).
  void Report(const Loc& loc, std::string message);

  // Reports an unknown name at most once per checker.
  void ReportUnknown(std::string_view name, const Loc& loc);

 private:
  Type CheckRec(const Expr& e, const ExprRules& rules, int depth);
  Type CheckVar(const Expr& e, const ExprRules& rules);
  Type CheckLoad(const Expr& e, const ExprRules& rules, int depth);
  bool CheckIndicesRec(std::string_view name, const NameInfo* info,
                       std::span<const Expr> indices, const Loc& loc,
                       const ExprRules& rules, int depth);
  Type CheckBinary(const Expr& e, const ExprRules& rules, int depth);
  Type CheckCall(const Expr& e, const ExprRules& rules, int depth);
  // False (and reported) when `info` is not allowed by `rules`.
  bool KindAllowed(std::string_view name, const NameInfo& info,
                   const ExprRules& rules, const Loc& loc);

  const NameTable* names_;
  Diagnostics* diags_;
  std::set<std::string, std::less<>> reported_unknown_;
  bool depth_reported_ = false;  // one "too deep" error per Check()
};

// The type of an expression of a verified program (no diagnostics).
Type InferType(const Expr& e, const NameTable& names);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_TYPE_CHECK_H_
