// `kiln tune FILE --shape M=4096,...`: autotune one kernel at one problem
// shape, through kilnd when it runs (else in process, like kiln compile),
// showing progress while it works and then the candidate table, the chosen
// configuration and the tuning key.
#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/cli/bindings.h"
#include "client/cli/commands.h"
#include "client/cli/daemon_compile.h"
#include "client/cli/source_file.h"
#include "client/embedded.h"
#include "compiler/ir/parser.h"
#include "server/tuning/tuning_record.h"

namespace kiln::cli {
namespace {

using kiln::v1::AutotuneProgress;

struct TuneArgs {
  std::string file;
  std::string target = "cpu";
  std::string kernel;
  std::vector<std::string> shapes;
  std::vector<std::string> defines;
  int max_candidates = 0;
  int runs = 0;
  double min_time_ms = 0;
  double time_limit_s = 0;
  bool force = false;
  std::string daemon;
  bool local = false;
};

// Progress on stderr: one line rewritten in place on a terminal, one line
// per event otherwise.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(STDERR_FILENO) == 1) {}
  ~ProgressPrinter() { Finish(); }

  void Update(const AutotuneProgress& p) {
    if (!tty_) {
      std::cerr << p.message() << "\n";
      return;
    }
    const int total = std::max(1, p.total());
    // Compiling is the first half of the bar, benchmarking the second.
    const int done = p.compiled() + p.benchmarked();
    const int width = 30;
    const int filled = std::min(width, done * width / (2 * total));
    std::string line = absl::StrFormat(
        "[%s%s] compiled %d/%d, benchmarked %d  %s", std::string(filled, '#'),
        std::string(width - filled, '.'), p.compiled(), p.total(),
        p.benchmarked(), p.message());
    if (line.size() > 110) line = line.substr(0, 107) + "...";
    std::cerr << "\r\033[K" << line << std::flush;
    dirty_ = true;
  }

  void Finish() {
    if (tty_ && dirty_) std::cerr << "\r\033[K" << std::flush;
    dirty_ = false;
  }

 private:
  const bool tty_;
  bool dirty_ = false;
};

std::string Joined(const google::protobuf::Map<std::string, int64_t>& m) {
  std::map<std::string, int64_t> sorted(m.begin(), m.end());
  return sorted.empty() ? "-"
                        : absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

void Run(const TuneArgs& args) {
  absl::StatusOr<std::string> text =
      ReadSourceFile(args.file, compiler::kMaxSourceBytes);
  if (!text.ok()) {
    std::cerr << args.file << ": error: " << text.status().message() << "\n";
    Exit(kExitFailure);
  }
  kiln::v1::AutotuneRequest request;
  request.set_ir_text(*text);
  request.set_kernel(args.kernel);
  request.set_target(args.target);
  request.set_filename(args.file);
  for (const auto& [name, value] :
       ParseBindings(args.shapes, "kiln tune", "--shape")) {
    (*request.mutable_shape())[name] = value;
  }
  for (const auto& [name, value] :
       ParseBindings(args.defines, "kiln tune", "-D")) {
    (*request.mutable_fixed_bindings())[name] = value;
  }
  kiln::v1::AutotuneOptions* options = request.mutable_options();
  options->set_max_candidates(args.max_candidates);
  options->set_min_runs(args.runs);
  options->set_min_time_ms(args.min_time_ms);
  options->set_time_limit_per_candidate_s(args.time_limit_s);
  options->set_force(args.force);

  std::string via;
  std::unique_ptr<client::Client> client =
      DaemonOrInProcess("kiln tune", args.daemon, args.local, &via);
  const absl::Time start = absl::Now();
  absl::StatusOr<kiln::v1::AutotuneResult> result;
  {
    ProgressPrinter printer;
    result = client->Autotune(
        request, [&](const AutotuneProgress& p) { printer.Update(p); });
  }
  if (!result.ok()) {
    std::cerr << "kiln tune: error: " << result.status().message() << "\n";
    Exit(kExitFailure);
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << "kernel      " << result->kernel_name() << "\n"
            << "target      " << result->target() << " ("
            << result->device_sku() << ")\n"
            << "shape       " << Joined(request.shape()) << " (bucket "
            << Joined(result->shape_bucket()) << ")\n";
  if (Joined(result->shape()) != Joined(request.shape())) {
    std::cout << "tuned at    " << Joined(result->shape()) << "\n";
  }
  std::cout << "via         " << via << "\n";
  if (result->cached()) {
    std::cout << absl::StrFormat(
        "result      cached (tuned earlier in %.1f s; --force tunes again)\n",
        result->tuning_ms() / 1000);
  } else {
    std::cout << absl::StrFormat("result      tuned in %.1f s, %d candidates\n",
                                 seconds, result->candidates_size());
  }
  std::cout << "\n"
            << server::tuning::FormatCandidateTable(*result) << "\n"
            << "chosen      "
            << (result->best_label().empty() ? "(no tunables)"
                                             : result->best_label())
            << absl::StrFormat("  (median %.1f us)", result->best_median_us())
            << "\n"
            << "checked     outputs against " << result->reference() << "\n"
            << "kernel key  " << result->best_kernel_key() << "\n"
            << "tuning key  " << result->tuning_key() << "\n";
}

}  // namespace

void RegisterTuneCommand(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Autotune one kernel at a problem shape (through kilnd when it runs, "
      "else in process) and store the best configuration under its tuning "
      "key");
  cmd->add_option("file", args->file, "Tile-IR file (.tile)")->required();
  cmd->add_option("--target", args->target,
                  "Target: cpu, or a GPU architecture of this host");
  cmd->add_option("--kernel", args->kernel,
                  "Which kernel (needed when the file has several)");
  cmd->add_option("--shape", args->shapes,
                  "Problem shape: NAME=VALUE[,NAME=VALUE...] for every "
                  "symbol (repeatable)")
      ->required();
  cmd->add_option("-D", args->defines,
                  "Fix a symbol at compile time, or a tunable to one value: "
                  "NAME=VALUE (repeatable)");
  cmd->add_option("--max-candidates", args->max_candidates,
                  "Benchmark at most this many configurations (default 256)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--runs", args->runs,
                  "Timed runs per candidate, at least (default 10)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-time-ms", args->min_time_ms,
                  "Timed runs per candidate last at least this long "
                  "(default 50)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--time-limit", args->time_limit_s,
                  "Seconds a candidate may run before its worker is killed "
                  "(default 20)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--force", args->force,
                "Tune again even when a result is stored");
  AddDaemonOptions(cmd, "Tune", &args->daemon, &args->local);
  cmd->callback([args] { Run(*args); });
}

}  // namespace kiln::cli
