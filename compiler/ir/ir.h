// The in-memory tile IR: a program of kernels, each a tree of statements and
// expressions. The textual form (compiler/docs/tile-ir.md) maps one-to-one onto
// these structures; the printer (printer.h) is its canonical inverse.
//
// Value semantics: nodes own their children by value, so an IR tree can be
// copied, compared (operator==) and moved like any other value. Source
// locations are carried for diagnostics but never take part in equality, so
// parse(print(p)) == p holds although every location differs.
#ifndef KILN_COMPILER_IR_IR_H_
#define KILN_COMPILER_IR_IR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "compiler/ir/dtype.h"

namespace kiln::compiler {

// A position in the source text, 1-based. Line 0 means "no location".
struct Loc {
  int line = 0;
  int col = 0;
  // Locations are diagnostics only: two nodes that differ only in where they
  // came from are the same IR.
  bool operator==(const Loc&) const { return true; }
};

// ---------------------------------------------------------------- expressions

enum class UnaryOp { kNeg, kNot, kBitNot };

enum class BinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,  // float division; floor division on two integers
  kMod,  // floor modulo (integers only)
  kShl,
  kShr,
  kBitAnd,
  kBitOr,
  kBitXor,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kAnd,
  kOr,
};

enum class ExprKind {
  kInt,     // int_value
  kFloat,   // float_value (inf allowed)
  kBool,    // bool_value
  kVar,     // name: a symbol, scalar param, tunable, block index, loop var, let
  kUnary,   // unary_op, args[0]
  kBinary,  // binary_op, args[0], args[1]
  kCall,    // name (a builtin: ceildiv, min, max, exp, ..., select), args
  kCast,    // dtype, args[0]; written `f16(x)`
  kLoad,    // name (a tile or tensor), args = one index per dim
};

struct Expr {
  ExprKind kind = ExprKind::kInt;
  Loc loc;
  int64_t int_value = 0;
  double float_value = 0;
  bool bool_value = false;
  std::string name;
  UnaryOp unary_op = UnaryOp::kNeg;
  BinaryOp binary_op = BinaryOp::kAdd;
  DType dtype = DType::kI32;  // kCast only
  std::vector<Expr> args;

  bool operator==(const Expr& o) const;

  static Expr Int(int64_t v, Loc loc = {});
  static Expr Float(double v, Loc loc = {});
  static Expr Bool(bool v, Loc loc = {});
  static Expr Var(std::string name, Loc loc = {});
  static Expr Unary(UnaryOp op, Expr a, Loc loc = {});
  static Expr Binary(BinaryOp op, Expr a, Expr b, Loc loc = {});
  static Expr Call(std::string name, std::vector<Expr> args, Loc loc = {});
  static Expr Cast(DType dtype, Expr a, Loc loc = {});
  static Expr Load(std::string name, std::vector<Expr> indices, Loc loc = {});
};

// ------------------------------------------------------------------- regions

// One dimension of a region: `e` (a single index; the dim is dropped from the
// region's shape), `start:+extent`, or `:` (the whole dim).
struct Slice {
  enum class Kind { kIndex, kRange, kFull };
  Kind kind = Kind::kFull;
  Expr start;   // kIndex, kRange
  Expr extent;  // kRange
  bool operator==(const Slice&) const = default;
};

// A tile or tensor operand: `X` (the whole buffer) or `X[s0, s1, ...]`.
struct Region {
  Loc loc;
  std::string name;
  bool has_slices = false;
  std::vector<Slice> slices;
  bool operator==(const Region&) const = default;
};

// ---------------------------------------------------------------- statements

enum class Scope { kGlobal, kShared, kFragment, kLocal };

// Shared-memory layout annotation. kNone lets the compiler choose.
struct Layout {
  enum class Kind { kNone, kRowMajor, kSwizzle, kPadded };
  Kind kind = Kind::kNone;
  int64_t param = 0;  // swizzle bytes (32/64/128) or padding elements
  bool operator==(const Layout&) const = default;
};

struct Stmt;
using Block = std::vector<Stmt>;

struct AllocStmt {
  Scope scope = Scope::kShared;
  std::string name;
  DType dtype = DType::kF32;
  std::vector<Expr> shape;
  Layout layout;
  bool operator==(const AllocStmt&) const = default;
};

struct CopyStmt {  // copy src -> dst
  Region src;
  Region dst;
  bool operator==(const CopyStmt&) const = default;
};

struct FillStmt {  // fill dst, value   (clear dst == fill dst, 0 written
                   // `clear`)
  Region dst;
  Expr value;
  bool is_clear = false;
  bool operator==(const FillStmt&) const = default;
};

enum class GemmPolicy { kSquare, kFullRow, kFullCol };

struct GemmStmt {  // gemm a, b -> c [transpose_a] [transpose_b] [clear_accum]
  Region a;
  Region b;
  Region c;
  bool transpose_a = false;
  bool transpose_b = false;
  bool clear_accum = false;
  GemmPolicy policy = GemmPolicy::kSquare;
  bool operator==(const GemmStmt&) const = default;
};

enum class ReduceKind { kSum, kMax, kMin, kAbsMax };

