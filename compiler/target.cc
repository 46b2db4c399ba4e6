#include "compiler/target.h"

namespace kiln::compiler {

const std::vector<Target>& AllTargets() {
  static const std::vector<Target>* targets = [] {
    auto* t = new std::vector<Target>;
    Target cpu;
    cpu.name = "cpu";
    cpu.products = "the host's CPU (LLVM)";
    t->push_back(cpu);
    auto cuda = [&](std::string_view name, int cc, std::string_view products,
                    int64_t shared_kib) {
      Target x;
      x.name = name;
      x.kind = TargetKind::kCuda;
      x.compute_capability = cc;
      x.products = products;
      x.max_shared_bytes = shared_kib * 1024;
      x.clusters = cc >= 90;
      t->push_back(x);
      return &t->back();
    };
    cuda("sm_80", 80, "A100, A30", 163);
    cuda("sm_86", 86, "RTX 30xx, A40, A10", 99);
    cuda("sm_89", 89, "L40, L4, RTX 40xx", 99);
    cuda("sm_90", 90, "H100, H200 (without wgmma or TMA)", 227);
    Target* hopper = cuda("sm_90a", 90, "H100, H200", 227);
    hopper->warpgroup_mma = true;
    hopper->tma = true;
    auto hip = [&](std::string_view name, std::string_view products, int major,
                   int minor) {
      Target x;
      x.name = name;
      x.kind = TargetKind::kHip;
      x.products = products;
      // 64 KiB of LDS per workgroup on gfx9; 512 VGPRs (arch +
      // accumulation) per lane.
      x.max_shared_bytes = 64 * 1024;
      x.max_registers_per_thread = 512;
      x.max_registers_per_block = 512 * 1024;
      x.rocm_major = major;
      x.rocm_minor = minor;
      t->push_back(x);
    };
    hip("gfx908", "MI100", 4, 0);
    hip("gfx90a", "MI200", 4, 3);
    hip("gfx942", "MI300X", 6, 0);
    return t;
  }();
  return *targets;
}

const Target* FindTarget(std::string_view name) {
  for (const Target& t : AllTargets()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string TargetNames() {
  std::string s;
  for (const Target& t : AllTargets()) {
    if (!s.empty()) s += ", ";
    s += t.name;
  }
  return s;
}

}  // namespace kiln::compiler
