// Prewarm manifests (kiln.v1.PrewarmManifest, written as JSON): reading one
// into the compiles and tunings it asks for, and the cache keys those make,
// for `kiln prewarm` and `kiln cache export --manifest`.
#ifndef KILN_CLIENT_CLI_MANIFEST_H_
#define KILN_CLIENT_CLI_MANIFEST_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/digest.h"
#include "cache/local_store.h"
#include "proto/kiln.pb.h"

namespace kiln::cli {

// One compile or one tuning of a manifest.
struct ManifestItem {
  enum class Kind { kCompile, kTune };
  Kind kind = Kind::kCompile;
  // Where it is written: "models.json: kernels[2].configs[1]".
  std::string where;
  std::string file;     // the path as written in the manifest
  std::string path;     // resolved against the manifest's folder
  std::string ir_text;  // the file's text
  std::string kernel;
  std::string target;
  // kCompile: every binding; kTune: the fixed bindings.
  std::map<std::string, int64_t> bindings;
  std::map<std::string, int64_t> shape;  // kTune
};

// The Autotune request of a kTune item (no options set).
kiln::v1::AutotuneRequest TuneRequest(const ManifestItem& item);

// Reads the manifest at `path` and every tile-IR file it names.
// `target_override`, when not empty, replaces every target. Errors
// (InvalidArgument, NotFound for a missing file) name the manifest and the
// entry: "m.json: kernels[1].configs[0]: \"BM\" is 1.5, not an integer".
absl::StatusOr<std::vector<ManifestItem>> LoadManifest(
    const std::string& path, const std::string& target_override);

// The cache keys `items` resolve to in `store`, offline: each compile's
// binary key; for each tuning, every candidate's binary key and the
// tuning results stored for it (one per GPU model in the store). Keys that
// are not in the store are left out; `missing` (if not null) gets what
// they were ("kernels[0].configs[1] (gemm, sm_90a)").
absl::StatusOr<std::vector<cache::Digest>> ManifestKeys(
    const std::vector<ManifestItem>& items, cache::LocalStore& store,
    std::vector<std::string>* missing);

}  // namespace kiln::cli

#endif  // KILN_CLIENT_CLI_MANIFEST_H_
