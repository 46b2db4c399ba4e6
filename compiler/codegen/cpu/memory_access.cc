// Element loads, stores and atomic adds on tiles and tensor parameters.
//
// 1. The element offset is sum(index_d * stride_d) in i64; i4/u4 elements
//    live in byte offset / 2, the low nibble holding the even element.
// 2. Plain `=` into a tensor is a plain store, except a nibble, which is
//    written with two atomic bit operations (and, then or) so that another
//    block writing the other nibble of the byte is not lost.
// 3. `+=`, `max=` and `min=` into a tensor are atomic: atomicrmw add / fadd /
//    max / min when the hardware has it for the element type and the
//    operation's type is the element's, else a compare-exchange loop on the
//    element's bits (16- and 8-bit floats, nibbles, mixed types, float
//    max/min, whose NaN rule atomicrmw does not have).
// 4. Other compound stores (`-= *= /=`, and all of them into tiles) read,
//    compute with the operator's types, convert to the element dtype and
//    write.
#include "compiler/codegen/cpu/kernel_emitter_internal.h"
#include "compiler/ir/assign_op.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::cpu {
namespace {

bool IsNibble(DType t) { return t == DType::kI4 || t == DType::kU4; }

}  // namespace

absl::StatusOr<const Buffer*> KernelEmitter::FindBuffer(const std::string& name,
                                                        const Loc& loc) const {
  const Binding* b = Lookup(name);
  if (b == nullptr || b->buffer == nullptr) {
    return Error(loc, StrCat("'", name, "' is not a tile or tensor in scope"));
  }
  return b->buffer;
}

absl::StatusOr<llvm::Value*> KernelEmitter::Offset(
    const Buffer& buffer, const std::vector<Expr>& indices, int depth,
    const Loc& loc) {
  if (indices.size() != buffer.strides.size()) {
    return Error(loc, StrCat("'", buffer.name, "' has ", buffer.strides.size(),
                             " dims; found ", indices.size(), " indices"));
  }
  llvm::Value* offset = nullptr;
  for (size_t d = 0; d < indices.size(); ++d) {
    KILN_CG_ASSIGN_OR_RETURN(TypedValue v, EmitExprRec(indices[d], depth + 1));
    absl::StatusOr<llvm::Value*> idx = scalar_.ToIndex(v);
    if (!idx.ok()) {
      return Error(indices[d].loc, StrCat("index ", d, " of '", buffer.name,
                                          "': ", idx.status().message()));
    }
    llvm::Value* term = *idx;
    auto* c = llvm::dyn_cast<llvm::ConstantInt>(buffer.strides[d]);
    if (c == nullptr || !c->isOne())
      term = b_.CreateMul(term, buffer.strides[d]);
    offset = offset == nullptr ? term : b_.CreateAdd(offset, term);
  }
  return offset != nullptr ? offset : b_.getInt64(0);
}

std::pair<llvm::Value*, llvm::Value*> KernelEmitter::NibbleAddress(
    const Buffer& buffer, llvm::Value* offset) {
  llvm::Value* byte = b_.CreateAShr(offset, 1);
  llvm::Value* ptr = b_.CreateInBoundsGEP(b_.getInt8Ty(), buffer.base, byte);
  llvm::Value* shift =
      b_.CreateShl(b_.CreateTrunc(b_.CreateAnd(offset, 1), b_.getInt8Ty()), 2);
  return {ptr, shift};
}

TypedValue KernelEmitter::LoadElement(const Buffer& buffer,
                                      llvm::Value* offset) {
  const Type t = Type::Of(buffer.dtype);
  if (IsNibble(buffer.dtype)) {
    auto [ptr, shift] = NibbleAddress(buffer, offset);
    llvm::Value* byte = b_.CreateLoad(b_.getInt8Ty(), ptr);
    return {t, b_.CreateTrunc(b_.CreateLShr(byte, shift), scalar_.RegType(t))};
  }
  llvm::Type* storage = scalar_.StorageType(buffer.dtype);
  llvm::Value* ptr = b_.CreateInBoundsGEP(storage, buffer.base, offset);
  llvm::Value* bits = b_.CreateLoad(storage, ptr);
  return {t, scalar_.FromStorage(bits, buffer.dtype)};
}

