// HmacSha256: signs and verifies remote cache entries with the cluster secret.
//
// The secret never leaves this object: there is no accessor, and it is wiped
// from memory on destruction. Uses OpenSSL's EVP_MAC interface.
#ifndef KILN_CACHE_HMAC_H_
#define KILN_CACHE_HMAC_H_

#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct evp_mac_ctx_st EVP_MAC_CTX;

namespace kiln::cache {

class HmacSha256 {
 public:
  static constexpr size_t kMacSize = 32;

  // InvalidArgument if `secret` is shorter than 16 bytes: a short cluster
  // secret is guessable, and refusing it is cheaper than explaining later.
  static absl::StatusOr<HmacSha256> Create(absl::string_view secret);

  HmacSha256(HmacSha256&& other) noexcept;
  HmacSha256& operator=(HmacSha256&& other) noexcept;
  ~HmacSha256();

  // The MAC over the concatenation of `parts` (32 raw bytes). Thread-safe.
  std::string Sign(std::initializer_list<absl::string_view> parts) const;

  // Constant-time comparison of `mac` against Sign(parts). Thread-safe.
  bool Verify(std::initializer_list<absl::string_view> parts,
              absl::string_view mac) const;

 private:
  explicit HmacSha256(EVP_MAC_CTX* keyed) : keyed_(keyed) {}
  EVP_MAC_CTX* keyed_;  // initialised with the key; duplicated per Sign()
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_HMAC_H_
