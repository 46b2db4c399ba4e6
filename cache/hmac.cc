#include "cache/hmac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"

namespace kiln::cache {

absl::StatusOr<HmacSha256> HmacSha256::Create(absl::string_view secret) {
  if (secret.size() < 16) {
    return absl::InvalidArgumentError(
        "the remote cache secret must be at least 16 bytes long");
  }
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) return absl::InternalError("OpenSSL has no HMAC");
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  EVP_MAC_free(mac);  // the context keeps its own reference
  if (ctx == nullptr) return absl::InternalError("EVP_MAC_CTX_new failed");
  char digest_name[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
      OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(secret.data()),
                   secret.size(), params) != 1) {
    EVP_MAC_CTX_free(ctx);
    return absl::InternalError("EVP_MAC_init(HMAC-SHA256) failed");
  }
  return HmacSha256(ctx);
}

HmacSha256::HmacSha256(HmacSha256&& other) noexcept
    : keyed_(std::exchange(other.keyed_, nullptr)) {}

HmacSha256& HmacSha256::operator=(HmacSha256&& other) noexcept {
  if (this != &other) {
    EVP_MAC_CTX_free(keyed_);  // OpenSSL cleanses the key material
    keyed_ = std::exchange(other.keyed_, nullptr);
  }
  return *this;
}

HmacSha256::~HmacSha256() { EVP_MAC_CTX_free(keyed_); }

std::string HmacSha256::Sign(
    std::initializer_list<absl::string_view> parts) const {
  // A keyed context is not safe to share between threads; a duplicate is.
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(keyed_);
  if (ctx == nullptr) abort();
  for (absl::string_view part : parts) {
    if (EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(part.data()),
                       part.size()) != 1) {
      abort();
    }
  }
  std::string out(kMacSize, '\0');
  size_t len = 0;
  if (EVP_MAC_final(ctx, reinterpret_cast<unsigned char*>(out.data()), &len,
                    out.size()) != 1 ||
      len != kMacSize) {
    abort();
  }
  EVP_MAC_CTX_free(ctx);
  return out;
}

bool HmacSha256::Verify(std::initializer_list<absl::string_view> parts,
                        absl::string_view mac) const {
  if (mac.size() != kMacSize) return false;
  std::string expected = Sign(parts);
  return CRYPTO_memcmp(expected.data(), mac.data(), kMacSize) == 0;
}

}  // namespace kiln::cache
