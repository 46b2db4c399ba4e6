// Verifier unit tests: constant folding, the typing rules, what verifies
// clean (the valid corpus, and a table of accepted constructs), that every
// error is reported in source order, and that malformed IR built by hand
// (shapes the parser never produces) gives diagnostics, never a crash. The
// per-rule error cases live in the invalid corpus (invalid_corpus_test.cc).
#include "compiler/ir/verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/type_check.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// ---------------------------------------------------------- constant folding

TEST(ConstFoldTest, FoldsIntegerArithmetic) {
  struct Case {
    std::string text;
    std::optional<int64_t> value;
  };
  const Case cases[] = {
      {"2 + 3 * 4", 14},
      {"7 / 2", 3},
      {"-7 / 2", -4},  // floor division
      {"7 / -2", -4},
      {"-7 % 3", 2},  // floor modulo: the divisor's sign
      {"7 % -3", -2},
      {"ceildiv(7, 2)", 4},
      {"ceildiv(-7, 2)", -3},
      {"min(3, -1) + max(2, 5) + abs(-4)", 8},
      {"1 << 10 | 3 & 1 ^ 4", 1029},
      {"~0", -1},
      {"-(4 >> 1)", -2},
      {"1 / 0", std::nullopt},
      {"1 % 0", std::nullopt},
      {"ceildiv(1, 0)", std::nullopt},
      {"9223372036854775807 + 1", std::nullopt},
      {"-9223372036854775807 - 2", std::nullopt},
      {"4611686018427387904 * 2", std::nullopt},
      {"1 << 64", std::nullopt},
      {"1 << -1", std::nullopt},
      {"1 << 63", std::nullopt},
      {"0 << 63", 0},
      {"1 >> 64", std::nullopt},
      {"abs(-9223372036854775807 - 1)", std::nullopt},
      {"-(-9223372036854775807 - 1)", std::nullopt},
      {"(-9223372036854775807 - 1) / -1", std::nullopt},
      {"(-9223372036854775807 - 1) % -1", 0},
      {"BM * 2", std::nullopt},
      {"1.5 * 2", std::nullopt},
      {"2 < 3", std::nullopt},
  };
  for (const Case& c : cases) {
    ParseResult r =
        Parse("kernel k() grid(1) threads(1) (b) { let v = " + c.text + " }");
    ASSERT_TRUE(r.ok()) << c.text << ": " << FormatDiagnostics(r.errors, "t");
    const Expr& e = std::get<LetStmt>(r.program.kernels[0].body[0].node).value;
    EXPECT_EQ(FoldInt(e), c.value) << c.text;
  }
}

TEST(ConstFoldTest, HelpersAreTotal) {
  EXPECT_EQ(FloorDiv(kMin, -1), std::nullopt);
  EXPECT_EQ(FloorMod(kMin, -1), 0);
  EXPECT_EQ(CeilDiv(kMin, 1), std::nullopt);
  EXPECT_EQ(CeilDiv(kMax, 1), kMax);
  EXPECT_EQ(FoldIntBinary(BinaryOp::kMul, kMax, kMax), std::nullopt);
  EXPECT_EQ(FoldIntBinary(BinaryOp::kEq, 1, 1), std::nullopt);
  EXPECT_EQ(FoldIntUnary(UnaryOp::kNot, 1), std::nullopt);
}

TEST(ConstFoldTest, ComparesDims) {
  Expr bm = Expr::Var("BM");
  Expr two_bm = Expr::Binary(BinaryOp::kMul, Expr::Int(2), bm);
  Expr bm_two = Expr::Binary(BinaryOp::kMul, bm, Expr::Int(2));
  Expr sixty_four = Expr::Binary(BinaryOp::kMul, Expr::Int(8), Expr::Int(8));
  EXPECT_EQ(CompareDims(sixty_four, Expr::Int(64)), DimCompare::kEqual);
  EXPECT_EQ(CompareDims(sixty_four, Expr::Int(32)), DimCompare::kDiffer);
  EXPECT_EQ(CompareDims(two_bm, two_bm), DimCompare::kEqual);
  EXPECT_EQ(CompareDims(two_bm, bm_two), DimCompare::kUnproven);
  // Folding inside a non-constant expression: BM * (1 + 1) == BM * 2.
  Expr bm_1p1 =
      Expr::Binary(BinaryOp::kMul, bm,
                   Expr::Binary(BinaryOp::kAdd, Expr::Int(1), Expr::Int(1)));
  EXPECT_EQ(CompareDims(bm_1p1, bm_two), DimCompare::kEqual);
  std::vector<Expr> a = {Expr::Int(1), bm, Expr::Int(1)};
  std::vector<Expr> b = {bm};
  EXPECT_EQ(CompareShapes(DropUnitDims(a), b), DimCompare::kEqual);
  EXPECT_EQ(CompareShapes(a, b), DimCompare::kDiffer);  // ranks differ
}

