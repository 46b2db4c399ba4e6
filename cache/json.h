// JSON renderings of the cache's records, for `kiln cache ... --json` and
// status endpoints. Output is one compact JSON document; strings are escaped
// (free-form metadata is emitted as a string, never spliced in raw); times
// are RFC 3339 UTC; sizes are bytes.
#ifndef KILN_CACHE_JSON_H_
#define KILN_CACHE_JSON_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "cache/bundle.h"
#include "cache/entry.h"
#include "cache/local_store.h"

namespace kiln::cache {

// `text` as a JSON string literal, quotes included. Bytes that are not
// valid UTF-8 are written as \u00XX of the byte.
std::string JsonQuote(absl::string_view text);

std::string ToJson(const EntryInfo& info);
std::string ToJson(const std::vector<EntryInfo>& infos);
std::string ToJson(const StoreStats& stats, absl::string_view dir);
std::string ToJson(const VerifyReport& report);
std::string ToJson(const GcReport& report);
std::string ToJson(const ExportReport& report, absl::string_view path);
std::string ToJson(const ImportReport& report, absl::string_view path,
                   bool dry_run);

}  // namespace kiln::cache

#endif  // KILN_CACHE_JSON_H_
