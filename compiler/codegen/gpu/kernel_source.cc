#include "compiler/codegen/gpu/kernel_source.h"

#include <algorithm>

#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/metadata_writer.h"
#include "compiler/ir/assign_op.h"
#include "compiler/ir/printer.h"

namespace kiln::compiler::gpu {
namespace internal {

absl::StatusOr<std::string> Emitter::Offset(const Buf& b,
                                            const std::vector<Expr>& idx) {
  if (idx.size() != b.shape.size()) {
    return absl::InternalError("rank mismatch in an element access of " +
                               b.code);
  }
  std::vector<std::string> ix;
  for (const Expr& e : idx) {
    auto c = Index(e);
    if (!c.ok()) return c.status();
    ix.push_back(*c);
  }
  if (b.row) {
    const bool var = idx.size() == 1 && idx[0].kind == ExprKind::kVar;
    if (var && !row_q_.empty() && idx[0].name == row_var_) return row_q_;
    if (var && !reg_q_.empty() && idx[0].name == reg_vars_[0]) {
      return reg_layout_ + "::row_reg(" + reg_q_ + ")";
    }
    if (var && b.row->owned() && !own_q_.empty() && !own_vars_.empty() &&
        idx[0].name == own_vars_[0]) {
      // Inside a parallel over the owned fragment of these rows.
      return b.layout + "::slot(" + own_q_ + ")";
    }
    return absl::InternalError("row fragment " + b.code +
                               " accessed outside its own rows");
  }
  if (b.own) {
    // Indexed by the loop's variables, or by its trailing ones (a tile of
    // lower rank under leading extents of 1: owned_fragments.cc).
    bool ok = !own_q_.empty() && idx.size() <= own_vars_.size();
    const size_t off = own_vars_.size() - idx.size();
    for (size_t d = 0; ok && d < idx.size(); ++d) {
      ok = idx[d].kind == ExprKind::kVar && idx[d].name == own_vars_[off + d];
    }
    if (!ok) {
      return absl::InternalError("thread-owned fragment " + b.code +
                                 " accessed outside its own elements");
    }
    return own_q_;
  }
  if (b.reg) {
    bool ok = !reg_q_.empty() && idx.size() == 2;
    for (size_t d = 0; ok && d < 2; ++d) {
      ok = idx[d].kind == ExprKind::kVar && idx[d].name == reg_vars_[d];
    }
    if (!ok) {
      return absl::InternalError("register fragment " + b.code +
                                 " accessed outside its own elements");
    }
    return reg_q_;
  }
  if (b.tensor) {
    std::string s;
    for (size_t d = 0; d < ix.size(); ++d) {
      if (d) s += " + ";
      s += "(" + ix[d] + ") * " + b.strides[d];
    }
    return "(" + s + ")";
  }
  if (!b.layout.empty()) {
    return b.layout + "::offset((int)(" + ix[0] + "), (int)(" + ix[1] + "))";
  }
  // Row-major tile (rank 1 or > 2), last-dim padding included.
  std::string s = ix[0];
  for (size_t d = 1; d < ix.size(); ++d) {
    int64_t dim = b.dims[d] + (d + 1 == ix.size() ? b.pad : 0);
    s = "(" + s + ") * " + std::to_string(dim) + "LL + (" + ix[d] + ")";
  }
  return "(" + s + ")";
}

absl::StatusOr<CExpr> Emitter::LoadValue(const std::string& name,
                                         const std::vector<Expr>& idx) {
  const Buf* b = FindBuf(name);
  if (!b) return absl::InvalidArgumentError("unknown buffer '" + name + "'");
  auto off = Offset(*b, idx);
  if (!off.ok()) return off.status();
  const Type t = Type::Of(b->dtype);
  const std::string p = b->code;
  if (b->reg || b->row) return CExpr{p + "[" + *off + "]", t};
  switch (b->dtype) {
    case DType::kBool:
      return CExpr{"(" + p + "[" + *off + "] != 0)", t};
    case DType::kI4:
      return CExpr{"kiln::load_i4(" + p + ", " + *off + ")", t};
    case DType::kU4:
      return CExpr{"kiln::load_u4(" + p + ", " + *off + ")", t};
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return CExpr{"kiln::from_bits<" + NarrowTag(b->dtype) + ">(" + p + "[" +
                       *off + "])",
                   t};
    default:
      return CExpr{p + "[" + *off + "]", t};
  }
}

absl::StatusOr<std::string> Emitter::StoreCode(const std::string& name,
                                               const std::vector<Expr>& idx,
                                               AssignOp op,
                                               const Expr& value_expr,
                                               bool shared_atomic) {
  const Buf* b = FindBuf(name);
  if (!b) return absl::InvalidArgumentError("unknown buffer '" + name + "'");
  auto off = Offset(*b, idx);
  if (!off.ok()) return off.status();
  const Type t = Type::Of(b->dtype);
  auto v = Value(value_expr);
  if (!v.ok()) return v.status();
  CExpr val = *v;
  if (HasAtomicForm(op) &&
      (b->tensor || (shared_atomic && !b->reg && !b->row))) {
    // `+=`, `max=` and `min=` into a tensor are atomic (tile-ir.md §8), and
    // into a shared tile where guard-accesses found that iterations of a
    // `parallel` may update one element (a shared-memory atomic). The
    // value is converted to the element type first: that commutes with a
    // wrapping add, and with max and min, since rounding is monotonic (an
    // integer element's max/min take a value of the element's type).
    const std::string fn = op == AssignOp::kAdd   ? "add"
                           : op == AssignOp::kMax ? "max"
                                                  : "min";
    CExpr x = Convert(val, t);
    std::string addr = "&" + b->code + "[" + *off + "]";
    switch (b->dtype) {
      case DType::kF16:
      case DType::kBF16:
      case DType::kF8E4M3:
      case DType::kF8E5M2:
        return "kiln::atomic_" + fn + "_narrow<" + NarrowTag(b->dtype) + ">(" +
               addr + ", " + x.code + ");";
      case DType::kI8:
      case DType::kU8:
      case DType::kI16:
        return "kiln::atomic_" + fn + "_small_int(" + addr + ", (" +
               RegType(t) + ")" + x.code + ");";
      case DType::kF32:
      case DType::kF64:
      case DType::kI32:
      case DType::kU32:
      case DType::kI64:
        return "kiln::atomic_" + fn + "(" + addr + ", " + x.code + ");";
      default:
        return absl::UnimplementedError(StrCat("atomic ", fn, " into a ",
                                               DTypeName(b->dtype),
                                               " tensor on ", dialect_.vendor));
    }
  }
  if (op != AssignOp::kSet) {
    auto cur = LoadValue(name, idx);
    if (!cur.ok()) return cur.status();
    // Reuse the expression emitter's operator semantics on the two values.
    // (The value stays an expression: a division looks at its divisor.)
    std::string tmp = StrCat("kiln_cur", uid_++);
    vars_[tmp] = {cur->code, cur->type};
    auto r = Value(CompoundValue(op, Expr::Var(tmp), value_expr));
    if (!r.ok()) return r.status();
    val = *r;
  }
  CExpr x = Convert(val, t);
  const std::string p = b->code;
  switch (b->dtype) {
    case DType::kBool:
      if (b->reg) break;
      return p + "[" + *off + "] = (" + x.code + ") ? 1 : 0;";
    case DType::kI4:
    case DType::kU4:
      return "kiln::store_nibble(" + p + ", " + *off + ", (unsigned)(" +
             x.code + "));";
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      if (b->reg) break;
      return p + "[" + *off + "] = kiln::to_bits<" + NarrowTag(b->dtype) +
             ">((float)" + x.code + ");";
    default:
      break;
  }
  return p + "[" + *off + "] = " + x.code + ";";
}

absl::StatusOr<Access> Emitter::MakeAccess(const Region& r) {
  const Buf* b = FindBuf(r.name);
  if (!b) {
    return LocatedError(r.loc, StrCat("unknown buffer '", r.name, "'"));
  }
  Access a;
  static_cast<RegionSlices&>(a) = RegionSlices(r, b->shape, /*fold=*/true);
  a.buf = b;
  a.name = r.name;
  return a;
}

// ------------------------------------------------------------ element loops

absl::Status Emitter::ForElements(
    const std::vector<Expr>& extents, const RegisterFragment* reg,
    const std::string& reg_layout,
    const std::function<absl::Status(const std::vector<Expr>&)>& body,
    const Buf* row, bool lane0_only) {
  std::vector<int64_t> ext;
  for (const Expr& e : extents) {
    auto c = FoldInt(e);
    if (!c) {
      return absl::InvalidArgumentError("tile extent '" + Print(e) +
                                        "' is not a constant");
    }
    ext.push_back(*c);
  }
  const int id = uid_++;
  std::vector<Expr> ivs;
  std::vector<std::string> names;
  for (size_t d = 0; d < ext.size(); ++d) {
    names.push_back(StrCat("kiln_i", id, "_", d));
    ivs.push_back(Expr::Var(names.back()));
    vars_[names.back()] = {names.back(), Type::Int()};
  }
  if (row) {
    // A row vector's own rows (the lanes of a row group alike).
    const std::string q = StrCat("kiln_q", id);
    Line("#pragma unroll");
    Open(StrCat("for (int ", q, " = 0; ", q, " < ", row->row->regs(), "; ++", q,
                ")"));
    Line(StrCat("const long long ", names[0], " = ", row->layout, "::row(", q,
                ");"));
    std::string saved_q = row_q_, saved_var = row_var_;
    row_q_ = q;
    row_var_ = names[0];
    // Rows of owned fragments: every lane runs the body (its registers must
    // all change), one lane per row makes its tensor stores.
    const bool lead_stores = lane0_only && row->row->owned();
    if (lead_stores) {
      store_lead_ = StrCat(row->layout, "::lead(", q, ")");
    } else if (lane0_only) {
      // (Rows of a column-split accumulator: the first slice's copy.)
      Open(StrCat(
          "if ((threadIdx.x & ", dialect_.acc.row_group_lanes - 1, ") == 0",
          row->row->warps_n > 1 ? StrCat(" && ", row->layout, "::first_slice()")
                                : "",
          ")"));
    }
    absl::Status st = body(ivs);
    if (lead_stores) {
      store_lead_.clear();
    } else if (lane0_only) {
      Close();
    }
    row_q_ = saved_q;
    row_var_ = saved_var;
    Close();
    return st;
  }
  if (reg) {
    const std::string q = StrCat("kiln_q", id);
    Line("#pragma unroll");
    Open(StrCat("for (int ", q, " = 0; ", q, " < ", reg->regs(), "; ++", q,
                ")"));
    Line(StrCat("const long long ", names[0], " = ", reg_layout, "::row(", q,
                ");"));
    Line(StrCat("const long long ", names[1], " = ", reg_layout, "::col(", q,
                ");"));
    std::string saved_q = reg_q_, saved_layout = reg_layout_;
    std::vector<std::string> saved_vars = reg_vars_;
    reg_q_ = q;
    reg_vars_ = names;
    reg_layout_ = reg_layout;
    absl::Status st = body(ivs);
    reg_q_ = saved_q;
    reg_vars_ = saved_vars;
    reg_layout_ = saved_layout;
    Close();
    return st;
  }
  int64_t total = 1;
  for (int64_t e : ext) total *= e;
  const std::string e = StrCat("kiln_e", id);
  Open(StrCat("for (int ", e, " = threadIdx.x; ", e, " < ", total, "; ", e,
              " += ", threads_, ")"));
  int64_t inner = total;
  for (size_t d = 0; d < ext.size(); ++d) {
    inner /= ext[d];
    std::string v = inner == 1 ? e : StrCat(e, " / ", inner);
    if (d > 0) v = StrCat("(", v, ") % ", ext[d]);
    Line(StrCat("const long long ", names[d], " = ", v, ";"));
  }
  absl::Status st = body(ivs);
  Close();
  return st;
}

absl::Status Emitter::AtOwned(
    const Buf& own, const std::string& q, const std::string& col_add,
    const std::function<absl::Status(const std::vector<Expr>&)>& body) {
  const int id = uid_++;
  std::vector<Expr> ivs;
  std::vector<std::string> names;
  const int rank = own.own->rank;
  for (int d = 0; d < rank; ++d) {
    names.push_back(StrCat("kiln_i", id, "_", d));
    ivs.push_back(Expr::Var(names.back()));
    vars_[names.back()] = {names.back(), Type::Int()};
    const bool col = d + 1 == rank;
    Line(StrCat("const long long ", names.back(), " = ", own.layout,
                col ? "::col(" : "::row(", q, ")",
                col && !col_add.empty() ? " + " + col_add : "", ";"));
  }
  const std::string saved_q = own_q_;
  const std::vector<std::string> saved_vars = own_vars_;
  own_q_ = col_add.empty() ? q : StrCat("(", q, ") + ", col_add);
  own_vars_ = names;
  absl::Status st = body(ivs);
  own_q_ = saved_q;
  own_vars_ = saved_vars;
  return st;
}

absl::Status Emitter::ForOwned(
    const Buf& own,
    const std::function<absl::Status(const std::vector<Expr>&)>& body) {
  const std::string q = StrCat("kiln_q", uid_++);
  Line("#pragma unroll");
  Open(StrCat("for (int ", q, " = 0; ", q, " < ", own.own->regs(), "; ++", q,
              ")"));
  absl::Status st = AtOwned(own, q, "", body);
  Close();
  return st;
}

absl::Status Emitter::ElementBody(const Block& b) { return EmitBlock(b, true); }

// ------------------------------------------------------------ statements

absl::Status Emitter::EmitBlock(const Block& b, bool element) {
  // A cluster pair's second block may walk past the grid's x extent (an
  // odd extent): it runs the main loop with its partner (out-of-range
  // loads read zeros) but not what follows it.
  const bool guard_tail = &b == &k_.body && kp_.launch.cluster_x > 1;
  bool guarded = false;
  known_lets_.emplace_back();
  struct PopLets {
    std::vector<std::map<std::string, std::optional<Expr>>>* lets;
    ~PopLets() { lets->pop_back(); }
  } pop_lets{&known_lets_};
  if (!element) ++wg_lazy_;
  struct EndLazy {
    Emitter* e;
    bool on;
    ~EndLazy() {
      if (on) --e->wg_lazy_;
    }
  } end_lazy{this, !element};
  for (size_t i = 0; i < b.size(); ++i) {
    if (guard_tail && !guarded && i > 0 &&
        std::get_if<ForStmt>(&b[i - 1].node) == kp_.ws.loop) {
      Flush();
      Open(StrCat("if (", Mangle(k_.block_vars[0]), " < kiln_grid0)"));
      guarded = true;
    }
    if (!element && kp_.epilogue.staged_stores.count(&b[i]) &&
        i + 1 < b.size()) {
      WgFlush();
      KILN_GPU_RETURN_IF_ERROR(EmitStagedStore(b[i], b[i + 1]));
      ++i;
      continue;
    }
    if (!element && kp_.ws.preloads.count(&b[i])) {
      WgFlush();
      KILN_GPU_RETURN_IF_ERROR(EmitWsPreCopy(b[i]));
      continue;
    }
    if (!element && i + 1 < b.size()) {
      // A parallel and the reduction fused with it (plan.fused_reductions):
      // emitted together, as the reduction.
      auto fused = kp_.fused_reductions.find(&b[i + 1]);
      if (fused != kp_.fused_reductions.end() && fused->second == &b[i]) {
        WgWaitFor(b[i]);
        WgWaitFor(b[i + 1]);
        KILN_GPU_RETURN_IF_ERROR(EmitFusedReduction(b[i], b[i + 1]));
        ++i;
        continue;
      }
    }
    KILN_GPU_RETURN_IF_ERROR(EmitStmt(b[i], element));
  }
  if (!element) WgFlush();
  if (guarded) {
    Flush();
    Close();
  }
  return absl::OkStatus();
}

absl::Status Emitter::EmitFusedReduction(const Stmt& parallel,
                                         const Stmt& reduce) {
  Line(StrCat("// tile ", At(reduce.loc), " with ", At(parallel.loc)));
  std::set<std::string> r, w;
  Accesses(parallel, &r, &w);
  Accesses(reduce, &r, &w);
  Sync(r, w);
  // The parallel's element comparisons hoisted as EmitParallel hoists them:
  // the reduction is emitted once per version of the body (each test is
  // the same for the whole block), the masks gone where they all pass.
  ParallelStmt p = std::get<ParallelStmt>(parallel.node);
  // In a split loop's first part, the body's conditions the in-bounds facts
  // decide fold away first (as EmitParallel folds them).
  const bool fold = full_ != nullptr;
  if (fold) {
    facts_->Push();
    for (size_t d = 0; d < p.vars.size() && d < p.extents.size(); ++d) {
      facts_->AddRange(p.vars[d], Expr::Int(0), p.extents[d]);
    }
    fold_ints_.insert(p.vars.begin(), p.vars.end());
    p.body = FoldDecided(p.body);
    for (const std::string& v : p.vars) fold_ints_.erase(v);
  }
  struct PopFacts {
    Emitter* e;
    bool on;
    ~PopFacts() {
      if (on) e->facts_->Pop();
    }
  } pop_facts{this, fold};
  if (p.body.empty()) {
    absl::Status st = EmitReduce(std::get<ReduceStmt>(reduce.node), reduce.loc);
    Touch(r, w);
    return st;
  }
  std::vector<Expr> ext;
  for (const Expr& e : p.extents) ext.push_back(FoldConstants(e));
  Open("");
  auto hoisted = HoistElementComparisons(p, ext);
  if (!hoisted.ok()) return hoisted.status();
  std::vector<std::pair<std::string, const Block*>> versions;
  if (!hoisted->all_true.empty()) {
    versions.push_back({hoisted->all_true, &hoisted->all_true_body});
  }
  if (!hoisted->uniform.empty()) {
    versions.push_back({hoisted->uniform, &hoisted->uniform_body});
  }
  versions.push_back({"", &hoisted->body});
  fused_producer_ = &p;
  absl::Status st;
  for (size_t v = 0; v < versions.size() && st.ok(); ++v) {
    if (versions.size() > 1) {
      Line(v == 0                    ? "if (" + versions[v].first + ")"
           : v + 1 < versions.size() ? "else if (" + versions[v].first + ")"
                                     : std::string("else"));
      Open("");
    }
    fused_body_ = versions[v].second;
    st = EmitReduce(std::get<ReduceStmt>(reduce.node), reduce.loc);
    if (versions.size() > 1) Close();
  }
  fused_producer_ = nullptr;
  fused_body_ = nullptr;
  Close();
  Touch(r, w);
  return st;
}

void Emitter::WgFlush() {
  if (wg_groups_.empty()) return;
  Line("kiln::wgmma_wait<0>();");
  for (const WgGroup& g : wg_groups_) {
    Line("kiln::wgmma_fence_operands(" + g.acc_code + ");");
  }
  wg_groups_.clear();
}

void Emitter::WgWaitFor(const Stmt& s) {
  if (wg_groups_.empty()) return;
  std::set<std::string> r, w;
  const SharedPred all = [](const std::string&) { return true; };
  Accesses(s, &r, &w, &all);
  int last = -1;
  for (size_t i = 0; i < wg_groups_.size(); ++i) {
    const WgGroup& g = wg_groups_[i];
    bool hit = false;
    for (const std::string& n : g.acc) hit |= r.count(n) || w.count(n);
    for (const std::string& n : g.operands) hit |= w.count(n) > 0;
    if (hit) last = static_cast<int>(i);
  }
  if (last < 0) return;
  const size_t younger = wg_groups_.size() - 1 - static_cast<size_t>(last);
  Line(StrCat("kiln::wgmma_wait<", younger, ">();"));
  for (int i = 0; i <= last; ++i) {
    Line("kiln::wgmma_fence_operands(" + wg_groups_[i].acc_code + ");");
  }
  wg_groups_.erase(wg_groups_.begin(), wg_groups_.begin() + last + 1);
}

absl::Status Emitter::EmitStmt(const Stmt& s, bool element) {
  if (!element && !wg_groups_.empty()) {
    const bool straight = std::holds_alternative<LetStmt>(s.node) ||
                          std::holds_alternative<StoreStmt>(s.node) ||
                          std::holds_alternative<CopyStmt>(s.node) ||
                          std::holds_alternative<FillStmt>(s.node) ||
                          std::holds_alternative<GemmStmt>(s.node) ||
                          std::holds_alternative<ReduceStmt>(s.node) ||
                          std::holds_alternative<CumsumStmt>(s.node) ||
                          std::holds_alternative<AtomicAddStmt>(s.node) ||
                          std::holds_alternative<ParallelStmt>(s.node) ||
                          std::holds_alternative<AllocStmt>(s.node);
    if (straight) {
      WgWaitFor(s);
    } else {
      WgFlush();
    }
  }
  return std::visit(
      [&](const auto& n) -> absl::Status {
        using T = std::decay_t<decltype(n)>;
        if (!element) {
          if constexpr (std::is_same_v<T, LetStmt> ||
                        std::is_same_v<T, StoreStmt>) {
            std::set<std::string> r, w;
            Accesses(s, &r, &w);
            Sync(r, w);
            Touch(r, w);
          }
        }
        if constexpr (std::is_same_v<T, LetStmt>) {
          KILN_GPU_RETURN_IF_ERROR(DeclareLet(n));
          NoteLet(n);
          return absl::OkStatus();
        } else if constexpr (std::is_same_v<T, StoreStmt>) {
          if (!element && Shared(n.name)) {
            // A fragment element stored outside `parallel` (in shared
            // memory: fragment_plan.h `uniform`): every thread computes
            // the same new value and stores it; when the value reads the
            // fragment, only after all have read it (the lazy barriers
            // order it against earlier statements).
            Expr value = n.value;
            if (n.op != AssignOp::kSet) {
              value =
                  CompoundValue(n.op, Expr::Load(n.name, n.indices), n.value);
            }
            auto v = Value(value);
            if (!v.ok()) return v.status();
            const std::string tmp = StrCat("kiln_u", uid_++);
            Line("const " + RegType(v->type) + " " + tmp + " = " + v->code +
                 ";");
            vars_[tmp] = {tmp, v->type};
            std::set<std::string> reads;
            ExprUses(value, &reads);
            for (const std::string& r : reads) {
              if (Shared(r) && SameBytes(r, n.name)) {
                Barrier();
                break;
              }
            }
            auto c =
                StoreCode(n.name, n.indices, AssignOp::kSet, Expr::Var(tmp));
            if (!c.ok()) return c.status();
            Line(*c);
            Touch({}, {n.name});
            return absl::OkStatus();
          }
          if (auto it = chunk_stores_.find(&n);
              element && it != chunk_stores_.end()) {
            return EmitChunkStore(n, it->second);
          }
          auto c = StoreCode(n.name, n.indices, n.op, n.value, n.shared_atomic);
          if (!c.ok()) return c.status();
          const Buf* target = FindBuf(n.name);
          if (!store_lead_.empty() && (!target || target->tensor)) {
            Line("if (" + store_lead_ + ") " + *c);
          } else {
            Line(*c);
          }
          return absl::OkStatus();
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          const std::optional<bool> known =
              element ? std::nullopt : Decide(n.cond);
          if (known) {
            // (Decided by a split loop's facts.)
            if (!*known && !n.has_else) return absl::OkStatus();
            Open("");
            KILN_GPU_RETURN_IF_ERROR(
                EmitBlock(*known ? n.then_body : n.else_body, element));
            if (!element) Flush();
            Close();
            return absl::OkStatus();
          }
          auto c = Value(n.cond);
          if (!c.ok()) return c.status();
          if (!element) Flush();
          Open("if (" + c->code + ")");
          KILN_GPU_RETURN_IF_ERROR(EmitBlock(n.then_body, element));
          if (!element) Flush();
          if (n.has_else) {
            Close("} else {");
            ++indent_;
            KILN_GPU_RETURN_IF_ERROR(EmitBlock(n.else_body, element));
            if (!element) Flush();
          }
          Close();
          return absl::OkStatus();
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          // (Groups were waited for above; a loop's own emitters start a
          // sequence of their own where they defer waits.)
          const int lazy = wg_lazy_;
          wg_lazy_ = 0;
          absl::Status st = n.loop == LoopKind::kPipelined && !element
                                ? EmitPipelined(n, s.loc)
                                : EmitFor(n, element);
          wg_lazy_ = lazy;
          return st;
        } else if constexpr (std::is_same_v<T, AllocStmt>) {
          return EmitAlloc(n);
        } else if constexpr (std::is_same_v<T, RasterizeStmt>) {
          return EmitRasterize(n);
        } else {
          if (element) {
            return LocatedError(s.loc, "tile op inside a parallel body");
          }
          Line(StrCat("// tile ", At(s.loc)));
          std::set<std::string> r, w;
          Accesses(s, &r, &w);
          Sync(r, w);
          absl::Status st = EmitTileOp(s);
          Touch(r, w);
          return st;
        }
      },
      s.node);
}

absl::Status Emitter::EmitTileOp(const Stmt& s) {
  return std::visit(
      [&](const auto& n) -> absl::Status {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, CopyStmt>) return EmitCopy(n, s);
        if constexpr (std::is_same_v<T, FillStmt>) return EmitFill(n, s.loc);
        if constexpr (std::is_same_v<T, GemmStmt>) return EmitGemm(n, s.loc);
        if constexpr (std::is_same_v<T, ReduceStmt>) {
          return EmitReduce(n, s.loc);
        }
        if constexpr (std::is_same_v<T, CumsumStmt>) {
          return EmitCumsum(n, s.loc);
        }
        if constexpr (std::is_same_v<T, AtomicAddStmt>) {
          return EmitAtomicAdd(n, s.loc);
        }
        if constexpr (std::is_same_v<T, ParallelStmt>) {
          return EmitParallel(n, s.loc);
        }
        return LocatedError(s.loc, "this statement has no GPU lowering",
                            absl::StatusCode::kUnimplemented);
      },
      s.node);
}

bool Emitter::SameBytes(const std::string& a, const std::string& b) const {
  if (a == b) return true;
  if (!kp_.shared.alias) return false;
  for (const SharedRegion& x : kp_.shared.regions) {
    if (x.name != a) continue;
    for (const SharedRegion& y : kp_.shared.regions) {
      if (y.name == b && x.lo < y.hi && y.lo < x.hi) return true;
    }
  }
  return false;
}

absl::Status Emitter::EmitAlloc(const AllocStmt& a) {
  Buf& b = bufs_[a.name];
  b.dtype = a.dtype;
  b.scope = a.scope;
  b.code = Mangle(a.name);
  int64_t elems = 1;
  for (const Expr& d : a.shape) {
    auto c = FoldInt(d);
    if (!c || *c <= 0) {
      return absl::InvalidArgumentError("tile '" + a.name +
                                        "' has a dim that is not a constant");
    }
    b.dims.push_back(*c);
    b.shape.push_back(Expr::Int(*c));
    elems *= *c;
  }
  const std::string st = StorageType(a.dtype);
  if (auto it = plan_.registers.find(a.name); it != plan_.registers.end()) {
    b.reg = &it->second;
    b.layout = b.code + "_L";
    if (b.reg->warpgroup) {
      Line(StrCat("typedef kiln::WgAccLayout<", b.reg->m, ", ", b.reg->n, ", ",
                  b.reg->warps_m,
                  b.reg->warps_n > 1 ? StrCat(", ", b.reg->warps_n) : "", "> ",
                  b.layout, ";"));
    } else {
      Line(StrCat("typedef kiln::AccLayout<", b.reg->m, ", ", b.reg->n, ", ",
                  b.reg->warps_m, ", ", b.reg->warps_n, "> ", b.layout, ";"));
    }
    Line(StrCat("float ", b.code, "[", b.reg->regs(), "];"));
    return absl::OkStatus();
  }
  if (auto it = plan_.owned.find(a.name); it != plan_.owned.end()) {
    b.own = &it->second;
    b.layout = b.code + "_L";
    Line(StrCat("typedef kiln::OwnLayout<", b.own->rows, ", ", b.own->cols,
                ", ", b.own->threads, ", ", b.own->vec, "> ", b.layout, ";"));
    Line(StrCat(st, " ", b.code, "[", b.own->regs(), "];"));
    return absl::OkStatus();
  }
  if (auto it = plan_.packed.find(a.name); it != plan_.packed.end()) {
    const RegisterFragment& acc = plan_.registers.at(it->second);
    b.packed_from = it->second;
    Line(StrCat("unsigned ", b.code, "[",
                acc.m / acc.warps_m / acc.tile_m * (acc.n / 16) * 4,
                "];  // matrix-core A operands"));
    return absl::OkStatus();
  }
  if (auto it = plan_.rows.find(a.name); it != plan_.rows.end()) {
    b.row = &it->second;
    b.layout = b.code + "_L";
    if (b.row->owned()) {
      Line(StrCat("typedef kiln::OwnRowLayout<", b.row->m, ", ",
                  b.row->own_cols, ", ", b.row->own_threads, ", ",
                  b.row->own_vec, "> ", b.layout, ";"));
    } else if (b.row->warpgroup) {
      Line(StrCat("typedef kiln::WgRowLayout<", b.row->m, ", ", b.row->warps_m,
                  b.row->warps_n > 1 ? StrCat(", ", b.row->warps_n) : "", "> ",
                  b.layout, ";"));
    } else {
      Line(StrCat("typedef kiln::RowLayout<", b.row->m, ", ", b.row->warps_m,
                  ", ", b.row->warps_n, "> ", b.layout, ";"));
    }
    Line(StrCat("float ", b.code, "[", b.row->regs(), "];"));
    return absl::OkStatus();
  }
  if (a.scope == Scope::kLocal) {
    Line(StrCat(st, " ", b.code, "[",
                StorageBytes(a.dtype, elems) /
                    std::max<int64_t>(1, DTypeBits(a.dtype) / 8),
                "];"));
    if (a.dtype == DType::kI4 || a.dtype == DType::kU4) {
      return absl::UnimplementedError("4-bit local tiles on " +
                                      dialect_.vendor);
    }
    return absl::OkStatus();
  }
  if (kp_.epilogue.elided_tiles.count(a.name)) {
    Line("// " + a.name +
         ": not allocated (the accumulator is stored straight to global "
         "memory)");
    return absl::OkStatus();
  }
  if (a.layout.kind == Layout::Kind::kPadded) b.pad = a.layout.param;
  if (b.dims.size() == 2) {
    b.layout = b.code + "_L";
    const int64_t eb = std::max<int64_t>(1, DTypeBits(a.dtype) / 8);
    if (plan_.wgmma_tiles.count(a.name)) {
      Line(StrCat("typedef kiln::WgmmaTile<", b.dims[0], ", ", b.dims[1], ", ",
                  eb, "> ", b.layout, ";"));
    } else if (plan_.swizzled.count(a.name)) {
      Line(StrCat("typedef kiln::Swizzled<", b.dims[0], ", ", b.dims[1], ", ",
                  eb, "> ", b.layout, ";"));
    } else if (a.dtype == DType::kI4 || a.dtype == DType::kU4) {
      b.layout.clear();  // packed: addressed as a flat row-major index
    } else {
      Line(StrCat("typedef kiln::RowMajor<", b.dims[0], ", ", b.dims[1], ", ",
                  b.pad, "> ", b.layout, ";"));
    }
  }
  int64_t padded = elems;
  if (b.pad && !b.dims.empty())
    padded = elems / b.dims.back() * (b.dims.back() + b.pad);
  const int64_t bytes = StorageBytes(a.dtype, padded);
  auto off = kp_.shared.offset.find(a.name);
  if (off == kp_.shared.offset.end() ||
      kp_.shared.slot_bytes.at(a.name) < bytes) {
    return absl::InternalError(StrCat("kernel '", k_.name, "': tile '", a.name,
                                      "' has no planned place in shared "
                                      "memory"));
  }
  Line(StrCat(st, "* ", b.code, " = reinterpret_cast<", st, "*>(kiln_smem + ",
              off->second, ");"));
  return absl::OkStatus();
}

absl::StatusOr<Emitter::LoopRange> Emitter::BindLoop(const ForStmt& f) {
  LoopRange r;
  r.start = "0LL";
  if (f.start) {
    auto s = Index(*f.start);
    if (!s.ok()) return s.status();
    r.start = *s;
  }
  auto stop = Index(f.stop);
  if (!stop.ok()) return stop.status();
  r.stop = *stop;
  r.var = Mangle(f.var);
  vars_[f.var] = {r.var, Type::Int()};
  return r;
}

absl::Status Emitter::EmitFor(const ForStmt& f, bool element) {
  if (const FullTilesPlan* p = element ? nullptr : kp_.FullTilesOf(&f)) {
    return EmitFullTilesFor(f, *p);
  }
  auto range = BindLoop(f);
  if (!range.ok()) return range.status();
  const std::string& v = range->var;
  if (!element) Flush();
  if (f.loop == LoopKind::kUnroll) Line("#pragma unroll");
  Open(StrCat("for (long long ", v, " = ", range->start, "; ", v, " < ",
              range->stop, "; ++", v, ")"));
  KILN_GPU_RETURN_IF_ERROR(EmitBlock(f.body, element));
  if (!element) Flush();
  Close();
  return absl::OkStatus();
}

absl::Status Emitter::EmitRasterize(const RasterizeStmt& r) {
  if (k_.block_vars.size() < 2) return absl::OkStatus();
  auto p = Index(r.panel);
  if (!p.ok()) return p.status();
  const std::string bx = Mangle(k_.block_vars[0]);
  const std::string by = Mangle(k_.block_vars[1]);
  Line("// rasterize: panels of blocks for L2 reuse (a bijection of the grid)");
  Open("");
  Line("const long long kiln_p = kiln::max_(" + *p + ", 1LL);");
  // (A persistent kernel walks the program's grid itself.)
  Line(kp_.launch.persistent
           ? std::string("const long long kiln_gx = kiln_walk0, kiln_gy = "
                         "kiln_grid1;")
           : std::string(
                 "const long long kiln_gx = gridDim.x, kiln_gy = gridDim.y;"));
  if (r.order == RasterOrder::kRow) {
    Line("const long long kiln_lin = " + by + " * kiln_gx + " + bx + ";");
    Line("const long long kiln_panel = kiln_lin / (kiln_p * kiln_gx);");
    Line("const long long kiln_in = kiln_lin % (kiln_p * kiln_gx);");
    Line(
        "const long long kiln_rows = kiln::min_(kiln_p, kiln_gy - "
        "kiln_panel * kiln_p);");
    Line(by + " = kiln_panel * kiln_p + kiln_in % kiln_rows;");
    Line(bx + " = kiln_in / kiln_rows;");
  } else {
    Line("const long long kiln_lin = " + bx + " * kiln_gy + " + by + ";");
    Line("const long long kiln_panel = kiln_lin / (kiln_p * kiln_gy);");
    Line("const long long kiln_in = kiln_lin % (kiln_p * kiln_gy);");
    Line(
        "const long long kiln_cols = kiln::min_(kiln_p, kiln_gx - "
        "kiln_panel * kiln_p);");
    Line(bx + " = kiln_panel * kiln_p + kiln_in % kiln_cols;");
    Line(by + " = kiln_in / kiln_cols;");
  }
  Close();
  // (A cluster pair's blocks: the pair was rasterised.)
  if (kp_.launch.persistent && kp_.launch.cluster_x > 1 &&
      !kp_.ws.rasterize.empty() && &r == kp_.ws.rasterize.back()) {
    Line(PairX());
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------ tile ops

absl::Status Emitter::DeclareLet(const LetStmt& l) {
  auto v = Value(l.value);
  if (!v.ok()) return v.status();
  const std::string name = Mangle(l.name);
  Line("const " + RegType(v->type) + " " + name + " = " + v->code + ";");
  vars_[l.name] = {name, v->type};
  return absl::OkStatus();
}

absl::StatusOr<KernelSource> Emitter::Run() {
  threads_ = kp_.launch.threads;
  KernelSource out;
  out.entry = "kiln_" + k_.name;
  out.threads = threads_;
  out.launch_threads = kp_.launch.launch_threads;

  std::vector<std::string> params;
  std::vector<std::string> prologue;
  for (const Param& p : k_.params) {
    const std::string name = Mangle(p.name);
    if (p.is_tensor) {
      params.push_back(StorageType(p.dtype) + "* " + name);
      Buf& b = bufs_[p.name];
      b.tensor = true;
      b.dtype = p.dtype;
      b.code = name;
      b.shape = p.shape;
      continue;
    }
    const Type t = Type::Of(p.dtype);
    switch (p.dtype) {
      case DType::kF16:
      case DType::kBF16:
      case DType::kF8E4M3:
      case DType::kF8E5M2:
        params.push_back(StorageType(p.dtype) + " " + name + "_bits");
        prologue.push_back("const float " + name + " = kiln::from_bits<" +
                           NarrowTag(p.dtype) + ">(" + name + "_bits);");
        break;
      case DType::kBool:
        params.push_back("unsigned char " + name + "_raw");
        prologue.push_back("const bool " + name + " = " + name + "_raw != 0;");
        break;
      case DType::kI4:
        params.push_back("unsigned char " + name + "_raw");
        prologue.push_back("const signed char " + name + " = kiln::wrap_i4(" +
                           name + "_raw);");
        break;
      case DType::kU4:
        params.push_back("unsigned char " + name + "_raw");
        prologue.push_back("const unsigned char " + name + " = kiln::wrap_u4(" +
                           name + "_raw);");
        break;
      default:
        params.push_back(RegType(t) + " " + name);
        break;
    }
    vars_[p.name] = {name, t};
  }
  for (const std::string& s : DynamicSymbols(k_)) {
    params.push_back("long long " + Mangle(s));
    vars_[s] = {Mangle(s), Type::Int()};
  }
  // Tensor strides.
  for (const Param& p : k_.params) {
    if (!p.is_tensor) continue;
    Buf& b = bufs_[p.name];
    const size_t rank = p.shape.size();
    b.strides.resize(rank);
    for (size_t d = 0; d < rank; ++d) {
      const std::string sv = StrCat(b.code, "_s", d);
      std::string code;
      if (!p.strides.empty()) {
        auto c = FoldInt(p.strides[d]);
        if (c && *c == 1) {
          b.strides[d] = "1LL";
          continue;
        }
        auto e = Index(p.strides[d]);
        if (!e.ok()) return e.status();
        code = *e;
      } else if (d + 1 == rank) {
        b.strides[d] = "1LL";
        continue;
      } else {
        code = "1LL";
        for (size_t j = d + 1; j < rank; ++j) {
          auto e = Index(p.shape[j]);
          if (!e.ok()) return e.status();
          code += " * " + *e;
        }
      }
      prologue.push_back("const long long " + sv + " = " + code + ";");
      b.strides[d] = sv;
    }
  }
  // A persistent kernel (the runtime launches min(blocks, resident blocks)
  // in x) walks the program's grid, so that a block's epilogue overlaps the
  // producer's loads for its next tile. The block variables are set per tile.
  if (kp_.launch.persistent) {
    for (size_t d = 0; d < 3; ++d) {
      std::string g = "1LL";
      if (d < k_.grid.size()) {
        auto e = Index(k_.grid[d]);
        if (!e.ok()) return e.status();
        g = *e;
      }
      prologue.push_back(StrCat("const long long kiln_grid", d, " = ", g, ";"));
    }
    // The x extent walked: pairs of blocks in a cluster pair, or pairs of
    // mirrored tiles (PairedWalk).
    prologue.push_back(
        kp_.launch.cluster_x > 1 || (kp_.launch.walk == Walk::kMirroredPairsX)
            ? "const long long kiln_walk0 = (kiln_grid0 + 1) / 2;"
            : "const long long kiln_walk0 = kiln_grid0;");
    if (kp_.launch.cluster_x > 1) {
      prologue.push_back("const unsigned kiln_rank = kiln::cluster_rank();");
    }
  }
  // Blocks whose loops run longer as x grows (causal attention) start in
  // decreasing x: blocks start roughly in index order, so the longest go
  // first and the last wave is made of the shortest (a bijection of x).
  const bool longest_first = (kp_.launch.walk == Walk::kLongestFirstX);
  for (size_t d = 0; d < k_.block_vars.size(); ++d) {
    const std::string v = Mangle(k_.block_vars[d]);
    prologue.push_back(
        kp_.launch.persistent ? StrCat("long long ", v, " = 0;")
        : d == 0 && longest_first
            ? StrCat("long long ", v,
                     " = gridDim.x - 1 - blockIdx.x;  "
                     "// longest first")
            : StrCat("long long ", v, " = blockIdx.", "xyz"[d], ";"));
    vars_[k_.block_vars[d]] = {v, Type::Int()};
  }
  indent_ = 1;
  for (const std::string& l : prologue) Line(l);
  const std::string producer_marker = "// @@kiln-producer@@\n";
  if (kp_.ws.loop) out_ += producer_marker;
  KILN_GPU_RETURN_IF_ERROR(EmitBlock(k_.body, false));
  WaitForCopies();  // (copies nothing read: none left in flight)
  // A persistent block's next tile reuses its shared buffers. With TMA,
  // the tiles the producer loads are handed over on mbarriers (the ring's,
  // and kiln_qempty for those loaded per tile) and each warpgroup waits
  // for its own staged stores: when nothing else is pending the consumer
  // warpgroups need no barrier between tiles, and each keeps its own pace
  // (one's softmax under the other's gemms) from one tile to the next.
  if (kp_.launch.persistent) {
    std::set<std::string> tma_handed(kp_.ws.preload_tiles.begin(),
                                     kp_.ws.preload_tiles.end());
    for (const Stmt& s : kp_.ws.loop->body) {
      if (auto* c = std::get_if<CopyStmt>(&s.node)) {
        tma_handed.insert(c->dst.name);
      }
    }
    bool only_handed = !kp_.ws.preloads.empty();
    for (const std::set<std::string>* pend : {&pend_r_, &pend_w_}) {
      for (const std::string& n : *pend) only_handed &= tma_handed.count(n) > 0;
    }
    if (only_handed && (!pend_r_.empty() || !pend_w_.empty())) {
      Open("if (!kiln_tma)");
      Flush();
      Close();
    } else {
      Flush();
    }
  }
  std::string body = std::move(out_);
  if (kp_.ws.loop) {
    auto producer = ProducerCode();
    if (!producer.ok()) return producer.status();
    // The consumers' tile loop around the program's body.
    std::string code = *producer;
    code += "  int kiln_it = 0;  // ring iterations so far (all tiles)\n";
    if (!kp_.ws.preloads.empty()) code += "  int kiln_q = 0;  // tiles begun\n";
    code += "  " + TileLoopHead() + "\n";
    body.replace(body.find(producer_marker), producer_marker.size(), code);
    body += "  }\n";
    // TMA stores still reading their staging chunks finish first.
    if (!kp_.tma.stores.empty()) body += "  kiln::tma_store_drain();\n";
    if (kp_.launch.cluster_x > 1) body += "  kiln::cluster_sync();\n";
    out.cluster_x = kp_.launch.cluster_x;
    for (size_t m = 0; m < kp_.tma.maps.size(); ++m) {
      params.push_back(
          StrCat("const __grid_constant__ kiln::TensorMap kiln_map", m));
    }
    if (!kp_.tma.maps.empty()) params.push_back("int kiln_tma");
    out.tensor_maps = kp_.tma.maps;
    out.persistent = kp_.launch.persistent;
    // The ring's mbarriers, as ptxas places them (a 1 KiB static block).
    out.static_shared_bytes = 1024;
  }

  std::string src;
  src += "// Generated by Kiln from tile IR kernel '" + k_.name + "'.\n";
  src += "#include \"" + dialect_.device_include + "\"\n";
  if (!plan_.wgmma_tiles.empty() || !wgmma_instrs_.empty()) {
    src += "#include \"kiln/wgmma.cuh\"\n";
  }
  if (kp_.ws.loop) src += "#include \"kiln/tma.cuh\"\n";
  src += "\n";
  for (const auto& [name, def] : wgmma_instrs_) src += def + "\n";
  const std::string bounds =
      dialect_.launch_bounds_min_blocks && kp_.launch.min_blocks > 0
          ? StrCat(out.launch_threads, ", ", kp_.launch.min_blocks)
          : StrCat(out.launch_threads);
  src += StrCat("extern \"C\" __global__ void __launch_bounds__(", bounds,
                ")\n", out.entry, "(");
  for (size_t i = 0; i < params.size(); ++i) {
    src += (i ? ",\n    " : "") + params[i];
  }
  src += ") {\n";
  if (plan_.wgmma_tiles.empty()) {
    src += "  extern __shared__ __align__(128) unsigned char kiln_smem[];\n";
  } else {
    // wgmma operand tiles are placed at multiples of 1024 bytes from a
    // 1024-byte-aligned base (the swizzle pattern repeats every 1024 bytes
    // and the descriptors' base offset is 0); the dynamic window is only
    // guaranteed 16-byte alignment, so 1 KiB extra is asked for.
    src +=
        "  extern __shared__ __align__(1024) unsigned char kiln_smem_raw[];\n";
    src +=
        "  unsigned char* const kiln_smem = kiln_smem_raw + ((1024u - "
        "kiln::smem_addr(kiln_smem_raw) % 1024u) % 1024u);\n";
  }
  src += body;
  src += "}\n";
  out.source = std::move(src);
  out.shared_bytes = kp_.shared.dynamic_bytes;
  return out;
}

}  // namespace internal

absl::StatusOr<KernelSource> EmitKernelSource(const Kernel& kernel,
                                              const KernelPlan& plan,
                                              const GpuDialect& dialect) {
  return internal::Emitter(kernel, plan, dialect).Run();
}

}  // namespace kiln::compiler::gpu
