// BlobDirectory: the blob files of a local store, one file per distinct blob,
// named by the SHA-256 of its content, so identical blobs are stored once.
//
//   <root>/blobs/<first two hex digits>/<64 hex digits>   published blobs
//   <root>/tmp/                                            files being written
//   <root>/quarantine/                                     blobs that failed
//                                                          verification
//
// A blob file is a 16-byte header (magic "KLNB", format version, codec, raw
// size) and the payload, raw or zstd. Files appear only by rename() of a
// complete, fsynced temp file, so a reader sees a whole file or none, and a
// crash leaves at most a stray temp file. All methods are thread-safe and
// safe across processes; they hold no state beyond the root path.
#ifndef KILN_CACHE_BLOB_DIRECTORY_H_
#define KILN_CACHE_BLOB_DIRECTORY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cache/digest.h"

namespace kiln::cache {

class BlobDirectory {
 public:
  explicit BlobDirectory(std::string root);

  // Creates the blobs/, tmp/ and quarantine/ folders if missing.
  absl::Status Init() const;

  std::string PathOf(const Digest& digest) const;

  // Makes `data`, whose SHA-256 is `digest`, durable as a blob file: temp
  // file, write, fsync, rename, fsync of the folder. If the file already
  // exists nothing is written. Returns the file's size on disk. With `sync`
  // false the fsyncs are skipped (still atomic, not durable on power loss).
  absl::StatusOr<uint64_t> Write(const Digest& digest, absl::string_view data,
                                 int compression_level, bool sync = true) const;

  // True if the blob file exists (a stat, no verification).
  bool Exists(const Digest& digest) const;

  // Reads the blob and verifies it hashes to `digest`. NotFound if there is
  // no file; DataLoss if the file is truncated, malformed or its content does
  // not match `digest`.
  absl::StatusOr<std::string> Read(const Digest& digest) const;

  // Moves the blob file into quarantine/ (kept for inspection, never served).
  // NotFound if the file is already gone.
  absl::Status Quarantine(const Digest& digest) const;

  // Deletes the blob file; a missing file is not an error.
  absl::Status Remove(const Digest& digest) const;

  struct FileInfo {
    Digest digest;
    uint64_t size = 0;
    absl::Time mtime;
  };
  // Calls `fn` for every well-named blob file. Files whose names are not
  // digests in the right shard are skipped and counted in `*strays` if given.
  absl::Status ForEach(const std::function<void(const FileInfo&)>& fn,
                       int64_t* strays = nullptr) const;

  // Deletes temp files older than `min_age` (left by crashed writers; younger
  // ones may belong to a live writer). Returns how many were deleted.
  absl::StatusOr<int64_t> CleanTemp(absl::Duration min_age) const;

  // Deletes quarantined files older than `min_age`; returns how many.
  absl::StatusOr<int64_t> CleanQuarantine(absl::Duration min_age) const;

  // Number and total size of quarantined files.
  absl::StatusOr<std::pair<int64_t, uint64_t>> QuarantineUsage() const;

 private:
  static absl::StatusOr<int64_t> CleanOld(const std::string& folder,
                                          absl::Duration min_age);

  std::string root_;
  std::string blobs_;
  std::string tmp_;
  std::string quarantine_;
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_BLOB_DIRECTORY_H_
