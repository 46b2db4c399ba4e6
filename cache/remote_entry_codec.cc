#include "cache/remote_entry_codec.h"

#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cache/compression.h"
#include "cache/index.h"
#include "cache/status_macros.h"
#include "cache/wire.h"

namespace kiln::cache {
namespace {

constexpr absl::string_view kMagic = "KLNR";
constexpr uint8_t kVersion = 1;
constexpr size_t kHeaderSize = 16;  // magic, version, codec, 2 reserved, size

absl::Status Reject(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("remote entry rejected: ", why));
}

}  // namespace

std::string RemoteKey(absl::string_view key_namespace, const Digest& key) {
  return absl::StrCat(key_namespace, ":v1:", key.hex());
}

absl::Status ValidateNamespace(absl::string_view key_namespace) {
  if (key_namespace.empty() || key_namespace.size() > 64) {
    return absl::InvalidArgumentError(
        "the remote cache namespace must be 1-64 characters");
  }
  for (char c : key_namespace) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("the remote cache namespace \"", key_namespace,
                       "\" may only use [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

std::string EncodeRemoteEntry(const HmacSha256& mac,
                              absl::string_view remote_key, const Digest& key,
                              const RemoteEntry& entry, int compression_level) {
  const EntryMetadata& m = entry.metadata;
  size_t body_size = Digest::kSize + 8 + 4 * 4 + m.kernel_name.size() +
                     m.target_arch.size() + m.gpu_sku.size() + m.extra.size() +
                     4;
  for (const Blob& blob : entry.blobs) {
    body_size += 4 + blob.name.size() + Digest::kSize + 4 + blob.data.size();
  }
  // The value is built in one buffer sized up front: for megabyte blobs,
  // every extra buffer costs more in page faults than the copy itself.
  auto header = [&](std::string* out, Codec codec) {
    WireWriter w(out);
    w.Raw(kMagic);
    w.U8(kVersion);
    w.U8(static_cast<uint8_t>(codec));
    w.U8(0);
    w.U8(0);
    w.U64(body_size);
  };
  std::string value;
  value.reserve(kHeaderSize + body_size + HmacSha256::kMacSize);
  header(&value, Codec::kRaw);
  WireWriter b(&value);
  b.Raw(key.bytes());
  b.I64(ToMillis(entry.created));
  b.String(m.kernel_name);
  b.String(m.target_arch);
  b.String(m.gpu_sku);
  b.String(m.extra);
  b.U32(static_cast<uint32_t>(entry.blobs.size()));
  for (const Blob& blob : entry.blobs) {
    b.String(blob.name);
    b.Raw(Digest::Of(blob.data).bytes());
    b.String(blob.data);
  }
  std::optional<std::string> packed = CompressIfSmaller(
      absl::string_view(value).substr(kHeaderSize), compression_level);
  if (packed) {
    value.clear();
    header(&value, Codec::kZstd);
    value += *packed;
  }
  value += mac.Sign({remote_key, absl::string_view("\0", 1), value});
  return value;
}

absl::StatusOr<RemoteEntry> DecodeRemoteEntry(const HmacSha256& mac,
                                              absl::string_view remote_key,
                                              const Digest& key,
                                              absl::string_view value,
                                              uint64_t max_size) {
  if (value.size() < kHeaderSize + HmacSha256::kMacSize) {
    return Reject(absl::StrCat("only ", value.size(), " bytes (truncated)"));
  }
  const absl::string_view signed_part =
      value.substr(0, value.size() - HmacSha256::kMacSize);
  const absl::string_view signature =
      value.substr(value.size() - HmacSha256::kMacSize);
  if (!mac.Verify({remote_key, absl::string_view("\0", 1), signed_part},
                  signature)) {
    return Reject("bad signature (tampered, truncated, or another secret)");
  }
  WireReader header(signed_part.substr(0, kHeaderSize));
  absl::string_view magic;
  uint8_t version = 0, codec = 0, pad1 = 0, pad2 = 0;
  uint64_t raw_size = 0;
  header.Raw(4, &magic);
  header.U8(&version);
  header.U8(&codec);
  header.U8(&pad1);
  header.U8(&pad2);
  header.U64(&raw_size);
  if (magic != kMagic) return Reject("not a kiln entry");
  if (version != kVersion) {
    return Reject(absl::StrCat("unknown format version ", int{version}));
  }
  if (codec > 1 || pad1 != 0 || pad2 != 0) return Reject("bad header");
  if (raw_size > max_size) {
    return Reject(
        absl::StrCat(raw_size, " bytes exceeds the limit ", max_size));
  }
  const absl::string_view stored = signed_part.substr(kHeaderSize);
  std::string inflated;
  absl::string_view body = stored;
  if (static_cast<Codec>(codec) == Codec::kZstd) {
    absl::StatusOr<std::string> raw = Decompress(stored, raw_size);
    if (!raw.ok()) return Reject(raw.status().message());
    inflated = *std::move(raw);
    body = inflated;
  } else if (stored.size() != raw_size) {
    return Reject("body size does not match its header");
  }

  WireReader r(body);
  absl::string_view raw_key;
  int64_t created_ms = 0;
  RemoteEntry entry;
  uint32_t count = 0;
  r.Raw(Digest::kSize, &raw_key);
  r.I64(&created_ms);
  r.String(&entry.metadata.kernel_name, kLimits.max_field);
  r.String(&entry.metadata.target_arch, kLimits.max_field);
  r.String(&entry.metadata.gpu_sku, kLimits.max_field);
  r.String(&entry.metadata.extra, kLimits.max_extra);
  r.U32(&count);
  if (!r.ok()) return Reject("malformed body");
  if (raw_key != key.bytes()) return Reject("stored under the wrong key");
  if (count == 0 || count > kLimits.max_blobs) return Reject("bad blob count");
  entry.created = FromMillis(created_ms);
  for (uint32_t i = 0; i < count; ++i) {
    Blob blob;
    absl::string_view digest, data;
    r.String(&blob.name, kLimits.max_blob_name);
    r.Raw(Digest::kSize, &digest);
    r.String(&data, kLimits.max_blob_size);
    if (!r.ok()) return Reject("malformed blob");
    if (Digest::Of(data).bytes() != digest) {
      return Reject(
          absl::StrCat("blob ", blob.name, " does not match its digest"));
    }
    blob.data = std::string(data);
    entry.blobs.push_back(std::move(blob));
  }
  if (r.remaining() != 0) return Reject("trailing bytes");
  absl::flat_hash_set<absl::string_view> names;
  for (const Blob& blob : entry.blobs) {
    if (absl::Status s = ValidateBlobName(blob.name); !s.ok()) {
      return Reject(s.message());
    }
    if (!names.insert(blob.name).second) return Reject("duplicate blob name");
  }
  return entry;
}

}  // namespace kiln::cache