TEST(ConstFoldTest, DeepExpressionsDoNotOverflowTheStack) {
  Expr e = Expr::Int(1);
  for (int i = 0; i < 5000; ++i) {
    e = Expr::Binary(BinaryOp::kAdd, std::move(e), Expr::Int(1));
  }
  EXPECT_EQ(FoldInt(e), std::nullopt);  // beyond kMaxFoldDepth: not folded
  Expr folded = FoldConstants(e);
  EXPECT_EQ(folded.kind, ExprKind::kBinary);
}

// ---------------------------------------------------------------- typing

TEST(TypeCheckTest, UnifiesNumbersBySection3) {
  const Type i = Type::Int(), f = Type::Float();
  auto d = [](DType t) { return Type::Of(t); };
  struct Case {
    Type a, b, want;
  };
  const Case cases[] = {
      {i, i, i},
      {i, f, f},
      {f, d(DType::kF16), d(DType::kF16)},
      {i, d(DType::kBF16), d(DType::kBF16)},
      {d(DType::kF16), d(DType::kBF16), d(DType::kF32)},
      {d(DType::kF8E4M3), d(DType::kF16), d(DType::kF32)},
      {d(DType::kF16), d(DType::kF32), d(DType::kF32)},
      {d(DType::kF64), d(DType::kF32), d(DType::kF64)},
      {d(DType::kI32), d(DType::kF16), d(DType::kF16)},
      {d(DType::kI8), d(DType::kI32), d(DType::kI32)},
      {d(DType::kI32), d(DType::kU32), d(DType::kU32)},
      {d(DType::kBool), i, Type::Error()},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(UnifyNumbers(c.a, c.b), c.want)
        << c.a.ToString() << " with " << c.b.ToString();
    EXPECT_EQ(UnifyNumbers(c.b, c.a), c.want)
        << c.b.ToString() << " with " << c.a.ToString();
  }
}

TEST(TypeCheckTest, OperatorsAndBuiltins) {
  const Type i = Type::Int(), f = Type::Float();
  const Type b = Type::Of(DType::kBool), f16 = Type::Of(DType::kF16);
  std::string error;
  EXPECT_EQ(BinaryResultType(BinaryOp::kDiv, i, i, &error), i);  // floor
  EXPECT_EQ(BinaryResultType(BinaryOp::kDiv, i, f16, &error), f16);
  EXPECT_EQ(BinaryResultType(BinaryOp::kLt, i, f, &error), b);
  EXPECT_EQ(BinaryResultType(BinaryOp::kEq, b, b, &error), b);
  EXPECT_EQ(BinaryResultType(BinaryOp::kAnd, b, b, &error), b);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_TRUE(BinaryResultType(BinaryOp::kLt, b, b, &error).IsError());
  EXPECT_NE(error.find("'<' compares numbers"), std::string::npos) << error;
  error.clear();
  // An operand that is already an error gives no new message.
  EXPECT_TRUE(
      BinaryResultType(BinaryOp::kAdd, Type::Error(), b, &error).IsError());
  EXPECT_TRUE(error.empty());
  const Type args1[] = {i};
  EXPECT_EQ(CallResultType("exp", args1, &error), Type::Of(DType::kF32));
  const Type args3[] = {b, f16, i};
  EXPECT_EQ(CallResultType("select", args3, &error), f16);
  EXPECT_EQ(CallResultType("if_then_else", args3, &error), f16);
  const Type fma[] = {f16, f16, f};
  EXPECT_EQ(CallResultType("fma", fma, &error), f16);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_TRUE(CallResultType("nope", args1, &error).IsError());
  EXPECT_EQ(error, "unknown function 'nope'");
}

// ------------------------------------------------------- clean programs

Diagnostics ParseAndVerify(const std::string& text) {
  ParseResult r = Parse(text);
  if (!r.ok()) {
    ADD_FAILURE() << "syntax error:\n" << FormatDiagnostics(r.errors, "t");
    return r.errors;
  }
  return Verify(r.program);
}

TEST(VerifierTest, ValidCorpusVerifiesClean) {
  std::vector<std::filesystem::path> files = testing::CorpusFiles();
  for (const std::filesystem::path& path : files) {
    SCOPED_TRACE(path.filename().string());
    std::string text = testing::ReadFileOrDie(path);
    Diagnostics d = ParseAndVerify(text);
    EXPECT_TRUE(d.empty()) << FormatDiagnostics(d, path.filename().string());
  }
}

