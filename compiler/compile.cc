// Compile: parse -> verify -> choose the kernel -> passes -> code generation,
// each stage timed; the binary key is computed before any pass runs.
#include "compiler/compile.h"

#include <chrono>

#include "compiler/arith/prover.h"
#include "compiler/codegen/cpu/cpu_codegen.h"
#include "compiler/codegen/cuda/cuda_codegen.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/codegen/hip/hip_codegen.h"
#include "compiler/ir/canonical_hash.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/format.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "compiler/passes/pipeline.h"
#include "compiler/target.h"

namespace kiln::compiler {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

// Parses, verifies and picks the requested kernel.
absl::StatusOr<Kernel> FrontEnd(std::string_view source,
                                const CompileOptions& options) {
  ParseResult parsed = Parse(source);
  if (!parsed.ok()) return DiagnosticsToStatus(parsed.errors, options.filename);
  Diagnostics diags = Verify(parsed.program);
  if (!diags.empty()) return DiagnosticsToStatus(diags, options.filename);
  const Program& p = parsed.program;
  if (options.kernel.empty()) {
    if (p.kernels.size() != 1) {
      std::vector<std::string> names;
      for (const Kernel& k : p.kernels) names.push_back(k.name);
      return absl::InvalidArgumentError(
          StrCat(options.filename, ": the program has ", p.kernels.size(),
                 " kernels (", StrJoin(names, ", "), "); name one"));
    }
    return p.kernels[0];
  }
  if (const Kernel* k = p.Find(options.kernel)) return *k;
  return absl::NotFoundError(
      StrCat(options.filename, ": no kernel named '", options.kernel, "'"));
}

absl::StatusOr<std::string> Toolchain(const std::string& target) {
  const Target* t = FindTarget(target);
  if (t == nullptr) {
    // (Echoed at most in part: the name is client input.)
    return absl::InvalidArgumentError(
        StrCat("unknown target '", target.substr(0, 64),
               "'; this build compiles for: ", TargetNames()));
  }
  switch (t->kind) {
    case TargetKind::kCpu: {
      absl::StatusOr<CpuCodegenOptions> cpu = DefaultCpuCodegenOptions();
      if (!cpu.ok()) return cpu.status();
      return CpuToolchainIdentity(*cpu);
    }
    case TargetKind::kCuda:
      return CudaToolchainIdentity(target);
    case TargetKind::kHip:
      return HipToolchainIdentity(target);
  }
  return absl::InternalError("target kind");
}

std::string KeyTextOf(const Kernel& k, const CompileOptions& options,
                      const std::string& toolchain) {
  std::string text = StrCat("kiln-binary-key-v1\nkernel ", KernelHash(k),
                            "\ntarget ", options.target, "\ntoolchain ",
                            toolchain, "\ncompiler ", CompilerVersion(), "\n");
  for (const auto& [name, value] : options.bindings) {
    StrAppend(&text, "bind ", name, "=", value, "\n");
  }
  return text;
}

// A pipeline error as `FILE:LINE:COL: error: MESSAGE (kernel K, pass P)`.
// Pass messages read `PASS: MESSAGE` (pipeline.h); the location is the
// error's own (LocatedError), put in front as diagnostics have it.
absl::Status PassError(const absl::Status& st, const std::string& file,
                       const std::string& kernel) {
  std::string msg(st.message().data(), st.message().size());
  std::string pass;
  size_t colon = msg.find(": ");
  if (colon != std::string::npos) {
    pass = msg.substr(0, colon);
    msg = msg.substr(colon + 2);
  }
  std::string where = file;
  if (std::optional<Loc> loc = ErrorLocation(st)) {
    where = StrCat(file, ":", loc->line, ":", loc->col);
  }
  return absl::Status(st.code(), StrCat(where, ": error: ", msg, " (kernel '",
                                        kernel, "', pass ", pass, ")"));
}

}  // namespace

absl::StatusOr<LoadedKernel> Load(std::string_view source,
                                  const CompileOptions& options) {
  const auto start = Clock::now();
  auto toolchain = Toolchain(options.target);
  if (!toolchain.ok()) return toolchain.status();
  auto kernel = FrontEnd(source, options);
  if (!kernel.ok()) return kernel.status();
  LoadedKernel out;
  out.kernel = *std::move(kernel);
  out.options = options;
  out.toolchain = *std::move(toolchain);
  out.key_text = KeyTextOf(out.kernel, options, out.toolchain);
  out.key = Sha256Hex(out.key_text);
  out.load_ms = MsSince(start);
  return out;
}

absl::StatusOr<std::string> BinaryKeyText(std::string_view source,
                                          const CompileOptions& options) {
  auto loaded = Load(source, options);
  if (!loaded.ok()) return loaded.status();
  return std::move(loaded->key_text);
}

