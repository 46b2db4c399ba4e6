// Parser and lexer: structure of what parses, and the location and wording of
// syntax errors.
#include "compiler/ir/parser.h"

#include <gtest/gtest.h>

#include <string>

#include "compiler/ir/lexer.h"
#include "compiler/ir/printer.h"

namespace kiln::compiler {
namespace {

constexpr char kHeader[] =
    "kernel k(A: f32[M, N], s: f32) grid(1) threads(32) (bx) {\n";

// Parses `body` inside a minimal kernel; the body starts on line 2.
ParseResult ParseBody(const std::string& body) {
  return Parse(std::string(kHeader) + body + "\n}\n");
}

const Expr& LetValue(const ParseResult& r, size_t i = 0) {
  return std::get<LetStmt>(r.program.kernels.at(0).body.at(i).node).value;
}

TEST(LexerTest, TokensCarryLocations) {
  std::vector<Token> t = Lex("kernel k\n  // comment\n  x->y 0x1F 2.5e3");
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t[2].text, "x");
  EXPECT_EQ(t[2].loc.line, 3);
  EXPECT_EQ(t[2].loc.col, 3);
  EXPECT_EQ(t[3].text, "->");
  EXPECT_EQ(t[5].int_value, 31);
  EXPECT_EQ(t[6].kind, TokenKind::kFloat);
  EXPECT_DOUBLE_EQ(t[6].float_value, 2500.0);
  EXPECT_EQ(t[7].kind, TokenKind::kEnd);
}

TEST(LexerTest, BadInputBecomesAnErrorToken) {
  struct Case {
    std::string text;
    std::string message;
    int col;
  };
  const Case cases[] = {
      {"a $", "unexpected character '$'", 3},
      {"99999999999999999999", "does not fit in 64 bits", 1},
      {"x \xc3\xa9", "unexpected byte 0xc3", 3},
      {"1e+", "malformed exponent", 1},
      {"12abc", "malformed number '12a'", 1},
      {std::string(200, 'a'), "the limit is 128", 1},
  };
  for (const Case& c : cases) {
    std::vector<Token> t = Lex(c.text);
    ASSERT_GE(t.size(), 2u) << c.text;
    const Token& err = t[t.size() - 2];
    EXPECT_EQ(err.kind, TokenKind::kError) << c.text;
    EXPECT_NE(err.text.find(c.message), std::string::npos) << err.text;
    EXPECT_EQ(err.loc.col, c.col) << c.text;
  }
}

TEST(ParserTest, PrecedenceFollowsTheGrammar) {
  ParseResult r = ParseBody("let x = 1 + 2 * 3 << 1 < 9 && true || false");
  ASSERT_TRUE(r.ok()) << FormatDiagnostics(r.errors, "t");
  const Expr& e = LetValue(r);
  ASSERT_EQ(e.binary_op, BinaryOp::kOr);
  const Expr& land = e.args[0];
  ASSERT_EQ(land.binary_op, BinaryOp::kAnd);
  const Expr& lt = land.args[0];
  ASSERT_EQ(lt.binary_op, BinaryOp::kLt);
  const Expr& shl = lt.args[0];
  ASSERT_EQ(shl.binary_op, BinaryOp::kShl);
  EXPECT_EQ(shl.args[0].binary_op, BinaryOp::kAdd);
  EXPECT_EQ(shl.args[0].args[1].binary_op, BinaryOp::kMul);
}

TEST(ParserTest, SubtractionIsLeftAssociative) {
  ParseResult r = ParseBody("let x = 10 - 4 - 3");
  ASSERT_TRUE(r.ok());
  const Expr& e = LetValue(r);
  EXPECT_EQ(e.args[0].kind, ExprKind::kBinary);
  EXPECT_EQ(e.args[1].int_value, 3);
}

TEST(ParserTest, IfThenElseIsSelect) {
  ParseResult a = ParseBody("let x = if_then_else(true, 1, 2)");
  ParseResult b = ParseBody("let x = select(true, 1, 2)");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.program, b.program);
  EXPECT_EQ(LetValue(a).name, "select");
}

TEST(ParserTest, RegionsAndSlices) {
  ParseResult r = ParseBody(
      "alloc shared T: f32[4, 8]\ncopy A[bx * 4:+4, :] -> T\n"
      "copy T[1, 0:+8] -> A[0, 0:+8]");
  ASSERT_TRUE(r.ok()) << FormatDiagnostics(r.errors, "t");
  const auto& copy = std::get<CopyStmt>(r.program.kernels[0].body[1].node);
  ASSERT_EQ(copy.src.slices.size(), 2u);
  EXPECT_EQ(copy.src.slices[0].kind, Slice::Kind::kRange);
  EXPECT_EQ(copy.src.slices[1].kind, Slice::Kind::kFull);
  EXPECT_FALSE(copy.dst.has_slices);
  const auto& copy2 = std::get<CopyStmt>(r.program.kernels[0].body[2].node);
  EXPECT_EQ(copy2.src.slices[0].kind, Slice::Kind::kIndex);
}

