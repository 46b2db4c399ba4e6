// Internal to the parser (parser.cc: kernels and statements; parser_expr.cc:
// expressions): the recursive-descent Parser class. Not part of the API.
#ifndef KILN_COMPILER_IR_PARSER_INTERNAL_H_
#define KILN_COMPILER_IR_PARSER_INTERNAL_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/ir/format.h"
#include "compiler/ir/lexer.h"
#include "compiler/ir/parser.h"

namespace kiln::compiler::parser_internal {

// Thrown inside the parser only (never escapes Parse): unwinds to the kernel
// loop, which records the diagnostic and resynchronises.
struct SyntaxError {
  Diagnostic diag;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  ParseResult Run();

 private:
  // ------------------------------------------------------------- tokens
  const Token& Peek(size_t ahead = 0) const {
    size_t i = pos_ + ahead;
    return i < toks_.size() ? toks_[i] : toks_.back();
  }
  const Token& Take() {
    const Token& t = Peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  bool IsWord(std::string_view w, size_t ahead = 0) const {
    const Token& t = Peek(ahead);
    return t.kind == TokenKind::kIdent && t.text == w;
  }
  bool IsPunct(std::string_view p, size_t ahead = 0) const {
    const Token& t = Peek(ahead);
    return t.kind == TokenKind::kPunct && t.text == p;
  }

  [[noreturn]] void Fail(const Loc& loc, std::string message) {
    throw SyntaxError{{loc, std::move(message)}};
  }
  [[noreturn]] void Expected(std::string_view what) {
    const Token& t = Peek();
    if (t.kind == TokenKind::kError) Fail(t.loc, t.text);
    Fail(t.loc, StrCat("expected ", what, ", found ", DescribeToken(t)));
  }

  const Token& ExpectPunct(std::string_view p) {
    if (!IsPunct(p)) Expected(StrCat("'", p, "'"));
    return Take();
  }
  const Token& ExpectWord(std::string_view w) {
    if (!IsWord(w)) Expected(StrCat("'", w, "'"));
    return Take();
  }
  bool AcceptPunct(std::string_view p) {
    if (!IsPunct(p)) return false;
    Take();
    return true;
  }
  bool AcceptWord(std::string_view w) {
    if (!IsWord(w)) return false;
    Take();
    return true;
  }

  // A name being declared or referenced: an identifier that is neither a
  // keyword nor a dtype name.
  std::pair<std::string, Loc> ExpectName(std::string_view what) {
    const Token& t = Peek();
    if (t.kind != TokenKind::kIdent) Expected(what);
    if (IsKeyword(t.text)) {
      Fail(t.loc, StrCat("expected ", what, ", found keyword '", t.text, "'"));
    }
    if (ParseDType(t.text)) {
      Fail(t.loc, StrCat("expected ", what, ", found dtype '", t.text, "'"));
    }
    Take();
    return {t.text, t.loc};
  }

  DType ExpectDType() {
    const Token& t = Peek();
    if (t.kind == TokenKind::kIdent) {
      if (auto d = ParseDType(t.text)) {
        Take();
        return *d;
      }
    }
    Expected(
        "a dtype (bool, i8, u8, i16, i32, i64, u32, f16, bf16, f32, f64, "
        "f8e4m3, f8e5m2, i4, u4)");
  }

  int64_t ExpectInt(std::string_view what) {
    if (Peek().kind != TokenKind::kInt) Expected(what);
    return Take().int_value;
  }

  bool ExpectBoolWord() {
    if (AcceptWord("true")) return true;
    if (AcceptWord("false")) return false;
    Expected("'true' or 'false'");
  }

  // Guards recursion depth for statements and expressions.
  class DepthGuard {
   public:
    DepthGuard(Parser* p, const Loc& loc) : p_(p) {
      if (++p_->depth_ > kMaxNestingDepth) {
        p_->Fail(loc, StrCat("nesting is deeper than the limit of ",
                             kMaxNestingDepth, " levels"));
      }
    }
    ~DepthGuard() { --p_->depth_; }

   private:
    Parser* p_;
  };

  // ------------------------------------------------------------- kernels
  Kernel ParseKernel();

  Param ParseParam();

  Tunable ParseTunable();

  // Leaves height_ at the tallest item's height.
  void ParseExprList(std::vector<Expr>* out);

  void CheckHeight(int height, const Loc& loc) {
    if (height > kMaxExprHeight) {
      Fail(loc,
           StrCat("expression is more than ", kMaxExprHeight, " levels deep"));
    }
  }

  // ---------------------------------------------------------- statements
  Block ParseBlock();

  Stmt ParseStmt();

  AllocStmt ParseAlloc();

  GemmStmt ParseGemm();

  // `, dim=D` shared by reduce and cumsum.
  // `, NAME=true|false` after a statement (reduce's clear, cumsum's
  // reverse): the value, or nullopt when the option is absent.
  std::optional<bool> AcceptBoolOption(std::string_view name);
  int64_t ParseDimArg();

  ReduceStmt ParseReduce();

  CumsumStmt ParseCumsum();

  ParallelStmt ParseParallel();

  ForStmt ParseFor();

  IfStmt ParseIf();

  RasterizeStmt ParseRasterize();

  StoreStmt ParseStore();

  Region ParseRegion();

  // --------------------------------------------------------- expressions
  Expr ParseExpr() { return ParseBinary(0); }

  struct OpLevel {
    std::string_view spelling;
    BinaryOp op;
  };

  // Binary precedence levels, loosest first (tile-ir.md §2).
  static const std::vector<std::vector<OpLevel>>& Levels();
  static constexpr size_t kCompareLevel = 5;

  const OpLevel* MatchOp(size_t level) const {
    if (Peek().kind != TokenKind::kPunct) return nullptr;
    for (const OpLevel& op : Levels()[level]) {
      if (Peek().text == op.spelling) return &op;
    }
    return nullptr;
  }

  Expr ParseBinary(size_t level);

  Expr ParseUnary();

  Expr ParsePrimary();

  Expr ParseNamePrimary();

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int height_ = 0;  // height of the expression parsed last
};

}  // namespace kiln::compiler::parser_internal

#endif  // KILN_COMPILER_IR_PARSER_INTERNAL_H_
