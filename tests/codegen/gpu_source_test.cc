// Generated GPU source, no toolchain needed: every kernel of every valid
// corpus program renders for each GPU target, and the GEMM and attention
// kernels match their goldens (tests/codegen/golden/FILE.KERNEL.TARGET.src).
// KILN_UPDATE_GOLDENS=1 rewrites the goldens instead of comparing;
// KILN_DUMP_GPU_SOURCE_DIR=DIR also writes every rendered source to DIR (to
// diff the output of a refactoring of the shared GPU lowering).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "compiler/arith/prover.h"
#include "compiler/codegen/cuda/cuda_codegen.h"
#include "compiler/codegen/hip/hip_codegen.h"
#include "compiler/ir/parser.h"
#include "compiler/passes/pipeline.h"
#include "compiler/tuning_space.h"
#include "gtest/gtest.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;

using testing::CorpusFiles;
using testing::ReadFileOrDie;
using testing::TestNameOf;

struct SourceCase {
  std::string file;  // corpus file name
  std::string kernel;
  std::string target;
};

const char* const kTargets[] = {"sm_80", "sm_90a", "gfx90a"};
// Kernels whose generated source is kept as a golden.
const std::set<std::string> kGoldenFiles = {"gemm.tile",
                                            "flash_attention_fwd.tile"};

std::vector<SourceCase> AllCases() {
  std::vector<SourceCase> out;
  for (const fs::path& f : CorpusFiles()) {
    for (const Kernel& k : Parse(ReadFileOrDie(f)).program.kernels) {
      for (const char* t : kTargets) {
        out.push_back({f.filename().string(), k.name, t});
      }
    }
  }
  return out;
}

// The generated source of `c` with the first point of its tuning space, or
// the error.
absl::StatusOr<std::string> Render(const SourceCase& c) {
  ParseResult parsed =
      Parse(ReadFileOrDie(testing::TestDataDir() / "corpus" / c.file));
  const Kernel* found = parsed.program.Find(c.kernel);
  if (!found) return absl::NotFoundError(c.kernel);
  Kernel k = *found;
  std::vector<TunableValues> space = EnumerateTuningSpace(k, 1);
  Prover prover;
  PassContext ctx;
  ctx.target = c.target;
  if (!space.empty()) ctx.bindings = space[0];
  ctx.prover = &prover;
  absl::Status st = RunPipeline(k, ctx);
  if (!st.ok()) return st;
  if (IsHipTarget(c.target)) {
    HipCodegenOptions o;
    o.target = c.target;
    auto art = GenerateHipSource(k, o);
    if (!art.ok()) return art.status();
    return art->source;
  }
  CudaCodegenOptions o;
  o.target = c.target;
  auto art = GenerateCudaSource(k, o);
  if (!art.ok()) return art.status();
  return art->source;
}

void PrintTo(const SourceCase& c, std::ostream* os) {
  *os << c.file << ":" << c.kernel << "@" << c.target;
}

class GpuSourceTest : public ::testing::TestWithParam<SourceCase> {};

TEST_P(GpuSourceTest, Renders) {
  const SourceCase& c = GetParam();
  absl::StatusOr<std::string> src = Render(c);
  const std::string stem = c.file.substr(0, c.file.size() - 5);
  const std::string name = stem + "." + c.kernel + "." + c.target + ".src";
  if (const char* dir = std::getenv("KILN_DUMP_GPU_SOURCE_DIR")) {
    fs::create_directories(dir);
    std::ofstream(fs::path(dir) / name)
        << (src.ok() ? *src : "error: " + src.status().ToString() + "\n");
  }
  if (!src.ok() && src.status().code() == absl::StatusCode::kInvalidArgument &&
      c.target != "sm_90a" &&
      src.status().message().find("cluster(...) needs") != std::string::npos) {
    return;  // thread block clusters: sm_90 only
  }
  if (c.target == "gfx90a" && testing::ExceedsGfx90aSharedMemory(c.kernel)) {
    ASSERT_FALSE(src.ok());
    EXPECT_NE(src.status().message().find(
                  "bytes of shared memory per block; gfx90a allows"),
              std::string::npos)
        << src.status();
    return;
  }
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_NE(src->find("kiln_" + c.kernel), std::string::npos);
  if (!kGoldenFiles.count(c.file)) return;
  const fs::path golden = fs::path(KILN_GOLDEN_DIR) / name;
  if (testing::UpdateGoldens()) {
    testing::WriteFileOrDie(golden, *src);
    GTEST_SKIP() << "rewrote " << golden;
  }
  ASSERT_TRUE(fs::exists(golden)) << golden << " is missing";
  EXPECT_EQ(*src, ReadFileOrDie(golden)) << "golden " << golden;
}

// A histogram's updates of shared tiles at keys read from memory (marked by
// guard-accesses) are shared-memory atomics on every GPU target, in the
// element type's form; the fills before them and the merge after, which
// one thread each owns, stay plain.
TEST(GpuSourceAtomicsTest, SharedTileUpdatesIterationsMayShareAreAtomics) {
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    absl::StatusOr<std::string> src =
        Render({"numerics.tile", "shared_histogram", target});
    ASSERT_TRUE(src.ok()) << src.status();
    EXPECT_NE(src->find("kiln::atomic_add(&count[(((long long)(key)))], "),
              std::string::npos);
    EXPECT_NE(src->find("kiln::atomic_add_small_int(&pairs["),
              std::string::npos);
    EXPECT_NE(src->find("kiln::atomic_max(&top[(((long long)(key)))], "),
              std::string::npos);
    EXPECT_NE(src->find("kiln::atomic_min_narrow<kiln::f16_t>(&low[(((long "
                        "long)(key)))], "),
              std::string::npos);
    // The fragment indexed by keys (kept in shared memory on GPUs).
    EXPECT_NE(src->find("kiln::atomic_add(&hits["), std::string::npos);
    // The fill and the merge's reads of the bins.
    EXPECT_NE(src->find("count[(kiln_i1_0)] = "), std::string::npos);
    EXPECT_NE(src->find("kiln::atomic_add(&Count[((b) * 1LL)], count[(b)]);"),
              std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, GpuSourceTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<SourceCase>& info) {
                           std::string n = info.param.file.substr(
                                               0, info.param.file.size() - 5) +
                                           "_" + info.param.kernel + "_" +
                                           info.param.target;
                           return TestNameOf(n);
                         });

}  // namespace
}  // namespace kiln::compiler
