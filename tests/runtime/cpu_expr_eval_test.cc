// The launch metadata's integer S-expressions (runtime/expr_eval.h).
#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/expr_eval.h"

namespace kiln::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

int64_t Eval(const std::string& text, const NameValues& values = {}) {
  absl::StatusOr<IntExpr> e = IntExpr::Parse(text);
  EXPECT_TRUE(e.ok()) << text << ": " << e.status();
  if (!e.ok()) return -999999;
  absl::StatusOr<int64_t> v = e->Evaluate(values);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status();
  return v.ok() ? *v : -999999;
}

std::string EvalError(const std::string& text, const NameValues& values = {}) {
  absl::StatusOr<IntExpr> e = IntExpr::Parse(text);
  if (!e.ok()) return std::string(e.status().message());
  absl::StatusOr<int64_t> v = e->Evaluate(values);
  EXPECT_FALSE(v.ok()) << text;
  return std::string(v.status().message());
}

TEST(CpuExprEvalTest, LiteralsNamesAndOperators) {
  EXPECT_EQ(Eval("42"), 42);
  EXPECT_EQ(Eval("-7"), -7);
  EXPECT_EQ(Eval("N", {{"N", 5}}), 5);
  EXPECT_EQ(Eval("(ceildiv N 128)", {{"N", 1000}}), 8);
  EXPECT_EQ(Eval("(+ 1 2 3 4)"), 10);
  EXPECT_EQ(Eval("(* 2 3 7)"), 42);
  EXPECT_EQ(Eval("(- 2 5)"), -3);
  EXPECT_EQ(Eval("(min 4 -2 9)"), -2);
  EXPECT_EQ(Eval("(max 4 -2 9)"), 9);
  EXPECT_EQ(Eval("(neg (+ 1 1))"), -2);
  EXPECT_EQ(Eval("(== (% K 64) 0)", {{"K", 128}}), 1);
  EXPECT_EQ(Eval("(== (% K 64) 0)", {{"K", 100}}), 0);
  EXPECT_EQ(Eval("(&& (< 1 2) (<= 2 2) (> 3 2) (>= 3 3) (!= 1 0))"), 1);
  EXPECT_EQ(Eval("(|| 0 0 (! 0))"), 1);
  EXPECT_EQ(Eval("(&& 1 (! 5))"), 0);
  EXPECT_EQ(Eval("  ( +   1\t2 )  "), 3);
}

TEST(CpuExprEvalTest, FloorDivisionModuloAndCeilDiv) {
  const int64_t cases[][5] = {
      // a, b, a / b, a % b, ceildiv(a, b)
      {7, 2, 3, 1, 4},
      {-7, 2, -4, 1, -3},
      {7, -2, -4, -1, -3},
      {-7, -2, 3, -1, 4},
      {6, 3, 2, 0, 2},
      {-6, 3, -2, 0, -2},
      {0, 5, 0, 0, 0},
      {INT64_MAX, 1, INT64_MAX, 0, INT64_MAX},
      {INT64_MIN, 2, INT64_MIN / 2, 0, INT64_MIN / 2},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    const NameValues v = {{"a", cases[i][0]}, {"b", cases[i][1]}};
    EXPECT_EQ(Eval("(/ a b)", v), cases[i][2])
        << cases[i][0] << " / " << cases[i][1];
    EXPECT_EQ(Eval("(% a b)", v), cases[i][3])
        << cases[i][0] << " % " << cases[i][1];
    EXPECT_EQ(Eval("(ceildiv a b)", v), cases[i][4]);
  }
  EXPECT_EQ(Eval("(% a -1)", {{"a", INT64_MIN}}), 0);
}

TEST(CpuExprEvalTest, OverflowAndDivisionByZeroAreErrors) {
  EXPECT_THAT(EvalError("(+ a 1)", {{"a", INT64_MAX}}), HasSubstr("overflows"));
  EXPECT_THAT(EvalError("(- a 1)", {{"a", INT64_MIN}}), HasSubstr("overflows"));
  EXPECT_THAT(EvalError("(* a 2)", {{"a", INT64_MAX / 2 + 1}}),
              HasSubstr("overflows"));
  EXPECT_THAT(EvalError("(neg a)", {{"a", INT64_MIN}}), HasSubstr("overflows"));
  EXPECT_THAT(EvalError("(/ a -1)", {{"a", INT64_MIN}}),
              HasSubstr("overflows"));
  EXPECT_THAT(EvalError("(/ 1 0)"), HasSubstr("divides by zero"));
  EXPECT_THAT(EvalError("(% 1 0)"), HasSubstr("divides by zero"));
  EXPECT_THAT(EvalError("(ceildiv 1 0)"), HasSubstr("divides by zero"));
  EXPECT_THAT(EvalError("(+ N 1)"), HasSubstr("uses 'N', which is not bound"));
}

TEST(CpuExprEvalTest, SyntaxErrorsSayWhere) {
  EXPECT_THAT(EvalError("(+ 1 2"), HasSubstr("missing ')'"));
  EXPECT_THAT(EvalError("(+ 1 2))"),
              HasSubstr("unexpected text after the end"));
  EXPECT_THAT(EvalError("(pow 2 3)"), HasSubstr("unknown operator 'pow'"));
  EXPECT_THAT(EvalError("(/ 1)"), HasSubstr("'/' takes 2 arguments; found 1"));
  EXPECT_THAT(EvalError("(neg 1 2)"), HasSubstr("'neg' takes 1 argument"));
  EXPECT_THAT(EvalError("(+ 1)"), HasSubstr("takes at least 2 arguments"));
  EXPECT_THAT(EvalError("99999999999999999999"), HasSubstr("int64 range"));
  EXPECT_THAT(EvalError("1x"), HasSubstr("unexpected character"));
  EXPECT_THAT(EvalError(""), HasSubstr("unexpected end"));
  EXPECT_THAT(EvalError(")"), HasSubstr("unexpected ')'"));
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "(neg ";
  deep += "1" + std::string(300, ')');
  EXPECT_THAT(EvalError(deep), HasSubstr("deeper than 256"));
}

TEST(CpuExprEvalTest, NamesAndConstants) {
  absl::StatusOr<IntExpr> e = IntExpr::Parse("(+ (* M N) (ceildiv K M))");
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->Names(), ElementsAre("M", "N", "K"));
  EXPECT_FALSE(e->AsConstant().has_value());
  EXPECT_EQ(IntExpr::Parse("(* 4 (+ 1 2))")->AsConstant(), 12);
  EXPECT_EQ(IntExpr::Constant(7).AsConstant(), 7);
  EXPECT_EQ(IntExpr().AsConstant(), 0);
  EXPECT_EQ(e->text(), "(+ (* M N) (ceildiv K M))");
}

}  // namespace
}  // namespace kiln::runtime