TEST(ParserTest, LoopForms) {
  ParseResult r = ParseBody(
      "for a in serial(4) { }\nfor b in unroll(1, 4) { }\n"
      "for c in pipelined(8, stages=3) { }\n"
      "for d in pipelined(2, 8, stages=2) { }");
  ASSERT_TRUE(r.ok()) << FormatDiagnostics(r.errors, "t");
  const Block& body = r.program.kernels[0].body;
  EXPECT_FALSE(std::get<ForStmt>(body[0].node).start.has_value());
  EXPECT_EQ(std::get<ForStmt>(body[1].node).loop, LoopKind::kUnroll);
  EXPECT_TRUE(std::get<ForStmt>(body[1].node).start.has_value());
  EXPECT_EQ(std::get<ForStmt>(body[2].node).stages->int_value, 3);
  EXPECT_EQ(std::get<ForStmt>(body[3].node).start->int_value, 2);
}

TEST(ParserTest, KeywordsMayNameKernelsButNotLocals) {
  EXPECT_TRUE(Parse("kernel gemm() grid(1) threads(1) (b) { }").ok());
  ParseResult r = ParseBody("alloc shared copy: f32[4]");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].loc.line, 2);
  EXPECT_EQ(r.errors[0].loc.col, 14);
  EXPECT_EQ(r.errors[0].message, "expected a tile name, found keyword 'copy'");
}

// Table of syntax errors: line, column and exact message.
TEST(ParserTest, SyntaxErrorsNameWhatWasFoundAndExpected) {
  struct Case {
    std::string body;
    int line, col;
    std::string message;
  };
  const Case cases[] = {
      {"copy A -> ", 3, 1, "expected a tile or tensor name, found '}'"},
      {"let x = (1 + 2", 3, 1, "expected ')', found '}'"},
      {"let x = 1 +", 3, 1, "expected an expression, found '}'"},
      {"gemm A, B => C", 2, 11, "expected '->', found '='"},
      {"for k in loop(4) { }", 2, 10,
       "expected a loop kind ('serial', 'unroll' or 'pipelined'), found "
       "'loop'"},
      {"for k in pipelined(4) { }", 2, 21,
       "expected ',' and 'stages=' (a pipelined loop names its stages), "
       "found ')'"},
      {"reduce.avg A -> B, dim=0", 2, 8,
       "expected a reduction ('sum', 'max', 'min' or 'absmax'), found 'avg'"},
      {"alloc global T: f32[4]", 2, 7,
       "expected a scope ('shared', 'fragment' or 'local'), found 'global'"},
      {"alloc shared T: f31[4]", 2, 17,
       "expected a dtype (bool, i8, u8, i16, i32, i64, u32, f16, bf16, f32, "
       "f64, f8e4m3, f8e5m2, i4, u4), found 'f31'"},
      {"let x = 1 < 2 < 3", 2, 15, "expected a statement, found '<'"},
      {"x = 1", 2, 1, "expected a statement, found 'x'"},
      {"parallel (i, j) in (4) { }", 2, 20,
       "parallel binds 2 variables but gives 1 extents"},
  };
  for (const Case& c : cases) {
    ParseResult r = ParseBody(c.body);
    ASSERT_EQ(r.errors.size(), 1u) << c.body;
    EXPECT_EQ(r.errors[0].loc.line, c.line) << c.body;
    EXPECT_EQ(r.errors[0].loc.col, c.col) << c.body;
    EXPECT_EQ(r.errors[0].message, c.message) << c.body;
  }
}

TEST(ParserTest, ErrorInOneKernelDoesNotHideTheNext) {
  ParseResult r = Parse(
      "kernel a() grid(1) threads(1) (b) { copy -> }\n"
      "kernel b() grid(1) threads(1) (b) { }\n"
      "kernel c() grid(1) threads(1) (b) { let = 1 }\n");
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].loc.line, 1);
  EXPECT_EQ(r.errors[1].loc.line, 3);
  ASSERT_EQ(r.program.kernels.size(), 1u);
  EXPECT_EQ(r.program.kernels[0].name, "b");
}

TEST(ParserTest, EmptyProgramIsAnError) {
  ParseResult r = Parse("  // nothing here\n");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("at least one kernel"), std::string::npos);
}

TEST(ParserTest, NestingIsBounded) {
  std::string deep =
      "let x = " + std::string(100, '(') + "1" + std::string(100, ')');
  ParseResult r = ParseBody(deep);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("deeper than the limit of 64"),
            std::string::npos);
  std::string blocks;
  for (int i = 0; i < 100; ++i) blocks += "if true {\n";
  for (int i = 0; i < 100; ++i) blocks += "}\n";
  r = ParseBody(blocks);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("deeper than the limit"),
            std::string::npos);
  // Within the limit is fine.
  EXPECT_TRUE(
      ParseBody("let x = " + std::string(40, '(') + "1" + std::string(40, ')'))
          .ok());
}

TEST(ParserTest, OversizedSourceIsRejected) {
  std::string big(kMaxSourceBytes + 1, ' ');
  ParseResult r = Parse(big);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("the limit is 4194304"),
            std::string::npos);
}

TEST(ParserTest, LexErrorIsReportedOnce) {
  ParseResult r = ParseBody("let x = 1 @ 2");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].message, "unexpected character '@'");
  EXPECT_EQ(r.errors[0].loc.col, 11);
}

}  // namespace
}  // namespace kiln::compiler
