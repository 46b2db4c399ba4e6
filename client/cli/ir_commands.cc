// `kiln ir check|fmt|hash`: the offline tile-IR tools. They read .tile files,
// run the compiler's parser, verifier, printer and hash, and print
// diagnostics as `FILE:LINE:COL: error: MESSAGE` on stderr. No daemon needed.
// `kiln ir check --prove` also prints what the prover says of every access
// (compiler/passes/access_report.h).
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/cli/bindings.h"
#include "client/cli/commands.h"
#include "client/cli/source_file.h"
#include "compiler/ir/canonical_hash.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "compiler/passes/access_report.h"
#include "compiler/tuning_space.h"

namespace kiln::cli {
namespace {

// Prints `file: error: message` the way the compiler prints a diagnostic
// without a location.
void PrintFileError(const std::string& file, absl::string_view message) {
  compiler::Diagnostic diagnostic{compiler::Loc{}, std::string(message)};
  std::cerr << diagnostic.ToString(file) << "\n";
}

struct ParsedFile {
  std::string text;
  compiler::Program program;
};

// Reads and parses `file`; with `verify`, also checks the semantic rules.
// Prints every problem and returns nullopt when there is one.
std::optional<ParsedFile> Load(const std::string& file, bool verify) {
  absl::StatusOr<std::string> text =
      ReadSourceFile(file, compiler::kMaxSourceBytes);
  if (!text.ok()) {
    PrintFileError(file, text.status().message());
    return std::nullopt;
  }
  compiler::ParseResult parsed = compiler::Parse(*text);
  compiler::Diagnostics diagnostics = std::move(parsed.errors);
  // Verifying a partial program would only add noise after syntax errors.
  if (diagnostics.empty() && verify) {
    diagnostics = compiler::Verify(parsed.program);
  }
  if (!diagnostics.empty()) {
    std::cerr << compiler::FormatDiagnostics(diagnostics, file);
    return std::nullopt;
  }
  return ParsedFile{*std::move(text), std::move(parsed.program)};
}

// The access report of every kernel of `parsed` (`--prove`), each at the
// bindings given, its tunables not given taking the first point of its
// tuning space; false when a kernel fails to specialise.
bool ProveFile(const std::string& file, const ParsedFile& parsed,
               const std::map<std::string, int64_t>& given) {
  bool ok = true;
  for (const compiler::Kernel& k : parsed.program.kernels) {
    std::map<std::string, int64_t> b = given;
    std::vector<compiler::TunableValues> space =
        compiler::EnumerateTuningSpace(k, 1);
    if (!space.empty()) {
      for (const auto& [name, v] : space[0]) b.emplace(name, v);
    }
    absl::StatusOr<compiler::AccessReport> report =
        compiler::ProveAccesses(k, b);
    if (!report.ok()) {
      std::optional<compiler::Loc> loc =
          compiler::ErrorLocation(report.status());
      compiler::Diagnostic d{loc.value_or(compiler::Loc{}),
                             std::string(report.status().message())};
      std::cerr << d.ToString(file) << " (kernel '" << k.name << "')\n";
      ok = false;
      continue;
    }
    std::cout << compiler::FormatAccessReport(*report, file);
  }
  return ok;
}

void RegisterCheck(CLI::App& ir) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto prove = std::make_shared<bool>(false);
  auto defines = std::make_shared<std::vector<std::string>>();
  CLI::App* check = ir.add_subcommand(
      "check", "Parse and verify tile-IR files; print every error");
  check->add_flag("--prove", *prove,
                  "Also print, for every access of every kernel, whether it "
                  "is proven in range, checked at run time (with a "
                  "counterexample) or out of range, and races on shared "
                  "tiles");
  check->add_option("-D", *defines,
                    "With --prove: bind a tunable or fix a symbol, "
                    "NAME=VALUE (repeatable; unbound tunables take their "
                    "first candidates)");
  check->add_option("files", *files, "Tile-IR files (.tile)")->required();
  check->callback([files, prove, defines] {
    const std::map<std::string, int64_t> given =
        ParseBindings(*defines, "kiln ir check", "-D");
    bool all_valid = true;
    for (const std::string& file : *files) {
      std::optional<ParsedFile> parsed = Load(file, /*verify=*/true);
      all_valid &= parsed.has_value();
      if (parsed && *prove) all_valid &= ProveFile(file, *parsed, given);
    }
    if (!all_valid) Exit(kExitFailure);
  });
}

void RegisterFmt(CLI::App& ir) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto check_only = std::make_shared<bool>(false);
  CLI::App* fmt = ir.add_subcommand(
      "fmt", "Print tile-IR files in canonical form (to stdout)");
  fmt->add_flag("--check", *check_only,
                "Print nothing; fail naming each file that is not canonical");
  fmt->add_option("files", *files, "Tile-IR files (.tile)")->required();
  fmt->callback([files, check_only] {
    bool ok = true;
    for (const std::string& file : *files) {
      std::optional<ParsedFile> parsed = Load(file, /*verify=*/false);
      if (!parsed.has_value()) {
        ok = false;
        continue;
      }
      std::string canonical = compiler::Print(parsed->program);
      if (!*check_only) {
        std::cout << canonical;
      } else if (canonical != parsed->text) {
        PrintFileError(file, "not in canonical form (see: kiln ir fmt FILE)");
        ok = false;
      }
    }
    if (!ok) Exit(kExitFailure);
  });
}

void RegisterHash(CLI::App& ir) {
  auto file = std::make_shared<std::string>();
  CLI::App* hash = ir.add_subcommand(
      "hash", "Print `NAME SHA256` for each kernel of a valid tile-IR file");
  hash->add_option("file", *file, "Tile-IR file (.tile)")->required();
  hash->callback([file] {
    std::optional<ParsedFile> parsed = Load(*file, /*verify=*/true);
    if (!parsed.has_value()) Exit(kExitFailure);
    for (const compiler::Kernel& kernel : parsed->program.kernels) {
      std::cout << kernel.name << " " << compiler::KernelHash(kernel) << "\n";
    }
  });
}

}  // namespace

void RegisterIrCommands(CLI::App& app) {
  CLI::App* ir = app.add_subcommand(
      "ir", "Offline tile-IR tools (compiler/docs/tile-ir.md)");
  ir->require_subcommand(1);
  RegisterCheck(*ir);
  RegisterFmt(*ir);
  RegisterHash(*ir);
}

}  // namespace kiln::cli
