#include "cache/digest.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kiln::cache {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Keeps error messages short and printable whatever the caller passed in.
std::string Quote(absl::string_view text) {
  constexpr size_t kMax = 80;
  std::string shown(text.substr(0, kMax));
  std::string out = absl::StrCat("\"", absl::CHexEscape(shown), "\"");
  if (text.size() > kMax) absl::StrAppend(&out, "...");
  return out;
}

}  // namespace

absl::StatusOr<Digest> Digest::Parse(absl::string_view hex,
                                     absl::string_view what) {
  if (hex.size() != kHexSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " must be 64 lowercase hex characters (a SHA-256 digest), got ",
        hex.size(), " characters: ", Quote(hex)));
  }
  Digest d;
  for (size_t i = 0; i < kSize; ++i) {
    int hi = HexValue(hex[2 * i]);
    int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      size_t bad = hi < 0 ? 2 * i : 2 * i + 1;
      return absl::InvalidArgumentError(absl::StrCat(
          what, " must be 64 lowercase hex characters (a SHA-256 digest); ",
          "character ", bad + 1, " is not [0-9a-f]: ", Quote(hex)));
    }
    d.bytes_[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return d;
}

absl::StatusOr<Digest> Digest::FromBytes(absl::string_view raw) {
  if (raw.size() != kSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("a raw digest is 32 bytes, got ", raw.size()));
  }
  Digest d;
  std::memcpy(d.bytes_.data(), raw.data(), kSize);
  return d;
}

Digest Digest::Of(absl::string_view data) {
  Sha256 hasher;
  hasher.Update(data);
  return hasher.Finish();
}

std::string Digest::hex() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kHexSize, '0');
  for (size_t i = 0; i < kSize; ++i) {
    out[2 * i] = kHex[bytes_[i] >> 4];
    out[2 * i + 1] = kHex[bytes_[i] & 0xf];
  }
  return out;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  // Allocation or init failure here means OpenSSL itself is broken.
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    abort();
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::Update(absl::string_view data) {
  if (EVP_DigestUpdate(ctx_, data.data(), data.size()) != 1) abort();
}

Digest Sha256::Finish() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_, out, &len) != 1 || len != Digest::kSize) {
    abort();
  }
  if (EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) abort();
  return *Digest::FromBytes(
      absl::string_view(reinterpret_cast<const char*>(out), len));
}

}  // namespace kiln::cache
