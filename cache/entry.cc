#include "cache/entry.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kiln::cache {

const Blob* Entry::Find(absl::string_view name) const {
  for (const Blob& blob : blobs) {
    if (blob.name == name) return &blob;
  }
  return nullptr;
}

absl::Status ValidateBlobName(absl::string_view name) {
  if (name.empty() || name.size() > kLimits.max_blob_name) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob name must be 1-", kLimits.max_blob_name,
                     " characters, got ", name.size()));
  }
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("blob name may not be \"", name, "\""));
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("blob name \"", absl::CHexEscape(name),
                       "\" has a character outside [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateEntryData(const EntryData& data) {
  if (data.blobs.empty()) {
    return absl::InvalidArgumentError("an entry needs at least one blob");
  }
  if (data.blobs.size() > kLimits.max_blobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("an entry has at most ", kLimits.max_blobs, " blobs, got ",
                     data.blobs.size()));
  }
  const EntryMetadata& m = data.metadata;
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{
                                         "kernel_name", &m.kernel_name},
                                     {"target_arch", &m.target_arch},
                                     {"gpu_sku", &m.gpu_sku}}) {
    if (value->size() > kLimits.max_field) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " is longer than ", kLimits.max_field, " bytes"));
    }
  }
  if (m.extra.size() > kLimits.max_extra) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extra metadata is longer than ", kLimits.max_extra, " bytes"));
  }
  absl::flat_hash_set<absl::string_view> names;
  for (const Blob& blob : data.blobs) {
    if (absl::Status s = ValidateBlobName(blob.name); !s.ok()) return s;
    if (!names.insert(blob.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("blob name \"", blob.name, "\" appears twice"));
    }
    if (blob.data.size() > kLimits.max_blob_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("blob \"", blob.name, "\" is ", blob.data.size(),
                       " bytes; the limit is ", kLimits.max_blob_size));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::cache
