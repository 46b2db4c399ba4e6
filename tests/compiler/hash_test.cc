// Canonical kernel hash (tile-ir.md §7), on the real corpus programs:
//   invariance: whitespace, comments, the names of local tiles, loop
//     variables, block indices, lets and parallel variables, header order,
//     and other spellings of the same IR leave every KernelHash unchanged;
//   sensitivity: any other change (a dim, a dtype, a flag, a constant, the
//     order of statements, candidates, interface names...) changes it.
// Every edited program must still parse and verify, so each case compares
// two valid kernels, and each edit must apply (no vacuous cases).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "compiler/ir/canonical_hash.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {
namespace fs = std::filesystem;
using testing::ReadFileOrDie;
using testing::ReplaceFirst;
using testing::ReplaceWord;

// Kernel name -> hash, for a program that must parse and verify.
std::map<std::string, std::string> Hashes(const std::string& text,
                                          const std::string& what) {
  std::map<std::string, std::string> hashes;
  ParseResult parsed = Parse(text);
  EXPECT_TRUE(parsed.ok()) << what << ":\n"
                           << FormatDiagnostics(parsed.errors, what) << text;
  if (!parsed.ok()) return hashes;
  Diagnostics diags = Verify(parsed.program);
  EXPECT_TRUE(diags.empty()) << what << ":\n"
                             << FormatDiagnostics(diags, what) << text;
  for (const Kernel& k : parsed.program.kernels) {
    hashes[k.name] = KernelHash(k);
  }
  return hashes;
}

std::string Corpus(const std::string& name) {
  return ReadFileOrDie(testing::TestDataDir() / "corpus" / name);
}

// ----------------------------------------------------------------- edits
// Each returns false when it did not apply (the test then fails).
using Edit = std::function<bool(std::string*)>;

Edit Word(std::string from, std::string to) {
  return [=](std::string* t) { return ReplaceWord(t, from, to) > 0; };
}
Edit First(std::string from, std::string to) {
  return [=](std::string* t) { return ReplaceFirst(t, from, to); };
}
Edit All(std::string from, std::string to) {
  return [=](std::string* t) {
    bool any = false;
    while (ReplaceFirst(t, from, to)) any = true;
    return any;
  };
}
Edit Both(Edit a, Edit b) {
  return [=](std::string* t) { return a(t) && b(t); };
}
// Exchanges two identifiers everywhere.
Edit SwapWords(std::string a, std::string b) {
  return Both(Both(Word(a, "__swap__"), Word(b, a)), Word("__swap__", b));
}
// Exchanges two (distinct, non-overlapping) lines of text.
Edit SwapLines(std::string a, std::string b) {
  return Both(Both(First(a, "\x01"), First(b, a)), First("\x01", b));
}
// The whole program on one line, single-spaced, without comments.
bool OneLine(std::string* t) {
  *t = std::regex_replace(testing::StripComments(*t), std::regex("\\s+"), " ");
  return true;
}
// Doubled spaces, blank lines, CRLF line ends and tab indents.
bool Loosen(std::string* t) {
  *t = std::regex_replace(std::regex_replace(*t, std::regex(" "), "  "),
                          std::regex("\n"), "\r\n\t\r\n");
  return true;
}
// A comment after every line and between the headers.
bool Annotate(std::string* t) {
  *t = "// leading comment\n" +
       std::regex_replace(*t, std::regex("\n"), "  // trailing // comment\n");
  return true;
}

struct HashCase {
  const char* name;
  const char* file;
  const char* kernel;  // the kernel whose hash is compared
  Edit edit;
  bool same;                           // true: invariance; false: sensitivity
  const char* kernel_after = nullptr;  // its name after the edit, if renamed
};

void PrintTo(const HashCase& c, std::ostream* os) { *os << c.name; }

