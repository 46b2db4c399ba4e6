// libFuzzer target for the tile-IR front end. For any input:
//   1. Parse must not crash (sanitizers watch every step).
//   2. Verify must not crash on whatever parsed.
//   3. For a program that parsed, the canonical print must parse back to the
//      same program, print identically, verify the same way and hash the
//      same (tile-ir.md §7: parse(print(p)) == p for every program p).
// A broken property aborts, so libFuzzer keeps the input as a crash artifact.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/ir/canonical_hash.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"

namespace {

using kiln::compiler::Diagnostics;
using kiln::compiler::ParseResult;
using kiln::compiler::Program;

[[noreturn]] void Fail(const char* what, const std::string& printed) {
  std::fprintf(stderr, "parse_verify_fuzz: %s\n--- canonical print ---\n%s\n",
               what, printed.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseResult parsed = kiln::compiler::Parse(text);
  if (!parsed.ok()) return 0;
  const Program& program = parsed.program;
  const bool valid = kiln::compiler::Verify(program).empty();

  const std::string printed = kiln::compiler::Print(program);
  ParseResult reparsed = kiln::compiler::Parse(printed);
  if (!reparsed.ok()) Fail("the canonical print does not parse", printed);
  if (!(reparsed.program == program)) {
    Fail("parse(print(p)) != p", printed);
  }
  if (kiln::compiler::Print(reparsed.program) != printed) {
    Fail("print(parse(print(p))) != print(p)", printed);
  }
  if (kiln::compiler::Verify(reparsed.program).empty() != valid) {
    Fail("the canonical print verifies differently", printed);
  }
  if (!valid) return 0;
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    if (kiln::compiler::KernelHash(program.kernels[i]) !=
        kiln::compiler::KernelHash(reparsed.program.kernels[i])) {
      Fail("the canonical print hashes differently", printed);
    }
  }
  return 0;
}
