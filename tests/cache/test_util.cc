#include "tests/cache/test_util.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace kiln::cache::testing {

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string pattern = absl::StrCat(base != nullptr && *base ? base : "/tmp",
                                     "/kiln-cache-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) abort();
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Digest KeyFor(uint64_t n, const std::string& ns) {
  return Digest::Of(absl::StrCat(ns, ":", n));
}

std::string Bytes(uint64_t seed, size_t size) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 1);
  std::string out(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    uint64_t v = rng();
    for (size_t j = 0; j < 8 && i + j < size; ++j)
      out[i + j] = char(v >> (8 * j));
  }
  return out;
}

EntryData MakeEntry(uint64_t n, size_t size) {
  EntryData data;
  data.metadata.kernel_name = absl::StrCat("kernel_", n % 7);
  data.metadata.target_arch = n % 2 == 0 ? "sm_90a" : "gfx942";
  data.metadata.gpu_sku = n % 3 == 0 ? "NVIDIA H100 80GB HBM3" : "AMD MI300X";
  data.metadata.extra = absl::StrCat("{\"n\":", n, "}");
  data.blobs.push_back(Blob{"binary", Bytes(n, size)});
  data.blobs.push_back(
      Blob{"launch.json", absl::StrCat("{\"grid\":[", n, ",1,1]}")});
  // The text KeyFor(n) hashes: the entry vouches for its key, as kiln's own
  // entries do (LocalStoreOptions::key_text_blob).
  data.blobs.push_back(Blob{"key.txt", absl::StrCat("test:", n)});
  return data;
}

void FlipBit(const std::string& path, uint64_t bit) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(bit / 8));
  char c = 0;
  f.get(c);
  c = static_cast<char>(c ^ (1 << (bit % 8)));
  f.seekp(static_cast<std::streamoff>(bit / 8));
  f.put(c);
}

bool MatchesEntry(const Entry& entry, uint64_t n, size_t size) {
  EntryData want = MakeEntry(n, size);
  return entry.info.metadata == want.metadata && entry.blobs == want.blobs;
}

}  // namespace kiln::cache::testing
