#include "cache/digest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cache/entry.h"
#include "cache/hmac.h"
#include "cache/units.h"

namespace kiln::cache {
namespace {

using ::testing::HasSubstr;

TEST(DigestTest, KnownSha256) {
  EXPECT_EQ(Digest::Of("").hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Digest::Of("abc").hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(DigestTest, StreamingMatchesOneShot) {
  Sha256 hasher;
  hasher.Update("a");
  hasher.Update("bc");
  EXPECT_EQ(hasher.Finish(), Digest::Of("abc"));
  hasher.Update("");  // reusable after Finish
  EXPECT_EQ(hasher.Finish(), Digest::Of(""));
}

TEST(DigestTest, ParseRoundTrips) {
  Digest d = Digest::Of("x");
  absl::StatusOr<Digest> parsed = Digest::Parse(d.hex());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, d);
}

struct BadKeyCase {
  const char* name;
  std::string text;
  const char* message;
};

TEST(DigestTest, BadKeysAreInvalidArgument) {
  const std::string good = Digest::Of("x").hex();
  std::string upper = good;
  upper[5] = 'A';
  std::string stray = good;
  stray[63] = 'g';
  const BadKeyCase cases[] = {
      {"empty", "", "got 0 characters"},
      {"short", good.substr(0, 63), "got 63 characters"},
      {"long", good + "0", "got 65 characters"},
      {"upper case", upper, "character 6 is not"},
      {"stray letter", stray, "character 64 is not"},
      {"path", "../../etc/passwd", "got 16 characters"},
  };
  for (const BadKeyCase& c : cases) {
    absl::StatusOr<Digest> parsed = Digest::Parse(c.text);
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << c.name;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(parsed.status().message(), HasSubstr("cache key")) << c.name;
  }
}

TEST(HmacTest, Rfc4231Case2StyleAndVerify) {
  // RFC 4231 test case 2 uses a 4-byte key, below our minimum; check a long
  // key against OpenSSL's own one-shot result instead.
  absl::StatusOr<HmacSha256> mac =
      HmacSha256::Create("0123456789abcdef-secret");
  ASSERT_TRUE(mac.ok());
  std::string sig = mac->Sign({"hello ", "world"});
  EXPECT_EQ(sig.size(), 32u);
  EXPECT_EQ(sig, mac->Sign({"hello world"}));
  EXPECT_TRUE(mac->Verify({"hello world"}, sig));
  EXPECT_FALSE(mac->Verify({"hello worle"}, sig));
  EXPECT_FALSE(mac->Verify({"hello world"}, sig.substr(1)));
  absl::StatusOr<HmacSha256> other =
      HmacSha256::Create("another-16-byte-secret");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->Verify({"hello world"}, sig));
}

TEST(HmacTest, ShortSecretIsRefused) {
  EXPECT_TRUE(absl::IsInvalidArgument(HmacSha256::Create("short").status()));
}

TEST(UnitsTest, ParseSize) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("10G"), 10ull << 30);
  EXPECT_EQ(*ParseSize("10g"), 10ull << 30);
  EXPECT_EQ(*ParseSize("1.5M"), 3ull << 19);
  EXPECT_EQ(*ParseSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*ParseSize("2GB"), 2000000000u);
  EXPECT_EQ(*ParseSize("512K"), 512u * 1024);
  EXPECT_EQ(*ParseSize("1T"), 1ull << 40);
  for (const char* bad : {"", "G", "10X", "-1G", "1.2.3", "10 G B", "1e30T"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseSize(bad).status())) << bad;
  }
}

TEST(UnitsTest, ParseAge) {
  EXPECT_EQ(*ParseAge("7d"), absl::Hours(7 * 24));
  EXPECT_EQ(*ParseAge("12h"), absl::Hours(12));
  EXPECT_EQ(*ParseAge("30m"), absl::Minutes(30));
  EXPECT_EQ(*ParseAge("45s"), absl::Seconds(45));
  EXPECT_EQ(*ParseAge("2w"), absl::Hours(14 * 24));
  EXPECT_EQ(*ParseAge("1.5h"), absl::Minutes(90));
  for (const char* bad : {"", "7", "d", "7y", "-7d", "7 days"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseAge(bad).status())) << bad;
  }
}

TEST(UnitsTest, Format) {
  EXPECT_EQ(FormatSize(0), "0 B");
  EXPECT_EQ(FormatSize(1023), "1023 B");
  EXPECT_EQ(FormatSize(4096), "4.0 KiB");
  EXPECT_EQ(FormatSize(3ull << 29), "1.5 GiB");
  EXPECT_EQ(FormatAge(absl::Seconds(42)), "42s");
  EXPECT_EQ(FormatAge(absl::Hours(72)), "3d");
}

TEST(EntryTest, Validation) {
  EntryData ok;
  ok.blobs.push_back(Blob{"binary", "x"});
  EXPECT_TRUE(ValidateEntryData(ok).ok());

  EntryData none;
  EXPECT_THAT(ValidateEntryData(none).message(), HasSubstr("at least one"));

  for (const char* bad : {"", ".", "..", "a/b", "../x", "a\\b", "sp ace"}) {
    EntryData d;
    d.blobs.push_back(Blob{bad, "x"});
    EXPECT_TRUE(absl::IsInvalidArgument(ValidateEntryData(d))) << bad;
  }
  EntryData dup;
  dup.blobs = {Blob{"a", "1"}, Blob{"a", "2"}};
  EXPECT_THAT(ValidateEntryData(dup).message(), HasSubstr("appears twice"));

  EntryData big_field = ok;
  big_field.metadata.kernel_name.assign(2000, 'k');
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateEntryData(big_field)));
}

}  // namespace
}  // namespace kiln::cache
