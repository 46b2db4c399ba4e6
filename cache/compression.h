// zstd compression for blob files, remote entries and bundle members.
#ifndef KILN_CACHE_COMPRESSION_H_
#define KILN_CACHE_COMPRESSION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::cache {

enum class Codec : uint8_t { kRaw = 0, kZstd = 1 };

// Compresses `data` at zstd `level` (1-19). Returns nullopt when `level` is 0
// or compression would save less than 1/16 of the size, so incompressible
// data (already-compressed binaries, random bytes) is stored raw and reads
// skip the decompressor. Inputs over 256 KiB are judged by a 64 KiB sample
// first, so incompressible ones cost little.
std::optional<std::string> CompressIfSmaller(absl::string_view data, int level);

// Decompresses a zstd frame that must expand to exactly `raw_size` bytes.
// The output buffer is sized from `raw_size`, never from the frame, so a
// hostile frame cannot make it allocate more. DataLoss on any mismatch.
absl::StatusOr<std::string> Decompress(absl::string_view frame,
                                       uint64_t raw_size);

}  // namespace kiln::cache

#endif  // KILN_CACHE_COMPRESSION_H_
