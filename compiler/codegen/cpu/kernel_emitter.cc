// 1. Prologue (entry block): bind block indices, load the dynamic symbols
//    and scalar parameters, compute each tensor's element strides.
// 2. Statements: `alloc` is a stack array allocated in the entry block;
//    `for` is a rotated counted loop (unroll: llvm.loop.unroll.full); `if` is
//    a diamond; `let` binds an SSA value; stores go to memory_access.cc.
// 3. Expressions are typed bottom-up with type_check.h's rules
//    (scalar_emitter.h). `&&`, `||` and `select` whose later operands read
//    memory are emitted with branches, so a guard keeps protecting the read
//    it guards.
#include "compiler/codegen/cpu/kernel_emitter.h"

#include "compiler/codegen/cpu/kernel_emitter_internal.h"
#include "compiler/codegen/metadata_writer.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"

namespace kiln::compiler::cpu {
namespace {

constexpr int kMaxExprDepth = 512;

bool ContainsLoad(const Expr& e) {
  if (e.kind == ExprKind::kLoad) return true;
  for (const Expr& a : e.args) {
    if (ContainsLoad(a)) return true;
  }
  return false;
}

}  // namespace

absl::Status EmitKernel(const Kernel& kernel, const EmitOptions& options,
                        llvm::Module* module) {
  return KernelEmitter(kernel, options, module).Emit();
}

KernelEmitter::KernelEmitter(const Kernel& kernel, const EmitOptions& options,
                             llvm::Module* module)
    : kernel_(kernel),
      options_(options),
      module_(module),
      ctx_(module->getContext()),
      b_(module->getContext()),
      narrow_(module, options.use_f16c),
      scalar_(&b_, module, &narrow_) {}

absl::Status KernelEmitter::Error(const Loc& loc,
                                  const std::string& message) const {
  if (loc.line > 0) {
    return absl::InvalidArgumentError(
        StrCat(loc.line, ":", loc.col, ": ", message));
  }
  return absl::InvalidArgumentError(message);
}

const Binding* KernelEmitter::Lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    if (auto f = it->find(name); f != it->end()) return &f->second;
  }
  return nullptr;
}

void KernelEmitter::Bind(const std::string& name, Binding b) {
  scopes_.back()[name] = b;
}

absl::Status KernelEmitter::Emit() {
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* args_type = b_.getInt8PtrTy()->getPointerTo();
  auto* fn_type = llvm::FunctionType::get(
      b_.getVoidTy(), {args_type, i64->getPointerTo(), i64, i64, i64}, false);
  llvm::Function* fn = llvm::Function::Create(
      fn_type, llvm::Function::ExternalLinkage, options_.entry, module_);
  fn->setDoesNotThrow();
  if (!options_.cpu.empty()) fn->addFnAttr("target-cpu", options_.cpu);
  if (!options_.features.empty()) {
    fn->addFnAttr("target-features", options_.features);
  }
  fn->addFnAttr("frame-pointer", "none");
  // Tiles make frames of many MiB: probe each page so that running out of
  // stack hits the guard page instead of jumping past it.
  fn->addFnAttr("probe-stack", "inline-asm");
  // Unwind tables let debuggers and profilers walk through kernel frames.
  fn->addFnAttr(llvm::Attribute::UWTable);
  fn->addFnAttr("no-trapping-math", "true");
  for (unsigned i = 0; i < 2; ++i) {
    fn->addParamAttr(i, llvm::Attribute::NoCapture);
    fn->addParamAttr(i, llvm::Attribute::ReadOnly);
  }
  const char* arg_names[] = {"args", "symbols", "bx", "by", "bz"};
  for (unsigned i = 0; i < 5; ++i) fn->getArg(i)->setName(arg_names[i]);

  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn);
  b_.SetInsertPoint(entry_);
  scopes_.emplace_back();
  KILN_CG_RETURN_IF_ERROR(EmitPrologue(fn));
  KILN_CG_RETURN_IF_ERROR(EmitBlock(kernel_.body));
  b_.CreateRetVoid();
  if (tile_bytes_ > options_.max_tile_bytes) {
    return Error(kernel_.loc,
                 StrCat("kernel '", kernel_.name, "' allocates ", tile_bytes_,
                        " bytes of tiles per block; the CPU target allows ",
                        options_.max_tile_bytes));
  }
  return absl::OkStatus();
}