void KernelEmitter::StoreElement(const Buffer& buffer, llvm::Value* offset,
                                 llvm::Value* reg) {
  if (IsNibble(buffer.dtype)) {
    auto [ptr, shift] = NibbleAddress(buffer, offset);
    llvm::Value* nib = b_.CreateShl(b_.CreateZExt(reg, b_.getInt8Ty()), shift);
    llvm::Value* keep = b_.CreateNot(b_.CreateShl(b_.getInt8(0xF), shift));
    if (buffer.is_tensor) {
      b_.CreateAtomicRMW(llvm::AtomicRMWInst::And, ptr, keep, llvm::Align(1),
                         llvm::AtomicOrdering::Monotonic);
      b_.CreateAtomicRMW(llvm::AtomicRMWInst::Or, ptr, nib, llvm::Align(1),
                         llvm::AtomicOrdering::Monotonic);
    } else {
      llvm::Value* old = b_.CreateLoad(b_.getInt8Ty(), ptr);
      b_.CreateStore(b_.CreateOr(b_.CreateAnd(old, keep), nib), ptr);
    }
    return;
  }
  llvm::Type* storage = scalar_.StorageType(buffer.dtype);
  llvm::Value* ptr = b_.CreateInBoundsGEP(storage, buffer.base, offset);
  b_.CreateStore(scalar_.ToStorage(reg, buffer.dtype), ptr);
}

absl::StatusOr<TypedValue> KernelEmitter::EmitLoad(const Expr& e, int depth) {
  KILN_CG_ASSIGN_OR_RETURN(const Buffer* buffer, FindBuffer(e.name, e.loc));
  KILN_CG_ASSIGN_OR_RETURN(llvm::Value * offset,
                           Offset(*buffer, e.args, depth, e.loc));
  return LoadElement(*buffer, offset);
}

absl::Status KernelEmitter::EmitStore(const StoreStmt& s, const Loc& loc) {
  KILN_CG_ASSIGN_OR_RETURN(const Buffer* buffer, FindBuffer(s.name, loc));
  KILN_CG_ASSIGN_OR_RETURN(llvm::Value * offset,
                           Offset(*buffer, s.indices, 0, loc));
  KILN_CG_ASSIGN_OR_RETURN(TypedValue value, EmitExpr(s.value));
  const Type elem = Type::Of(buffer->dtype);
  if (HasAtomicForm(s.op) && buffer->is_tensor) {
    return AtomicUpdate(*buffer, offset, s.op, value, loc);
  }
  if (s.op != AssignOp::kSet) {
    absl::StatusOr<TypedValue> r =
        Combine(s.op, LoadElement(*buffer, offset), value);
    if (!r.ok()) return Error(loc, std::string(r.status().message()));
    value = *r;
  }
  absl::StatusOr<TypedValue> v = scalar_.Convert(value, elem);
  if (!v.ok()) return Error(loc, std::string(v.status().message()));
  StoreElement(*buffer, offset, v->value);
  return absl::OkStatus();
}

absl::StatusOr<TypedValue> KernelEmitter::Combine(AssignOp op,
                                                  TypedValue current,
                                                  TypedValue value) {
  if (std::optional<BinaryOp> b = CompoundBinaryOp(op)) {
    return scalar_.Binary(*b, current, value);
  }
  const TypedValue args[] = {current, value};
  return scalar_.Call(CompoundBuiltin(op), args);
}

