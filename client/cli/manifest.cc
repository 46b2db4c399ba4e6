#include "client/cli/manifest.h"

#include <cmath>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cli/commands.h"
#include "client/cli/source_file.h"
#include "compiler/compile.h"
#include "compiler/ir/parser.h"
#include "google/protobuf/util/json_util.h"
#include "proto/kiln.pb.h"
#include "server/tuning/tune_plan.h"
#include "server/tuning/tuning_key.h"

namespace kiln::cli {
namespace {

// Manifests are small; a larger file is a mistake (a binary, a log).
constexpr size_t kMaxManifestBytes = 16 << 20;

// The bindings a JSON object gives: every value an integer.
absl::StatusOr<std::map<std::string, int64_t>> Bindings(
    const google::protobuf::Struct& object, const std::string& where) {
  std::map<std::string, int64_t> out;
  for (const auto& [name, value] : object.fields()) {
    const double v = value.number_value();
    if (value.kind_case() != google::protobuf::Value::kNumberValue ||
        std::floor(v) != v || std::fabs(v) > 9007199254740992.0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"", name, "\" is not an integer"));
    }
    out[name] = static_cast<int64_t>(v);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ManifestItem>> LoadManifest(
    const std::string& path, const std::string& target_override) {
  absl::StatusOr<std::string> text = ReadSourceFile(path, kMaxManifestBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(path, ": ", text.status().message()));
  }
  kiln::v1::PrewarmManifest manifest;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  if (auto parsed = google::protobuf::util::JsonStringToMessage(
          *text, &manifest, options);
      !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a prewarm manifest: ",
        std::string(parsed.message().data(), parsed.message().size())));
  }
  if (manifest.version() != 0 && manifest.version() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": manifest version ", manifest.version(),
                     " is not supported (this kiln reads version 1)"));
  }
  if (manifest.kernels().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the manifest lists no kernels"));
  }
  const std::filesystem::path folder =
      std::filesystem::path(path).parent_path();
  std::map<std::string, std::string> texts;  // each file read once
  std::vector<ManifestItem> items;
  for (int k = 0; k < manifest.kernels_size(); ++k) {
    const kiln::v1::ManifestKernel& entry = manifest.kernels(k);
    const std::string where = absl::StrCat(path, ": kernels[", k, "]");
    if (entry.file().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"file\" is missing"));
    }
    ManifestItem base;
    base.file = entry.file();
    const std::filesystem::path file(entry.file());
    base.path = (file.is_absolute() ? file : folder / file).string();
    auto cached = texts.find(base.path);
    if (cached == texts.end()) {
      absl::StatusOr<std::string> ir =
          ReadSourceFile(base.path, compiler::kMaxSourceBytes);
      if (!ir.ok()) {
        return absl::Status(
            ir.status().code(),
            absl::StrCat(where, ": ", base.path, ": ", ir.status().message()));
      }
      cached = texts.emplace(base.path, *std::move(ir)).first;
    }
    base.ir_text = cached->second;
    base.kernel = entry.kernel();
    base.target = !target_override.empty()     ? target_override
                  : !entry.target().empty()    ? entry.target()
                  : !manifest.target().empty() ? manifest.target()
                                               : "auto";
    base.bindings.insert(entry.bindings().begin(), entry.bindings().end());
    if (entry.configs().empty() && entry.tune().empty()) {
      base.where = where;
      items.push_back(base);
    }
    for (int c = 0; c < entry.configs_size(); ++c) {
      ManifestItem item = base;
      item.where = absl::StrCat(where, ".configs[", c, "]");
      absl::StatusOr<std::map<std::string, int64_t>> config =
          Bindings(entry.configs(c), item.where);
      if (!config.ok()) return config.status();
      for (const auto& [name, value] : *config) item.bindings[name] = value;
      items.push_back(std::move(item));
    }
    for (int t = 0; t < entry.tune_size(); ++t) {
      ManifestItem item = base;
      item.kind = ManifestItem::Kind::kTune;
      item.where = absl::StrCat(where, ".tune[", t, "]");
      absl::StatusOr<std::map<std::string, int64_t>> shape =
          Bindings(entry.tune(t), item.where);
      if (!shape.ok()) return shape.status();
      if (shape->empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(item.where,
                         ": a tuning needs its problem shape, e.g. "
                         "{\"M\": 4096}"));
      }
      item.shape = *std::move(shape);
      items.push_back(std::move(item));
    }
  }
  return items;
}

