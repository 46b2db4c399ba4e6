// One language on every target (issue 22): a program means the same thing
// on cpu, sm_80, sm_90a and gfx90a, so it is accepted or refused alike.
// Every program here is judged on the four targets:
//   - every invalid program (tests/compiler/invalid/);
//   - every kernel of the corpus, of the phrasings (tests/codegen/phrasings/)
//     and of the Python DSL's goldens (tests/python/goldens/), at several
//     points of its tuning space, each also with its symbols fixed to a
//     ragged value (generated valid variants; a fixed value may break an
//     `assume`, which must then be refused alike).
// The front end (parse, verify) and the passes decide the language's
// verdict; it must agree across targets, word for word for the refusals.
// Only a back end may refuse what another target accepts, and only for a
// documented limit of its target (clusters, the shared-memory size), as a
// located error. No toolchain is needed: GPU targets stop at the generated
// source, the CPU target builds its object.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "compiler/arith/prover.h"
#include "compiler/codegen/cpu/cpu_codegen.h"
#include "compiler/codegen/cuda/cuda_codegen.h"
#include "compiler/codegen/hip/hip_codegen.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/verifier.h"
#include "compiler/passes/pipeline.h"
#include "compiler/target.h"
#include "compiler/tuning_space.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;

const char* const kTargets[] = {"cpu", "sm_80", "sm_90a", "gfx90a"};

// The target limits a back end may refuse a program for (compiler/docs/
// tile-ir.md §9, §10): message substrings.
const char* const kBackEndLimits[] = {
    "cluster(...) needs",          // thread block clusters: sm_90 only
    "bytes of shared memory per",  // the target's shared memory per block
};

enum class Stage { kAccepted, kLanguage, kBackEnd };

struct Verdict {
  Stage stage = Stage::kAccepted;
  std::string message;
  bool located = false;
};

// `kernel` of the verified `program` through the passes and the back end
// of `target`.
Verdict JudgeKernel(const Kernel& kernel, const TunableValues& bindings,
                    const std::string& target) {
  Kernel k = kernel;
  Prover prover;
  PassContext ctx;
  ctx.target = target;
  ctx.bindings = bindings;
  ctx.prover = &prover;
  Verdict v;
  absl::Status st = RunPipeline(k, ctx);
  if (!st.ok()) {
    v.stage = Stage::kLanguage;
    v.message = std::string(st.message());
    v.located = ErrorLocation(st).has_value();
    return v;
  }
  if (IsCudaTarget(target)) {
    CudaCodegenOptions o;
    o.target = target;
    o.plan = ctx.gpu_plan.get();
    st = GenerateCudaSource(k, o).status();
  } else if (IsHipTarget(target)) {
    HipCodegenOptions o;
    o.target = target;
    o.plan = ctx.gpu_plan.get();
    st = GenerateHipSource(k, o).status();
  } else {
    CpuCodegenOptions o;
    o.opt_level = 0;
    o.keep_llvm_ir = false;
    st = GenerateCpu(k, o).status();
  }
  if (!st.ok()) {
    v.stage = Stage::kBackEnd;
    v.message = std::string(st.message());
    v.located = ErrorLocation(st).has_value();
  }
  return v;
}

struct ProgramCase {
  std::string label;  // file, kernel, bindings
  const Kernel* kernel = nullptr;
  TunableValues bindings;
};

std::string Describe(const Verdict& v) {
  switch (v.stage) {
    case Stage::kAccepted:
      return "accepted";
    case Stage::kLanguage:
      return "refused: " + v.message;
    case Stage::kBackEnd:
      return "back-end limit: " + v.message;
  }
  return "?";
}

// Symbols: the names in tensor shapes and strides.
std::vector<std::string> SymbolsOf(const Kernel& k) {
  std::vector<std::string> out;
  for (const Param& p : k.params) {
    for (const auto* dims : {&p.shape, &p.strides}) {
      for (const Expr& e : *dims) {
        if (e.kind == ExprKind::kVar &&
            std::find(out.begin(), out.end(), e.name) == out.end()) {
          out.push_back(e.name);
        }
      }
    }
  }
  return out;
}

// Every target's verdict on one kernel and binding, checked as the file's
// comment says; true when every target accepts it.
bool ExpectOneVerdict(const ProgramCase& c) {
  std::map<std::string, Verdict> verdicts;
  for (const char* t : kTargets) {
    verdicts[t] = JudgeKernel(*c.kernel, c.bindings, t);
  }
  std::string all;
  for (const auto& [t, v] : verdicts) all += "\n  " + t + ": " + Describe(v);
  SCOPED_TRACE(c.label + all);
  const Verdict& cpu = verdicts["cpu"];
  for (const auto& [t, v] : verdicts) {
    // The language's verdict: the same, and in the same words.
    EXPECT_EQ(v.stage == Stage::kLanguage, cpu.stage == Stage::kLanguage) << t;
    if (v.stage == Stage::kLanguage && cpu.stage == Stage::kLanguage) {
      EXPECT_EQ(v.message, cpu.message) << t;
    }
    if (v.stage == Stage::kAccepted) continue;
    EXPECT_TRUE(v.located) << t << ": the error has no line and column";
    if (v.stage == Stage::kBackEnd) {
      // (The CPU target has no limit of this kind.)
      EXPECT_NE(t, "cpu");
      const std::string& msg = v.message;
      const bool documented = std::any_of(
          std::begin(kBackEndLimits), std::end(kBackEndLimits),
          [&](const char* m) { return msg.find(m) != std::string::npos; });
      EXPECT_TRUE(documented) << t << ": an undocumented back-end refusal";
    }
  }
  return std::all_of(verdicts.begin(), verdicts.end(), [](const auto& tv) {
    return tv.second.stage == Stage::kAccepted;
  });
}