absl::Status KernelEmitter::AtomicUpdate(const Buffer& buffer,
                                         llvm::Value* offset, AssignOp op,
                                         TypedValue value, const Loc& loc) {
  const DType d = buffer.dtype;
  const Type elem = Type::Of(d);
  const bool add = op == AssignOp::kAdd;
  std::string error;
  const Type op_type =
      add ? BinaryResultType(BinaryOp::kAdd, elem, value.type, &error)
          : UnifyNumbers(elem, value.type);
  if (op_type.IsError()) {
    if (error.empty()) error = "needs numbers";
    return Error(loc, StrCat("'", AssignOpSpelling(op), "' into '", buffer.name,
                             "': ", error));
  }
  llvm::Type* storage = scalar_.StorageType(d);
  // A wrapping add commutes with the conversion to the element type; max
  // and min do not, so they take the native form only in the element type.
  const bool native_int = IsInteger(d) && !IsNibble(d) &&
                          (add ? op_type.IsInteger() : op_type == elem);
  const bool native_float =
      add && (d == DType::kF32 || d == DType::kF64) && op_type == elem;
  if (native_int || native_float) {
    KILN_CG_ASSIGN_OR_RETURN(TypedValue v, scalar_.Convert(value, elem));
    llvm::Value* ptr = b_.CreateInBoundsGEP(storage, buffer.base, offset);
    const bool is_signed = IsSignedType(elem);
    llvm::AtomicRMWInst::BinOp rmw =
        native_float ? llvm::AtomicRMWInst::FAdd
        : add        ? llvm::AtomicRMWInst::Add
        : op == AssignOp::kMax
            ? (is_signed ? llvm::AtomicRMWInst::Max : llvm::AtomicRMWInst::UMax)
            : (is_signed ? llvm::AtomicRMWInst::Min
                         : llvm::AtomicRMWInst::UMin);
    b_.CreateAtomicRMW(rmw, ptr, v.value, llvm::Align(DTypeBits(d) / 8),
                       llvm::AtomicOrdering::Monotonic);
    return absl::OkStatus();
  }
  // Compare-exchange on the element's bits (the byte, for a nibble).
  llvm::Value* ptr;
  llvm::Value* shift = nullptr;
  llvm::IntegerType* word;
  if (IsNibble(d)) {
    std::tie(ptr, shift) = NibbleAddress(buffer, offset);
    word = b_.getInt8Ty();
  } else {
    word = b_.getIntNTy(storage->getPrimitiveSizeInBits());
    ptr = b_.CreateBitCast(b_.CreateInBoundsGEP(storage, buffer.base, offset),
                           word->getPointerTo());
  }
  const llvm::Align align(word->getBitWidth() / 8);
  llvm::LoadInst* init = b_.CreateAlignedLoad(word, ptr, align);
  init->setAtomic(llvm::AtomicOrdering::Monotonic);
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ctx_, "atomic.loop", fn);
  auto* done = llvm::BasicBlock::Create(ctx_, "atomic.done", fn);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  llvm::PHINode* old = b_.CreatePHI(word, 2);
  old->addIncoming(init, pre);
  llvm::Value* cur;
  if (IsNibble(d)) {
    cur = b_.CreateTrunc(b_.CreateLShr(old, shift), scalar_.RegType(elem));
  } else if (NarrowFloats::IsNarrow(d)) {
    cur = scalar_.FromStorage(old, d);
  } else {
    cur = b_.CreateBitCast(old, storage);
  }
  absl::StatusOr<TypedValue> combined = Combine(op, {elem, cur}, value);
  if (!combined.ok()) {
    return Error(loc, std::string(combined.status().message()));
  }
  KILN_CG_ASSIGN_OR_RETURN(TypedValue next, scalar_.Convert(*combined, elem));
  llvm::Value* bits;
  if (IsNibble(d)) {
    llvm::Value* keep = b_.CreateNot(b_.CreateShl(b_.getInt8(0xF), shift));
    bits = b_.CreateOr(b_.CreateAnd(old, keep),
                       b_.CreateShl(b_.CreateZExt(next.value, word), shift));
  } else if (NarrowFloats::IsNarrow(d)) {
    bits = scalar_.ToStorage(next.value, d);
  } else {
    bits = b_.CreateBitCast(next.value, word);
  }
  llvm::Value* pair = b_.CreateAtomicCmpXchg(ptr, old, bits, align,
                                             llvm::AtomicOrdering::Monotonic,
                                             llvm::AtomicOrdering::Monotonic);
  old->addIncoming(b_.CreateExtractValue(pair, 0), b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateExtractValue(pair, 1), done, loop);
  b_.SetInsertPoint(done);
  return absl::OkStatus();
}

}  // namespace kiln::compiler::cpu
