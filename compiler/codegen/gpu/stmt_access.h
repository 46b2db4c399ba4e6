// Which buffers a statement reads and writes, as the GPU planners and the
// emitter see them: the planners decide barriers, rings and tile lives from
// these sets before anything is emitted, and the emitter places its lazy
// barriers with the same sets.
#ifndef KILN_COMPILER_CODEGEN_GPU_STMT_ACCESS_H_
#define KILN_COMPILER_CODEGEN_GPU_STMT_ACCESS_H_

#include <functional>
#include <map>
#include <set>
#include <string>

#include "compiler/codegen/gpu/fragment_plan.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::gpu {

// Whether a buffer counts (shared memory, or every buffer).
using BufferPred = std::function<bool(const std::string&)>;

// Adds to `r` and `w` the buffers that `s` (with everything nested in it)
// reads and writes, keeping those `counts` accepts. A row reduction of a
// register fragment spread over several warps along its columns, or of a
// thread-owned fragment, also reads and writes the block's reduction
// scratch ("kiln_scratch").
void StmtAccesses(const Stmt& s, const FragmentPlan& fragments,
                  const BufferPred& counts, std::set<std::string>* r,
                  std::set<std::string>* w);

// Every buffer of any scope `s` reads and writes.
void AllStmtAccesses(const Stmt& s, const FragmentPlan& fragments,
                     std::set<std::string>* r, std::set<std::string>* w);

// How many top-level statements of the kernel body (with everything in
// them; allocs excluded) touch each buffer.
std::map<std::string, int> TopLevelUsers(const Kernel& k,
                                         const FragmentPlan& fragments);

// Calls `fn` on `s` and on every statement in the bodies of the `for`s and
// `if`s it is or holds, in order (not inside `parallel` bodies).
void ForEachNested(const Stmt& s, const std::function<void(const Stmt&)>& fn);

// Whether a planned tile lives in shared memory: a tile that is not local,
// not held in registers and not a register A operand.
bool InSharedMemory(const FragmentPlan& fragments, const std::string& name);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_STMT_ACCESS_H_