absl::Status KernelEmitter::EmitPrologue(llvm::Function* fn) {
  if (kernel_.block_vars.size() > 3) {
    return Error(kernel_.loc, "more than 3 block indices");
  }
  for (size_t i = 0; i < kernel_.block_vars.size(); ++i) {
    Bind(kernel_.block_vars[i], {nullptr, {Type::Int(), fn->getArg(2 + i)}});
  }
  llvm::Value* symbols = fn->getArg(1);
  std::vector<std::string> dynamic = DynamicSymbols(kernel_);
  for (size_t j = 0; j < dynamic.size(); ++j) {
    llvm::Value* addr = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), symbols,
                                                      j, dynamic[j] + ".addr");
    Bind(dynamic[j],
         {nullptr,
          {Type::Int(), b_.CreateLoad(b_.getInt64Ty(), addr, dynamic[j])}});
  }
  llvm::Value* args = fn->getArg(0);
  // Scalars first: strides may use integer scalar parameters.
  std::vector<std::pair<const Param*, llvm::Value*>> tensors;
  for (size_t i = 0; i < kernel_.params.size(); ++i) {
    const Param& p = kernel_.params[i];
    llvm::Value* slot =
        b_.CreateConstInBoundsGEP1_64(b_.getInt8PtrTy(), args, i);
    llvm::Value* raw = b_.CreateLoad(b_.getInt8PtrTy(), slot, p.name + ".ptr");
    llvm::Type* storage = scalar_.StorageType(p.dtype);
    llvm::Value* typed = b_.CreateBitCast(raw, storage->getPointerTo());
    if (p.is_tensor) {
      tensors.emplace_back(&p, typed);
      continue;
    }
    llvm::Value* bits = b_.CreateLoad(storage, typed, p.name + ".bits");
    llvm::Value* reg =
        (p.dtype == DType::kI4 || p.dtype == DType::kU4)
            ? b_.CreateTrunc(bits, scalar_.RegType(Type::Of(p.dtype)))
            : scalar_.FromStorage(bits, p.dtype);
    Bind(p.name, {nullptr, {Type::Of(p.dtype), reg}});
  }
  for (auto [p, base] : tensors) {
    Buffer buf{p->name, p->dtype, true, base, {}};
    const size_t rank = p->shape.size();
    if (!p->strides.empty()) {
      if (p->strides.size() != rank) {
        return Error(
            p->loc, StrCat("parameter '", p->name, "' has ", rank, " dims but ",
                           p->strides.size(), " strides"));
      }
      for (const Expr& s : p->strides) {
        KILN_CG_ASSIGN_OR_RETURN(TypedValue v, EmitExpr(s));
        KILN_CG_ASSIGN_OR_RETURN(llvm::Value * idx, scalar_.ToIndex(v));
        buf.strides.push_back(idx);
      }
    } else {
      buf.strides.assign(rank, nullptr);
      llvm::Value* stride = b_.getInt64(1);
      for (size_t d = rank; d-- > 0;) {
        buf.strides[d] = stride;
        if (d == 0) break;
        KILN_CG_ASSIGN_OR_RETURN(TypedValue dim, EmitExpr(p->shape[d]));
        KILN_CG_ASSIGN_OR_RETURN(llvm::Value * n, scalar_.ToIndex(dim));
        stride = b_.CreateMul(stride, n);
      }
    }
    buffers_.push_back(std::move(buf));
    Bind(p->name, {&buffers_.back(), {}});
  }
  return absl::OkStatus();
}

absl::Status KernelEmitter::EmitBlock(const Block& block) {
  scopes_.emplace_back();
  for (const Stmt& s : block) {
    absl::Status st = EmitStmt(s);
    if (!st.ok()) {
      scopes_.pop_back();
      return st;
    }
  }
  scopes_.pop_back();
  return absl::OkStatus();
}

