// Tunable combinations are enumerated like an odometer over the candidate
// lists; each `where` constraint is evaluated with the tunables substituted
// (integer folding, then comparisons and && || !). Compiled kernels are
// cached by (file, kernel, bindings): several tests share a compile.
#include "tests/e2e/e2e_harness.h"

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/compile.h"
#include "compiler/ir/parser.h"
#include "compiler/tuning_space.h"

namespace kiln::e2e {
namespace {

struct CacheEntry {
  absl::StatusOr<std::unique_ptr<runtime::CpuKernel>> kernel =
      absl::UnknownError("not compiled");
};

std::map<const runtime::CpuKernel*, std::string>& Descriptions() {
  static auto* names = new std::map<const runtime::CpuKernel*, std::string>;
  return *names;
}

std::mutex& CacheMutex() {
  static std::mutex mu;
  return mu;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

}  // namespace

const std::string& CorpusSource(const std::string& file) {
  static auto* sources = new std::map<std::string, std::string>;
  std::lock_guard<std::mutex> lock(CacheMutex());
  auto it = sources->find(file);
  if (it != sources->end()) return it->second;
  std::ifstream in(std::string(KILN_E2E_CORPUS_DIR) + "/" + file);
  std::stringstream text;
  text << in.rdbuf();
  return (*sources)[file] = text.str();
}

absl::StatusOr<std::vector<Bindings>> ValidBindings(const std::string& file,
                                                    const std::string& kernel) {
  const std::string& source = CorpusSource(file);
  if (source.empty()) return absl::NotFoundError("cannot read corpus " + file);
  compiler::ParseResult parsed = compiler::Parse(source);
  if (!parsed.ok()) return absl::InvalidArgumentError(file + " does not parse");
  const compiler::Kernel* k = parsed.program.Find(kernel);
  if (k == nullptr) {
    return absl::NotFoundError(absl::StrCat(file, " has no kernel ", kernel));
  }
  return compiler::EnumerateTuningSpace(*k);
}

absl::StatusOr<Bindings> PickBindings(const std::string& file,
                                      const std::string& kernel,
                                      const Bindings& fixed) {
  absl::StatusOr<std::vector<Bindings>> all = ValidBindings(file, kernel);
  if (!all.ok()) return all.status();
  for (const Bindings& b : *all) {
    bool agrees = true;
    for (const auto& [name, value] : fixed) {
      auto it = b.find(name);
      agrees &= it != b.end() && it->second == value;
    }
    if (agrees) return b;
  }
  return absl::NotFoundError(absl::StrCat("no valid tunables of ", kernel,
                                          " agree with ", BindingsText(fixed)));
}

std::string BindingsText(const Bindings& b) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : b)
    parts.push_back(absl::StrCat(name, "=", value));
  return parts.empty() ? "(no tunables)" : absl::StrJoin(parts, " ");
}

absl::StatusOr<const runtime::CpuKernel*> LoadKernel(const std::string& file,
                                                     const std::string& kernel,
                                                     const Bindings& bindings) {
  static auto* cache = new std::map<std::string, CacheEntry>;
  const std::string key =
      absl::StrCat(file, ":", kernel, ":", BindingsText(bindings));
  const std::string& source = CorpusSource(file);
  std::lock_guard<std::mutex> lock(CacheMutex());
  auto [it, inserted] = cache->try_emplace(key);
  if (inserted) {
    compiler::CompileOptions options;
    options.target = "cpu";
    options.kernel = kernel;
    options.bindings = bindings;
    options.filename = file;
    absl::StatusOr<compiler::CompiledKernel> compiled =
        compiler::Compile(source, options);
    if (!compiled.ok()) {
      it->second.kernel = compiled.status();
    } else {
      it->second.kernel =
          runtime::CpuKernel::Load(compiled->binary, compiled->metadata);
      if (it->second.kernel.ok()) {
        Descriptions()[it->second.kernel->get()] = key;
      }
    }
  }
  if (!it->second.kernel.ok()) {
    const absl::Status& s = it->second.kernel.status();
    return absl::Status(s.code(),
                        absl::StrCat("compiling ", key, ": ", s.message()));
  }
  return it->second.kernel->get();
}

