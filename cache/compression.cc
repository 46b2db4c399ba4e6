#include "cache/compression.h"

#include <zstd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::cache {

std::optional<std::string> CompressIfSmaller(absl::string_view data,
                                             int level) {
  if (level <= 0 || data.size() < 64) return std::nullopt;
  // For large inputs, a sample from the middle decides first, so data that
  // does not compress (random, already compressed) costs a 64 KiB attempt,
  // not a full one.
  constexpr size_t kSample = 64 << 10;
  if (data.size() > 4 * kSample) {
    absl::string_view sample =
        data.substr(data.size() / 2 - kSample / 2, kSample);
    if (!CompressIfSmaller(sample, level)) return std::nullopt;
  }
  std::string out(ZSTD_compressBound(data.size()), '\0');
  size_t n =
      ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n) || n > data.size() - data.size() / 16) {
    return std::nullopt;
  }
  out.resize(n);
  return out;
}

absl::StatusOr<std::string> Decompress(absl::string_view frame,
                                       uint64_t raw_size) {
  // Check the frame's own size field before allocating, so a damaged size
  // never turns into a huge allocation.
  const unsigned long long content =
      ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (content == ZSTD_CONTENTSIZE_ERROR ||
      content == ZSTD_CONTENTSIZE_UNKNOWN || content != raw_size) {
    return absl::DataLossError(
        absl::StrCat("zstd frame header does not announce the expected ",
                     raw_size, " bytes"));
  }
  std::string out(raw_size, '\0');
  size_t n =
      ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) {
    return absl::DataLossError(absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
  }
  if (n != raw_size) {
    return absl::DataLossError(absl::StrCat("zstd frame expands to ", n,
                                            " bytes, expected ", raw_size));
  }
  return out;
}

}  // namespace kiln::cache