absl::Status KernelEmitter::EmitStmt(const Stmt& s) {
  if (const auto* a = std::get_if<AllocStmt>(&s.node)) {
    return EmitAlloc(*a, s.loc);
  }
  if (const auto* f = std::get_if<ForStmt>(&s.node)) return EmitFor(*f, s.loc);
  if (const auto* i = std::get_if<IfStmt>(&s.node)) return EmitIf(*i, s.loc);
  if (const auto* l = std::get_if<LetStmt>(&s.node)) {
    KILN_CG_ASSIGN_OR_RETURN(TypedValue v, EmitExpr(l->value));
    if (auto* inst = llvm::dyn_cast<llvm::Instruction>(v.value);
        inst != nullptr && !inst->hasName()) {
      inst->setName(l->name);
    }
    Bind(l->name, {nullptr, v});
    return absl::OkStatus();
  }
  if (const auto* st = std::get_if<StoreStmt>(&s.node)) {
    return EmitStore(*st, s.loc);
  }
  return Error(s.loc,
               "statement not in the lowered form (tile ops, parallel and "
               "rasterize must be lowered before CPU code generation)");
}

absl::Status KernelEmitter::EmitAlloc(const AllocStmt& a, const Loc& loc) {
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (const Expr& d : a.shape) {
    std::optional<int64_t> v = FoldInt(d);
    if (!v || *v <= 0) {
      return Error(loc, StrCat("tile '", a.name,
                               "' has a dim that is not a positive integer "
                               "constant in the lowered form"));
    }
    dims.push_back(*v);
    if (__builtin_mul_overflow(count, *v, &count) ||
        count > (int64_t{1} << 40)) {
      return Error(loc, StrCat("tile '", a.name, "' is too large"));
    }
  }
  const bool packed = a.dtype == DType::kI4 || a.dtype == DType::kU4;
  const int64_t storage_count = packed ? (count + 1) / 2 : count;
  llvm::Type* storage = scalar_.StorageType(a.dtype);
  tile_bytes_ += storage_count * std::max(1, DTypeBits(a.dtype) / 8);
  llvm::IRBuilder<> ab(entry_, entry_->begin());
  auto* array = llvm::ArrayType::get(storage, storage_count);
  llvm::AllocaInst* alloca = ab.CreateAlloca(array, nullptr, a.name);
  alloca->setAlignment(llvm::Align(64));
  Buffer buf{a.name,
             a.dtype,
             false,
             ab.CreateConstInBoundsGEP2_64(array, alloca, 0, 0),
             {}};
  int64_t stride = 1;
  buf.strides.assign(dims.size(), nullptr);
  for (size_t d = dims.size(); d-- > 0;) {
    buf.strides[d] = b_.getInt64(stride);
    stride *= dims[d];
  }
  buffers_.push_back(std::move(buf));
  Bind(a.name, {&buffers_.back(), {}});
  return absl::OkStatus();
}

absl::Status KernelEmitter::EmitFor(const ForStmt& f, const Loc& loc) {
  llvm::Value* start = b_.getInt64(0);
  if (f.start) {
    KILN_CG_ASSIGN_OR_RETURN(TypedValue v, EmitExpr(*f.start));
    KILN_CG_ASSIGN_OR_RETURN(start, scalar_.ToIndex(v));
  }
  KILN_CG_ASSIGN_OR_RETURN(TypedValue stop_v, EmitExpr(f.stop));
  KILN_CG_ASSIGN_OR_RETURN(llvm::Value * stop, scalar_.ToIndex(stop_v));
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* body = llvm::BasicBlock::Create(ctx_, f.var + ".body", fn);
  auto* exit = llvm::BasicBlock::Create(ctx_, f.var + ".end", fn);
  b_.CreateCondBr(b_.CreateICmpSLT(start, stop), body, exit);
  b_.SetInsertPoint(body);
  llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, f.var);
  iv->addIncoming(start, pre);
  scopes_.emplace_back();
  Bind(f.var, {nullptr, {Type::Int(), iv}});
  absl::Status st = EmitBlock(f.body);
  scopes_.pop_back();
  if (!st.ok()) return st;
  // iv < stop <= INT64_MAX, so iv + 1 cannot overflow.
  llvm::Value* next = b_.CreateAdd(iv, b_.getInt64(1), f.var + ".next",
                                   /*HasNUW=*/false, /*HasNSW=*/true);
  llvm::BranchInst* latch =
      b_.CreateCondBr(b_.CreateICmpSLT(next, stop), body, exit);
  iv->addIncoming(next, b_.GetInsertBlock());
  if (f.loop == LoopKind::kUnroll) {
    llvm::MDNode* full = llvm::MDNode::get(
        ctx_, llvm::MDString::get(ctx_, "llvm.loop.unroll.full"));
    auto* self = llvm::MDNode::getDistinct(ctx_, {nullptr, full});
    self->replaceOperandWith(0, self);
    latch->setMetadata(llvm::LLVMContext::MD_loop, self);
  }
  b_.SetInsertPoint(exit);
  return absl::OkStatus();
}

