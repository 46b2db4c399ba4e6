#include "cache/bundle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "tests/cache/test_util.h"

namespace kiln::cache {
namespace {

using ::kiln::cache::testing::KeyFor;
using ::kiln::cache::testing::MakeEntry;
using ::kiln::cache::testing::MatchesEntry;
using ::kiln::cache::testing::TempDir;
using ::testing::HasSubstr;

std::unique_ptr<LocalStore> Open(const std::string& dir) {
  LocalStoreOptions options;
  options.fsync = false;
  return *LocalStore::Open(dir, options);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Assembles a bundle file around `manifest`, with a correct header (so the
// only defect is the one a test plants). `members` is the member area.
std::string Assemble(const std::string& members, const std::string& manifest,
                     uint32_t version = kBundleVersion) {
  BundleHeader header;
  header.version = version;
  header.manifest_offset = kBundleHeaderSize + members.size();
  header.manifest_size = manifest.size();
  header.manifest_sha256 = Digest::Of(manifest);
  return EncodeBundleHeader(header) + members + manifest;
}

class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = Open(tmp_.Sub("source"));
    for (int n = 0; n < 12; ++n) {
      EntryData data = MakeEntry(n, 3000);
      if (n % 4 == 0) data.blobs[0].data = std::string(20000, 'c');  // zstd
      ASSERT_TRUE(source_->Put(KeyFor(n), data).ok());
    }
  }

  // Imports `bundle_bytes` into a fresh store; returns the status and checks
  // that a failure published nothing.
  absl::Status ImportBytes(const std::string& bundle_bytes) {
    const std::string path = tmp_.Sub("crafted.kbundle");
    WriteFile(path, bundle_bytes);
    auto target = Open(tmp_.Sub(absl::StrCat("target", ++imports_)));
    absl::StatusOr<ImportReport> report = ImportBundle(*target, path);
    if (!report.ok()) EXPECT_TRUE(target->List()->empty());
    return report.status();
  }

  TempDir tmp_;
  std::unique_ptr<LocalStore> source_;
  int imports_ = 0;
};

TEST_F(BundleTest, ExportImportRoundTripBySelection) {
  EntryFilter by_arch;
  by_arch.target_arch = "sm_90a";  // even n
  const std::string path = tmp_.Sub("sm90.kbundle");
  absl::StatusOr<ExportReport> exported = ExportBundle(*source_, by_arch, path);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->entries, 6);
  EXPECT_TRUE(exported->skipped.empty());

  auto target = Open(tmp_.Sub("target"));
  absl::StatusOr<ImportReport> imported = ImportBundle(*target, path);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->imported, 6);
  for (int n = 0; n < 12; ++n) {
    absl::StatusOr<Entry> got = target->Get(KeyFor(n));
    if (n % 2 == 0) {
      ASSERT_TRUE(got.ok()) << n;
      EntryData want = MakeEntry(n, 3000);
      if (n % 4 == 0) want.blobs[0].data = std::string(20000, 'c');
      EXPECT_EQ(got->blobs, want.blobs);
      EXPECT_EQ(got->info.metadata, want.metadata);
    } else {
      EXPECT_TRUE(absl::IsNotFound(got.status())) << n;
    }
  }
  // Importing again changes nothing.
  imported = ImportBundle(*target, path);
  ASSERT_TRUE(imported.ok());
  EXPECT_EQ(imported->already_present, 6);
  EXPECT_EQ(imported->imported, 0);

  EntryFilter by_sku;
  by_sku.gpu_sku = "AMD MI300X";
  EXPECT_EQ(ExportBundle(*source_, by_sku, tmp_.Sub("mi300.kbundle"))->entries,
            8);
  EntryFilter by_kernel;
  by_kernel.kernel_name = "kernel_1";  // n = 1, 8
  EXPECT_EQ(ExportBundle(*source_, by_kernel, tmp_.Sub("k.kbundle"))->entries,
            2);
  EntryFilter by_keys;
  by_keys.keys = {KeyFor(3), KeyFor(5)};
  EXPECT_EQ(ExportBundle(*source_, by_keys, tmp_.Sub("keys.kbundle"))->entries,
            2);
}

TEST_F(BundleTest, ExportRefusesMissingKeysAndEmptySelections) {
  EntryFilter keys;
  keys.keys = {KeyFor(3), KeyFor(999)};
  absl::StatusOr<ExportReport> r = ExportBundle(*source_, keys, tmp_.Sub("x"));
  EXPECT_TRUE(absl::IsNotFound(r.status()));
  EXPECT_THAT(r.status().message(), HasSubstr(KeyFor(999).hex()));
  EntryFilter none;
  none.target_arch = "sm_1000";
  EXPECT_TRUE(absl::IsInvalidArgument(
      ExportBundle(*source_, none, tmp_.Sub("y")).status()));
  EXPECT_FALSE(std::ifstream(tmp_.Sub("x")).good());
}