kiln::v1::AutotuneRequest TuneRequest(const ManifestItem& item) {
  kiln::v1::AutotuneRequest request;
  request.set_ir_text(item.ir_text);
  request.set_kernel(item.kernel);
  request.set_target(item.target);
  request.set_filename(item.file);
  request.mutable_shape()->insert(item.shape.begin(), item.shape.end());
  request.mutable_fixed_bindings()->insert(item.bindings.begin(),
                                           item.bindings.end());
  return request;
}

namespace {

compiler::CompileOptions OptionsFor(const ManifestItem& item) {
  compiler::CompileOptions options;
  options.target = item.target;
  options.kernel = item.kernel;
  options.bindings = item.bindings;
  options.filename = item.file;
  return options;
}

absl::Status Located(const ManifestItem& item, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(item.where, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::vector<cache::Digest>> ManifestKeys(
    const std::vector<ManifestItem>& items, cache::LocalStore& store,
    std::vector<std::string>* missing) {
  // Keys found in the store (each looked up once), and what was not.
  std::set<std::string> keys;
  std::set<std::string> absent;
  const auto keep_if_cached = [&](const std::string& key) {
    absl::StatusOr<cache::Digest> digest = cache::Digest::Parse(key);
    if (!digest.ok() || !store.Stat(*digest).ok()) return false;
    keys.insert(key);
    return true;
  };
  for (const ManifestItem& item : items) {
    if (item.target == "auto") {
      return absl::InvalidArgumentError(
          absl::StrCat(item.where,
                       ": target \"auto\" depends on the daemon's GPUs; name "
                       "the target (\"target\" in the manifest, or --target)"));
    }
    if (item.kind == ManifestItem::Kind::kCompile) {
      absl::StatusOr<std::string> key =
          compiler::BinaryKey(item.ir_text, OptionsFor(item));
      if (!key.ok()) return Located(item, key.status());
      if (!keep_if_cached(*key)) absent.insert(item.where);
      continue;
    }
    absl::StatusOr<server::tuning::TunePlan> plan =
        server::tuning::PlanTuning(TuneRequest(item), /*allow_faults=*/false);
    if (!plan.ok()) return Located(item, plan.status());
    compiler::CompileOptions candidate = OptionsFor(item);
    candidate.kernel = plan->kernel.name;
    for (const compiler::TunableValues& values : plan->space) {
      candidate.bindings = plan->fixed;
      candidate.bindings.insert(values.begin(), values.end());
      absl::StatusOr<std::string> key =
          compiler::BinaryKey(item.ir_text, candidate);
      if (key.ok()) keep_if_cached(*key);  // else the tuner prunes it
    }
    // The tuning results: one per GPU model that tuned it here.
    cache::EntryFilter filter;
    filter.kernel_name = plan->kernel.name;
    filter.target_arch = plan->target;
    absl::StatusOr<std::vector<cache::EntryInfo>> entries = store.List(filter);
    if (!entries.ok()) return entries.status();
    std::set<std::string> skus;
    for (const cache::EntryInfo& e : *entries) {
      if (!e.metadata.gpu_sku.empty()) skus.insert(e.metadata.gpu_sku);
    }
    server::tuning::TuningKeyParts parts;
    parts.kernel_hash =
        server::tuning::KernelHashWithoutTunableValues(plan->kernel);
    parts.fixed = plan->fixed;
    parts.target = plan->target;
    parts.bucket = server::tuning::ShapeBucket(plan->shape);
    bool tuned = false;
    for (const std::string& sku : skus) {
      parts.sku = sku;
      tuned = keep_if_cached(server::tuning::TuningKey(parts)) || tuned;
    }
    if (!tuned) absent.insert(absl::StrCat(item.where, " (no tuning result)"));
  }
  if (missing != nullptr) missing->assign(absent.begin(), absent.end());
  std::vector<cache::Digest> out;
  for (const std::string& key : keys) {
    out.push_back(*cache::Digest::Parse(key));  // parsed above
  }
  return out;
}

ManifestResolver ManifestKeyResolver() {
  return [](const std::string& manifest, const std::string& target,
            cache::LocalStore& store, std::vector<std::string>* missing)
             -> absl::StatusOr<std::vector<cache::Digest>> {
    absl::StatusOr<std::vector<ManifestItem>> items =
        LoadManifest(manifest, target);
    if (!items.ok()) return items.status();
    return ManifestKeys(*items, store, missing);
  };
}

}  // namespace kiln::cli