std::vector<fs::path> TileFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".tile") {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Up to `n` points spread over the kernel's tuning space (its first and
// last included).
std::vector<TunableValues> SpreadPoints(const Kernel& k, size_t n) {
  std::vector<TunableValues> all = EnumerateTuningSpace(k, 4096);
  if (all.size() <= n) return all;
  std::vector<TunableValues> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(all[i * (all.size() - 1) / (n - 1)]);
  return out;
}

TEST(OneVerdictTest, InvalidProgramsAreRefusedAlikeOnEveryTarget) {
  const std::vector<fs::path> files =
      TileFiles(testing::TestDataDir() / "invalid");
  ASSERT_GT(files.size(), 100u);
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.filename().string());
    ParseResult parsed = Parse(testing::ReadFileOrDie(f));
    Diagnostics diags = parsed.errors;
    if (diags.empty()) diags = Verify(parsed.program);
    if (!diags.empty()) {
      // The front end reads no target: one refusal, located.
      for (const Diagnostic& d : diags) {
        EXPECT_GT(d.loc.line, 0) << d.message;
      }
      continue;
    }
    // What the verifier lets through is refused by the passes, alike on
    // every target (every kernel at its tuning space's first point).
    bool refused = false;
    for (const Kernel& k : parsed.program.kernels) {
      std::vector<TunableValues> space = EnumerateTuningSpace(k, 1);
      ProgramCase c{f.filename().string() + ":" + k.name, &k,
                    space.empty() ? TunableValues{} : space[0]};
      ExpectOneVerdict(c);
      refused |= JudgeKernel(k, c.bindings, "cpu").stage != Stage::kAccepted;
    }
    EXPECT_TRUE(refused) << "an invalid program passed on the CPU target";
  }
}

TEST(OneVerdictTest, ValidProgramsAndTheirVariantsGetOneVerdict) {
  const fs::path root = testing::TestDataDir();
  std::vector<fs::path> files = TileFiles(root / "corpus");
  for (const char* extra : {"../codegen/phrasings", "../python/goldens"}) {
    std::vector<fs::path> more = TileFiles(root / extra);
    ASSERT_FALSE(more.empty()) << extra;
    files.insert(files.end(), more.begin(), more.end());
  }
  int cases = 0, accepted_everywhere = 0, refused_variants = 0;
  for (const fs::path& f : files) {
    ParseResult parsed = Parse(testing::ReadFileOrDie(f));
    ASSERT_TRUE(parsed.ok()) << f;
    ASSERT_TRUE(Verify(parsed.program).empty()) << f;
    for (const Kernel& k : parsed.program.kernels) {
      std::vector<TunableValues> points = SpreadPoints(k, 3);
      if (points.empty()) points.push_back({});
      for (const TunableValues& point : points) {
        for (bool fix_symbols : {false, true}) {
          TunableValues b = point;
          if (fix_symbols) {
            const std::vector<std::string> symbols = SymbolsOf(k);
            if (symbols.empty()) continue;
            for (const std::string& s : symbols) b[s] = 37;
          }
          std::string label = f.filename().string() + ":" + k.name;
          for (const auto& [n, v] : b) {
            label += " " + n + "=" + std::to_string(v);
          }
          accepted_everywhere += ExpectOneVerdict({label, &k, b});
          ++cases;
        }
      }
      // Invalid variants the verifier cannot see: a tunable off its
      // candidates is refused by `specialize`, alike everywhere.
      if (!k.tunables.empty() && !points.empty()) {
        TunableValues b = points[0];
        const Tunable& t = k.tunables[0];
        b[t.name] =
            *std::max_element(t.candidates.begin(), t.candidates.end()) + 1;
        EXPECT_FALSE(ExpectOneVerdict(
            {f.filename().string() + ":" + k.name + " " + t.name + " off", &k,
             b}));
        ++refused_variants;
      }
    }
  }
  // The programs are valid: most variants run everywhere (the rest break
  // an `assume` with a fixed symbol, or ask for clusters).
  EXPECT_GT(cases, 150);
  EXPECT_GT(refused_variants, 30);
  EXPECT_GT(accepted_everywhere, cases / 2);
}

}  // namespace
}  // namespace kiln::compiler
