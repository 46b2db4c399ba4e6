#include "cache/blob_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <random>

#include "absl/strings/str_cat.h"
#include "cache/compression.h"
#include "cache/entry.h"
#include "cache/wire.h"

namespace kiln::cache {
namespace {

constexpr absl::string_view kMagic = "KLNB";
constexpr uint8_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 16;

absl::Status Errno(absl::string_view what, const std::string& path) {
  int e = errno;
  return absl::ErrnoToStatus(e, absl::StrCat(what, " ", path));
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return Errno("cannot create folder", path);
  }
  return absl::OkStatus();
}

absl::Status FsyncPath(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("cannot open folder", path);
  if (fsync(fd.get()) != 0) return Errno("cannot fsync folder", path);
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

bool ReadExact(int fd, char* out, size_t n, off_t offset) {
  while (n > 0) {
    ssize_t got = pread(fd, out, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out += got;
    n -= static_cast<size_t>(got);
    offset += got;
  }
  return true;
}

std::string UniqueSuffix() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat(getpid(), ".", counter.fetch_add(1), ".",
                      rng() % 1000000);
}

}  // namespace

BlobDirectory::BlobDirectory(std::string root)
    : root_(std::move(root)),
      blobs_(root_ + "/blobs"),
      tmp_(root_ + "/tmp"),
      quarantine_(root_ + "/quarantine") {}

absl::Status BlobDirectory::Init() const {
  for (const std::string* dir : {&blobs_, &tmp_, &quarantine_}) {
    if (absl::Status s = MakeDir(*dir); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string BlobDirectory::PathOf(const Digest& digest) const {
  std::string hex = digest.hex();
  return absl::StrCat(blobs_, "/", hex.substr(0, 2), "/", hex);
}

bool BlobDirectory::Exists(const Digest& digest) const {
  struct stat st;
  return stat(PathOf(digest).c_str(), &st) == 0;
}

absl::StatusOr<uint64_t> BlobDirectory::Write(const Digest& digest,
                                              absl::string_view data,
                                              int compression_level,
                                              bool sync) const {
  const std::string path = PathOf(digest);
  struct stat st;
  if (stat(path.c_str(), &st) == 0) return static_cast<uint64_t>(st.st_size);

  std::optional<std::string> packed =
      CompressIfSmaller(data, compression_level);
  std::string header;
  WireWriter w(&header);
  w.Raw(kMagic);
  w.U8(kFormatVersion);
  w.U8(static_cast<uint8_t>(packed ? Codec::kZstd : Codec::kRaw));
  w.U8(0);
  w.U8(0);
  w.U64(data.size());
  absl::string_view payload = packed ? absl::string_view(*packed) : data;

  const std::string tmp =
      absl::StrCat(tmp_, "/", digest.hex(), ".", UniqueSuffix(), ".tmp");
  {
    Fd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) return Errno("cannot create", tmp);
    absl::Status s = WriteAll(fd.get(), header, tmp);
    if (s.ok()) s = WriteAll(fd.get(), payload, tmp);
    if (s.ok() && sync && fsync(fd.get()) != 0) s = Errno("cannot fsync", tmp);
    if (!s.ok()) {
      unlink(tmp.c_str());
      return s;
    }
  }
  const std::string shard = path.substr(0, path.rfind('/'));
  bool new_shard = mkdir(shard.c_str(), 0755) == 0;
  if (!new_shard && errno != EEXIST) {
    absl::Status s = Errno("cannot create folder", shard);
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno("cannot rename into", path);
    unlink(tmp.c_str());
    return s;
  }
  if (!sync) return header.size() + payload.size();
  if (absl::Status s = FsyncPath(shard); !s.ok()) return s;
  if (new_shard) {
    if (absl::Status s = FsyncPath(blobs_); !s.ok()) return s;
  }
  return header.size() + payload.size();
}

absl::StatusOr<std::string> BlobDirectory::Read(const Digest& digest) const {
  const std::string path = PathOf(digest);
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError("no blob file " + path);
    return Errno("cannot open", path);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Errno("cannot stat", path);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  char header[kHeaderSize];
  if (file_size < kHeaderSize || !ReadExact(fd.get(), header, kHeaderSize, 0)) {
    return absl::DataLossError("blob file is truncated: " + path);
  }
  WireReader r(absl::string_view(header, kHeaderSize));
  absl::string_view magic;
  uint8_t version = 0, codec = 0, pad1 = 0, pad2 = 0;
  uint64_t raw_size = 0;
  r.Raw(4, &magic);
  r.U8(&version);
  r.U8(&codec);
  r.U8(&pad1);
  r.U8(&pad2);
  r.U64(&raw_size);
  // Every header byte is checked, so any flipped byte is detected.
  if (magic != kMagic || version != kFormatVersion || codec > 1 || pad1 != 0 ||
      pad2 != 0) {
    return absl::DataLossError("blob file has a bad header: " + path);
  }
  const uint64_t payload_size = file_size - kHeaderSize;
  std::string out;
  if (static_cast<Codec>(codec) == Codec::kRaw) {
    if (payload_size != raw_size) {
      return absl::DataLossError(absl::StrCat("blob file is ", payload_size,
                                              " bytes, header says ", raw_size,
                                              ": ", path));
    }
    out.resize(raw_size);
    if (!ReadExact(fd.get(), out.data(), raw_size, kHeaderSize)) {
      return absl::DataLossError("blob file is truncated: " + path);
    }
  } else {
    // The header's raw size is untrusted until the digest matches; Decompress
    // checks it against the frame before allocating.
    if (raw_size > kLimits.max_blob_size) {
      return absl::DataLossError("blob file has a bad header: " + path);
    }
    std::string packed(payload_size, '\0');
    if (!ReadExact(fd.get(), packed.data(), payload_size, kHeaderSize)) {
      return absl::DataLossError("blob file is truncated: " + path);
    }
    absl::StatusOr<std::string> raw = Decompress(packed, raw_size);
    if (!raw.ok()) {
      return absl::DataLossError(
          absl::StrCat(raw.status().message(), ": ", path));
    }
    out = *std::move(raw);
  }
  if (Digest::Of(out) != digest) {
    return absl::DataLossError("blob content does not match its digest: " +
                               path);
  }
  return out;
}

absl::Status BlobDirectory::Quarantine(const Digest& digest) const {
  const std::string path = PathOf(digest);
  const std::string dest =
      absl::StrCat(quarantine_, "/", digest.hex(), ".", UniqueSuffix());
  if (rename(path.c_str(), dest.c_str()) != 0) {
    if (errno == ENOENT) return absl::NotFoundError("no blob file " + path);
    return Errno("cannot quarantine", path);
  }
  return absl::OkStatus();
}

absl::Status BlobDirectory::Remove(const Digest& digest) const {
  const std::string path = PathOf(digest);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Errno("cannot delete", path);
  }
  return absl::OkStatus();
}

absl::Status BlobDirectory::ForEach(
    const std::function<void(const FileInfo&)>& fn, int64_t* strays) const {
  DIR* top = opendir(blobs_.c_str());
  if (top == nullptr) return Errno("cannot list", blobs_);
  absl::Status status;
  while (struct dirent* shard = readdir(top)) {
    absl::string_view shard_name = shard->d_name;
    if (shard_name == "." || shard_name == "..") continue;
    const std::string shard_path = absl::StrCat(blobs_, "/", shard_name);
    DIR* dir = opendir(shard_path.c_str());
    if (dir == nullptr) {
      if (strays != nullptr) ++*strays;
      continue;
    }
    while (struct dirent* file = readdir(dir)) {
      absl::string_view name = file->d_name;
      if (name == "." || name == "..") continue;
      absl::StatusOr<Digest> digest = Digest::Parse(name, "blob file name");
      struct stat st;
      const std::string path = absl::StrCat(shard_path, "/", name);
      if (!digest.ok() || name.substr(0, 2) != shard_name ||
          stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        if (strays != nullptr) ++*strays;
        continue;
      }
      fn(FileInfo{*digest, static_cast<uint64_t>(st.st_size),
                  absl::FromTimeT(st.st_mtime)});
    }
    closedir(dir);
  }
  closedir(top);
  return status;
}

absl::StatusOr<int64_t> BlobDirectory::CleanTemp(absl::Duration min_age) const {
  return CleanOld(tmp_, min_age);
}

absl::StatusOr<int64_t> BlobDirectory::CleanQuarantine(
    absl::Duration min_age) const {
  return CleanOld(quarantine_, min_age);
}

absl::StatusOr<int64_t> BlobDirectory::CleanOld(const std::string& folder,
                                                absl::Duration min_age) {
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) return Errno("cannot list", folder);
  const absl::Time cutoff = absl::Now() - min_age;
  int64_t removed = 0;
  while (struct dirent* file = readdir(dir)) {
    absl::string_view name = file->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = absl::StrCat(folder, "/", name);
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (absl::FromTimeT(st.st_mtime) <= cutoff && unlink(path.c_str()) == 0) {
      ++removed;
    }
  }
  closedir(dir);
  return removed;
}

absl::StatusOr<std::pair<int64_t, uint64_t>> BlobDirectory::QuarantineUsage()
    const {
  DIR* dir = opendir(quarantine_.c_str());
  if (dir == nullptr) return Errno("cannot list", quarantine_);
  std::pair<int64_t, uint64_t> usage{0, 0};
  while (struct dirent* file = readdir(dir)) {
    absl::string_view name = file->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (stat(absl::StrCat(quarantine_, "/", name).c_str(), &st) == 0) {
      ++usage.first;
      usage.second += static_cast<uint64_t>(st.st_size);
    }
  }
  closedir(dir);
  return usage;
}

}  // namespace kiln::cache
