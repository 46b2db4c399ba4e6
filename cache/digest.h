// Digest: a SHA-256 value, the name of every cache key and every blob.
//
// Keys and blob names are written as 64 lowercase hex characters. Parse() is
// the only way to turn untrusted text into a Digest, so code that holds a
// Digest never re-validates it. Hashing goes through OpenSSL's EVP interface.
#ifndef KILN_CACHE_DIGEST_H_
#define KILN_CACHE_DIGEST_H_

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::cache {

class Digest {
 public:
  static constexpr size_t kSize = 32;     // bytes
  static constexpr size_t kHexSize = 64;  // characters

  // The all-zero digest; a placeholder, never the hash of real data.
  Digest() : bytes_{} {}

  // Parses 64 lowercase hex characters. Anything else (upper case, wrong
  // length, stray characters) is InvalidArgument naming what was wrong; `what`
  // ("cache key", "blob digest") prefixes the message.
  static absl::StatusOr<Digest> Parse(absl::string_view hex,
                                      absl::string_view what = "cache key");

  // Builds a digest from 32 raw bytes (wire formats); InvalidArgument if the
  // size is not 32.
  static absl::StatusOr<Digest> FromBytes(absl::string_view raw);

  // SHA-256 of `data`.
  static Digest Of(absl::string_view data);

  std::string hex() const;
  absl::string_view bytes() const {
    return absl::string_view(reinterpret_cast<const char*>(bytes_.data()),
                             bytes_.size());
  }

  friend bool operator==(const Digest& a, const Digest& b) {
    return a.bytes_ == b.bytes_;
  }
  friend bool operator!=(const Digest& a, const Digest& b) { return !(a == b); }
  friend bool operator<(const Digest& a, const Digest& b) {
    return a.bytes_ < b.bytes_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const Digest& d) {
    return H::combine(std::move(h), d.bytes_);
  }
  friend std::ostream& operator<<(std::ostream& os, const Digest& d) {
    return os << d.hex();
  }

 private:
  std::array<uint8_t, kSize> bytes_;
};

// Incremental SHA-256 for data that arrives in pieces (files, bundles).
// Not thread-safe; one hasher per stream.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(absl::string_view data);
  // Returns the digest of everything passed to Update(); the hasher is then
  // reset and can be reused.
  Digest Finish();

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_DIGEST_H_
