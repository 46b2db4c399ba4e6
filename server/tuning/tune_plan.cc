#include "server/tuning/tune_plan.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/verifier.h"

namespace kiln::server::tuning {
namespace {

using kiln::v1::AutotuneRequest;

constexpr int kDefaultMaxCandidates = 256;
constexpr int kMaxCandidates = 4096;

template <typename T>
T Or(T value, T fallback) {
  return value > 0 ? value : fallback;
}

// Parses, verifies and picks the kernel (as the compiler's front end).
absl::StatusOr<compiler::Kernel> FrontEnd(const AutotuneRequest& request,
                                          const std::string& filename) {
  compiler::ParseResult parsed = compiler::Parse(request.ir_text());
  if (!parsed.ok()) {
    return compiler::DiagnosticsToStatus(parsed.errors, filename);
  }
  compiler::Diagnostics diags = compiler::Verify(parsed.program);
  if (!diags.empty()) return compiler::DiagnosticsToStatus(diags, filename);
  const compiler::Program& p = parsed.program;
  if (request.kernel().empty()) {
    if (p.kernels.size() != 1) {
      std::vector<std::string> names;
      for (const compiler::Kernel& k : p.kernels) names.push_back(k.name);
      return absl::InvalidArgumentError(absl::StrCat(
          filename, ": the program has ", p.kernels.size(), " kernels (",
          absl::StrJoin(names, ", "), "); name one"));
    }
    return p.kernels[0];
  }
  if (const compiler::Kernel* k = p.Find(request.kernel())) return *k;
  return absl::NotFoundError(
      absl::StrCat(filename, ": no kernel named '", request.kernel(), "'"));
}

// The kernel's symbols (tensor dims that are names) and integer scalars.
void Names(const compiler::Kernel& kernel, std::set<std::string>* symbols,
           std::set<std::string>* int_scalars) {
  for (const compiler::Param& p : kernel.params) {
    if (!p.is_tensor) {
      if (compiler::IsInteger(p.dtype)) int_scalars->insert(p.name);
      continue;
    }
    for (const compiler::Expr& d : p.shape) {
      if (d.kind == compiler::ExprKind::kVar) symbols->insert(d.name);
    }
  }
}

absl::Status CheckOptions(const kiln::v1::AutotuneOptions& o) {
  if (o.max_candidates() < 0 || o.min_runs() < 0 || o.min_time_ms() < 0 ||
      o.time_limit_per_candidate_s() < 0 || o.remeasure_top() < 0) {
    return absl::InvalidArgumentError(
        "autotune options must not be negative (max_candidates, min_runs, "
        "min_time_ms, time_limit_per_candidate_s, remeasure_top)");
  }
  if (o.max_candidates() > kMaxCandidates) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_candidates ", o.max_candidates(),
                     " is over the limit of ", kMaxCandidates));
  }
  if (o.time_limit_per_candidate_s() > 3600) {
    return absl::InvalidArgumentError(
        "time_limit_per_candidate_s is over an hour");
  }
  return absl::OkStatus();
}

// The candidates of `space` each requested config selects (those agreeing
// with every value the config binds), in config order, without repeats.
// Configs selecting nothing are described in `excluded`. InvalidArgument
// for a config naming something that is not a tunable.
absl::StatusOr<std::vector<compiler::TunableValues>> SelectConfigs(
    const compiler::Kernel& kernel, const std::string& filename,
    const google::protobuf::RepeatedPtrField<kiln::v1::TuningConfig>& configs,
    const std::vector<compiler::TunableValues>& space,
    std::vector<std::string>* excluded) {
  std::vector<compiler::TunableValues> out;
  std::set<size_t> taken;
  for (int c = 0; c < configs.size(); ++c) {
    const Bindings config(configs[c].bindings().begin(),
                          configs[c].bindings().end());
    std::string why;
    for (const auto& [name, value] : config) {
      const std::string& wanted = name;
      auto t = std::find_if(
          kernel.tunables.begin(), kernel.tunables.end(),
          [&](const compiler::Tunable& x) { return x.name == wanted; });
      if (t == kernel.tunables.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            filename, ": config ", c, " binds ", name,
            ", which is not a tunable of kernel '", kernel.name, "'"));
      }
      if (why.empty() && std::find(t->candidates.begin(), t->candidates.end(),
                                   value) == t->candidates.end()) {
        why = absl::StrCat(name, "=", value, " is not one of ", name,
                           "'s values [", absl::StrJoin(t->candidates, ", "),
                           "]");
      }
    }
    size_t matched = 0, repeated = 0;
    for (size_t i = 0; i < space.size() && why.empty(); ++i) {
      bool agrees = true;
      for (const auto& [name, value] : config) {
        agrees = agrees && space[i].at(name) == value;
      }
      if (!agrees) continue;
      ++matched;
      if (!taken.insert(i).second) {
        ++repeated;
        continue;
      }
      out.push_back(space[i]);
    }
    if (why.empty() && matched == 0) {
      why = "breaks the kernel's where-constraints or the fixed bindings";
    } else if (why.empty() && matched == repeated) {
      why = "repeats an earlier config";
    }
    if (!why.empty()) excluded->push_back(Label(config) + ": " + why);
  }
  return out;
}

}  // namespace

