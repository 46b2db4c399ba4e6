#include "compiler/codegen/cpu/llvm_target.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "llvm/ADT/StringMap.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/Transforms/Instrumentation/AddressSanitizer.h"

namespace kiln::compiler::cpu {
namespace {

void InitializeLlvmOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

}  // namespace

HostTarget DetectHostTarget() {
  // The host does not change while the process runs: detect once.
  static const HostTarget* host = [] {
    auto* t = new HostTarget;
    *t = DetectHostTargetUncached();
    return t;
  }();
  return *host;
}

HostTarget DetectHostTargetUncached() {
  HostTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  llvm::StringMap<bool> features;
  std::vector<std::string> list;
  if (llvm::sys::getHostCPUFeatures(features)) {
    for (const auto& f : features) {
      list.push_back((f.getValue() ? "+" : "-") + f.getKey().str());
    }
  }
  std::sort(list.begin(), list.end(),
            [](const std::string& a, const std::string& b) {
              return a.substr(1) < b.substr(1);
            });
  for (const std::string& f : list) {
    if (!t.features.empty()) t.features += ",";
    t.features += f;
  }
  return t;
}

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(
    const HostTarget& target) {
  InitializeLlvmOnce();
  std::string error;
  const llvm::Target* t =
      llvm::TargetRegistry::lookupTarget(target.triple, error);
  if (t == nullptr) {
    return absl::InvalidArgumentError("cpu codegen: target '" + target.triple +
                                      "': " + error);
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(
      target.triple, target.cpu, target.features, options, llvm::Reloc::PIC_,
      llvm::CodeModel::Small, llvm::CodeGenOpt::Aggressive));
  if (tm == nullptr) {
    return absl::InvalidArgumentError(
        "cpu codegen: cannot create a target "
        "machine for cpu '" +
        target.cpu + "'");
  }
  if (!target.cpu.empty() &&
      !tm->getMCSubtargetInfo()->isCPUStringValid(target.cpu)) {
    return absl::InvalidArgumentError("cpu codegen: unknown cpu '" +
                                      target.cpu + "' for " + target.triple);
  }
  return tm;
}

bool HasFeature(const llvm::TargetMachine& tm, const std::string& feature) {
  return tm.getMCSubtargetInfo()->checkFeatures(feature);
}

void Optimize(llvm::Module* module, llvm::TargetMachine* tm, int opt_level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = opt_level >= 2;
  pto.SLPVectorization = opt_level >= 2;
  pto.LoopUnrolling = opt_level >= 1;
  pto.LoopInterleaving = opt_level >= 2;
  llvm::PassBuilder pb(tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  switch (opt_level) {
    case 0:
      mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0);
      break;
    case 1:
      mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O1);
      break;
    case 2:
      mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
      break;
    default:
      mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
      break;
  }
  mpm.run(*module, mam);
}

void InstrumentAddresses(llvm::Module* module) {
  for (llvm::Function& f : *module) {
    if (!f.isDeclaration()) f.addFnAttr(llvm::Attribute::SanitizeAddress);
  }
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb;
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::AddressSanitizerOptions options;
  options.UseAfterScope = true;
  llvm::ModulePassManager mpm;
  mpm.addPass(llvm::RequireAnalysisPass<llvm::ASanGlobalsMetadataAnalysis,
                                        llvm::Module>());
  // (In LLVM 14 the module pass instruments the functions too; adding
  // AddressSanitizerPass as well would instrument them twice.)
  mpm.addPass(llvm::ModuleAddressSanitizerPass(options));
  mpm.run(*module, mam);
}

absl::StatusOr<std::string> EmitObject(llvm::Module* module,
                                       llvm::TargetMachine* tm) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile)) {
    return absl::InternalError("cpu codegen: the target cannot emit objects");
  }
  pm.run(*module);
  return std::string(buffer.data(), buffer.size());
}

}  // namespace kiln::compiler::cpu
