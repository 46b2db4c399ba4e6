// `kiln cache stats|ls|show|verify|rm|gc|export|import`: inspect and
// maintain a local cache directory, offline, beside a running daemon or not
// (the store is safe for several processes).
//
// Every command takes --dir (default: the daemon's directory) and, where it
// prints data, --json. Exit statuses as in commands.h: a malformed flag
// value (SIZE, AGE) is a usage error (2); a bad key, a missing cache or
// entry, a damaged bundle, or a verify that quarantined something is 1.
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cache/bundle.h"
#include "cache/cache_dir.h"
#include "cache/entry.h"
#include "cache/hmac.h"
#include "cache/json.h"
#include "cache/local_store.h"
#include "cache/units.h"
#include "client/cli/commands.h"

namespace kiln::cli {
namespace {

namespace kc = ::kiln::cache;

// The blob in which an autotuning result explains itself
// (server/tuning/tuning_record.h).
constexpr char kTuningTextBlob[] = "tuning.txt";
// The text a key hashes, stored with compiled kernels and tuning results
// (server/engine/compile_engine.h).
constexpr char kKeyTextBlob[] = "key.txt";

struct Common {
  std::string dir = kc::DefaultCacheDirectory();
  bool json = false;
};

[[noreturn]] void Fail(absl::string_view command, const absl::Status& status) {
  std::cerr << "kiln cache " << command << ": " << status.message() << "\n";
  Exit(kExitFailure);
}

void AddCommon(CLI::App* cmd, Common* common, bool json) {
  cmd->add_option("--dir", common->dir,
                  "Cache directory (default: $XDG_CACHE_HOME/kiln or "
                  "~/.cache/kiln)");
  if (json) cmd->add_flag("--json", common->json, "Print JSON");
}

std::unique_ptr<kc::LocalStore> OpenStore(absl::string_view command,
                                          const Common& common, bool create) {
  kc::LocalStoreOptions options;
  options.create_if_missing = create;
  absl::StatusOr<std::unique_ptr<kc::LocalStore>> store =
      kc::LocalStore::Open(common.dir, options);
  if (!store.ok()) Fail(command, store.status());
  return *std::move(store);
}

kc::Digest ParseKey(absl::string_view command, const std::string& text) {
  absl::StatusOr<kc::Digest> key = kc::Digest::Parse(text);
  if (!key.ok()) Fail(command, key.status());
  return *key;
}

// Rejects malformed values while parsing, so they are usage errors.
template <typename Parser>
CLI::Validator UnitValidator(Parser parse, const char* name) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        auto parsed = parse(value);
        return parsed.ok() ? "" : std::string(parsed.status().message());
      },
      name, name);
}

std::string Age(absl::Time t) { return kc::FormatAge(absl::Now() - t); }

std::string Shown(const std::string& text) { return text.empty() ? "-" : text; }

