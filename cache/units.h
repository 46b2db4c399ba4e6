// Human-readable sizes and ages for cache limits ("10G", "7d") and reports.
#ifndef KILN_CACHE_UNITS_H_
#define KILN_CACHE_UNITS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kiln::cache {

// Parses a byte count: a non-negative number (decimals allowed) with an
// optional suffix. K, M, G, T (and KiB, MiB, GiB, TiB) are powers of 1024, as
// in du -h; KB, MB, GB, TB are powers of 1000; B or nothing means bytes.
// Suffixes are case-insensitive. "10G" = 10 GiB, "1.5M", "4096".
// InvalidArgument for anything else or a value past 2^63.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

// Parses an age: a non-negative number with a unit s, m, h, d or w (seconds to
// weeks); "7d", "12h", "1.5h". A bare number is rejected as ambiguous.
absl::StatusOr<absl::Duration> ParseAge(absl::string_view text);

// "0 B", "4.0 KiB", "1.5 GiB": binary units, one decimal above bytes.
std::string FormatSize(uint64_t bytes);

// "42s", "5m", "3h", "12d": the largest whole unit, for listings.
std::string FormatAge(absl::Duration age);

}  // namespace kiln::cache

#endif  // KILN_CACHE_UNITS_H_
