// Shared helpers for the cache tests: temporary directories and entries
// whose content is a function of a seed, so any reader can check them.
#ifndef KILN_TESTS_CACHE_TEST_UTIL_H_
#define KILN_TESTS_CACHE_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <string>

#include "cache/digest.h"
#include "cache/entry.h"

namespace kiln::cache::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents when
// the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The key of test entry `n` in namespace `ns`.
Digest KeyFor(uint64_t n, const std::string& ns = "test");

// `size` pseudo-random bytes determined by `seed`.
std::string Bytes(uint64_t seed, size_t size);

// Test entry `n`: blobs "binary" (`size` bytes), "launch.json" and the
// "key.txt" that KeyFor(n) is the SHA-256 of; metadata derived from n.
// Entries with the same n are identical.
EntryData MakeEntry(uint64_t n, size_t size = 1000);

// Flips bit `bit` (counted from the start) of the file at `path`, in place.
void FlipBit(const std::string& path, uint64_t bit);

// True if `entry` is exactly MakeEntry(n, size) (blobs and metadata).
bool MatchesEntry(const Entry& entry, uint64_t n, size_t size = 1000);

}  // namespace kiln::cache::testing

#endif  // KILN_TESTS_CACHE_TEST_UTIL_H_