const std::vector<HashCase>& Cases() {
  static const auto* cases = new std::vector<HashCase>{
      // ------------------------------------------------------ invariance
      {"OneLine", "gemm.tile", "gemm", OneLine, true},
      {"OneLineMultiKernel", "flash_attention_fwd.tile",
       "flash_attention_fwd_causal", OneLine, true},
      {"LooseWhitespace", "softmax.tile", "softmax", Loosen, true},
      {"Comments", "gemm_splitk.tile", "gemm_splitk", Annotate, true},
      {"RenameTiles", "gemm.tile", "gemm",
       Both(Both(Word("As", "a_shared"), Word("Bs", "b_shared")),
            Word("Acc", "c_frag")),
       true},
      {"SwapTileNames", "gemm.tile", "gemm", SwapWords("As", "Bs"), true},
      {"RenameLoopVar", "gemm.tile", "gemm", Word("k", "ko"), true},
      {"RenameBlockIndices", "gemm.tile", "gemm",
       Both(Word("bx", "col"), Word("by", "row")), true},
      {"SwapBlockIndexNames", "batched_gemm.tile", "batched_gemm",
       SwapWords("bx", "bz"), true},
      {"RenameLets", "gemm_splitk.tile", "gemm_splitk",
       Both(Both(Word("k_tiles", "nk"), Word("per_split", "chunk")),
            Both(Word("k_begin", "first"), Word("k_end", "last"))),
       true},
      {"RenameParallelVars", "flash_attention_fwd.tile",
       "flash_attention_fwd_causal",
       Both(Both(Word("i", "q"), Word("j", "kv")), Word("i1", "row1")), true},
      {"RenameLocalTile", "stencil_blur.tile", "stencil_blur",
       Word("taps", "w"), true},
      {"RenameLetInParallel", "dequant_int4.tile", "unpack_i4_bytes",
       Both(Word("nib", "nibble"), Word("byte", "b8")), true},
      {"SplitWhere", "gemm.tile", "gemm",
       First("where BM * BN <= 32768, ", "where BM * BN <= 32768\n  where "),
       true},
      {"JoinTunes", "gemm.tile", "gemm",
       First("tune BN in [64, 128, 256]\n  tune BK",
             "tune BN in [64, 128, 256], BK"),
       true},
      {"AssumeFirst", "gemm_fp8.tile", "gemm_fp8",
       Both(First("  assume K % 16 == 0, M > 0\n", ""),
            First("  tune BM",
                  "  assume K % 16 == 0\n"
                  "  assume M > 0\n  tune BM")),
       true},
      {"IfThenElseIsSelect", "flash_attention_fwd.tile", "flash_attention_fwd",
       First("if_then_else(", "select("), true},
      {"HexIsDecimal", "dropout.tile", "dropout",
       First("0x85EBCA6B", "2246822507"), true},
      {"FloatSpellings", "gemm_bias_gelu.tile", "gemm_bias_gelu",
       Both(First("0.5 * x", "5e-1 * x"), First("1.0 +", "1. +")), true},
      {"RedundantParentheses", "gemm.tile", "gemm",
       First("copy A[by * BM:+BM, k * BK:+BK]",
             "copy A[((by * BM)):+(BM), (k * BK):+BK]"),
       true},
      {"ExplicitDefaultPolicy", "batched_gemm.tile", "batched_gemm",
       First(" policy=square", ""), true},
      {"ExplicitDefaultClear", "softmax.tile", "softmax",
       First(", clear=true", ""), true},
      {"ExplicitDefaultReverse", "inclusive_scan.tile", "inclusive_scan",
       First(", reverse=false", ""), true},
      {"ExplicitDefaultOrder", "gemm_fp8.tile", "gemm_fp8",
       First(", order=row", ""), true},
      {"GemmFlagOrder", "flash_attention_fwd.tile", "flash_attention_fwd",
       First("transpose_b clear_accum policy=full_row",
             "policy=full_row clear_accum transpose_b"),
       true},
      {"OtherKernelEdited", "flash_attention_fwd.tile",
       "flash_attention_fwd_causal",
       // The non-causal kernel is the only one with clear_accum.
       First(" clear_accum", ""), true},

      // ----------------------------------------------------- sensitivity
      {"ConstantDim", "layernorm.tile", "layernorm", Word("1024", "2048"),
       false},
      {"TileDim", "stencil_blur.tile", "stencil_blur", All("BN + 4", "BN + 6"),
       false},
      {"ParamDType", "gemm.tile", "gemm",
       First("C: f16[M, N]", "C: bf16[M, N]"), false},
      {"TileDType", "softmax.tile", "softmax",
       First("xs: f32[BM, BN]", "xs: f64[BM, BN]"), false},
      {"ScalarParamDType", "elementwise_broadcast.tile",
       "elementwise_broadcast", First("alpha: f32", "alpha: f16"), false},
      {"CastDType", "quantize.tile", "quantize_q15",
       First("ys[i] = i16(", "ys[i] = i32("), false},
      {"GemmClearAccum", "gemm_bias_gelu.tile", "gemm_bias_gelu",
       First("-> Acc transpose_b", "-> Acc transpose_b clear_accum"), false},
      {"GemmTranspose", "gemm_int8.tile", "gemm_int8",
       Both(First("As: i8[BK, BM]", "As: i8[BM, BK]"),
            Both(First("AT[k * BK:+BK, by * BM:+BM]",
                       "AT[by * BM:+BM, k * BK:+BK]"),
                 First("Acc transpose_a", "Acc"))),
       false},
      {"GemmPolicy", "flash_attention_fwd.tile", "flash_attention_fwd_causal",
       First("policy=full_row", "policy=full_col"), false},
      {"IntConstant", "gemm.tile", "gemm",
       First("threads(128)", "threads(256)"), false},
      {"FloatConstantOneUlp", "gemm_bias_gelu.tile", "gemm_bias_gelu",
       First("0.7071067811865476", "0.7071067811865475"), false},
      {"Stages", "gemm_bias_gelu.tile", "gemm_bias_gelu",
       First("stages=3", "stages=2"), false},
      {"StatementOrder", "gemm.tile", "gemm",
       SwapLines("copy A[by * BM:+BM, k * BK:+BK] -> As",
                 "copy B[k * BK:+BK, bx * BN:+BN] -> Bs"),
       false},
      {"AllocOrder", "gemm.tile", "gemm",
       SwapLines("alloc shared As: f16[BM, BK] layout swizzle(128)",
                 "alloc shared Bs: f16[BK, BN] layout swizzle(128)"),
       false},
      {"TunableCandidateAdded", "gemm.tile", "gemm",
       First("tune BK in [32, 64]", "tune BK in [32, 64, 128]"), false},
      {"TunableCandidateOrder", "gemm.tile", "gemm",
       First("tune BK in [32, 64]", "tune BK in [64, 32]"), false},
      {"TunableName", "gemm.tile", "gemm", Word("BM", "BLOCK_M"), false},
      {"ParamName", "gemm.tile", "gemm", Word("A", "X"), false},
      {"ScalarParamName", "adam_step.tile", "adam_step", Word("lr", "alpha"),
       false},
      {"SymbolName", "gemm.tile", "gemm", Word("K", "KD"), false},
      {"KernelName", "gemm.tile", "gemm",
       First("kernel gemm(", "kernel matmul("), false, "matmul"},
      {"Scope", "gemm_bias_gelu.tile", "gemm_bias_gelu",
       First("alloc shared Cs", "alloc fragment Cs"), false},
      {"LayoutParam", "gemm.tile", "gemm",
       First("layout swizzle(128)", "layout swizzle(64)"), false},
      {"LayoutDropped", "gemm.tile", "gemm", First(" layout swizzle(128)", ""),
       false},
      {"ReduceKind", "losses.tile", "cross_entropy",
       First("reduce.max xs -> tm", "reduce.absmax xs -> tm"), false},
      {"ReduceAccumulates", "softmax.tile", "softmax",
       First("clear=true", "clear=false"), false},
      {"CumsumReverse", "inclusive_scan.tile", "segment_suffix_sum",
       First("reverse=true", "reverse=false"), false},
      {"LoopKind", "softmax.tile", "softmax", First("in serial(", "in unroll("),
       false},
      {"LoopStart", "topk.tile", "topk", First("serial(0, 8)", "serial(8)"),
       false},
      {"StoreOp", "gemm_fp8.tile", "gemm_fp8", First("*=", "/="), false},
      {"BinaryOp", "adam_step.tile", "adam_step",
       First("g[i] + weight_decay", "g[i] - weight_decay"), false},
      {"Builtin", "elementwise_broadcast.tile", "elementwise_broadcast",
       First("tanh(", "erf("), false},
      {"Where", "gemm.tile", "gemm", First("<= 32768", "<= 16384"), false},
      {"Assume", "gemm_int8.tile", "gemm_int8", First("K % 16", "K % 32"),
       false},
      {"GridOrder", "gemm.tile", "gemm",
       First("grid(ceildiv(N, BN), ceildiv(M, BM))",
             "grid(ceildiv(M, BM), ceildiv(N, BN))"),
       false},
      {"Cluster", "gemm_fp8.tile", "gemm_fp8",
       First("cluster(2, 1, 1)", "cluster(1, 2, 1)"), false},
      {"Strides", "batched_gemm.tile", "batched_gemm",
       First(" strides [0, N, 1]", ""), false},
      {"RasterizePanel", "gemm.tile", "gemm", First("panel=8", "panel=16"),
       false},
      {"RasterizeOrder", "batched_gemm.tile", "batched_gemm",
       First(", order=column", ""), false},
      {"ElseBranch", "elementwise_broadcast.tile", "elementwise_broadcast",
       First("act == 1", "act == 2"), false},
      {"RegionStart", "stencil_blur.tile", "stencil_blur",
       First("bx * BN - 2:+", "bx * BN - 1:+"), false},
      {"FillValue", "softmax.tile", "softmax",
       First("fill row_max, -inf", "fill row_max, inf"), false},
      {"ParamOrder", "losses.tile", "huber_loss",
       First("Pred: f32[N], Target: f32[N]", "Target: f32[N], Pred: f32[N]"),
       false},
      {"LocalTileUseSwapped", "gemm.tile", "gemm",
       // Same names, but the gemm now reads its operands the other way round.
       Both(First("alloc shared As: f16[BM, BK]",
                  "alloc shared As: f16[BK, BN]"),
            Both(First("alloc shared Bs: f16[BK, BN]",
                       "alloc shared Bs: f16[BM, BK]"),
                 Both(First("-> As\n", "-> Bs\n"),
                      Both(First("-> Bs\n    gemm", "-> As\n    gemm"),
                           First("gemm As, Bs", "gemm Bs, As"))))),
       false},
  };
  return *cases;
}