absl::Status KernelEmitter::EmitIf(const IfStmt& s, const Loc& loc) {
  KILN_CG_ASSIGN_OR_RETURN(TypedValue c, EmitExpr(s.cond));
  if (!c.type.IsBool()) {
    return Error(loc, StrCat("an 'if' condition must be bool; found ",
                             c.type.ToString()));
  }
  if (auto* k = llvm::dyn_cast<llvm::ConstantInt>(c.value)) {
    if (!k->isZero()) return EmitBlock(s.then_body);
    return s.has_else ? EmitBlock(s.else_body) : absl::OkStatus();
  }
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn);
  auto* merge = llvm::BasicBlock::Create(ctx_, "endif", fn);
  llvm::BasicBlock* else_bb =
      s.has_else ? llvm::BasicBlock::Create(ctx_, "else", fn) : merge;
  b_.CreateCondBr(c.value, then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  KILN_CG_RETURN_IF_ERROR(EmitBlock(s.then_body));
  b_.CreateBr(merge);
  if (s.has_else) {
    b_.SetInsertPoint(else_bb);
    KILN_CG_RETURN_IF_ERROR(EmitBlock(s.else_body));
    b_.CreateBr(merge);
  }
  b_.SetInsertPoint(merge);
  return absl::OkStatus();
}

absl::StatusOr<TypedValue> KernelEmitter::EmitExpr(const Expr& e) {
  return EmitExprRec(e, 0);
}

absl::StatusOr<TypedValue> KernelEmitter::EmitExprRec(const Expr& e,
                                                      int depth) {
  if (depth > kMaxExprDepth) return Error(e.loc, "expression nests too deep");
  switch (e.kind) {
    case ExprKind::kInt:
      return scalar_.Int(e.int_value);
    case ExprKind::kFloat:
      return scalar_.Float(e.float_value);
    case ExprKind::kBool:
      return scalar_.Bool(e.bool_value);
    case ExprKind::kVar: {
      const Binding* bnd = Lookup(e.name);
      if (bnd == nullptr)
        return Error(e.loc, StrCat("unknown name '", e.name, "'"));
      if (bnd->buffer != nullptr) {
        return Error(e.loc, StrCat("'", e.name, "' is a buffer, not a scalar"));
      }
      return bnd->value;
    }
    case ExprKind::kLoad:
      return EmitLoad(e, depth);
    case ExprKind::kCast: {
      if (e.args.size() != 1) return Error(e.loc, "malformed cast");
      KILN_CG_ASSIGN_OR_RETURN(TypedValue a, EmitExprRec(e.args[0], depth + 1));
      return scalar_.Convert(a, Type::Of(e.dtype));
    }
    case ExprKind::kUnary: {
      if (e.args.size() != 1) return Error(e.loc, "malformed unary operator");
      KILN_CG_ASSIGN_OR_RETURN(TypedValue a, EmitExprRec(e.args[0], depth + 1));
      return scalar_.Unary(e.unary_op, a);
    }
    case ExprKind::kBinary: {
      if (e.args.size() != 2) return Error(e.loc, "malformed binary operator");
      if ((e.binary_op == BinaryOp::kAnd || e.binary_op == BinaryOp::kOr) &&
          ContainsLoad(e.args[1])) {
        return EmitShortCircuit(e, depth);
      }
      KILN_CG_ASSIGN_OR_RETURN(TypedValue a, EmitExprRec(e.args[0], depth + 1));
      KILN_CG_ASSIGN_OR_RETURN(TypedValue b, EmitExprRec(e.args[1], depth + 1));
      absl::StatusOr<TypedValue> r = scalar_.Binary(e.binary_op, a, b);
      if (!r.ok()) return Error(e.loc, std::string(r.status().message()));
      return r;
    }
    case ExprKind::kCall: {
      if ((e.name == "select" || e.name == "if_then_else") &&
          e.args.size() == 3 &&
          (ContainsLoad(e.args[1]) || ContainsLoad(e.args[2]))) {
        return EmitGuardedSelect(e, depth);
      }
      std::vector<TypedValue> args;
      for (const Expr& a : e.args) {
        KILN_CG_ASSIGN_OR_RETURN(TypedValue v, EmitExprRec(a, depth + 1));
        args.push_back(v);
      }
      absl::StatusOr<TypedValue> r = scalar_.Call(e.name, args);
      if (!r.ok()) return Error(e.loc, std::string(r.status().message()));
      return r;
    }
  }
  return Error(e.loc, "unknown expression");
}

