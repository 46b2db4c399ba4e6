#include "cache/bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/status_macros.h"

namespace kiln::cache {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path));
}

bool PreadAll(int fd, char* out, size_t n, uint64_t offset) {
  while (n > 0) {
    ssize_t got = pread(fd, out, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// An open, header- and manifest-checked bundle.
class BundleReader {
 public:
  ~BundleReader() {
    if (fd_ >= 0) close(fd_);
  }

  absl::Status Open(const std::string& path, const BundleOptions& options) {
    const BundleLimits& limits = options.limits;
    path_ = path;
    // Refused before any open: opening a FIFO or a device blocks or acts.
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return Errno("cannot open bundle", path);
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(path + " is not a regular file");
    }
    // O_NONBLOCK: should the path be swapped for a FIFO since, the open does
    // not wait, and the check below refuses it.
    fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) return Errno("cannot open bundle", path);
    if (fstat(fd_, &st) != 0) return Errno("cannot stat", path);
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(path + " is not a regular file");
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    std::string head(kBundleHeaderSize, '\0');
    if (size < kBundleHeaderSize ||
        !PreadAll(fd_, head.data(), head.size(), 0)) {
      return absl::InvalidArgumentError(
          "not a kiln bundle: the file is shorter than a bundle header");
    }
    CACHE_ASSIGN_OR_RETURN(BundleHeader header,
                           ParseBundleHeader(head, size, limits));
    std::string text(header.manifest_size, '\0');
    if (!PreadAll(fd_, text.data(), text.size(), header.manifest_offset)) {
      return absl::DataLossError("cannot read the bundle manifest");
    }
    if (Digest::Of(text) != header.manifest_sha256) {
      return absl::DataLossError(
          "bundle manifest checksum mismatch (the file is damaged)");
    }
    if (options.secret != nullptr) {
      if ((header.flags & kBundleSigned) == 0) {
        return absl::PermissionDeniedError(
            "the bundle is not signed, and this cache takes only bundles "
            "signed with its secret");
      }
      std::string mac(kBundleSignatureSize, '\0');
      if (!PreadAll(fd_, mac.data(), mac.size(),
                    header.manifest_offset + header.manifest_size) ||
          !options.secret->Verify(
              {kBundleSignatureContext, header.manifest_sha256.bytes()}, mac)) {
        return absl::PermissionDeniedError(
            "the bundle's signature does not match this cache's secret");
      }
      signed_ = true;
    }
    CACHE_ASSIGN_OR_RETURN(
        manifest_, ParseBundleManifest(text, header.manifest_offset, limits));
    return absl::OkStatus();
  }

  // The decoded, checksum-verified content of member `i`.
  absl::StatusOr<std::string> ReadMember(size_t i) const {
    const BundleMember& m = manifest_.members[i];
    std::string stored(m.stored_size, '\0');
    if (!PreadAll(fd_, stored.data(), stored.size(), m.offset)) {
      return absl::DataLossError(
          absl::StrCat("bundle member ", m.name, " is truncated"));
    }
    std::string data;
    if (m.codec == Codec::kZstd) {
      absl::StatusOr<std::string> raw = Decompress(stored, m.size);
      if (!raw.ok()) {
        return absl::DataLossError(absl::StrCat("bundle member ", m.name, ": ",
                                                raw.status().message()));
      }
      data = *std::move(raw);
    } else {
      data = std::move(stored);
    }
    const Digest actual = Digest::Of(data);
    if (actual != m.sha256) {
      return absl::DataLossError(absl::StrCat(
          "bundle member ", m.name, " checksum mismatch: expected ",
          m.sha256.hex(), ", got ", actual.hex()));
    }
    return data;
  }

  const BundleManifest& manifest() const { return manifest_; }
  // Whether the signature was checked against the secret and matched.
  bool verified_signature() const { return signed_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool signed_ = false;
  BundleManifest manifest_;
};

}  // namespace

absl::StatusOr<ExportReport> ExportBundle(LocalStore& store,
                                          const EntryFilter& filter,
                                          const std::string& path,
                                          const BundleOptions& options) {
  CACHE_ASSIGN_OR_RETURN(std::vector<EntryInfo> infos, store.List(filter));
  if (!filter.keys.empty()) {
    std::vector<std::string> missing;
    for (const Digest& key : filter.keys) {
      bool found = false;
      for (const EntryInfo& info : infos) found = found || info.key == key;
      if (!found) missing.push_back(key.hex());
    }
    if (!missing.empty()) {
      return absl::NotFoundError(
          absl::StrCat("not in the cache (or not matching the filter): ",
                       absl::StrJoin(missing, ", ")));
    }
  }
  if (infos.empty()) {
    return absl::InvalidArgumentError(
        "no cache entries match; nothing to export");
  }
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  auto fail = [&](absl::Status s) {
    close(fd);
    unlink(tmp.c_str());
    return s;
  };
  ExportReport report;
  BundleManifest manifest;
  manifest.created = absl::Now();
  std::map<Digest, size_t> member_of;
  uint64_t offset = kBundleHeaderSize;
  if (!WriteAll(fd, std::string(kBundleHeaderSize, '\0'))) {
    return fail(Errno("cannot write", tmp));
  }
  for (const EntryInfo& info : infos) {
    // Verified, but not a use: exporting must not skew hit counts or LRU.
    absl::StatusOr<Entry> entry = store.Get(info.key, /*record_use=*/false);
    if (absl::IsNotFound(entry.status())) {
      report.skipped.push_back(info.key);
      continue;
    }
    if (!entry.ok()) return fail(entry.status());
    BundleEntry out{info.key, entry->info.created, entry->info.metadata, {}};
    for (size_t i = 0; i < entry->blobs.size(); ++i) {
      const Blob& blob = entry->blobs[i];
      const Digest digest = entry->info.blobs[i].digest;
      auto [it, fresh] = member_of.emplace(digest, manifest.members.size());
      if (fresh) {
        std::optional<std::string> packed =
            CompressIfSmaller(blob.data, options.compression_level);
        absl::string_view stored = packed ? *packed : blob.data;
        if (!WriteAll(fd, stored)) return fail(Errno("cannot write", tmp));
        manifest.members.push_back(BundleMember{
            absl::StrCat("blobs/", digest.hex()), offset, stored.size(),
            packed ? Codec::kZstd : Codec::kRaw, blob.data.size(), digest});
        offset += stored.size();
      }
      out.blobs.emplace_back(blob.name, it->second);
    }
    manifest.entries.push_back(std::move(out));
  }
  if (manifest.entries.empty()) {
    return fail(absl::DataLossError(
        "every selected entry failed verification; nothing exported"));
  }
  std::string text = EncodeBundleManifest(manifest);
  BundleHeader header;
  header.manifest_offset = offset;
  header.manifest_size = text.size();
  header.manifest_sha256 = Digest::Of(text);
  if (options.secret != nullptr) {
    header.flags |= kBundleSigned;
    text += options.secret->Sign(
        {kBundleSignatureContext, header.manifest_sha256.bytes()});
  }
  const std::string head = EncodeBundleHeader(header);
  if (!WriteAll(fd, text) ||
      pwrite(fd, head.data(), head.size(), 0) !=
          static_cast<ssize_t>(head.size()) ||
      fsync(fd) != 0) {
    return fail(Errno("cannot write", tmp));
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno("cannot rename into", path);
    unlink(tmp.c_str());
    return s;
  }
  report.entries = static_cast<int64_t>(manifest.entries.size());
  report.members = static_cast<int64_t>(manifest.members.size());
  report.file_bytes = offset + text.size();
  return report;
}

absl::StatusOr<ImportReport> VerifyBundle(const std::string& path,
                                          const BundleOptions& options) {
  BundleReader reader;
  CACHE_RETURN_IF_ERROR(reader.Open(path, options));
  ImportReport report;
  report.is_signed = reader.verified_signature();
  report.entries = static_cast<int64_t>(reader.manifest().entries.size());
  for (size_t i = 0; i < reader.manifest().members.size(); ++i) {
    CACHE_ASSIGN_OR_RETURN(std::string data, reader.ReadMember(i));
    report.bytes += data.size();
    ++report.members;
  }
  return report;
}

absl::StatusOr<ImportReport> ImportBundle(LocalStore& store,
                                          const std::string& path,
                                          const BundleOptions& options) {
  // Everything is verified before the first entry is published.
  CACHE_ASSIGN_OR_RETURN(ImportReport report, VerifyBundle(path, options));
  BundleReader reader;
  CACHE_RETURN_IF_ERROR(reader.Open(path, options));
  const std::string& key_text = store.options().key_text_blob;
  for (const BundleEntry& e : reader.manifest().entries) {
    EntryData data{e.metadata, {}};
    for (const auto& [name, member] : e.blobs) {
      // Read again (and re-verified): the file could have changed since.
      CACHE_ASSIGN_OR_RETURN(std::string bytes, reader.ReadMember(member));
      data.blobs.push_back(Blob{name, std::move(bytes)});
    }
    if (!reader.verified_signature()) {
      // Nothing but the entry itself can say it belongs under its key.
      const Blob* text = nullptr;
      for (const Blob& b : data.blobs) {
        if (!key_text.empty() && b.name == key_text) text = &b;
      }
      if (text == nullptr || Digest::Of(text->data) != e.key) {
        report.refused.emplace_back(
            e.key, text == nullptr
                       ? absl::StrCat("unsigned, and it has no ",
                                      key_text.empty() ? "key text" : key_text,
                                      " blob to check its key against")
                       : absl::StrCat("unsigned, and its ", key_text,
                                      " blob does not hash to its key"));
        continue;
      }
    }
    absl::StatusOr<EntryInfo> existing = store.Stat(e.key);
    if (existing.ok() && existing->damage.empty()) {
      bool same = existing->metadata == e.metadata &&
                  existing->blobs.size() == data.blobs.size();
      for (size_t i = 0; same && i < data.blobs.size(); ++i) {
        same = existing->blobs[i].name == data.blobs[i].name &&
               existing->blobs[i].digest == Digest::Of(data.blobs[i].data);
      }
      if (same) {
        ++report.already_present;
      } else {
        ++report.kept_existing;
      }
      continue;
    }
    CACHE_RETURN_IF_ERROR(store.Put(e.key, data));
    ++report.imported;
  }
  return report;
}

}  // namespace kiln::cache