class KernelHashCaseTest : public ::testing::TestWithParam<HashCase> {};

TEST_P(KernelHashCaseTest, EditChangesTheHashExactlyWhenItShould) {
  const HashCase& c = GetParam();
  const std::string original = Corpus(c.file);
  std::string edited = original;
  ASSERT_TRUE(c.edit(&edited)) << "the edit does not apply to " << c.file;
  ASSERT_NE(edited, original);

  std::map<std::string, std::string> before = Hashes(original, c.file);
  std::map<std::string, std::string> after =
      Hashes(edited, std::string("edited ") + c.file);
  const std::string kernel_after = c.kernel_after ? c.kernel_after : c.kernel;
  ASSERT_TRUE(before.count(c.kernel)) << c.kernel;
  ASSERT_TRUE(after.count(kernel_after)) << kernel_after;
  if (c.same) {
    EXPECT_EQ(after[kernel_after], before[c.kernel]);
  } else {
    EXPECT_NE(after[kernel_after], before[c.kernel]);
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, KernelHashCaseTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<HashCase>& info) {
                           return std::string(info.param.same ? "Same_"
                                                              : "Differs_") +
                                  info.param.name;
                         });

// ------------------------------------------------------- whole-corpus sweeps

struct KernelText {
  std::string file;
  std::string name;
  std::string text;  // the kernel alone, canonically printed
  Kernel kernel;
};