// A kernel whose body starts on line 4.
std::string InKernel(const std::string& body) {
  return "kernel k(X: f32[M, N], Y: f16[M, N], P: f32[100], W: i4[N, 64],\n"
         "         s: f32, n: i32)\n"
         "  tune BM in [64, 128] grid(ceildiv(M, BM), 4) threads(128) "
         "cluster(2, 1, 1) (bx, by) {\n" +
         body + "\n}\n";
}

TEST(VerifierTest, AcceptsEveryConstructUsedCorrectly) {
  const std::string bodies[] = {
      "rasterize(panel=8, order=column)",
      "let q = M / 4 + M % BM + ceildiv(N, 3) + (n << 2) + (bx & 1)",
      "let v = 1.5 * bx + s * 2 - f16(s) + bf16(1)",
      "let c = select(bx > 0 && !(by == 1), true, false) == (1 != 2)",
      "let e = exp(1) + fma(s, 2, 1.0) + sigmoid(s) + erf(2.5)",
      "let t = X[0, 1] + P[99]",
      "alloc local L: f32[4]\nL[0] = s\nL[1] += L[0] * 2\nL[2] /= 2",
      "alloc shared S: f32[BM, 64]\nalloc local L: f32[1]\nL[0] = S[0, 63]",
      "alloc shared S: f32[64]\ncopy X[bx, 0:+64] -> S",
      "alloc shared S: f32[64]\ncopy X[bx:+1, 0:+64] -> S",
      "alloc fragment F: f32[BM, 1]\ncopy X[bx * BM:+BM, 0] -> F",
      // Tensor regions may overhang the end of a constant dim.
      "alloc shared S: f32[8]\ncopy P[96:+8] -> S",
      "alloc shared S: f32[BM, 32] layout swizzle(64)\n"
      "alloc shared T: f32[8, 8] layout padded(4)\n"
      "alloc shared U: f32[8] layout row_major",
      "alloc shared Q: i4[64, 64]\ncopy W[0:+64, :] -> Q",
      "alloc shared As: f16[64, 32]\nalloc shared Bs: f16[64, 32]\n"
      "alloc fragment Acc: f16[64, 64]\n"
      "gemm As, Bs -> Acc transpose_b clear_accum policy=full_row",
      "alloc shared As: i8[32, 64]\nalloc fragment Bs: i8[32, 16]\n"
      "alloc fragment Acc: i32[64, 16]\ngemm As, Bs -> Acc transpose_a",
      "alloc shared As: f16[2, 64, 32]\nalloc shared Bs: f16[32, 64]\n"
      "alloc fragment Acc: f32[64, 64]\ngemm As[1, :, :], Bs -> Acc",
      "alloc fragment F: f32[BM, 64]\nalloc fragment R: f32[BM]\n"
      "alloc fragment R1: f32[BM, 1]\n"
      "reduce.absmax F -> R, dim=1, clear=false\nreduce.min F -> R1, dim=1",
      "alloc fragment F: f32[BM, 64]\nalloc shared D: f32[BM, 64]\n"
      "cumsum F -> D, dim=1, reverse=true",
      "alloc fragment F: f32[BM, 64]\n"
      "atomic_add X[bx * BM:+BM, 0:+64], F",
      "alloc fragment F: f32[BM, 64]\nfill F, -inf\nclear F[0:+8, :]",
      "alloc fragment F: f32[BM, 64]\nalloc shared S: f32[BM, 64]\n"
      "for t in pipelined(ceildiv(N, 64), stages=2) {\n"
      "  copy X[bx * BM:+BM, t * 64:+64] -> S\n  copy S -> F\n"
      "  parallel (i, j) in (BM, 64) {\n"
      "    let z = F[i, j] * S[i, j]\n"
      "    for u in unroll(2) {\n"
      "      if j % 2 == u { F[i, j] = z } else if j > 3 { S[i, j] = 0 }"
      " else { F[i, j] += 1 }\n"
      "    }\n  }\n}",
      "for t in serial(1, n) {\n  let a = t\n}\nif n > 0 {\n  let b = 2\n}",
      // A local tile stored inside `parallel` is read where the same
      // iteration stored the element: after lets, inside loops, after an
      // `if` that stores it on both branches, after a loop over its whole
      // dim. One never stored inside `parallel` is read anywhere.
      "alloc local L: f32[4]\nalloc local C: f32[2]\nC[0] = s\nC[1] = 2\n"
      "parallel (i, j) in (64, 4) {\n"
      "  let r = bx * 64 + i\n  L[j] = X[r, j] * C[0]\n"
      "  for u in serial(n) {\n    L[j] += X[bx * 64 + i, u]\n  }\n"
      "  if i > 3 { L[0] = 1 } else { L[0] = C[1] }\n"
      "  P[i] = L[j] + L[0]\n"
      "  for w in unroll(4) {\n    L[w] = 0\n  }\n  P[i] = L[3 - j]\n"
      "}\nlet c = C[1]",
  };
  for (const std::string& body : bodies) {
    Diagnostics d = ParseAndVerify(InKernel(body));
    EXPECT_TRUE(d.empty()) << body << "\n" << FormatDiagnostics(d, "t");
  }
}

