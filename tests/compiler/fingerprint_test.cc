// The compiler build fingerprint: it is the hash of the compiler's sources as
// compiler/fingerprint.cmake computes it at build time, the same for the
// same sources, different after any change, and part of every binary key.
#include <gtest/gtest.h>
#include <stdio.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/compile.h"
#include "tests/support/test_kernels.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::path(KILN_TEST_DATA_DIR) / ".." / "..";

// What fingerprint.cmake prints for the compiler/ folder under `root`.
std::string FingerprintOf(const fs::path& root) {
  const std::string command =
      std::string("'") + KILN_CMAKE_COMMAND + "' -DROOT='" + root.string() +
      "' -P '" + (kRoot / "compiler" / "fingerprint.cmake").string() + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "popen failed";
  std::string out;
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
    out.pop_back();
  }
  return out;
}

class TempTree {
 public:
  TempTree() {
    char name[] = "/tmp/kiln-fingerprint-XXXXXX";
    path_ = mkdtemp(name);
  }
  ~TempTree() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(FingerprintTest, IsTheHashOfTheSourcesThisBuildWasMadeFrom) {
  ASSERT_EQ(CompilerFingerprint().size(), 64u);
  EXPECT_EQ(FingerprintOf(kRoot), CompilerFingerprint());
  EXPECT_EQ(CompilerVersion(),
            std::string("kiln-") + KILN_VERSION + "+" +
                std::string(CompilerFingerprint().substr(0, 16)));
}

TEST(FingerprintTest, SameSourcesGiveTheSameFingerprintAndAnyChangeAnother) {
  TempTree tree;
  fs::copy(kRoot / "compiler", tree.path() / "compiler",
           fs::copy_options::recursive);
  // A copy elsewhere (another checkout, another build) agrees.
  EXPECT_EQ(FingerprintOf(tree.path()), CompilerFingerprint());

  const fs::path pass = tree.path() / "compiler" / "passes" / "simplify.cc";
  { std::ofstream(pass, std::ios::app) << "// one more line\n"; }
  const std::string edited = FingerprintOf(tree.path());
  EXPECT_EQ(edited.size(), 64u) << edited;
  EXPECT_NE(edited, CompilerFingerprint());

  fs::copy_file(kRoot / "compiler" / "passes" / "simplify.cc", pass,
                fs::copy_options::overwrite_existing);
  EXPECT_EQ(FingerprintOf(tree.path()), CompilerFingerprint());

  // A new device-library header changes it too, as does a renamed file.
  const fs::path device = tree.path() / "compiler" / "codegen" / "cuda" /
                          "device" / "kiln" / "extra.cuh";
  { std::ofstream(device) << "#pragma once\n"; }
  EXPECT_NE(FingerprintOf(tree.path()), CompilerFingerprint());
  fs::remove(device);
  fs::rename(pass, pass.string() + ".renamed.cc");
  EXPECT_NE(FingerprintOf(tree.path()), CompilerFingerprint());
}

TEST(FingerprintTest, IsPartOfEveryBinaryKey) {
  CompileOptions options;
  options.bindings = {{"B", 64}};
  absl::StatusOr<std::string> text =
      BinaryKeyText(::kiln::testing::kScaleKernel, options);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find(std::string("\ncompiler ") +
                       std::string(CompilerVersion()) + "\n"),
            std::string::npos)
      << *text;
}

}  // namespace
}  // namespace kiln::compiler