TEST_F(BundleTest, DamagedBundlesAreRefusedWithoutPublishing) {
  const std::string path = tmp_.Sub("all.kbundle");
  ASSERT_TRUE(ExportBundle(*source_, {}, path).ok());
  const std::string good = ReadFile(path);
  ASSERT_TRUE(ImportBytes(good).ok());

  // A flipped byte in the member area: that member's checksum fails.
  std::string flipped = good;
  flipped[kBundleHeaderSize + 100] ^= 0x08;
  absl::Status s = ImportBytes(flipped);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), ::testing::AnyOf(HasSubstr("checksum mismatch"),
                                            HasSubstr("zstd")));

  // Damage in the manifest: its checksum fails.
  std::string manifest_flip = good;
  manifest_flip[good.size() - 10] ^= 0x01;
  EXPECT_THAT(ImportBytes(manifest_flip).message(),
              HasSubstr("manifest checksum mismatch"));

  // Truncated anywhere, or with trailing bytes.
  for (size_t len :
       {size_t{0}, size_t{10}, size_t{64}, good.size() / 2, good.size() - 1}) {
    EXPECT_FALSE(ImportBytes(good.substr(0, len)).ok()) << len;
  }
  EXPECT_THAT(ImportBytes(good + "x").message(), HasSubstr("trailing data"));

  // Not a bundle at all / a future version.
  EXPECT_THAT(ImportBytes(std::string(200, 'z')).message(),
              HasSubstr("not a kiln bundle"));
  std::string future = good;
  future[8] = 2;
  EXPECT_THAT(
      ImportBytes(future).message(),
      HasSubstr("unsupported bundle version 2; this kiln reads version 1"));
}

TEST_F(BundleTest, CraftedManifestsAreRefused) {
  const std::string data = "payload";
  const std::string sha = Digest::Of(data).hex();
  auto manifest = [&](const std::string& member_line,
                      const std::string& blob_member) {
    return absl::StrCat("kiln-bundle 1\ncreated 0\n", member_line, "\n",
                        "entry ", KeyFor(1).hex(), " 0 k sm_90a - -\n",
                        "blob binary ", blob_member, "\nend\n");
  };
  const std::string ok_member =
      absl::StrCat("member blobs/", sha, " 64 7 raw 7 ", sha);
  ASSERT_TRUE(
      ImportBytes(Assemble(data, manifest(ok_member, "blobs/" + sha))).ok());

  struct Case {
    const char* what;
    std::string member_line;
    std::string blob_member;
    const char* message;
  };
  const Case cases[] = {
      {"traversal", absl::StrCat("member ../../etc/passwd 64 7 raw 7 ", sha),
       "../../etc/passwd", "path traversal"},
      {"nested traversal",
       absl::StrCat("member blobs/../../x 64 7 raw 7 ", sha), "blobs/../../x",
       "path traversal"},
      {"absolute", absl::StrCat("member /etc/passwd 64 7 raw 7 ", sha),
       "/etc/passwd", "absolute path"},
      {"oversized",
       absl::StrCat("member blobs/", sha, " 64 7 zstd 99999999999 ", sha),
       "blobs/" + sha, "the limit is"},
      {"outside the member area",
       absl::StrCat("member blobs/", sha, " 64 700 raw 700 ", sha),
       "blobs/" + sha, "outside the member area"},
      {"checksum not the name",
       absl::StrCat("member blobs/", sha, " 64 7 raw 7 ", KeyFor(9).hex()),
       "blobs/" + sha, "does not match its name"},
      {"unknown member", ok_member, "blobs/" + KeyFor(9).hex(),
       "unknown member"},
  };
  for (const Case& c : cases) {
    absl::Status s =
        ImportBytes(Assemble(data, manifest(c.member_line, c.blob_member)));
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.what << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.what;
  }
  // A member whose name and checksum agree but whose bytes differ.
  const std::string liar = absl::StrCat("member blobs/", KeyFor(9).hex(),
                                        " 64 7 raw 7 ", KeyFor(9).hex());
  absl::Status s =
      ImportBytes(Assemble(data, manifest(liar, "blobs/" + KeyFor(9).hex())));
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("checksum mismatch"));
  // A manifest cut before "end".
  EXPECT_THAT(
      ImportBytes(Assemble(data, "kiln-bundle 1\ncreated 0\n")).message(),
      HasSubstr("missing \"end\""));
  // An unknown manifest version line.
  EXPECT_FALSE(ImportBytes(Assemble(data, "kiln-bundle 9\nend\n")).ok());
}

TEST_F(BundleTest, VerifyBundleNeedsNoStore) {
  const std::string path = tmp_.Sub("all.kbundle");
  ASSERT_TRUE(ExportBundle(*source_, {}, path).ok());
  absl::StatusOr<ImportReport> report = VerifyBundle(path);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->entries, 12);
  EXPECT_TRUE(absl::IsNotFound(VerifyBundle(tmp_.Sub("missing")).status()));
}

}  // namespace
}  // namespace kiln::cache
