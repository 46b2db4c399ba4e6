// `kiln prewarm MANIFEST`: compile (and tune) every kernel a manifest lists,
// through kilnd when it runs (else in process), with a progress bar, then a
// report: hits, compiled, tuned, failed with the reason. `--target` prewarms
// for a GPU this host does not have (tunings then compile their candidates
// only); `--report` writes the report as JSON, `--keys-out` the cache keys
// for `kiln cache export --keys-file`.
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cache/json.h"
#include "client/cli/commands.h"
#include "client/cli/daemon_compile.h"
#include "client/cli/manifest.h"
#include "client/cli/progress.h"

namespace kiln::cli {
namespace {

struct PrewarmArgs {
  std::string manifest;
  std::string target;
  std::string report;
  std::string keys_out;
  std::string daemon;
  bool local = false;
  bool compile_only = false;
};

// What can become of a manifest item, in report order.
constexpr const char* kStatuses[] = {
    "hit",   "compiled", "tuned", "tuned-cached", "candidates-compiled",
    "failed"};

// What became of one manifest item.
struct Outcome {
  std::string status;  // "hit", "compiled", "tuned", "tuned-cached",
                       // "candidates-compiled", "failed"
  std::string tier;    // where a compile's kernel came from
  std::string key;     // kernel key (a tuning's best)
  std::string tuning_key;
  std::string error;
  int candidates = 0;  // a tuning's candidates compiled
  std::vector<std::string> candidate_keys;
};

std::string FirstLine(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

std::string JsonBindings(const std::map<std::string, int64_t>& bindings) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : bindings) {
    parts.push_back(absl::StrCat(cache::JsonQuote(name), ":", value));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

std::string ReportJson(const std::string& manifest, double seconds,
                       const std::map<std::string, int>& counts,
                       const std::vector<ManifestItem>& items,
                       const std::vector<Outcome>& outcomes) {
  std::vector<std::string> count_parts;
  for (const char* status : kStatuses) {
    auto n = counts.find(status);
    count_parts.push_back(absl::StrCat(cache::JsonQuote(status), ":",
                                       n == counts.end() ? 0 : n->second));
  }
  std::vector<std::string> rows;
  for (size_t i = 0; i < items.size(); ++i) {
    const ManifestItem& item = items[i];
    const Outcome& o = outcomes[i];
    std::string row = absl::StrCat(
        "{\"where\":", cache::JsonQuote(item.where),
        ",\"file\":", cache::JsonQuote(item.file),
        ",\"kernel\":", cache::JsonQuote(item.kernel),
        ",\"target\":", cache::JsonQuote(item.target), ",\"kind\":",
        item.kind == ManifestItem::Kind::kTune ? "\"tune\"" : "\"compile\"",
        ",\"bindings\":", JsonBindings(item.bindings));
    if (item.kind == ManifestItem::Kind::kTune) {
      absl::StrAppend(&row, ",\"shape\":", JsonBindings(item.shape),
                      ",\"candidates_compiled\":", o.candidates);
    }
    absl::StrAppend(&row, ",\"status\":", cache::JsonQuote(o.status));
    if (!o.tier.empty()) {
      absl::StrAppend(&row, ",\"tier\":", cache::JsonQuote(o.tier));
    }
    if (!o.key.empty()) {
      absl::StrAppend(&row, ",\"key\":", cache::JsonQuote(o.key));
    }
    if (!o.tuning_key.empty()) {
      absl::StrAppend(&row, ",\"tuning_key\":", cache::JsonQuote(o.tuning_key));
    }
    if (!o.error.empty()) {
      absl::StrAppend(&row, ",\"error\":", cache::JsonQuote(o.error));
    }
    rows.push_back(row + "}");
  }
  return absl::StrCat("{\"manifest\":", cache::JsonQuote(manifest),
                      ",\"seconds\":", absl::StrFormat("%.3f", seconds),
                      ",\"counts\":{", absl::StrJoin(count_parts, ","),
                      "},\"items\":[", absl::StrJoin(rows, ","), "]}\n");
}

// Requests go to the daemon in batches under this many bytes of IR, well
// inside its default request limit (16 MiB).
constexpr size_t kBatchBytes = 4 << 20;

void Run(const PrewarmArgs& args) {
  absl::StatusOr<std::vector<ManifestItem>> items =
      LoadManifest(args.manifest, args.target);
  if (!items.ok()) {
    std::cerr << "kiln prewarm: error: " << items.status().message() << "\n";
    Exit(kExitFailure);
  }
  std::string via;
  std::unique_ptr<client::Client> client =
      DaemonOrInProcess("kiln prewarm", args.daemon, args.local, &via);
  // Tunings run where a device of their target is; elsewhere they compile.
  std::set<std::string> devices = {"cpu"};
  absl::StatusOr<kiln::v1::CapabilitiesResponse> caps = client->Capabilities();
  if (!caps.ok()) {
    std::cerr << "kiln prewarm: error: " << caps.status().message() << "\n";
    Exit(kExitFailure);
  }
  for (const kiln::v1::Gpu& gpu : caps->gpus()) devices.insert(gpu.target());

  const absl::Time start = absl::Now();
  std::vector<Outcome> outcomes(items->size());
  int done = 0;
  {
    ProgressBar bar(static_cast<int>(items->size()), "kernels");
    // Compiles, in batches, all compiling at once on the daemon.
    std::vector<size_t> batch;
    size_t batch_bytes = 0;
    const auto flush = [&] {
      if (batch.empty()) return;
      std::vector<client::KernelRequest> requests;
      for (size_t i : batch) {
        const ManifestItem& item = (*items)[i];
        client::KernelRequest r;
        r.ir_text = item.ir_text;
        r.kernel = item.kernel;
        r.target = item.target;
        r.bindings = item.bindings;
        r.filename = item.file;
        requests.push_back(std::move(r));
      }
      absl::Status status =
          client->Prewarm(requests, [&](const kiln::v1::PrewarmProgress& p) {
            if (p.index() < 0 || p.index() >= static_cast<int>(batch.size())) {
              return;
            }
            Outcome& o = outcomes[batch[p.index()]];
            if (p.error_code() != 0) {
              o.status = "failed";
              o.error = p.error_message();
            } else {
              o.tier = client::TierName(p.tier());
              o.status =
                  p.tier() == kiln::v1::TIER_COMPILED ? "compiled" : "hit";
              o.key = p.key();
            }
            bar.Update(++done, (*items)[batch[p.index()]].where);
          });
      for (size_t i : batch) {
        if (outcomes[i].status.empty()) {
          outcomes[i].status = "failed";
          outcomes[i].error = status.ok() ? "no answer from the daemon"
                                          : std::string(status.message());
          bar.Update(++done, "");
        }
      }
      batch.clear();
      batch_bytes = 0;
    };
    for (size_t i = 0; i < items->size(); ++i) {
      const ManifestItem& item = (*items)[i];
      if (item.kind != ManifestItem::Kind::kCompile) continue;
      if (batch_bytes + item.ir_text.size() > kBatchBytes) flush();
      batch.push_back(i);
      batch_bytes += item.ir_text.size();
    }
    flush();
    // Tunings, one after another (each compiles its candidates at once).
    for (size_t i = 0; i < items->size(); ++i) {
      const ManifestItem& item = (*items)[i];
      if (item.kind != ManifestItem::Kind::kTune) continue;
      kiln::v1::AutotuneRequest request = TuneRequest(item);
      const bool compile_only =
          args.compile_only ||
          (item.target != "auto" && devices.count(item.target) == 0);
      request.mutable_options()->set_compile_only(compile_only);
      Outcome& o = outcomes[i];
      absl::StatusOr<kiln::v1::AutotuneResult> result =
          client->Autotune(request, [&](const kiln::v1::AutotuneProgress& p) {
            bar.Update(done, absl::StrCat(item.where, ": ", p.message()));
          });
      if (!result.ok()) {
        o.status = "failed";
        o.error = std::string(result.status().message());
      } else {
        for (const kiln::v1::CandidateResult& c : result->candidates()) {
          if (c.kernel_key().empty()) continue;
          ++o.candidates;
          o.candidate_keys.push_back(c.kernel_key());
        }
        o.status = result->compile_only() ? "candidates-compiled"
                   : result->cached()     ? "tuned-cached"
                                          : "tuned";
        o.key = result->best_kernel_key();
        o.tuning_key = result->tuning_key();
      }
      bar.Update(++done, item.where);
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  std::map<std::string, int> counts;
  for (const char* status : kStatuses) counts[status] = 0;
  for (const Outcome& o : outcomes) ++counts[o.status];
  std::cout << absl::StrFormat(
      "prewarmed %d of %d from %s in %.1f s (%.1f/s) via %s\n",
      static_cast<int>(items->size()) - counts["failed"],
      static_cast<int>(items->size()), args.manifest, seconds,
      seconds > 0 ? items->size() / seconds : 0.0, via);
  std::cout << absl::StrFormat(
      "  %d hits, %d compiled, %d tuned (%d already), %d tunings compiled "
      "only, %d failed\n",
      counts["hit"], counts["compiled"],
      counts["tuned"] + counts["tuned-cached"], counts["tuned-cached"],
      counts["candidates-compiled"], counts["failed"]);
  for (size_t i = 0; i < items->size(); ++i) {
    const Outcome& o = outcomes[i];
    if (o.status == "candidates-compiled") {
      std::cout << "  " << (*items)[i].where << ": " << o.candidates
                << " candidates compiled; not tuned ("
                << (args.compile_only ? std::string("--compile-only")
                                      : absl::StrCat("no ", (*items)[i].target,
                                                     " device here"))
                << ")\n";
    }
  }
  for (size_t i = 0; i < items->size(); ++i) {
    const Outcome& o = outcomes[i];
    if (o.status == "failed") {
      std::cout << "  FAILED " << (*items)[i].where << ": "
                << FirstLine(o.error) << "\n";
    }
  }
  if (!args.report.empty()) {
    std::ofstream out(args.report, std::ios::trunc);
    out << ReportJson(args.manifest, seconds, counts, *items, outcomes);
    if (!out.flush()) {
      std::cerr << "kiln prewarm: error: cannot write " << args.report << "\n";
      Exit(kExitFailure);
    }
  }
  if (!args.keys_out.empty()) {
    std::set<std::string> keys;
    for (const Outcome& o : outcomes) {
      if (!o.key.empty()) keys.insert(o.key);
      if (!o.tuning_key.empty()) keys.insert(o.tuning_key);
      keys.insert(o.candidate_keys.begin(), o.candidate_keys.end());
    }
    std::ofstream out(args.keys_out, std::ios::trunc);
    for (const std::string& k : keys) out << k << "\n";
    if (!out.flush()) {
      std::cerr << "kiln prewarm: error: cannot write " << args.keys_out
                << "\n";
      Exit(kExitFailure);
    }
  }
  if (counts["failed"] > 0) Exit(kExitFailure);
}

}  // namespace

void RegisterPrewarmCommand(CLI::App& app) {
  auto args = std::make_shared<PrewarmArgs>();
  CLI::App* cmd = app.add_subcommand(
      "prewarm",
      "Compile and tune every kernel a manifest lists (JSON, see the README), "
      "through kilnd when it runs, else in process; report hits, compiles, "
      "tunings and failures");
  cmd->add_option("MANIFEST", args->manifest, "Prewarm manifest (JSON)")
      ->required();
  cmd->add_option("--target", args->target,
                  "Compile every kernel for this target instead of the "
                  "manifest's (sm_90a, sm_80, gfx90a, cpu): a GPU this host "
                  "need not have");
  cmd->add_option("--report", args->report,
                  "Write the report as JSON to this file");
  cmd->add_option("--keys-out", args->keys_out,
                  "Write every cache key made or found, one per line (for "
                  "kiln cache export --keys-file)");
  cmd->add_flag("--compile-only", args->compile_only,
                "Tunings compile their candidates and benchmark none, even "
                "where a device is present");
  AddDaemonOptions(cmd, "Prewarm", &args->daemon, &args->local);
  cmd->callback([args] { Run(*args); });
}

}  // namespace kiln::cli
