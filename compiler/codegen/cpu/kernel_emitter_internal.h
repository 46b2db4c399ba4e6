// The state of one kernel's emission, shared by kernel_emitter.cc
// (statements and expressions) and memory_access.cc (element loads, stores
// and atomics). Internal to the CPU back end (includes LLVM headers).
#ifndef KILN_COMPILER_CODEGEN_CPU_KERNEL_EMITTER_INTERNAL_H_
#define KILN_COMPILER_CODEGEN_CPU_KERNEL_EMITTER_INTERNAL_H_

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "compiler/codegen/cpu/kernel_emitter.h"
#include "compiler/codegen/cpu/narrow_float.h"
#include "compiler/codegen/cpu/scalar_emitter.h"
#include "llvm/IR/IRBuilder.h"

namespace kiln::compiler::cpu {

// A tensor parameter or a tile: element storage addressed by strides.
struct Buffer {
  std::string name;
  DType dtype = DType::kF32;
  bool is_tensor = false;
  llvm::Value* base = nullptr;        // pointer to StorageType(dtype)
  std::vector<llvm::Value*> strides;  // i64 element strides, one per dim
};

// What a name in scope denotes: a buffer, or a scalar value.
struct Binding {
  const Buffer* buffer = nullptr;
  TypedValue value;
};

class KernelEmitter {
 public:
  KernelEmitter(const Kernel& kernel, const EmitOptions& options,
                llvm::Module* module);
  absl::Status Emit();

 private:
  // kernel_emitter.cc
  absl::Status EmitPrologue(llvm::Function* fn);
  absl::Status EmitBlock(const Block& block);
  absl::Status EmitStmt(const Stmt& s);
  absl::Status EmitAlloc(const AllocStmt& a, const Loc& loc);
  absl::Status EmitFor(const ForStmt& f, const Loc& loc);
  absl::Status EmitIf(const IfStmt& s, const Loc& loc);
  absl::StatusOr<TypedValue> EmitExpr(const Expr& e);
  absl::StatusOr<TypedValue> EmitExprRec(const Expr& e, int depth);
  absl::StatusOr<TypedValue> EmitShortCircuit(const Expr& e, int depth);
  absl::StatusOr<TypedValue> EmitGuardedSelect(const Expr& e, int depth);
  const Binding* Lookup(const std::string& name) const;
  void Bind(const std::string& name, Binding b);
  absl::Status Error(const Loc& loc, const std::string& message) const;

  // memory_access.cc
  absl::StatusOr<const Buffer*> FindBuffer(const std::string& name,
                                           const Loc& loc) const;
  // The element offset of `indices` (one per dim) in `buffer`.
  absl::StatusOr<llvm::Value*> Offset(const Buffer& buffer,
                                      const std::vector<Expr>& indices,
                                      int depth, const Loc& loc);
  absl::StatusOr<TypedValue> EmitLoad(const Expr& e, int depth);
  absl::Status EmitStore(const StoreStmt& s, const Loc& loc);
  TypedValue LoadElement(const Buffer& buffer, llvm::Value* offset);
  // Stores `reg` (a register value of the buffer's dtype).
  void StoreElement(const Buffer& buffer, llvm::Value* offset,
                    llvm::Value* reg);
  // `buffer[offset] op= value` (`+=`, `max=` or `min=`), atomically (a
  // tensor parameter).
  absl::Status AtomicUpdate(const Buffer& buffer, llvm::Value* offset,
                            AssignOp op, TypedValue value, const Loc& loc);
  // The value `op=` (not `=`) makes of the element's current value and
  // `value`.
  absl::StatusOr<TypedValue> Combine(AssignOp op, TypedValue current,
                                     TypedValue value);
  // For i4/u4: the byte holding element `offset` and the nibble's shift.
  std::pair<llvm::Value*, llvm::Value*> NibbleAddress(const Buffer& buffer,
                                                      llvm::Value* offset);

  const Kernel& kernel_;
  const EmitOptions& options_;
  llvm::Module* module_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  NarrowFloats narrow_;
  ScalarEmitter scalar_;
  llvm::BasicBlock* entry_ = nullptr;  // allocas go here
  std::deque<Buffer> buffers_;
  std::vector<std::map<std::string, Binding>> scopes_;
  int64_t tile_bytes_ = 0;
};

}  // namespace kiln::compiler::cpu

#endif  // KILN_COMPILER_CODEGEN_CPU_KERNEL_EMITTER_INTERNAL_H_
