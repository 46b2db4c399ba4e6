#include "cache/bundle_format.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cache/index.h"
#include "cache/status_macros.h"
#include "cache/wire.h"

namespace kiln::cache {
namespace {

constexpr absl::string_view kMagic = "KILNBNDL";
constexpr absl::string_view kBlobPrefix = "blobs/";

// Percent-encodes everything but a conservative set of printable bytes, so
// fields never contain spaces or newlines; "-" stands for the empty string.
std::string Encode(absl::string_view text) {
  if (text.empty()) return "-";
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '/' ||
                 c == ':' || (c == '-' && text.size() > 1);
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

bool Decode(absl::string_view field, std::string* out) {
  out->clear();
  if (field == "-") return true;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '%') {
      out->push_back(field[i]);
      continue;
    }
    int v = 0;
    if (i + 2 >= field.size()) return false;
    if (!absl::SimpleHexAtoi(field.substr(i + 1, 2), &v)) return false;
    out->push_back(static_cast<char>(v));
    i += 2;
  }
  return true;
}

absl::Status LineError(size_t line, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bundle manifest line ", line, ": ", why));
}

}  // namespace

absl::Status ValidateMemberPath(absl::string_view name) {
  const std::string shown = absl::CHexEscape(name.substr(0, 200));
  if (name.empty()) return absl::InvalidArgumentError("empty member name");
  if (name[0] == '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "member \"", shown, "\" is an absolute path (path traversal refused)"));
  }
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("member \"", shown,
                       "\" escapes the bundle (path traversal refused)"));
    }
    if (part.empty() || part == ".") {
      return absl::InvalidArgumentError(
          absl::StrCat("member \"", shown, "\" has an empty or '.' component"));
    }
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      return absl::InvalidArgumentError(absl::StrCat(
          "member \"", shown, "\" contains a control character or backslash"));
    }
  }
  return absl::OkStatus();
}

std::string EncodeBundleHeader(const BundleHeader& header) {
  std::string out;
  WireWriter w(&out);
  w.Raw(kMagic);
  w.U32(header.version);
  w.U32(header.flags);
  w.U64(header.manifest_offset);
  w.U64(header.manifest_size);
  w.Raw(header.manifest_sha256.bytes());
  return out;
}

absl::StatusOr<BundleHeader> ParseBundleHeader(absl::string_view bytes,
                                               uint64_t file_size,
                                               const BundleLimits& limits) {
  if (bytes.size() < kBundleHeaderSize || file_size < kBundleHeaderSize) {
    return absl::InvalidArgumentError(
        "not a kiln bundle: the file is shorter than a bundle header");
  }
  WireReader r(bytes.substr(0, kBundleHeaderSize));
  absl::string_view magic, sha;
  BundleHeader header;
  r.Raw(kMagic.size(), &magic);
  r.U32(&header.version);
  r.U32(&header.flags);
  r.U64(&header.manifest_offset);
  r.U64(&header.manifest_size);
  r.Raw(Digest::kSize, &sha);
  if (magic != kMagic) {
    return absl::InvalidArgumentError("not a kiln bundle (bad magic)");
  }
  if (header.version != kBundleVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported bundle version ", header.version,
                     "; this kiln reads version ", kBundleVersion));
  }
  if ((header.flags & ~kBundleSigned) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported bundle flags ", header.flags));
  }
  const uint64_t trailer =
      (header.flags & kBundleSigned) != 0 ? kBundleSignatureSize : 0;
  if (header.manifest_size > limits.max_manifest_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("bundle manifest is ", header.manifest_size,
                     " bytes; the limit is ", limits.max_manifest_size));
  }
  if (header.manifest_offset < kBundleHeaderSize ||
      header.manifest_offset > file_size ||
      file_size - header.manifest_offset != header.manifest_size + trailer) {
    return absl::InvalidArgumentError(
        absl::StrCat("bundle is truncated or has trailing data (", file_size,
                     " bytes, manifest at ", header.manifest_offset, " of ",
                     header.manifest_size, " bytes)"));
  }
  header.manifest_sha256 = *Digest::FromBytes(sha);
  return header;
}

std::string EncodeBundleManifest(const BundleManifest& manifest) {
  std::string out = absl::StrCat("kiln-bundle ", kBundleVersion, "\n",
                                 "created ", ToMillis(manifest.created), "\n");
  for (const BundleMember& m : manifest.members) {
    absl::StrAppend(&out, "member ", Encode(m.name), " ", m.offset, " ",
                    m.stored_size, " ",
                    m.codec == Codec::kZstd ? "zstd" : "raw", " ", m.size, " ",
                    m.sha256.hex(), "\n");
  }
  for (const BundleEntry& e : manifest.entries) {
    absl::StrAppend(
        &out, "entry ", e.key.hex(), " ", ToMillis(e.created), " ",
        Encode(e.metadata.kernel_name), " ", Encode(e.metadata.target_arch),
        " ", Encode(e.metadata.gpu_sku), " ", Encode(e.metadata.extra), "\n");
    for (const auto& [name, member] : e.blobs) {
      absl::StrAppend(&out, "blob ", Encode(name), " ",
                      Encode(manifest.members[member].name), "\n");
    }
  }
  out += "end\n";
  return out;
}

