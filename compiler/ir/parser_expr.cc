// Expression parsing (tile-ir.md §2, `expr`): precedence climbing over the
// binary levels, then unary operators and primaries. Nesting of parentheses
// and unary operators counts against kMaxNestingDepth; the height of the tree
// (a chain `a + b + ...` adds one level per operator) against kMaxExprHeight.
#include <algorithm>

#include "compiler/ir/parser_internal.h"

namespace kiln::compiler::parser_internal {

void Parser::ParseExprList(std::vector<Expr>* out) {
  int tallest = 0;
  do {
    out->push_back(ParseExpr());
    tallest = std::max(tallest, height_);
  } while (AcceptPunct(","));
  height_ = tallest;
}

const std::vector<std::vector<Parser::OpLevel>>& Parser::Levels() {
  static const auto* levels = new std::vector<std::vector<OpLevel>>{
      {{"||", BinaryOp::kOr}},
      {{"&&", BinaryOp::kAnd}},
      {{"|", BinaryOp::kBitOr}},
      {{"^", BinaryOp::kBitXor}},
      {{"&", BinaryOp::kBitAnd}},
      {{"==", BinaryOp::kEq},
       {"!=", BinaryOp::kNe},
       {"<=", BinaryOp::kLe},
       {">=", BinaryOp::kGe},
       {"<", BinaryOp::kLt},
       {">", BinaryOp::kGt}},
      {{"<<", BinaryOp::kShl}, {">>", BinaryOp::kShr}},
      {{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}},
      {{"*", BinaryOp::kMul}, {"/", BinaryOp::kDiv}, {"%", BinaryOp::kMod}},
  };
  return *levels;
}

Expr Parser::ParseBinary(size_t level) {
  // The level count is fixed, so this recursion is bounded; nesting depth is
  // counted in ParseUnary, which every parenthesis and operand goes through.
  if (level == Levels().size()) return ParseUnary();
  Expr lhs = ParseBinary(level + 1);
  int height = height_;
  while (const OpLevel* op = MatchOp(level)) {
    Loc loc = Take().loc;
    Expr rhs = ParseBinary(level + 1);
    // A chain `a + b + c ...` nests one level per operator without any
    // parenthesis: bound the tree's height too.
    height = std::max(height, height_) + 1;
    CheckHeight(height, loc);
    lhs = Expr::Binary(op->op, std::move(lhs), std::move(rhs), loc);
    if (level == kCompareLevel) break;  // comparisons do not chain
  }
  height_ = height;
  return lhs;
}

Expr Parser::ParseUnary() {
  const Token& t = Peek();
  DepthGuard guard(this, t.loc);
  if (t.kind == TokenKind::kPunct) {
    UnaryOp op;
    if (t.text == "-") {
      op = UnaryOp::kNeg;
    } else if (t.text == "!") {
      op = UnaryOp::kNot;
    } else if (t.text == "~") {
      op = UnaryOp::kBitNot;
    } else {
      return ParsePrimary();
    }
    Take();
    Expr operand = ParseUnary();
    CheckHeight(++height_, t.loc);
    return Expr::Unary(op, std::move(operand), t.loc);
  }
  return ParsePrimary();
}

Expr Parser::ParsePrimary() {
  const Token& t = Peek();
  switch (t.kind) {
    case TokenKind::kInt:
      Take();
      height_ = 1;
      return Expr::Int(t.int_value, t.loc);
    case TokenKind::kFloat:
      Take();
      height_ = 1;
      return Expr::Float(t.float_value, t.loc);
    case TokenKind::kPunct:
      if (t.text == "(") {
        Take();
        Expr e = ParseExpr();
        ExpectPunct(")");
        return e;
      }
      Expected("an expression");
    case TokenKind::kIdent:
      return ParseNamePrimary();
    default:
      Expected("an expression");
  }
}

Expr Parser::ParseNamePrimary() {
  const Token& t = Peek();
  if (t.text == "true" || t.text == "false") {
    Take();
    height_ = 1;
    return Expr::Bool(t.text == "true", t.loc);
  }
  if (auto dtype = ParseDType(t.text)) {
    Take();
    ExpectPunct("(");
    Expr arg = ParseExpr();
    ExpectPunct(")");
    CheckHeight(++height_, t.loc);
    return Expr::Cast(*dtype, std::move(arg), t.loc);
  }
  if (IsKeyword(t.text)) Expected("an expression");
  Take();
  if (AcceptPunct("(")) {
    std::vector<Expr> args;
    height_ = 0;
    if (!IsPunct(")")) ParseExprList(&args);
    ExpectPunct(")");
    CheckHeight(++height_, t.loc);
    std::string name = t.text == "if_then_else" ? "select" : t.text;
    return Expr::Call(std::move(name), std::move(args), t.loc);
  }
  if (AcceptPunct("[")) {
    std::vector<Expr> indices;
    ParseExprList(&indices);
    ExpectPunct("]");
    CheckHeight(++height_, t.loc);
    return Expr::Load(t.text, std::move(indices), t.loc);
  }
  height_ = 1;
  return Expr::Var(t.text, t.loc);
}

}  // namespace kiln::compiler::parser_internal
