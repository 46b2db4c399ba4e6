// Printer: canonical spelling, and parse(print(e)) == e for random trees.
#include "compiler/ir/printer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "compiler/ir/parser.h"

namespace kiln::compiler {
namespace {

// A random expression tree using every operator and leaf kind the parser can
// produce (non-negative literals: a minus sign parses as a unary op).
class RandomExpr {
 public:
  explicit RandomExpr(uint32_t seed) : rng_(seed) {}

  Expr Make(int depth) {
    int pick = depth <= 0 ? Pick(0, 4) : Pick(0, 10);
    switch (pick) {
      case 0:
        return Expr::Int(Pick(0, 1000));
      case 1:
        return Expr::Float(Pick(0, 1000) / 8.0);
      case 2:
        return Expr::Var(std::string(1, static_cast<char>('a' + Pick(0, 5))));
      case 3:
        return Expr::Bool(Pick(0, 1) == 1);
      case 4:
        return Expr::Load("T", {Make(depth - 1), Make(depth - 1)});
      case 5:
        return Expr::Unary(static_cast<UnaryOp>(Pick(0, 2)), Make(depth - 1));
      case 6:
        return Expr::Call("max", {Make(depth - 1), Make(depth - 1)});
      case 7:
        return Expr::Cast(DType::kF16, Make(depth - 1));
      default:
        return Expr::Binary(static_cast<BinaryOp>(Pick(0, 17)), Make(depth - 1),
                            Make(depth - 1));
    }
  }

 private:
  int Pick(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  std::mt19937 rng_;
};

Expr ParseExprText(const std::string& text) {
  ParseResult r =
      Parse("kernel k() grid(1) threads(1) (b) { let x = " + text + " }");
  EXPECT_TRUE(r.ok()) << text << "\n" << FormatDiagnostics(r.errors, "expr");
  if (!r.ok()) return Expr();
  return std::get<LetStmt>(r.program.kernels[0].body[0].node).value;
}

TEST(PrinterTest, RandomExpressionsRoundTrip) {
  RandomExpr gen(20261129);
  for (int i = 0; i < 3000; ++i) {
    Expr e = gen.Make(5);
    std::string text = Print(e);
    // Comparisons do not chain, so a tree with a comparison directly under
    // another is printed with parentheses and must still round-trip.
    Expr back = ParseExprText(text);
    ASSERT_EQ(back, e) << text << " reprinted as " << Print(back);
  }
}

TEST(PrinterTest, FewestParentheses) {
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"(a + b) + c", "a + b + c"},
      {"a + (b + c)", "a + (b + c)"},
      {"a - (b - c)", "a - (b - c)"},
      {"(a * b) + (c * d)", "a * b + c * d"},
      {"-(a)", "-a"},
      {"-(a + b)", "-(a + b)"},
      {"(a < b) == (c < d)", "(a < b) == (c < d)"},
      {"(a & b) == c", "(a & b) == c"},
      {"a & (b == c)", "a & b == c"},
      {"1e-3", "0.001"},
      {"1.0e20", "1e+20"},
      {"2.", "2.0"},
      {"inf", "inf"},
      {"0x10", "16"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Print(ParseExprText(c.in)), c.out) << c.in;
  }
}

TEST(PrinterTest, CanonicalHeaderOrderAndIndentation) {
  ParseResult r = Parse(
      "kernel k(A: f32[M, 4] strides [4, 1]) assume M > 0 tune X in [1, 2], "
      "Y in [3] where X < Y grid(M) threads(32) cluster(2, 1, 1) (b) {"
      "if b == 0 { let t = 1 } else { if b == 1 { let u = 2 } } }");
  ASSERT_TRUE(r.ok()) << FormatDiagnostics(r.errors, "k");
  EXPECT_EQ(Print(r.program),
            "kernel k(A: f32[M, 4] strides [4, 1])\n"
            "  tune X in [1, 2]\n"
            "  tune Y in [3]\n"
            "  where X < Y\n"
            "  assume M > 0\n"
            "  grid(M) threads(32) cluster(2, 1, 1) (b) {\n"
            "  if b == 0 {\n"
            "    let t = 1\n"
            "  } else if b == 1 {\n"
            "    let u = 2\n"
            "  }\n"
            "}\n");
}

TEST(PrinterTest, EveryStatementRoundTrips) {
  const std::string text =
      "kernel k(A: f16[M, N], B: u4[N, 8], C: f32[M])\n"
      "  grid(ceildiv(M, 64), 2, 1) threads(128) (bx, by, bz) {\n"
      "  rasterize(panel=4, order=column)\n"
      "  alloc shared S: f16[64, 32] layout padded(8)\n"
      "  alloc shared R: f16[64, 32] layout row_major\n"
      "  alloc fragment F: f32[64, 32]\n"
      "  alloc fragment G: f32[64]\n"
      "  alloc local L: i32[2]\n"
      "  fill F, -inf\n"
      "  clear G\n"
      "  copy A[bx * 64:+64, 0:+32] -> S\n"
      "  gemm S, R -> F transpose_a transpose_b clear_accum policy=full_col\n"
      "  reduce.absmax F -> G, dim=1, clear=false\n"
      "  cumsum F -> F, dim=0, reverse=true\n"
      "  atomic_add C[bx * 64:+64], G\n"
      "  for k in unroll(2) {\n"
      "    L[k] = k << 2 | 1\n"
      "  }\n"
      "  parallel (i, j) in (64, 32) {\n"
      "    F[i, j] /= exp2(F[i, j]) + sigmoid(1.5)\n"
      "  }\n"
      "}\n";
  ParseResult r = Parse(text);
  ASSERT_TRUE(r.ok()) << FormatDiagnostics(r.errors, "k");
  EXPECT_EQ(Print(r.program), text);
  EXPECT_EQ(Parse(Print(r.program)).program, r.program);
}

}  // namespace
}  // namespace kiln::compiler
