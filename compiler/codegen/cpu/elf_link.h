// In-process linking of one relocatable object into an ELF shared object,
// with lld's ELF driver (no external linker process). Internal to the CPU
// back end.
#ifndef KILN_COMPILER_CODEGEN_CPU_ELF_LINK_H_
#define KILN_COMPILER_CODEGEN_CPU_ELF_LINK_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kiln::compiler::cpu {

// Links `object` (ELF relocatable bytes) into a shared object that needs only
// libc.so.6 and libm.so.6 (--as-needed: only those it uses), with every
// undefined symbol checked against them (--no-undefined), so an object
// calling a compiler-rt/libgcc helper fails here rather than at dlopen.
// lld keeps global state: calls are serialised by a process-wide mutex.
// The files lld needs live in a private temporary directory, removed before
// returning. Internal error carrying lld's messages when linking fails.
// `sanitized`: the object calls the AddressSanitizer runtime, which the
// process that loads it provides (not checked here).
absl::StatusOr<std::string> LinkSharedObject(std::string_view object,
                                             bool sanitized = false);

}  // namespace kiln::compiler::cpu

#endif  // KILN_COMPILER_CODEGEN_CPU_ELF_LINK_H_