struct ReduceStmt {  // reduce.KIND src -> dst, dim=D [, clear=false]
  ReduceKind op = ReduceKind::kSum;
  Region src;
  Region dst;
  int64_t dim = 0;
  bool clear = true;
  bool operator==(const ReduceStmt&) const = default;
};

struct CumsumStmt {  // cumsum src -> dst, dim=D [, reverse=true]
  Region src;
  Region dst;
  int64_t dim = 0;
  bool reverse = false;
  bool operator==(const CumsumStmt&) const = default;
};

struct AtomicAddStmt {  // atomic_add dst, src
  Region dst;
  Region src;
  bool operator==(const AtomicAddStmt&) const = default;
};

struct ParallelStmt {  // parallel (i, j) in (E0, E1) { body }
  std::vector<std::string> vars;
  std::vector<Expr> extents;
  Block body;
  bool operator==(const ParallelStmt&) const;
};

enum class LoopKind { kSerial, kUnroll, kPipelined };

struct ForStmt {  // for v in serial(lo, hi) / unroll(..) / pipelined(..,
                  // stages=S)
  std::string var;
  LoopKind loop = LoopKind::kSerial;
  std::optional<Expr> start;  // absent: 0
  Expr stop;
  std::optional<Expr> stages;  // pipelined only
  Block body;
  bool operator==(const ForStmt&) const;
};

struct IfStmt {  // if cond { then } else { otherwise }
  Expr cond;
  Block then_body;
  Block else_body;
  bool has_else = false;
  bool operator==(const IfStmt&) const;
};

struct LetStmt {  // let x = value
  std::string name;
  Expr value;
  bool operator==(const LetStmt&) const = default;
};

// `max=` / `min=` keep the larger / smaller of the element and the value,
// with the `max` / `min` builtins' numerics (a NaN wins).
enum class AssignOp { kSet, kAdd, kSub, kMul, kDiv, kMax, kMin };

struct StoreStmt {  // X[i, j] = value   (also += -= *= /=)
  std::string name;
  std::vector<Expr> indices;
  AssignOp op = AssignOp::kSet;
  Expr value;
  // Set by guard-accesses on a `+=`, `max=` or `min=` into a shared tile
  // or a fragment inside `parallel` when the prover cannot show that two
  // iterations never write one element: GPU targets then update the
  // element with a shared-memory atomic (a fragment indexed so is kept in
  // shared memory; tile-ir.md §8). Printed as a trailing comment.
  bool shared_atomic = false;
  bool operator==(const StoreStmt&) const = default;
};

enum class RasterOrder { kRow, kColumn };

struct RasterizeStmt {  // rasterize(panel=P [, order=column])
  Expr panel;
  RasterOrder order = RasterOrder::kRow;
  bool operator==(const RasterizeStmt&) const = default;
};

struct Stmt {
  Loc loc;
  std::variant<AllocStmt, CopyStmt, FillStmt, GemmStmt, ReduceStmt, CumsumStmt,
               AtomicAddStmt, ParallelStmt, ForStmt, IfStmt, LetStmt, StoreStmt,
               RasterizeStmt>
      node;
  bool operator==(const Stmt&) const = default;
};

// ------------------------------------------------------------------- kernels

// A kernel parameter: a global tensor `A: f16[M, K]` (optionally with
// `strides [s0, s1]`) or a scalar `alpha: f32` (empty shape, is_tensor false).
struct Param {
  Loc loc;
  std::string name;
  DType dtype = DType::kF32;
  bool is_tensor = false;
  std::vector<Expr> shape;    // each an Int or a Var (a symbol)
  std::vector<Expr> strides;  // empty: row-major
  bool operator==(const Param&) const = default;
};

struct Tunable {  // tune BM in [64, 128]
  Loc loc;
  std::string name;
  std::vector<int64_t> candidates;
  bool operator==(const Tunable&) const = default;
};

struct Kernel {
  Loc loc;
  std::string name;
  std::vector<Param> params;
  std::vector<Tunable> tunables;
  std::vector<Expr> constraints;  // `where` clauses over tunables
  std::vector<Expr>
      assumptions;         // `assume` facts over symbols, checked at launch
  std::vector<Expr> grid;  // 1 to 3 extents
  Expr threads;
  std::vector<Expr> cluster;            // empty or 3 extents
  std::vector<std::string> block_vars;  // one per grid dim
  Block body;
  bool operator==(const Kernel&) const = default;
};

struct Program {
  std::vector<Kernel> kernels;
  bool operator==(const Program&) const = default;

  // The kernel named `name`, or nullptr.
  const Kernel* Find(std::string_view name) const;
};

// Spelling helpers shared by the parser, printer and diagnostics.
std::string_view ScopeName(Scope s);
std::string_view ReduceName(ReduceKind r);
std::string_view LoopName(LoopKind l);
std::string_view PolicyName(GemmPolicy p);
std::string_view BinaryOpSpelling(BinaryOp op);
std::string_view UnaryOpSpelling(UnaryOp op);
std::string_view AssignOpSpelling(AssignOp op);

// The value a compound store `X[..] op= value` writes, as an expression over
// the element's current value: `current + value`, `max(current, value)`...
// `op` is not kSet.
Expr CompoundValue(AssignOp op, Expr current, Expr value);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_IR_H_