// --------------------------------------------------------- error reporting

TEST(VerifierTest, ReportsAllErrorsNotOnlyTheFirstInSourceOrder) {
  // Nine independent errors, several per line, two kernels.
  std::string text =
      "kernel a(X: f32[M]) grid(0) threads(4096) (bx) {\n"
      "  let p = 1 / 0 + (true + 1)\n"
      "  alloc shared S: f32[M]\n"
      "  let q = nope\n"
      "}\n"
      "kernel b(X: f32[M]) grid(1) threads(32) (bx) {\n"
      "  alloc shared F: f32[8]\n"
      "  F[0] = 1.0\n"
      "  copy X -> X\n"
      "  rasterize(panel=1)\n"
      "  rasterize(panel=2)\n"
      "}\n";
  Diagnostics d = ParseAndVerify(text);
  std::vector<std::pair<int, int>> locs;
  for (const Diagnostic& diag : d)
    locs.push_back({diag.loc.line, diag.loc.col});
  std::vector<std::pair<int, int>> want = {
      {1, 26}, {1, 37}, {2, 13}, {2, 25}, {3, 23},
      {4, 11}, {8, 3},  {9, 3},  {11, 3},
  };
  EXPECT_EQ(locs, want) << FormatDiagnostics(d, "t");
  EXPECT_TRUE(std::is_sorted(locs.begin(), locs.end()));
}

TEST(VerifierTest, FormatsLikeTheLanguageReference) {
  Diagnostics d = ParseAndVerify(
      "kernel k(X: f32[M]) grid(1) threads(32) (bx) {\n  let v = Q\n}\n");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].ToString("x.tile"), "x.tile:2:11: error: unknown name 'Q'");
}

// ------------------------------------------------ malformed IR, by hand

// A minimal valid kernel to break in one way per case.
Kernel MinimalKernel() {
  Kernel k;
  k.loc = {1, 1};
  k.name = "k";
  k.grid = {Expr::Int(1, {1, 10})};
  k.threads = Expr::Int(32, {1, 20});
  k.block_vars = {"bx"};
  return k;
}

Stmt MakeStmt(decltype(Stmt::node) node, int line = 2) {
  Stmt s;
  s.loc = {line, 3};
  s.node = std::move(node);
  return s;
}

