#include "runtime/cpu/cpu_kernel.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln::runtime {
namespace {

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// dlopen through an anonymous memory file: nothing is left on disk. The fd
// stays open while the library is loaded (returned in *fd): glibc treats a
// dlopen of a path it has already loaded as the same library, so the
// "/proc/self/fd/N" name must not be reused by another kernel meanwhile.
absl::StatusOr<SharedLibrary> OpenFromMemfd(std::string_view bytes, int* fd) {
  *fd = memfd_create("kiln-cpu-kernel", MFD_CLOEXEC);
  if (*fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("memfd_create: ", std::strerror(errno)));
  }
  absl::StatusOr<SharedLibrary> lib =
      WriteAll(*fd, bytes)
          ? SharedLibrary::Open(absl::StrCat("/proc/self/fd/", *fd))
          : absl::UnavailableError("memfd: short write");
  if (!lib.ok()) {
    close(*fd);
    *fd = -1;
  }
  return lib;
}

// dlopen through a private temporary file, removed right after.
absl::StatusOr<SharedLibrary> OpenFromTempFile(std::string_view bytes) {
  const char* base = std::getenv("TMPDIR");
  std::string dir = std::string(base != nullptr && *base ? base : "/tmp") +
                    "/kiln-cpu-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  const std::string path = dir + "/kernel.so";
  absl::StatusOr<SharedLibrary> lib =
      absl::InternalError("cannot write " + path);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
  if (fd >= 0) {
    const bool ok = WriteAll(fd, bytes);
    close(fd);
    if (ok) lib = SharedLibrary::Open(path);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return lib;
}

}  // namespace

CpuKernel::FileDescriptor::~FileDescriptor() {
  if (fd >= 0) close(fd);
}

absl::StatusOr<std::unique_ptr<CpuKernel>> CpuKernel::Load(
    std::string_view shared_object, std::string_view metadata_text) {
  absl::StatusOr<KernelMetadata> md = ParseKernelMetadata(metadata_text);
  if (!md.ok()) return md.status();
  return Load(shared_object, std::move(*md));
}

absl::StatusOr<std::unique_ptr<CpuKernel>> CpuKernel::Load(
    std::string_view shared_object, KernelMetadata metadata) {
  if (metadata.target != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel '", metadata.name, "' targets '", metadata.target,
                     "', not 'cpu'"));
  }
  if (shared_object.size() < 4 || shared_object.substr(0, 4) !=
                                      "\x7f"
                                      "ELF") {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel '", metadata.name, "': the binary is not an ELF object"));
  }
  int fd = -1;
  absl::StatusOr<SharedLibrary> lib = OpenFromMemfd(shared_object, &fd);
  if (!lib.ok() && absl::IsUnavailable(lib.status())) {
    lib = OpenFromTempFile(shared_object);
  }
  if (!lib.ok()) {
    if (absl::StrContains(lib.status().message(), "__asan")) {
      // Compiled with KILN_CPU_SANITIZE=address (cpu_codegen.h).
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel '", metadata.name,
          "' is instrumented with AddressSanitizer and this process has no "
          "ASan runtime: build it with -fsanitize=address or start it with "
          "LD_PRELOAD=$(clang -print-file-name=libclang_rt.asan-x86_64.so) (",
          lib.status().message(), ")"));
    }
    return lib.status();
  }
  std::unique_ptr<CpuKernel> kernel(
      new CpuKernel(fd, std::move(*lib), std::move(metadata)));
  absl::StatusOr<EntryFn*> entry =
      kernel->library_.FindFunction<EntryFn>(kernel->metadata_.entry);
  if (!entry.ok()) return entry.status();
  kernel->entry_ = *entry;
  return kernel;
}

absl::Status CpuKernel::Launch(absl::Span<const ArgValue> args) const {
  absl::StatusOr<ThreadPool*> pool = ThreadPool::Default();
  if (!pool.ok()) return pool.status();
  return Launch(args, **pool);
}

absl::Status CpuKernel::Launch(absl::Span<const ArgValue> args,
                               ThreadPool& pool) const {
  absl::StatusOr<LaunchPlan> plan = BindLaunch(metadata_, args);
  if (!plan.ok()) return plan.status();
  const int64_t gx = plan->grid[0];
  const int64_t gy = plan->grid[1];
  void* const* argv = plan->args.data();
  const int64_t* symbols = plan->symbols.data();
  EntryFn* entry = entry_;
  pool.ParallelFor(plan->num_blocks(), 0, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      entry(argv, symbols, i % gx, (i / gx) % gy, i / (gx * gy));
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::runtime