absl::StatusOr<TypedValue> KernelEmitter::EmitShortCircuit(const Expr& e,
                                                           int depth) {
  const bool is_and = e.binary_op == BinaryOp::kAnd;
  KILN_CG_ASSIGN_OR_RETURN(TypedValue a, EmitExprRec(e.args[0], depth + 1));
  if (!a.type.IsBool()) return Error(e.loc, "'&&'/'||' take bool operands");
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* lhs_end = b_.GetInsertBlock();
  auto* rhs_bb = llvm::BasicBlock::Create(ctx_, "sc.rhs", fn);
  auto* merge = llvm::BasicBlock::Create(ctx_, "sc.end", fn);
  if (is_and) {
    b_.CreateCondBr(a.value, rhs_bb, merge);
  } else {
    b_.CreateCondBr(a.value, merge, rhs_bb);
  }
  b_.SetInsertPoint(rhs_bb);
  KILN_CG_ASSIGN_OR_RETURN(TypedValue r, EmitExprRec(e.args[1], depth + 1));
  if (!r.type.IsBool()) return Error(e.loc, "'&&'/'||' take bool operands");
  llvm::BasicBlock* rhs_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
  llvm::PHINode* phi = b_.CreatePHI(b_.getInt1Ty(), 2);
  phi->addIncoming(b_.getInt1(!is_and), lhs_end);
  phi->addIncoming(r.value, rhs_end);
  return TypedValue{Type::Of(DType::kBool), phi};
}

absl::StatusOr<TypedValue> KernelEmitter::EmitGuardedSelect(const Expr& e,
                                                            int depth) {
  KILN_CG_ASSIGN_OR_RETURN(TypedValue c, EmitExprRec(e.args[0], depth + 1));
  if (!c.type.IsBool()) return Error(e.loc, "select condition must be bool");
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* arms[2] = {llvm::BasicBlock::Create(ctx_, "sel.a", fn),
                               llvm::BasicBlock::Create(ctx_, "sel.b", fn)};
  auto* merge = llvm::BasicBlock::Create(ctx_, "sel.end", fn);
  b_.CreateCondBr(c.value, arms[0], arms[1]);
  TypedValue v[2];
  llvm::BranchInst* ends[2];
  for (int i = 0; i < 2; ++i) {
    b_.SetInsertPoint(arms[i]);
    KILN_CG_ASSIGN_OR_RETURN(v[i], EmitExprRec(e.args[1 + i], depth + 1));
    ends[i] = b_.CreateBr(merge);
  }
  // The result type is known only now: convert at the end of each arm.
  const Type types[3] = {c.type, v[0].type, v[1].type};
  std::string error;
  Type t = CallResultType("select", types, &error);
  if (t.IsError()) return Error(e.loc, error);
  llvm::Value* converted[2];
  for (int i = 0; i < 2; ++i) {
    b_.SetInsertPoint(ends[i]);
    KILN_CG_ASSIGN_OR_RETURN(TypedValue cv, scalar_.Convert(v[i], t));
    converted[i] = cv.value;
  }
  b_.SetInsertPoint(merge);
  llvm::PHINode* phi = b_.CreatePHI(scalar_.RegType(t), 2);
  phi->addIncoming(converted[0], ends[0]->getParent());
  phi->addIncoming(converted[1], ends[1]->getParent());
  return TypedValue{t, phi};
}

}  // namespace kiln::compiler::cpu
