// `kiln cache explain FILE`: would this request hit the cache, and if not,
// why not. It works out the binary key of the request (and, with --shape,
// its tuning key) exactly as the daemon does, looks it up in a cache
// directory, and on a miss compares the request's key text with the key
// texts stored beside the entries of the same kernel ("key.txt" blobs),
// naming each component that differs: the program's code, a binding, the
// target, the toolchain, the compiler build; for tuning keys the fixed
// bindings, the device SKU and the shape bucket.
#include <algorithm>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cache/cache_dir.h"
#include "cache/digest.h"
#include "cache/local_store.h"
#include "client/cli/bindings.h"
#include "client/cli/commands.h"
#include "client/cli/source_file.h"
#include "compiler/compile.h"
#include "compiler/ir/canonical_hash.h"
#include "compiler/ir/parser.h"
#include "proto/kiln.pb.h"
#include "server/tuning/tune_plan.h"
#include "server/tuning/tuning_key.h"
#include "server/tuning/tuning_record.h"

namespace kiln::cli {
namespace {

namespace kc = ::kiln::cache;
namespace tuning = ::kiln::server::tuning;

struct ExplainArgs {
  std::string file;
  std::string kernel;
  std::string target = "cpu";
  std::vector<std::string> defines;
  std::vector<std::string> shapes;
  std::string sku;
  std::string dir = kc::DefaultCacheDirectory();
};

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "kiln cache explain: " << message << "\n";
  Exit(kExitFailure);
}

// A key text as component -> values: "kernel" -> {hash}, "bind" ->
// {"BM=64", ...}. The first line (the key's kind) is "kind".
using KeyParts = std::map<std::string, std::set<std::string>>;

KeyParts Parts(const std::string& text) {
  KeyParts parts;
  bool first = true;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty()) continue;
    if (first) {
      parts["kind"].insert(std::string(line));
      first = false;
      continue;
    }
    const size_t space = line.find(' ');
    parts[std::string(line.substr(0, space))].insert(
        space == absl::string_view::npos ? ""
                                         : std::string(line.substr(space + 1)));
  }
  return parts;
}

// What a reader needs to know about a differing component.
std::string Meaning(const std::string& component) {
  if (component == "kernel") return "the program's code differs";
  if (component == "bind") return "tunable or symbol values differ";
  if (component == "fixed") return "fixed bindings differ";
  if (component == "toolchain") {
    return "the toolchain (NVRTC/LLVM version, device library) changed";
  }
  if (component == "compiler") {
    return "another Kiln compiler build: another version, or a change to a "
           "source under compiler/";
  }
  if (component == "bucket") return "another shape bucket";
  if (component == "sku") return "another device model";
  return "";
}

// How `stored` differs from `want`: one line per differing component
// naming only the differing items ("bind: request STAGES=5, stored
// STAGES=4"), and a distance to rank entries by (differing components
// first, then differing items).
struct Difference {
  std::vector<std::string> lines;
  size_t components = 0, items = 0;
};

Difference Compare(const KeyParts& want, const KeyParts& stored) {
  std::set<std::string> names;
  for (const auto& [name, values] : want) names.insert(name);
  for (const auto& [name, values] : stored) names.insert(name);
  Difference out;
  const std::set<std::string> none;
  for (const std::string& name : names) {
    auto a = want.find(name);
    auto b = stored.find(name);
    const std::set<std::string>& av = a == want.end() ? none : a->second;
    const std::set<std::string>& bv = b == stored.end() ? none : b->second;
    std::vector<std::string> only_a, only_b;
    std::set_difference(av.begin(), av.end(), bv.begin(), bv.end(),
                        std::back_inserter(only_a));
    std::set_difference(bv.begin(), bv.end(), av.begin(), av.end(),
                        std::back_inserter(only_b));
    if (only_a.empty() && only_b.empty()) continue;
    ++out.components;
    out.items += only_a.size() + only_b.size();
    const std::string meaning = Meaning(name);
    out.lines.push_back(absl::StrCat(
        name, ": request ",
        only_a.empty() ? "(none)" : absl::StrJoin(only_a, " "), ", stored ",
        only_b.empty() ? "(none)" : absl::StrJoin(only_b, " "),
        meaning.empty() ? "" : absl::StrCat(" (", meaning, ")")));
  }
  return out;
}

