// `kiln compile FILE`: compile one kernel without a daemon and report its
// binary key, launch metadata summary and compile time; --emit prints the
// generated code, -o writes the binary.
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/cli/bindings.h"
#include "client/cli/commands.h"
#include "client/cli/daemon_compile.h"
#include "client/cli/source_file.h"
#include "compiler/compile.h"
#include "compiler/ir/parser.h"
#include "compiler/target.h"

namespace kiln::cli {
namespace {

struct CompileArgs {
  std::string file;
  std::string target = "cpu";
  std::string kernel;
  std::vector<std::string> defines;
  std::string output;
  std::string emit;
  bool print_ir_after_all = false;
  bool print_plan = false;
  std::string daemon;  // compile through this kilnd
  bool local = false;  // never through a daemon
};

void PrintSummary(const compiler::CompiledKernel& k) {
  std::cout << "kernel   " << k.name << "\n"
            << "target   " << k.target << "\n"
            << "key      " << k.key << "\n"
            << "binary   " << k.binary.size() << " bytes\n"
            << "toolchain " << k.toolchain << "\n";
  if (!k.layouts.empty()) {
    std::cout << "layouts\n";
    PrintIndented(k.layouts);
  }
  std::cout << "metadata\n";
  PrintIndented(k.metadata);
  std::cout << std::fixed << std::setprecision(1) << "time     "
            << k.timings.total_ms << " ms (parse+verify "
            << k.timings.parse_verify_ms << ", passes " << k.timings.passes_ms
            << ", codegen " << k.timings.codegen_ms << "); prover "
            << k.prover_queries << " queries, " << k.prover_z3_queries
            << " to z3\n";
}

void Run(const CompileArgs& args) {
  absl::StatusOr<std::string> text =
      ReadSourceFile(args.file, compiler::kMaxSourceBytes);
  if (!text.ok()) {
    std::cerr << args.file << ": error: " << text.status().message() << "\n";
    Exit(kExitFailure);
  }
  // Through kilnd when one is running, unless the output needs the
  // compiler's internals (generated code, IR dumps).
  const bool needs_compiler = args.print_ir_after_all || args.print_plan ||
                              (!args.emit.empty() && args.emit != "metadata");
  if (needs_compiler && !args.daemon.empty()) {
    std::cerr << "kiln compile: error: --emit " << args.emit
              << (args.print_ir_after_all ? " / --print-ir-after-all" : "")
              << (args.print_plan ? " / --print-plan" : "")
              << " compiles in process; drop --daemon\n";
    Exit(kExitUsage);
  }
  if (!needs_compiler && !args.local) {
    if (std::unique_ptr<client::Client> daemon =
            DaemonForCompile("kiln compile", args.daemon)) {
      CompileThroughDaemon(*daemon, *text, args.file, args.kernel, args.target,
                           ParseBindings(args.defines, "kiln compile", "-D"),
                           args.emit == "metadata", args.output);
      return;
    }
  }
  if (args.emit == "ptx" && args.target.rfind("sm_", 0) != 0) {
    std::cerr << "kiln compile: error: --emit ptx needs a CUDA target (sm_*); "
              << args.target << " has no PTX (--emit source shows the "
              << "generated code)\n";
    Exit(kExitUsage);
  }
  compiler::CompileOptions options;
  options.target = args.target;
  options.kernel = args.kernel;
  options.bindings = ParseBindings(args.defines, "kiln compile", "-D");
  options.print_ir_after_all = args.print_ir_after_all;
  options.filename = args.file;
  options.keep_ptx = args.emit == "ptx";
  // (--print-plan alone needs no toolchain: it stops once planned.)
  options.plan_only =
      args.print_plan && args.emit.empty() && args.output.empty();
  absl::StatusOr<compiler::CompiledKernel> k =
      compiler::Compile(*text, options);
  if (!k.ok()) {
    std::cerr << k.status().message() << "\n";
    Exit(kExitFailure);
  }
  if (args.print_ir_after_all) std::cout << k->ir_dump;
  if (args.print_plan) std::cout << k->plan;
  if (args.emit == "llvm") {
    std::cout << k->llvm_ir;
  } else if (args.emit == "source") {
    // CUDA / HIP: the generated CUDA / HIP C++; CPU: the lowered tile IR.
    std::cout << (k->device_source.empty() ? k->lowered_ir : k->device_source);
  } else if (args.emit == "ptx") {
    if (k->ptx.empty()) {
      std::cerr << "kiln compile: error: --emit ptx needs a CUDA target\n";
      Exit(kExitUsage);
    }
    std::cout << k->ptx;
  } else if (args.emit == "metadata") {
    std::cout << k->metadata;
  } else if (!args.print_ir_after_all && !args.print_plan) {
    PrintSummary(*k);
  }
  if (!args.output.empty()) {
    std::ofstream out(args.output, std::ios::binary | std::ios::trunc);
    out.write(k->binary.data(), static_cast<std::streamsize>(k->binary.size()));
    out.close();
    if (!out) {
      std::cerr << args.output << ": error: cannot write the binary\n";
      Exit(kExitFailure);
    }
  }
}

}  // namespace

void RegisterCompileCommand(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compile",
      "Compile one kernel (through kilnd when it runs, else in process) and "
      "report its key");
  cmd->add_option("file", args->file, "Tile-IR file (.tile)")->required();
  std::vector<std::string> targets;
  for (const compiler::Target& t : compiler::AllTargets()) {
    targets.emplace_back(t.name);
  }
  cmd->add_option("--target", args->target,
                  "Target: " + compiler::TargetNames() +
                      " (CUDA targets need NVRTC, HIP targets hiprtc from "
                      "libamdhip64, not a GPU; gfx942 needs ROCm 6.0 or "
                      "newer)")
      ->check(CLI::IsMember(targets));
  cmd->add_option("--kernel", args->kernel,
                  "Which kernel (needed when the file has several)");
  cmd->add_option("-D", args->defines,
                  "Bind a tunable or fix a symbol: NAME=VALUE (repeatable)");
  cmd->add_option("-o,--output", args->output, "Write the binary here");
  cmd->add_option("--emit", args->emit,
                  "Print generated code instead of the summary: llvm "
                  "(optimised LLVM IR, cpu), source (the lowered tile IR for "
                  "cpu, the generated CUDA C++ for sm_*, HIP C++ for gfx*), "
                  "ptx (sm_*), "
                  "metadata (the launch metadata)")
      ->check(CLI::IsMember({"llvm", "source", "ptx", "metadata"}));
  cmd->add_flag("--print-ir-after-all", args->print_ir_after_all,
                "Print the kernel after every compiler pass");
  cmd->add_flag("--print-plan", args->print_plan,
                "GPU targets: print the kernel plan (launch and walk order, "
                "pipeline and warp roles, clusters, epilogue, shared memory, "
                "fragment layouts) that code generation renders");
  AddDaemonOptions(cmd, "Compile", &args->daemon, &args->local);
  cmd->callback([args] { Run(*args); });
}

}  // namespace kiln::cli
