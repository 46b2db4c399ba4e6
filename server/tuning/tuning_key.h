// The tuning key: where an autotuning result is stored, so that a later
// request for the same kernel on the same kind of device at a similar
// shape reuses it. It is the SHA-256 (hex) of this text:
//
//   kiln-tuning-key-v1
//   kernel <canonical hash of the kernel with every tunable's candidate
//           list removed: tunable values never change the key>
//   fixed NAME=VALUE        (each fixed binding, sorted by name)
//   target <target>
//   sku <device SKU>
//   bucket NAME=VALUE       (each shape symbol rounded up to a power of
//                            two, sorted by name)
//
// So the key ignores which values the tunables may take (a stored choice
// outside the current space is not reused, see Autotuner), and changes
// with the kernel's code, fixed bindings, target, device model and shape
// bucket. The compiler version is not part of it: a new compiler keeps its
// tuning results (its binaries get new binary keys and are recompiled).
#ifndef KILN_SERVER_TUNING_TUNING_KEY_H_
#define KILN_SERVER_TUNING_TUNING_KEY_H_

#include <cstdint>
#include <map>
#include <string>

#include "compiler/ir/ir.h"

namespace kiln::server::tuning {

using Bindings = std::map<std::string, int64_t>;

// Each value rounded up to the next power of two (1 -> 1, 3000 -> 4096,
// 4096 -> 4096); values below 1 become 1.
Bindings ShapeBucket(const Bindings& shape);

// The kernel's canonical hash without its tunables' candidate values.
std::string KernelHashWithoutTunableValues(const compiler::Kernel& kernel);

struct TuningKeyParts {
  std::string kernel_hash;  // KernelHashWithoutTunableValues
  Bindings fixed;
  std::string target;
  std::string sku;
  Bindings bucket;  // ShapeBucket of the shape
};

// The key text above, and its SHA-256 (64 lowercase hex characters).
std::string TuningKeyText(const TuningKeyParts& parts);
std::string TuningKey(const TuningKeyParts& parts);

// The SKU string of this host's CPU: /proc/cpuinfo's "model name" and the
// number of hardware threads, e.g. "AMD EPYC 7B13, 2 threads" ("unknown
// CPU, N threads" when there is no model name).
std::string CpuSku();

}  // namespace kiln::server::tuning

#endif  // KILN_SERVER_TUNING_TUNING_KEY_H_