// Every kernel of the corpus, each printed alone.
std::vector<KernelText> CorpusKernels() {
  std::vector<KernelText> out;
  for (const fs::path& f : testing::CorpusFiles()) {
    ParseResult parsed = Parse(ReadFileOrDie(f));
    EXPECT_TRUE(parsed.ok()) << f;
    for (const Kernel& k : parsed.program.kernels) {
      out.push_back({f.filename().string(), k.name, Print(k), k});
    }
  }
  return out;
}

// Names bound inside the kernel (block indices, tiles, loop and parallel
// variables, lets), and names of its interface (params, symbols, tunables).
void CollectLocals(const Block& block, std::set<std::string>* out) {
  for (const Stmt& s : block) {
    if (auto* a = std::get_if<AllocStmt>(&s.node)) out->insert(a->name);
    if (auto* l = std::get_if<LetStmt>(&s.node)) out->insert(l->name);
    if (auto* p = std::get_if<ParallelStmt>(&s.node)) {
      out->insert(p->vars.begin(), p->vars.end());
      CollectLocals(p->body, out);
    }
    if (auto* f = std::get_if<ForStmt>(&s.node)) {
      out->insert(f->var);
      CollectLocals(f->body, out);
    }
    if (auto* i = std::get_if<IfStmt>(&s.node)) {
      CollectLocals(i->then_body, out);
      CollectLocals(i->else_body, out);
    }
  }
}
std::set<std::string> LocalNames(const Kernel& k) {
  std::set<std::string> names(k.block_vars.begin(), k.block_vars.end());
  CollectLocals(k.body, &names);
  return names;
}
std::set<std::string> InterfaceNames(const Kernel& k) {
  std::set<std::string> names;
  for (const Param& p : k.params) {
    names.insert(p.name);
    for (const Expr& d : p.shape) {
      if (d.kind == ExprKind::kVar) names.insert(d.name);
    }
  }
  for (const Tunable& t : k.tunables) names.insert(t.name);
  return names;
}