std::string DescribeKernel(const runtime::CpuKernel* kernel) {
  std::lock_guard<std::mutex> lock(CacheMutex());
  auto it = Descriptions().find(kernel);
  return it == Descriptions().end() ? "?" : it->second;
}

std::vector<CoveredKernel>& CoveredKernels() {
  static auto* covered = new std::vector<CoveredKernel>;
  return *covered;
}

bool RegisterCoverage(const char* file, const char* kernel) {
  CoveredKernels().push_back({file, kernel});
  return true;
}

E2eTest::E2eTest()
    : seed_(SeedForCurrentTest()),
      rng_(seed_),
      trace_(__FILE__, __LINE__,
             absl::StrCat("fixed seed ", FixedSeed(), ", test seed ", seed_,
                          " (re-run with KILN_E2E_SEED=", FixedSeed(), ")")) {
  InstallGuardPageReporter();
}

uint64_t E2eTest::FixedSeed() {
  const char* env = std::getenv("KILN_E2E_SEED");
  if (env != nullptr && *env != '\0') return std::strtoull(env, nullptr, 10);
  return kDefaultSeed;
}

uint64_t E2eTest::SeedForCurrentTest() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      info == nullptr
          ? std::string()
          : absl::StrCat(info->test_suite_name(), ".", info->name());
  return Fnv1a(name) ^ FixedSeed();
}

HostTensor E2eTest::Random(DType dtype, std::vector<int64_t> shape, double lo,
                           double hi, std::vector<int64_t> strides) {
  HostTensor t(dtype, std::move(shape), std::move(strides));
  t.FillRandom(rng_, lo, hi);
  return t;
}

const runtime::CpuKernel* E2eTest::Kernel(const std::string& file,
                                          const std::string& kernel,
                                          const Bindings& fixed) {
  absl::StatusOr<Bindings> b = PickBindings(file, kernel, fixed);
  if (!b.ok()) {
    ADD_FAILURE() << b.status();
    return nullptr;
  }
  absl::StatusOr<const runtime::CpuKernel*> k = LoadKernel(file, kernel, *b);
  if (!k.ok()) {
    ADD_FAILURE() << k.status();
    return nullptr;
  }
  return *k;
}

Launch& Launch::In(HostTensor& t) {
  args_.push_back(t.Arg());
  tensors_.push_back(&t);
  inputs_.emplace_back(&t, t);
  return *this;
}

Launch& Launch::Out(HostTensor& t) {
  t.Poison();
  args_.push_back(t.Arg());
  tensors_.push_back(&t);
  return *this;
}

Launch& Launch::InOut(HostTensor& t) {
  args_.push_back(t.Arg());
  tensors_.push_back(&t);
  return *this;
}

Launch& Launch::Scalar(const runtime::ArgValue& v) {
  args_.push_back(v);
  return *this;
}

::testing::AssertionResult Launch::Run(const runtime::CpuKernel& kernel) {
  absl::Status status = kernel.Launch(args_);
  if (!status.ok()) {
    return ::testing::AssertionFailure()
           << "launch of " << kernel.metadata().name << " failed: " << status;
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    std::string where;
    if (!tensors_[i]->GuardsIntact(&where)) {
      return ::testing::AssertionFailure()
             << kernel.metadata().name << " wrote before the data of argument "
             << i << ": " << where;
    }
  }
  for (const auto& [tensor, snapshot] : inputs_) {
    if (!tensor->SameBytes(snapshot)) {
      return ::testing::AssertionFailure()
             << kernel.metadata().name << " modified an input tensor";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::e2e
