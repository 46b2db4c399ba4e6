// A loaded CPU kernel: the shared object of a `target cpu` handle, opened
// from its bytes, plus its metadata; Launch runs every block of the grid on
// a thread pool (ABI: compiler/docs/kernel-handle.md, "CPU target ABI").
#ifndef KILN_RUNTIME_CPU_CPU_KERNEL_H_
#define KILN_RUNTIME_CPU_CPU_KERNEL_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/kernel_metadata.h"
#include "runtime/launch_args.h"
#include "runtime/shared_library.h"

namespace kiln::runtime {

class CpuKernel {
 public:
  // void ENTRY(void* const* args, const int64_t* symbols,
  //            int64_t bx, int64_t by, int64_t bz)
  using EntryFn = void(void* const*, const int64_t*, int64_t, int64_t, int64_t);

  // Loads `shared_object` (ELF bytes) through an anonymous memory file
  // (memfd; a private temporary file where memfd is unavailable) and
  // resolves `metadata.entry`. InvalidArgument when the target is not "cpu"
  // or the bytes are not an ELF object; NotFound when dlopen or the entry
  // lookup fails (dlerror()'s text).
  static absl::StatusOr<std::unique_ptr<CpuKernel>> Load(
      std::string_view shared_object, KernelMetadata metadata);
  // The same, parsing the metadata text first (its errors are returned).
  static absl::StatusOr<std::unique_ptr<CpuKernel>> Load(
      std::string_view shared_object, std::string_view metadata_text);

  // Checks and binds `args` (launch_args.h: every mismatch is an
  // InvalidArgument naming the parameter), then runs every block on `pool`
  // (default: ThreadPool::Default()) and returns when all have finished.
  // Thread-safe. The argument buffers must stay valid until it returns.
  absl::Status Launch(absl::Span<const ArgValue> args) const;
  absl::Status Launch(absl::Span<const ArgValue> args, ThreadPool& pool) const;

  const KernelMetadata& metadata() const { return metadata_; }
  EntryFn* entry() const { return entry_; }

 private:
  // The memfd backing the library (-1: none), closed after the library is.
  struct FileDescriptor {
    int fd = -1;
    ~FileDescriptor();
  };

  CpuKernel(int fd, SharedLibrary library, KernelMetadata metadata)
      : fd_{fd}, library_(std::move(library)), metadata_(std::move(metadata)) {}

  FileDescriptor fd_;  // declared first: destroyed after library_
  SharedLibrary library_;
  KernelMetadata metadata_;
  EntryFn* entry_ = nullptr;
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_CPU_CPU_KERNEL_H_
