#include "cache/json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace kiln::cache {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid.
size_t Utf8Length(absl::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t min;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  uint32_t cp = c & (0xff >> (n + 1));
  for (size_t k = 1; k < n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (cc & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

std::string Time(absl::Time t) {
  return JsonQuote(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone()));
}

std::string Keys(const std::vector<Digest>& keys) {
  return absl::StrCat("[",
                      absl::StrJoin(keys, ",",
                                    [](std::string* out, const Digest& d) {
                                      absl::StrAppend(out, "\"", d.hex(), "\"");
                                    }),
                      "]");
}

}  // namespace

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      size_t n = Utf8Length(text, i);
      if (n == 0) {
        absl::StrAppendFormat(&out, "\\u%04x", c);
        ++i;
      } else {
        out.append(text.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out += "\"";
  return out;
}

std::string ToJson(const EntryInfo& info) {
  std::vector<std::string> blobs;
  for (const BlobInfo& b : info.blobs) {
    blobs.push_back(absl::StrCat("{\"name\":", JsonQuote(b.name),
                                 ",\"sha256\":\"", b.digest.hex(),
                                 "\",\"size\":", b.size, "}"));
  }
  return absl::StrCat(
      "{\"key\":\"", info.key.hex(),
      "\",\"kernel_name\":", JsonQuote(info.metadata.kernel_name),
      ",\"target_arch\":", JsonQuote(info.metadata.target_arch),
      ",\"gpu_sku\":", JsonQuote(info.metadata.gpu_sku),
      ",\"metadata\":", JsonQuote(info.metadata.extra), ",\"size\":", info.size,
      ",\"created\":", Time(info.created),
      ",\"last_access\":", Time(info.last_access),
      info.damage.empty()
          ? ""
          : absl::StrCat(",\"damage\":", JsonQuote(info.damage)),
      ",\"blobs\":[", absl::StrJoin(blobs, ","), "]}");
}

std::string ToJson(const std::vector<EntryInfo>& infos) {
  std::vector<std::string> items;
  for (const EntryInfo& info : infos) items.push_back(ToJson(info));
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string ToJson(const StoreStats& stats, absl::string_view dir) {
  std::vector<std::string> counters;
  for (const auto& [name, value] : stats.counters) {
    counters.push_back(absl::StrCat(JsonQuote(name), ":", value));
  }
  const int64_t hits =
      stats.counters.count(kHits) ? stats.counters.at(kHits) : 0;
  const int64_t misses =
      stats.counters.count(kMisses) ? stats.counters.at(kMisses) : 0;
  const double rate =
      hits + misses > 0 ? static_cast<double>(hits) / (hits + misses) : 0;
  return absl::StrCat("{\"dir\":", JsonQuote(dir),
                      ",\"entries\":", stats.entries,
                      ",\"entry_bytes\":", stats.entry_bytes,
                      ",\"blob_files\":", stats.blob_files,
                      ",\"disk_bytes\":", stats.disk_bytes,
                      ",\"index_bytes\":", stats.index_bytes,
                      ",\"quarantine_files\":", stats.quarantine_files,
                      ",\"quarantine_bytes\":", stats.quarantine_bytes,
                      ",\"hit_rate\":", absl::StrFormat("%.4f", rate),
                      ",\"counters\":{", absl::StrJoin(counters, ","), "}}");
}

std::string ToJson(const VerifyReport& report) {
  std::vector<std::string> q;
  for (const QuarantineRecord& r : report.quarantined) {
    q.push_back(absl::StrCat("{\"sha256\":\"", r.digest.hex(),
                             "\",\"reason\":", JsonQuote(r.reason),
                             ",\"keys\":", Keys(r.keys), "}"));
  }
  std::vector<std::string> damaged;
  for (const DamagedEntry& d : report.damaged_entries) {
    damaged.push_back(absl::StrCat("{\"key\":", JsonQuote(d.key),
                                   ",\"reason\":", JsonQuote(d.reason), "}"));
  }
  return absl::StrCat("{\"clean\":", report.clean() ? "true" : "false",
                      ",\"entries\":", report.entries,
                      ",\"index_problem\":", JsonQuote(report.index_problem),
                      ",\"malformed_rows\":", report.malformed_rows,
                      ",\"damaged_entries\":[", absl::StrJoin(damaged, ","),
                      "]", ",\"blobs_checked\":", report.blobs_checked,
                      ",\"bytes_checked\":", report.bytes_checked,
                      ",\"unreferenced_files\":", report.unreferenced_files,
                      ",\"stray_files\":", report.stray_files,
                      ",\"quarantined\":[", absl::StrJoin(q, ","), "]}");
}

std::string ToJson(const GcReport& report) {
  return absl::StrCat(
      "{\"evicted_entries\":", report.evicted_entries,
      ",\"malformed_rows\":", report.malformed_rows,
      ",\"wal_bytes_before\":", report.wal_bytes_before,
      ",\"wal_bytes_after\":", report.wal_bytes_after,
      ",\"disk_bytes_before\":", report.disk_bytes_before,
      ",\"disk_bytes_after\":", report.disk_bytes_after,
      ",\"removed_blob_files\":", report.removed_blob_files,
      ",\"removed_temp_files\":", report.removed_temp_files,
      ",\"removed_quarantine_files\":", report.removed_quarantine_files, "}");
}

std::string ToJson(const ExportReport& report, absl::string_view path) {
  return absl::StrCat(
      "{\"bundle\":", JsonQuote(path), ",\"entries\":", report.entries,
      ",\"members\":", report.members, ",\"file_bytes\":", report.file_bytes,
      ",\"skipped\":", Keys(report.skipped), "}");
}

std::string ToJson(const ImportReport& report, absl::string_view path,
                   bool dry_run) {
  return absl::StrCat(
      "{\"bundle\":", JsonQuote(path),
      ",\"dry_run\":", dry_run ? "true" : "false",
      ",\"entries\":", report.entries, ",\"imported\":", report.imported,
      ",\"already_present\":", report.already_present,
      ",\"kept_existing\":", report.kept_existing, ",\"refused\":[",
      absl::StrJoin(report.refused, ",",
                    [](std::string* out, const auto& r) {
                      absl::StrAppend(out, "{\"key\":\"", r.first.hex(),
                                      "\",\"reason\":", JsonQuote(r.second),
                                      "}");
                    }),
      "],\"signed\":", report.is_signed ? "true" : "false",
      ",\"members\":", report.members, ",\"bytes\":", report.bytes, "}");
}

}  // namespace kiln::cache