void PrintKeyText(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!line.empty()) std::cout << "    " << line << "\n";
  }
}

// Looks `text` (whose SHA-256 is the key) up in `store`; on a miss prints
// the stored entries of `kernel_name` with the same kind of key, closest
// first. `ignore` names components left out of the comparison. True on a
// hit.
bool Explain(kc::LocalStore& store, const std::string& what,
             const std::string& text, const std::string& kernel_name,
             const std::set<std::string>& ignore) {
  const std::string hex = compiler::Sha256Hex(text);
  std::cout << what << " " << hex << "\n  = SHA-256 of:\n";
  PrintKeyText(text);
  absl::StatusOr<kc::Digest> digest = kc::Digest::Parse(hex);
  if (!digest.ok()) Fail(std::string(digest.status().message()));
  if (absl::StatusOr<kc::EntryInfo> info = store.Stat(*digest);
      info.ok() && info->damage.empty()) {
    std::cout << "  hit: the cache holds this " << what << "\n";
    return true;
  }
  KeyParts want = Parts(text);
  for (const std::string& c : ignore) want.erase(c);
  kc::EntryFilter filter;
  filter.kernel_name = kernel_name;
  absl::StatusOr<std::vector<kc::EntryInfo>> entries = store.List(filter);
  if (!entries.ok()) Fail(std::string(entries.status().message()));
  struct Near {
    std::string key;
    Difference diff;
  };
  std::vector<Near> near;
  for (const kc::EntryInfo& e : *entries) {
    const bool has_text =
        std::any_of(e.blobs.begin(), e.blobs.end(), [](const kc::BlobInfo& b) {
          return b.name == tuning::kTuningKeyTextBlob;
        });
    if (!has_text) continue;
    absl::StatusOr<kc::Entry> entry = store.Get(e.key, /*record_use=*/false);
    if (!entry.ok()) continue;
    KeyParts stored = Parts(entry->Find(tuning::kTuningKeyTextBlob)->data);
    if (stored["kind"] != want["kind"]) continue;
    for (const std::string& c : ignore) stored.erase(c);
    near.push_back({e.key.hex(), Compare(want, stored)});
  }
  std::stable_sort(near.begin(), near.end(), [](const Near& a, const Near& b) {
    return std::tie(a.diff.components, a.diff.items) <
           std::tie(b.diff.components, b.diff.items);
  });
  if (near.empty()) {
    std::cout << "  miss: no " << what << " of kernel '" << kernel_name
              << "' is stored in this cache\n";
    return false;
  }
  std::cout << "  miss: " << near.size() << " stored " << what
            << (near.size() == 1 ? "" : "s") << " of kernel '" << kernel_name
            << "', closest first:\n";
  for (size_t i = 0; i < near.size() && i < 5; ++i) {
    std::cout << "  " << near[i].key
              << (near[i].diff.lines.empty()
                      ? " matches every compared component"
                      : " differs in")
              << "\n";
    for (const std::string& d : near[i].diff.lines) {
      std::cout << "    " << d << "\n";
    }
  }
  if (near.size() > 5) std::cout << "  (" << near.size() - 5 << " more)\n";
  return false;
}