void PrintEntry(const kc::EntryInfo& e) {
  const auto when = [](absl::Time t) {
    return absl::StrCat(
        absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", t, absl::UTCTimeZone()), " (",
        Age(t), " ago)");
  };
  std::cout << "key          " << e.key.hex() << "\n"
            << "kernel       " << Shown(e.metadata.kernel_name) << "\n"
            << "target arch  " << Shown(e.metadata.target_arch) << "\n"
            << "gpu sku      " << Shown(e.metadata.gpu_sku) << "\n"
            << "created      " << when(e.created) << "\n"
            << "last access  " << when(e.last_access) << "\n"
            << "size         " << kc::FormatSize(e.size) << " in "
            << e.blobs.size() << (e.blobs.size() == 1 ? " blob" : " blobs")
            << "\n"
            << "metadata     " << Shown(e.metadata.extra) << "\n"
            << "blobs\n";
  for (const kc::BlobInfo& b : e.blobs) {
    std::cout << absl::StrFormat("  %-20s %10s  sha256:%s\n", b.name,
                                 kc::FormatSize(b.size), b.digest.hex());
  }
}

void RegisterStats(CLI::App* group) {
  auto common = std::make_shared<Common>();
  CLI::App* cmd = group->add_subcommand(
      "stats", "Entries, sizes, hit rate and other counters");
  AddCommon(cmd, common.get(), true);
  cmd->callback([common] {
    auto store = OpenStore("stats", *common, false);
    absl::StatusOr<kc::StoreStats> stats = store->Stats();
    if (!stats.ok()) Fail("stats", stats.status());
    if (common->json) {
      std::cout << kc::ToJson(*stats, common->dir) << "\n";
      return;
    }
    std::map<std::string, int64_t>& c = stats->counters;
    const int64_t lookups = c[kc::kHits] + c[kc::kMisses];
    std::cout << "cache directory      " << common->dir << "\n"
              << "entries              " << stats->entries << " ("
              << kc::FormatSize(stats->entry_bytes) << ")\n"
              << "on disk              " << kc::FormatSize(stats->disk_bytes)
              << " in " << stats->blob_files << " blob files\n"
              << "quarantined          " << stats->quarantine_files
              << " files (" << kc::FormatSize(stats->quarantine_bytes) << ")\n"
              << "hit rate             "
              << (lookups > 0
                      ? absl::StrFormat("%.1f%% of %d lookups",
                                        100.0 * c[kc::kHits] / lookups, lookups)
                      : std::string("no lookups yet"))
              << "\n";
    for (const auto& [name, value] : c) {
      std::cout << absl::StrFormat("%-20s %d\n", name, value);
    }
  });
}

void RegisterLs(CLI::App* group) {
  auto common = std::make_shared<Common>();
  auto filter = std::make_shared<kc::EntryFilter>();
  CLI::App* cmd =
      group->add_subcommand("ls", "List entries, most recently used first");
  AddCommon(cmd, common.get(), true);
  cmd->add_option("--arch", filter->target_arch, "Only this target arch");
  cmd->add_option("--sku", filter->gpu_sku, "Only this GPU SKU");
  cmd->add_option("--kernel", filter->kernel_name, "Only this kernel name");
  cmd->add_option("--limit", filter->limit, "At most this many entries");
  cmd->callback([common, filter] {
    auto store = OpenStore("ls", *common, false);
    absl::StatusOr<std::vector<kc::EntryInfo>> entries = store->List(*filter);
    if (!entries.ok()) Fail("ls", entries.status());
    if (common->json) {
      std::cout << kc::ToJson(*entries) << "\n";
      return;
    }
    std::cout << absl::StrFormat("%-64s %10s %-10s %-24s %-24s %s\n", "KEY",
                                 "SIZE", "ARCH", "SKU", "KERNEL", "USED");
    for (const kc::EntryInfo& e : *entries) {
      std::cout << absl::StrFormat(
          "%-64s %10s %-10s %-24s %-24s %s ago\n", e.key.hex(),
          kc::FormatSize(e.size), Shown(e.metadata.target_arch),
          Shown(e.metadata.gpu_sku), Shown(e.metadata.kernel_name),
          Age(e.last_access));
      if (!e.damage.empty()) {
        std::cout << "  DAMAGED (never served; `kiln cache verify` or `rm` "
                     "drops it): "
                  << e.damage << "\n";
      }
    }
  });
}

void RegisterShow(CLI::App* group) {
  auto common = std::make_shared<Common>();
  auto key = std::make_shared<std::string>();
  CLI::App* cmd = group->add_subcommand(
      "show",
      "Describe one entry (an autotuning result also says what it holds and "
      "what its tuning key is made of)");
  cmd->add_option("KEY", *key, "Cache key (64 hex digits)")->required();
  AddCommon(cmd, common.get(), true);
  cmd->callback([common, key] {
    const kc::Digest digest = ParseKey("show", *key);
    auto store = OpenStore("show", *common, false);
    absl::StatusOr<kc::EntryInfo> info = store->Stat(digest);
    if (!info.ok()) Fail("show", info.status());
    if (common->json) {
      std::cout << kc::ToJson(*info) << "\n";
      return;
    }
    PrintEntry(*info);
    if (!info->damage.empty()) {
      std::cout << "DAMAGED: " << info->damage
                << " (never served; `kiln cache verify` or `rm` drops it)\n";
      return;
    }
    // An autotuning result (kiln tune) explains itself in a text blob; a
    // compiled kernel keeps the text its binary key hashes. Blobs are read
    // only for those, and a compiled kernel whose blobs cannot be read is
    // still shown (verify says what is wrong).
    const auto has = [&](absl::string_view name) {
      for (const kc::BlobInfo& b : info->blobs) {
        if (b.name == name) return true;
      }
      return false;
    };
    if (has(kTuningTextBlob)) {
      absl::StatusOr<kc::Entry> entry = store->Get(digest, false);
      if (!entry.ok()) Fail("show", entry.status());
      std::cout << "\n" << entry->Find(kTuningTextBlob)->data;
    } else if (has(kKeyTextBlob)) {
      absl::StatusOr<kc::Entry> entry = store->Get(digest, false);
      if (!entry.ok()) {
        std::cout << "\n(the key's text cannot be read: "
                  << entry.status().message() << ")\n";
        return;
      }
      std::cout << "\nbinary key   " << digest.hex() << "\n  = SHA-256 of:\n";
      for (absl::string_view line :
           absl::StrSplit(entry->Find(kKeyTextBlob)->data, '\n')) {
        if (!line.empty()) std::cout << "    " << line << "\n";
      }
      std::cout << "(kiln cache explain FILE --target ... -D ... says why a "
                   "request would miss it)\n";
    }
  });
}

void RegisterVerify(CLI::App* group) {
  auto common = std::make_shared<Common>();
  CLI::App* cmd = group->add_subcommand(
      "verify",
      "Check the index file and every entry's rows, re-hash every blob; "
      "drop what fails (exit 1 if anything did)");
  AddCommon(cmd, common.get(), true);
  cmd->callback([common] {
    auto store = OpenStore("verify", *common, false);
    absl::StatusOr<kc::VerifyReport> report = store->Verify();
    if (!report.ok()) Fail("verify", report.status());
    if (common->json) {
      std::cout << kc::ToJson(*report) << "\n";
    } else {
      if (!report->index_problem.empty()) {
        std::cout << "the index file is damaged: " << report->index_problem
                  << "\n";
      }
      if (report->malformed_rows > 0) {
        std::cout << "deleted " << report->malformed_rows
                  << " malformed index rows\n";
      }
      for (const kc::DamagedEntry& d : report->damaged_entries) {
        std::cout << "dropped entry " << d.key << ": " << d.reason << "\n";
      }
      for (const kc::QuarantineRecord& r : report->quarantined) {
        std::cout << "quarantined blob " << r.digest.hex() << ": " << r.reason
                  << "\n";
        for (const kc::Digest& k : r.keys) {
          std::cout << "  dropped entry " << k.hex() << "\n";
        }
      }
      std::cout << "verified " << report->blobs_checked << " blobs ("
                << kc::FormatSize(report->bytes_checked) << ") of "
                << report->entries << " entries: "
                << (report->clean()
                        ? std::string("clean")
                        : absl::StrCat(report->quarantined.size(),
                                       " blobs quarantined, ",
                                       report->damaged_entries.size(),
                                       " damaged entries dropped"))
                << "\n";
      if (report->unreferenced_files > 0) {
        std::cout
            << report->unreferenced_files
            << " unreferenced blob files (reclaimed by `kiln cache gc`)\n";
      }
    }
    if (!report->clean()) Exit(kExitFailure);
  });
}

void RegisterRm(CLI::App* group) {
  auto common = std::make_shared<Common>();
  auto keys = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = group->add_subcommand("rm", "Remove entries");
  cmd->add_option("KEY", *keys, "Cache keys (64 hex digits)")->required();
  AddCommon(cmd, common.get(), false);
  cmd->callback([common, keys] {
    std::vector<kc::Digest> digests;
    for (const std::string& k : *keys) digests.push_back(ParseKey("rm", k));
    auto store = OpenStore("rm", *common, false);
    bool failed = false;
    for (const kc::Digest& d : digests) {
      absl::Status s = store->Remove(d);
      if (s.ok()) {
        std::cout << "removed " << d.hex() << "\n";
      } else {
        std::cerr << "kiln cache rm: " << s.message() << "\n";
        failed = true;
      }
    }
    if (failed) Exit(kExitFailure);
  });
}

void RegisterGc(CLI::App* group) {
  auto common = std::make_shared<Common>();
  auto size = std::make_shared<std::string>();
  auto age = std::make_shared<std::string>();
  CLI::App* cmd = group->add_subcommand(
      "gc",
      "Evict least recently used entries down to --max-size and those unused "
      "for --max-age; delete unreferenced and stale temporary files");
  cmd->add_option("--max-size", *size,
                  "e.g. 10G, 500M (K/M/G/T are 1024-based)")
      ->check(UnitValidator(kc::ParseSize, "SIZE"));
  cmd->add_option("--max-age", *age, "e.g. 7d, 12h, 30m")
      ->check(UnitValidator(kc::ParseAge, "AGE"));
  AddCommon(cmd, common.get(), true);
  cmd->callback([common, size, age] {
    kc::GcOptions options;
    if (!size->empty()) options.max_size = *kc::ParseSize(*size);
    if (!age->empty()) options.max_age = *kc::ParseAge(*age);
    auto store = OpenStore("gc", *common, false);
    absl::StatusOr<kc::GcReport> report = store->Gc(options);
    if (!report.ok()) Fail("gc", report.status());
    if (common->json) {
      std::cout << kc::ToJson(*report) << "\n";
      return;
    }
    std::cout << "evicted " << report->evicted_entries << " entries; removed "
              << report->removed_blob_files << " unreferenced blob files, "
              << report->removed_temp_files << " temporary files and "
              << report->removed_quarantine_files << " old quarantined files; "
              << kc::FormatSize(report->disk_bytes_before) << " -> "
              << kc::FormatSize(report->disk_bytes_after) << " on disk\n";
  });
}

// The bundle signing secret in `path` (as the daemon reads the cluster
// secret: surrounding whitespace dropped, at least 16 characters).
std::unique_ptr<kc::HmacSha256> ReadSecret(const char* verb,
                                           const std::string& path) {
  if (path.empty()) return nullptr;
  std::ifstream in(path, std::ios::binary);
  std::string text;
  if (in) {
    text.assign(std::istreambuf_iterator<char>(in), {});
    if (text.size() > 4096) text.clear();
  }
  if (!in && text.empty()) {
    Fail(verb, absl::NotFoundError("cannot read the secret file " + path));
  }
  absl::StatusOr<kc::HmacSha256> mac =
      kc::HmacSha256::Create(absl::StripAsciiWhitespace(text));
  if (!mac.ok()) {
    Fail(verb, absl::InvalidArgumentError(absl::StrCat(
                   "the secret in ", path, ": ", mac.status().message())));
  }
  return std::make_unique<kc::HmacSha256>(*std::move(mac));
}

constexpr char kSecretHelp[] =
    "File holding the secret that signs bundles (at least 16 characters; "
    "the cluster's Redis secret will do)";

void RegisterExport(CLI::App* group, ManifestResolver resolver) {
  struct Args {
    Common common;
    kc::EntryFilter filter;
    std::string out;
    std::vector<std::string> keys;
    std::string keys_file;
    std::string manifest;
    std::string manifest_target;
    std::string secret_file;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = group->add_subcommand(
      "export", "Write selected entries into a bundle file (for prewarming)");
  cmd->add_option("BUNDLE", args->out, "Output file")->required();
  cmd->add_option("--arch", args->filter.target_arch, "Only this target arch");
  cmd->add_option("--sku", args->filter.gpu_sku, "Only this GPU SKU");
  cmd->add_option("--kernel", args->filter.kernel_name, "Only this kernel");
  cmd->add_option("--key", args->keys, "Only these keys (repeatable)");
  cmd->add_option("--keys-file", args->keys_file,
                  "Only the keys listed in this file, one per line");
  cmd->add_option("--manifest", args->manifest,
                  "Only the kernels and tuning results this prewarm manifest "
                  "resolves to (what `kiln prewarm` made); those not cached "
                  "are listed");
  cmd->add_option("--target", args->manifest_target,
                  "With --manifest: the target of every kernel, replacing "
                  "the manifest's");
  cmd->add_option("--secret-file", args->secret_file, kSecretHelp);
  AddCommon(cmd, &args->common, true);
  cmd->callback([args, resolver] {
    std::vector<std::string> keys = args->keys;
    if (!args->keys_file.empty()) {
      std::ifstream in(args->keys_file);
      if (!in) {
        Fail("export", absl::NotFoundError("cannot read " + args->keys_file));
      }
      for (std::string line; std::getline(in, line);) {
        if (!line.empty()) keys.push_back(line);
      }
    }
    for (const std::string& k : keys) {
      args->filter.keys.push_back(ParseKey("export", k));
    }
    std::unique_ptr<kc::HmacSha256> secret =
        ReadSecret("export", args->secret_file);
    auto store = OpenStore("export", args->common, false);
    std::vector<std::string> missing;
    if (!args->manifest.empty()) {
      if (!resolver) {
        Fail("export", absl::UnimplementedError(
                           "--manifest needs the full kiln CLI (this build "
                           "has no compiler)"));
      }
      absl::StatusOr<std::vector<kc::Digest>> resolved =
          resolver(args->manifest, args->manifest_target, *store, &missing);
      if (!resolved.ok()) Fail("export", resolved.status());
      if (resolved->empty()) {
        Fail("export", absl::NotFoundError(absl::StrCat(
                           "none of the kernels of ", args->manifest,
                           " is in the cache (run kiln prewarm ",
                           args->manifest, " first)")));
      }
      args->filter.keys.insert(args->filter.keys.end(), resolved->begin(),
                               resolved->end());
    }
    kc::BundleOptions options;
    options.secret = secret.get();
    absl::StatusOr<kc::ExportReport> report =
        kc::ExportBundle(*store, args->filter, args->out, options);
    if (!report.ok()) Fail("export", report.status());
    if (args->common.json) {
      std::cout << kc::ToJson(*report, args->out) << "\n";
      return;
    }
    std::cout << "exported " << report->entries << " entries ("
              << report->members << " blobs, "
              << kc::FormatSize(report->file_bytes) << ") to " << args->out
              << "\n";
    for (const kc::Digest& k : report->skipped) {
      std::cout << "skipped " << k.hex() << ": failed verification\n";
    }
    for (const std::string& m : missing) {
      std::cout << "not cached: " << m << "\n";
    }
  });
}

void RegisterImport(CLI::App* group) {
  auto common = std::make_shared<Common>();
  auto path = std::make_shared<std::string>();
  auto dry_run = std::make_shared<bool>(false);
  auto secret_file = std::make_shared<std::string>();
  CLI::App* cmd = group->add_subcommand(
      "import",
      "Verify a bundle completely, then add its entries to the cache (an "
      "entry already cached is never replaced; an unsigned bundle's entries "
      "must hash to their keys)");
  cmd->add_option("BUNDLE", *path, "Bundle file")->required();
  cmd->add_flag("--dry-run", *dry_run, "Only verify the bundle");
  cmd->add_option("--secret-file", *secret_file,
                  std::string(kSecretHelp) +
                      "; with it, only bundles signed with it are taken");
  AddCommon(cmd, common.get(), true);
  cmd->callback([common, path, dry_run, secret_file] {
    std::unique_ptr<kc::HmacSha256> secret = ReadSecret("import", *secret_file);
    kc::BundleOptions options;
    options.secret = secret.get();
    absl::StatusOr<kc::ImportReport> report;
    if (*dry_run) {
      report = kc::VerifyBundle(*path, options);
    } else {
      auto store = OpenStore("import", *common, true);
      report = kc::ImportBundle(*store, *path, options);
    }
    if (!report.ok()) Fail("import", report.status());
    if (common->json) {
      std::cout << kc::ToJson(*report, *path, *dry_run) << "\n";
    } else if (*dry_run) {
      std::cout << *path << ": valid " << (report->is_signed ? "signed " : "")
                << "bundle, " << report->entries << " entries, "
                << report->members << " blobs ("
                << kc::FormatSize(report->bytes) << ")\n";
    } else {
      std::cout << "imported " << report->imported << " entries ("
                << report->already_present << " already present, "
                << report->kept_existing
                << " kept as cached: other content under the same key, "
                << report->refused.size() << " refused) from " << *path
                << (report->is_signed ? " (signature verified)" : "") << "\n";
      for (const auto& [key, why] : report->refused) {
        std::cout << "refused " << key.hex() << ": " << why << "\n";
      }
    }
    if (!report->refused.empty()) Exit(kExitFailure);
  });
}

}  // namespace

void RegisterCacheCommands(CLI::App& app, ManifestResolver resolver) {
  CLI::App* group = app.add_subcommand(
      "cache", "Inspect and maintain the local kernel cache");
  group->require_subcommand(1);
  RegisterStats(group);
  RegisterLs(group);
  RegisterShow(group);
  RegisterVerify(group);
  RegisterRm(group);
  RegisterGc(group);
  RegisterExport(group, std::move(resolver));
  RegisterImport(group);
}

}  // namespace kiln::cli