TEST(VerifierTest, MalformedIrGivesDiagnosticsNotCrashes) {
  struct Case {
    std::string name;
    std::function<void(Kernel&)> edit;
    std::string substring;
  };
  AllocStmt global_alloc;
  global_alloc.scope = Scope::kGlobal;
  global_alloc.name = "G";
  global_alloc.shape = {Expr::Int(4)};
  AllocStmt no_dims;
  no_dims.name = "E";
  ForStmt no_stages;
  no_stages.var = "t";
  no_stages.loop = LoopKind::kPipelined;
  no_stages.stop = Expr::Int(4);
  ForStmt serial_stages = no_stages;
  serial_stages.loop = LoopKind::kSerial;
  serial_stages.stages = Expr::Int(2);
  ParallelStmt mismatch;
  mismatch.vars = {"i", "j"};
  mismatch.extents = {Expr::Int(4)};
  LetStmt bad_unary;
  bad_unary.name = "u";
  bad_unary.value.kind = ExprKind::kUnary;  // no operand
  LetStmt bad_binary;
  bad_binary.name = "w";
  bad_binary.value.kind = ExprKind::kBinary;
  bad_binary.value.args = {Expr::Int(1)};
  ReduceStmt negative_dim;
  AllocStmt frag;
  frag.scope = Scope::kFragment;
  frag.name = "F";
  frag.shape = {Expr::Int(8)};
  negative_dim.src.name = "F";
  negative_dim.dst.name = "F";
  negative_dim.dim = -1;
  LetStmt keyword_let;
  keyword_let.name = "kernel";
  keyword_let.value = Expr::Int(1);

  const Case cases[] = {
      {"empty grid", [](Kernel& k) { k.grid.clear(); },
       "the grid has 0 extents"},
      {"four grid dims",
       [](Kernel& k) {
         k.grid.assign(4, Expr::Int(1));
         k.block_vars = {"a", "b", "c", "d"};
       },
       "the grid has 4 extents"},
      {"two cluster dims",
       [](Kernel& k) {
         k.cluster = {Expr::Int(1), Expr::Int(1)};
       },
       "a cluster has 3 extents; found 2"},
      {"tensor without dims",
       [](Kernel& k) {
         Param p;
         p.name = "T";
         p.is_tensor = true;
         k.params.push_back(p);
       },
       "tensor 'T' has no dims"},
      {"non-symbol tensor dim",
       [](Kernel& k) {
         Param p;
         p.name = "T";
         p.is_tensor = true;
         p.shape = {Expr::Binary(BinaryOp::kAdd, Expr::Int(1), Expr::Int(2))};
         k.params.push_back(p);
       },
       "must be an integer or a symbol"},
      {"tunable without candidates",
       [](Kernel& k) {
         k.tunables.push_back({{1, 5}, "T", {}});
       },
       "tunable 'T' has no candidates"},
      {"global alloc",
       [&](Kernel& k) { k.body.push_back(MakeStmt(global_alloc)); },
       "tile 'G' cannot be global"},
      {"alloc without dims",
       [&](Kernel& k) { k.body.push_back(MakeStmt(no_dims)); },
       "tile 'E' has no dims"},
      {"pipelined without stages",
       [&](Kernel& k) { k.body.push_back(MakeStmt(no_stages)); },
       "a pipelined loop needs 'stages='"},
      {"stages on a serial loop",
       [&](Kernel& k) { k.body.push_back(MakeStmt(serial_stages)); },
       "'stages' applies to pipelined loops only"},
      {"parallel arity",
       [&](Kernel& k) { k.body.push_back(MakeStmt(mismatch)); },
       "parallel binds 2 variables but gives 1 extents"},
      {"unary without operand",
       [&](Kernel& k) { k.body.push_back(MakeStmt(bad_unary)); },
       "malformed expression"},
      {"binary with one operand",
       [&](Kernel& k) { k.body.push_back(MakeStmt(bad_binary)); },
       "malformed expression"},
      {"negative reduce dim",
       [&](Kernel& k) {
         k.body.push_back(MakeStmt(frag));
         k.body.push_back(MakeStmt(negative_dim, 3));
       },
       "reduce dim=-1 is out of range"},
      {"keyword as a name",
       [&](Kernel& k) { k.body.push_back(MakeStmt(keyword_let)); },
       "'kernel' cannot name a let"},
  };
  for (const Case& c : cases) {
    Program p;
    p.kernels.push_back(MinimalKernel());
    EXPECT_TRUE(Verify(p).empty()) << "baseline";
    c.edit(p.kernels[0]);
    Diagnostics d = Verify(p);
    ASSERT_FALSE(d.empty()) << c.name;
    bool found = false;
    for (const Diagnostic& diag : d) {
      found = found || diag.message.find(c.substring) != std::string::npos;
    }
    EXPECT_TRUE(found) << c.name << ":\n" << FormatDiagnostics(d, "t");
  }
  EXPECT_FALSE(Verify(Program{}).empty());
}

TEST(VerifierTest, DeepIrIsBoundedNotACrash) {
  Program p;
  p.kernels.push_back(MinimalKernel());
  Kernel& k = p.kernels[0];
  // A left-associative chain the parser accepts at any length.
  Expr chain = Expr::Var("bx", {2, 11});
  for (int i = 0; i < 3000; ++i) {
    chain =
        Expr::Binary(BinaryOp::kAdd, std::move(chain), Expr::Int(1), {2, 12});
  }
  LetStmt let;
  let.name = "v";
  let.value = std::move(chain);
  k.body.push_back(MakeStmt(let));
  // Statements nested deeper than the parser allows.
  Stmt inner = MakeStmt(IfStmt{Expr::Bool(true), {}, {}, false}, 3);
  for (int i = 0; i < 200; ++i) {
    IfStmt outer{Expr::Bool(true), {std::move(inner)}, {}, false};
    inner = MakeStmt(std::move(outer), 3);
  }
  k.body.push_back(std::move(inner));
  Diagnostics d = Verify(p);
  ASSERT_EQ(d.size(), 2u) << FormatDiagnostics(d, "t");
  EXPECT_NE(d[0].message.find("expression nests deeper"), std::string::npos);
  EXPECT_NE(d[1].message.find("statements nest deeper"), std::string::npos);
}

}  // namespace
}  // namespace kiln::compiler