absl::StatusOr<std::string> BinaryKey(std::string_view source,
                                      const CompileOptions& options) {
  auto loaded = Load(source, options);
  if (!loaded.ok()) return loaded.status();
  return std::move(loaded->key);
}

absl::StatusOr<CompiledKernel> Compile(std::string_view source,
                                       const CompileOptions& options) {
  auto loaded = Load(source, options);
  if (!loaded.ok()) return loaded.status();
  return Compile(*loaded);
}

absl::StatusOr<CompiledKernel> Compile(const LoadedKernel& loaded) {
  const auto start = Clock::now();
  const CompileOptions& options = loaded.options;
  CompiledKernel out;
  out.target = options.target;
  out.toolchain = loaded.toolchain;
  out.timings.parse_verify_ms = loaded.load_ms;
  out.name = loaded.kernel.name;
  out.key_text = loaded.key_text;
  out.key = loaded.key;
  Kernel kernel = loaded.kernel;  // (the passes rewrite their own copy)

  const auto passes_start = Clock::now();
  Prover prover;
  PassContext ctx;
  ctx.target = options.target;
  ctx.bindings = options.bindings;
  ctx.prover = &prover;
  absl::Status st = RunPipeline(
      kernel, ctx, options.print_ir_after_all ? &out.ir_dump : nullptr);
  if (!st.ok()) return PassError(st, options.filename, out.name);
  out.timings.passes_ms = MsSince(passes_start);
  out.lowered_ir = Print(kernel);
  out.prover_queries = prover.stats().queries;
  out.prover_z3_queries = prover.stats().z3_queries;

  const auto codegen_start = Clock::now();
  // A back end's error, with the file and the kernel: `FILE:LINE:COL:
  // error: MESSAGE (kernel K)` where the back end located it
  // (LocatedError), else `FILE: kernel 'K': MESSAGE`.
  auto located = [&](const absl::Status& st) {
    if (std::optional<Loc> loc = ErrorLocation(st)) {
      return absl::Status(
          st.code(), StrCat(options.filename, ":", loc->line, ":", loc->col,
                            ": error: ", st.message(), " (kernel '", out.name,
                            "', back end)"));
    }
    return absl::Status(st.code(), StrCat(options.filename, ": kernel '",
                                          out.name, "': ", st.message()));
  };
  if (options.plan_only) {
    if (ctx.gpu_plan == nullptr) {  // (GPU pipelines end with `plan`)
      return located(absl::InvalidArgumentError(
          StrCat("the ", options.target,
                 " target has no kernel plan (GPU targets only)")));
    }
    out.plan = gpu::PrintPlan(*ctx.gpu_plan);
    out.timings.codegen_ms = MsSince(codegen_start);
    out.timings.total_ms = loaded.load_ms + MsSince(start);
    return out;
  }
  if (IsCudaTarget(options.target)) {
    CudaCodegenOptions co;
    co.target = options.target;
    co.want_ptx = options.keep_ptx;
    co.plan = ctx.gpu_plan.get();
    auto cuda = GenerateCuda(kernel, co);
    if (!cuda.ok()) return located(cuda.status());
    out.binary = std::move(cuda->cubin);
    out.metadata = std::move(cuda->metadata);
    out.device_source = std::move(cuda->source);
    out.ptx = std::move(cuda->ptx);
    out.layouts = std::move(cuda->layouts);
    out.plan = std::move(cuda->plan);
    out.build_log = std::move(cuda->nvrtc_log);
  } else if (IsHipTarget(options.target)) {
    HipCodegenOptions ho;
    ho.target = options.target;
    ho.plan = ctx.gpu_plan.get();
    auto hip = GenerateHip(kernel, ho);
    if (!hip.ok()) return located(hip.status());
    out.binary = std::move(hip->code_object);
    out.metadata = std::move(hip->metadata);
    out.device_source = std::move(hip->source);
    out.layouts = std::move(hip->layouts);
    out.plan = std::move(hip->plan);
    out.build_log = std::move(hip->hiprtc_log);
  } else {
    absl::StatusOr<CpuCodegenOptions> cpu = DefaultCpuCodegenOptions();
    if (!cpu.ok()) return cpu.status();
    auto artifact = GenerateCpu(kernel, *cpu);
    if (!artifact.ok()) return located(artifact.status());
    out.binary = std::move(artifact->shared_object);
    out.metadata = std::move(artifact->metadata);
    out.llvm_ir = std::move(artifact->llvm_ir);
  }
  out.timings.codegen_ms = MsSince(codegen_start);
  out.timings.total_ms = loaded.load_ms + MsSince(start);
  return out;
}

}  // namespace kiln::compiler