absl::StatusOr<BundleManifest> ParseBundleManifest(absl::string_view text,
                                                   uint64_t members_end,
                                                   const BundleLimits& limits) {
  BundleManifest manifest;
  absl::flat_hash_map<std::string, size_t> member_index;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.empty() ||
      lines[0] != absl::StrCat("kiln-bundle ", kBundleVersion)) {
    return LineError(
        1, absl::StrCat("expected \"kiln-bundle ", kBundleVersion, "\""));
  }
  bool ended = false;
  uint64_t previous_end = kBundleHeaderSize;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t line = i + 1;
    if (lines[i].empty() && i + 1 == lines.size()) break;  // final newline
    if (ended) return LineError(line, "text after \"end\"");
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ');
    const absl::string_view kind = f[0];
    if (kind == "end" && f.size() == 1) {
      ended = true;
    } else if (kind == "created" && f.size() == 2) {
      int64_t ms;
      if (!absl::SimpleAtoi(f[1], &ms)) return LineError(line, "bad time");
      manifest.created = FromMillis(ms);
    } else if (kind == "member" && f.size() == 7) {
      BundleMember m;
      if (!Decode(f[1], &m.name)) return LineError(line, "bad encoding");
      CACHE_RETURN_IF_ERROR(ValidateMemberPath(m.name));
      if (!absl::StartsWith(m.name, kBlobPrefix) ||
          !Digest::Parse(m.name.substr(kBlobPrefix.size())).ok()) {
        return LineError(line, absl::StrCat("unexpected member name \"",
                                            absl::CHexEscape(m.name),
                                            "\" (expected blobs/<sha256>)"));
      }
      if (!absl::SimpleAtoi(f[2], &m.offset) ||
          !absl::SimpleAtoi(f[3], &m.stored_size) ||
          !absl::SimpleAtoi(f[5], &m.size) ||
          (f[4] != "raw" && f[4] != "zstd")) {
        return LineError(line, "malformed member");
      }
      m.codec = f[4] == "zstd" ? Codec::kZstd : Codec::kRaw;
      absl::StatusOr<Digest> sha = Digest::Parse(f[6], "member checksum");
      if (!sha.ok()) return LineError(line, sha.status().message());
      m.sha256 = *sha;
      if (m.sha256.hex() != m.name.substr(kBlobPrefix.size())) {
        return LineError(line, absl::StrCat("member ", m.name,
                                            " has a checksum that does not "
                                            "match its name"));
      }
      if (m.size > limits.max_member_size ||
          m.stored_size > limits.max_member_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bundle member ", m.name, " is ", std::max(m.size, m.stored_size),
            " bytes; the limit is ", limits.max_member_size));
      }
      if (m.codec == Codec::kRaw && m.stored_size != m.size) {
        return LineError(line, "raw member with two different sizes");
      }
      if (m.offset < previous_end || m.offset > members_end ||
          members_end - m.offset < m.stored_size) {
        return LineError(line, absl::StrCat("member ", m.name,
                                            " lies outside the member area "
                                            "or overlaps another"));
      }
      previous_end = m.offset + m.stored_size;
      if (!member_index.emplace(m.name, manifest.members.size()).second) {
        return LineError(line, absl::StrCat("duplicate member ", m.name));
      }
      manifest.members.push_back(std::move(m));
    } else if (kind == "entry" && f.size() == 7) {
      if (manifest.entries.size() >= limits.max_entries) {
        return LineError(line, "too many entries");
      }
      BundleEntry e;
      absl::StatusOr<Digest> key = Digest::Parse(f[1]);
      if (!key.ok()) return LineError(line, key.status().message());
      e.key = *key;
      int64_t ms;
      if (!absl::SimpleAtoi(f[2], &ms) ||
          !Decode(f[3], &e.metadata.kernel_name) ||
          !Decode(f[4], &e.metadata.target_arch) ||
          !Decode(f[5], &e.metadata.gpu_sku) ||
          !Decode(f[6], &e.metadata.extra)) {
        return LineError(line, "malformed entry");
      }
      e.created = FromMillis(ms);
      manifest.entries.push_back(std::move(e));
    } else if (kind == "blob" && f.size() == 3) {
      if (manifest.entries.empty()) return LineError(line, "blob before entry");
      std::string name, member;
      if (!Decode(f[1], &name) || !Decode(f[2], &member)) {
        return LineError(line, "bad encoding");
      }
      auto it = member_index.find(member);
      if (it == member_index.end()) {
        return LineError(line, absl::StrCat("unknown member ", member));
      }
      manifest.entries.back().blobs.emplace_back(std::move(name), it->second);
    } else {
      return LineError(
          line, absl::StrCat("unexpected line \"",
                             absl::CHexEscape(lines[i].substr(0, 80)), "\""));
    }
  }
  if (!ended) return LineError(lines.size(), "missing \"end\" (truncated?)");
  // Each entry must be something Put() accepts.
  for (const BundleEntry& e : manifest.entries) {
    EntryData check{e.metadata, {}};
    for (const auto& [name, member] : e.blobs)
      check.blobs.push_back(Blob{name, ""});
    if (absl::Status s = ValidateEntryData(check); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bundle entry ", e.key.hex(), ": ", s.message()));
    }
  }
  return manifest;
}

}  // namespace kiln::cache