std::string OnlyHash(const std::string& text, const std::string& what) {
  std::map<std::string, std::string> h = Hashes(text, what);
  EXPECT_EQ(h.size(), 1u) << what;
  return h.empty() ? "" : h.begin()->second;
}

TEST(KernelHashTest, IsLowerCaseHexSha256) {
  for (const KernelText& k : CorpusKernels()) {
    const std::string h = KernelHash(k.kernel);
    EXPECT_TRUE(std::regex_match(h, std::regex("[0-9a-f]{64}"))) << h;
  }
}

// The source (comments, free layout), its golden (canonical) and the kernel
// printed alone all hash the same; a kernel's hash does not depend on the
// other kernels of its file.
TEST(KernelHashTest, SourceGoldenAndKernelAloneAgree) {
  for (const fs::path& f : testing::CorpusFiles()) {
    std::map<std::string, std::string> source =
        Hashes(ReadFileOrDie(f), f.filename().string());
    std::map<std::string, std::string> golden =
        Hashes(ReadFileOrDie(testing::GoldenPath(f)), "golden");
    EXPECT_EQ(source, golden) << f;
  }
  for (const KernelText& k : CorpusKernels()) {
    EXPECT_EQ(OnlyHash(k.text, k.name), KernelHash(k.kernel)) << k.name;
  }
}

// Renaming every local name of every corpus kernel at once keeps its hash.
TEST(KernelHashTest, EveryLocalRenamedKeepsTheHash) {
  for (const KernelText& k : CorpusKernels()) {
    std::string renamed = k.text;
    for (const std::string& name : LocalNames(k.kernel)) {
      ASSERT_GT(ReplaceWord(&renamed, name, "r_" + name), 0) << name;
    }
    EXPECT_EQ(OnlyHash(renamed, k.name), KernelHash(k.kernel)) << k.name;
  }
}

// Renaming any single interface name (parameter, symbol, tunable) of any
// corpus kernel changes its hash.
TEST(KernelHashTest, EveryInterfaceRenameChangesTheHash) {
  for (const KernelText& k : CorpusKernels()) {
    for (const std::string& name : InterfaceNames(k.kernel)) {
      std::string renamed = k.text;
      ASSERT_GT(ReplaceWord(&renamed, name, "r_" + name), 0) << name;
      EXPECT_NE(OnlyHash(renamed, k.name), KernelHash(k.kernel))
          << k.name << ": renaming " << name;
    }
  }
}

// `kiln ir hash` prints one line per kernel: the kernels of a multi-kernel
// program hash apart, and each line follows only its own kernel.
TEST(KernelHashTest, MultiKernelProgramsHashPerKernel) {
  std::set<std::string> all;
  int kernels = 0;
  for (const KernelText& k : CorpusKernels()) {
    all.insert(KernelHash(k.kernel));
    ++kernels;
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kernels))
      << "two corpus kernels hash the same";

  const std::string text = Corpus("flash_attention_fwd.tile");
  std::map<std::string, std::string> before = Hashes(text, "fa");
  ASSERT_EQ(before.size(), 2u);
  // Change the first kernel only (its Lse store is unique to it).
  std::string edited = text;
  ASSERT_TRUE(ReplaceFirst(&edited, "logsum[r] = log2(logsum[r])",
                           "logsum[r] = log(logsum[r])"));
  std::map<std::string, std::string> after = Hashes(edited, "edited fa");
  EXPECT_NE(after["flash_attention_fwd_causal"],
            before["flash_attention_fwd_causal"]);
  EXPECT_EQ(after["flash_attention_fwd"], before["flash_attention_fwd"]);

  // Reordering the kernels of a program changes no kernel's hash.
  ParseResult parsed = Parse(text);
  ASSERT_TRUE(parsed.ok());
  Program swapped = parsed.program;
  std::swap(swapped.kernels[0], swapped.kernels[1]);
  EXPECT_EQ(Hashes(Print(swapped), "swapped fa"), before);
}

}  // namespace
}  // namespace kiln::compiler