std::string Label(const compiler::TunableValues& values) {
  return absl::StrJoin(values, ",", absl::PairFormatter("="));
}

absl::StatusOr<TunePlan> PlanTuning(const AutotuneRequest& request,
                                    bool allow_faults) {
  if (request.ir_text().empty()) {
    return absl::InvalidArgumentError("autotune request has no IR text");
  }
  const std::string filename =
      request.filename().empty() ? "<input>" : request.filename();
  const std::string target =
      request.target().empty() ? "cpu" : request.target();
  const kiln::v1::AutotuneOptions& opt = request.options();
  if (absl::Status s = CheckOptions(opt); !s.ok()) return s;
  if (!opt.faults().empty() && !allow_faults) {
    return absl::FailedPreconditionError(
        "fault injection (options.faults) is for tests and needs "
        "KILN_BENCH_WORKER_FAULTS=1 in the daemon's environment");
  }
  absl::StatusOr<compiler::Kernel> kernel = FrontEnd(request, filename);
  if (!kernel.ok()) return kernel.status();

  // Check the shape and fixed bindings against the kernel's names.
  std::set<std::string> symbols, int_scalars, tunables;
  Names(*kernel, &symbols, &int_scalars);
  for (const compiler::Tunable& t : kernel->tunables) tunables.insert(t.name);
  Bindings fixed(request.fixed_bindings().begin(),
                 request.fixed_bindings().end());
  Bindings shape(request.shape().begin(), request.shape().end());
  for (const auto& [name, value] : fixed) {
    if (!symbols.count(name) && !tunables.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(filename, ": fixed binding ", name,
                       " is neither a symbol nor a "
                       "tunable of kernel '",
                       kernel->name, "'"));
    }
  }
  for (const auto& [name, value] : shape) {
    if (!symbols.count(name) && !int_scalars.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(filename, ": shape ", name, "=", value,
                       " names no symbol of kernel '", kernel->name,
                       "' (its symbols: ", absl::StrJoin(symbols, ", "), ")"));
    }
    if (value <= 0 && symbols.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", name, "=", value, " must be positive"));
    }
    if (auto it = fixed.find(name); it != fixed.end() && it->second != value) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", name, "=", value,
                                                     " contradicts fixed ",
                                                     name, "=", it->second));
    }
  }
  std::vector<std::string> missing;
  for (const std::string& s : symbols) {
    if (!shape.count(s) && !fixed.count(s)) missing.push_back(s);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no shape for symbol", missing.size() > 1 ? "s " : " ",
                     absl::StrJoin(missing, ", "), " of kernel '", kernel->name,
                     "' (give e.g. --shape ", missing[0], "=1024)"));
  }

  // The space, narrowed by fixed tunables and the requested configs, and
  // limited.
  const size_t max_candidates = static_cast<size_t>(
      Or<int32_t>(opt.max_candidates(), kDefaultMaxCandidates));
  std::vector<compiler::TunableValues> space;
  for (compiler::TunableValues& v : compiler::EnumerateTuningSpace(*kernel)) {
    bool keep = true;
    for (const auto& [name, value] : v) {
      auto it = fixed.find(name);
      if (it != fixed.end() && it->second != value) keep = false;
    }
    if (keep) space.push_back(std::move(v));
    if (space.size() == max_candidates && request.configs().empty()) break;
  }
  std::vector<std::string> excluded;
  if (!request.configs().empty()) {
    absl::StatusOr<std::vector<compiler::TunableValues>> chosen =
        SelectConfigs(*kernel, filename, request.configs(), space, &excluded);
    if (!chosen.ok()) return chosen.status();
    space = *std::move(chosen);
    if (space.size() > max_candidates) space.resize(max_candidates);
  }
  if (space.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(filename, ": kernel '", kernel->name,
                     "' has no configuration satisfying its constraints",
                     fixed.empty() ? "" : " and the fixed tunables",
                     excluded.empty() ? "" : " among the requested configs: ",
                     absl::StrJoin(excluded, "; ")));
  }
  for (const auto& [label, fault] : opt.faults()) {
    if (fault != "crash" && fault != "abort" && fault != "hang" &&
        fault != "wrong") {
      return absl::InvalidArgumentError(
          absl::StrCat("fault '", fault, "' for ", label,
                       " is not one of crash, abort, hang, wrong"));
    }
  }

  TunePlan plan;
  plan.kernel = *std::move(kernel);
  plan.filename = filename;
  plan.target = target;
  plan.shape = std::move(shape);
  for (const auto& [name, value] : fixed) {
    if (symbols.count(name)) plan.fixed_symbols[name] = value;
  }
  plan.fixed = std::move(fixed);
  plan.space = std::move(space);
  plan.excluded_configs = std::move(excluded);
  return plan;
}

}  // namespace kiln::server::tuning
