// Kernel: a loaded kernel handle (binary + launch metadata) that launches
// with no call to the daemon. Cheap to copy (shared state); thread-safe.
#ifndef KILN_CLIENT_KERNEL_H_
#define KILN_CLIENT_KERNEL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/kernel_metadata.h"
#include "runtime/launch_args.h"

namespace kiln::client {

// What a handle is made of (kiln.v1.KernelHandle, plus where it came from).
struct KernelParts {
  std::string key;
  std::string binary;
  std::string metadata;  // text, compiler/docs/kernel-handle.md
  std::string compile_log;
  // "memory", "local", "remote", "compiled" or "" (unknown)
  std::string tier;
  double compile_ms = 0;
  // GPU targets: the device (driver ordinal) to load the binary on.
  int device = 0;
};

class Kernel {
 public:
  // Parses the metadata and loads the binary for its target: CPU shared
  // objects (dlopen from memory), CUDA cubins (into the primary context of
  // parts.device; the dynamic shared-memory limit raised as needed), HIP
  // code objects (targets gfx*, on AMD GPU parts.device).
  // InvalidArgument for bad metadata or a binary that is not what the
  // target needs; FailedPrecondition for a target this process cannot run
  // (no CUDA driver or GPU for an sm_* kernel; "no AMD GPU: ..." for a gfx*
  // kernel without the HIP runtime or an AMD GPU).
  static absl::StatusOr<Kernel> Load(KernelParts parts);

  // Checks `args` against the metadata (count, dtypes, ranks, shapes,
  // strides, assumptions; InvalidArgument naming the parameter), computes
  // the grid from the shapes and launches. GPU targets enqueue on `stream`
  // (a CUstream or hipStream_t; nullptr: the default stream) and return; the
  // CPU target runs every block on Kiln's thread pool and returns when done.
  absl::Status Launch(absl::Span<const runtime::ArgValue> args,
                      void* stream = nullptr) const;

  const std::string& key() const;
  const std::string& name() const;    // the kernel's name
  const std::string& target() const;  // "cpu", "sm_90a", "gfx90a", ...
  const std::string& tier() const;
  double compile_ms() const;
  const std::string& binary() const;
  const std::string& metadata_text() const;
  const std::string& compile_log() const;
  const runtime::KernelMetadata& metadata() const;

 private:
  struct State;
  explicit Kernel(std::shared_ptr<const State> state);
  std::shared_ptr<const State> state_;
};

}  // namespace kiln::client

namespace kiln {
using client::Kernel;
}  // namespace kiln

#endif  // KILN_CLIENT_KERNEL_H_