void Run(const ExplainArgs& args) {
  absl::StatusOr<std::string> source =
      ReadSourceFile(args.file, compiler::kMaxSourceBytes);
  if (!source.ok())
    Fail(absl::StrCat(args.file, ": error: ", source.status().message()));
  const std::map<std::string, int64_t> defines =
      ParseBindings(args.defines, "kiln cache explain", "-D");
  const std::map<std::string, int64_t> shape =
      ParseBindings(args.shapes, "kiln cache explain", "--shape");

  kc::LocalStoreOptions store_options;
  store_options.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<kc::LocalStore>> store =
      kc::LocalStore::Open(args.dir, store_options);
  if (!store.ok()) Fail(std::string(store.status().message()));

  bool all_hit = true;
  if (shape.empty()) {
    compiler::CompileOptions options;
    options.target = args.target;
    options.kernel = args.kernel;
    options.filename = args.file;
    for (const auto& [name, value] : defines) options.bindings[name] = value;
    absl::StatusOr<std::string> text =
        compiler::BinaryKeyText(*source, options);
    if (!text.ok()) Fail(std::string(text.status().message()));
    // The kernel's name: --kernel, else the program's only kernel (with
    // several, BinaryKeyText has already asked for --kernel).
    std::string name = args.kernel;
    if (name.empty()) {
      compiler::ParseResult parsed = compiler::Parse(*source);
      if (parsed.program.kernels.size() == 1) {
        name = parsed.program.kernels[0].name;
      }
    }
    all_hit = Explain(**store, "binary key", *text, name, {});
  } else {
    kiln::v1::AutotuneRequest request;
    request.set_ir_text(*source);
    request.set_kernel(args.kernel);
    request.set_target(args.target);
    request.set_filename(args.file);
    request.mutable_shape()->insert(shape.begin(), shape.end());
    request.mutable_fixed_bindings()->insert(defines.begin(), defines.end());
    absl::StatusOr<tuning::TunePlan> plan =
        tuning::PlanTuning(request, /*allow_faults=*/false);
    if (!plan.ok()) Fail(std::string(plan.status().message()));
    tuning::TuningKeyParts parts;
    parts.kernel_hash = tuning::KernelHashWithoutTunableValues(plan->kernel);
    parts.fixed = plan->fixed;
    parts.target = plan->target;
    parts.sku = !args.sku.empty()       ? args.sku
                : plan->target == "cpu" ? tuning::CpuSku()
                                        : "(any: give --sku)";
    parts.bucket = tuning::ShapeBucket(plan->shape);
    std::set<std::string> ignore;
    if (args.sku.empty() && plan->target != "cpu") ignore.insert("sku");
    all_hit = Explain(**store, "tuning key", tuning::TuningKeyText(parts),
                      plan->kernel.name, ignore);
  }
  if (!all_hit) Exit(kExitFailure);
}

}  // namespace

void RegisterCacheExplain(CLI::App* group) {
  auto args = std::make_shared<ExplainArgs>();
  CLI::App* cmd = group->add_subcommand(
      "explain",
      "Would this request hit the cache? Print its binary key (or with "
      "--shape its tuning key) and what it is made of; on a miss, which "
      "components differ from the closest stored entries (exit 1)");
  cmd->add_option("FILE", args->file, "Tile-IR file (.tile)")->required();
  cmd->add_option("--kernel", args->kernel,
                  "Kernel name (needed when the file has several)");
  cmd->add_option("--target", args->target,
                  "Target as for kiln compile (default: cpu)");
  cmd->add_option("-D", args->defines,
                  "NAME=INTEGER: a binding (a tunable or symbol value); with "
                  "--shape, a fixed binding");
  cmd->add_option("--shape", args->shapes,
                  "NAME=INTEGER,...: explain the tuning key for this problem "
                  "shape instead");
  cmd->add_option("--sku", args->sku,
                  "Device SKU of the tuning key (default: this CPU for the "
                  "cpu target; for GPU targets, SKUs are not compared)");
  cmd->add_option("--dir", args->dir,
                  "Cache directory (default: $XDG_CACHE_HOME/kiln or "
                  "~/.cache/kiln)");
  cmd->callback([args] { Run(*args); });
}

}  // namespace kiln::cli
