// `reduce` on GPU targets: row reductions of register accumulators (per
// thread, then the lanes of a row group, then across warps through a shared
// scratch), of thread-owned fragments (per chunk, per warp, then a thread
// per row over the scratch), and a warp (wavefront) per output element
// otherwise.
#include "compiler/codegen/gpu/kernel_source_internal.h"

namespace kiln::compiler::gpu::internal {

absl::Status Emitter::EmitReduce(const ReduceStmt& r, const Loc& loc) {
  auto src = MakeAccess(r.src);
  if (!src.ok()) return src.status();
  auto dst = MakeAccess(r.dst);
  if (!dst.ok()) return dst.status();
  const DType dt = dst->buf->dtype;
  const Type t = Type::Of(dt);
  // Accumulate in the destination's register type, widened for shuffles.
  std::string acc_type = RegType(t);
  if (acc_type == "short" || acc_type == "signed char" ||
      acc_type == "unsigned char" || acc_type == "bool") {
    acc_type = "int";
  }
  const Type acc_t = acc_type == "int" ? Type::Of(DType::kI32) : t;
  std::string op_name = r.op == ReduceKind::kSum   ? "kiln::SumOp"
                        : r.op == ReduceKind::kMin ? "kiln::MinOp"
                                                   : "kiln::MaxOp";
  std::string init;
  if (r.op == ReduceKind::kSum || r.op == ReduceKind::kAbsMax) {
    init = "0";
  } else if (IsFloat(dt)) {
    init = r.op == ReduceKind::kMax ? "(-__int_as_float(0x7f800000))"
                                    : "__int_as_float(0x7f800000)";
    if (dt == DType::kF64) {
      init = r.op == ReduceKind::kMax
                 ? "(-__longlong_as_double(0x7ff0000000000000LL))"
                 : "__longlong_as_double(0x7ff0000000000000LL)";
    }
  } else {
    const int bits = DTypeBits(dt);
    const bool sgn = IsSigned(dt);
    if (r.op == ReduceKind::kMax) {
      init = sgn ? StrCat("(",
                          -(bits >= 64 ? INT64_MAX
                                       : (int64_t{1} << (bits - 1)) - 1),
                          "LL - 1)")
                 : "0";
    } else {
      init =
          sgn ? StrCat(
                    (bits >= 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1),
                    "LL")
              : (bits >= 32 ? "0xffffffffu" : StrCat((int64_t{1} << bits) - 1));
    }
  }
  // Converts an element value of src into the accumulator (abs for absmax).
  auto element = [&](const CExpr& v) {
    CExpr x = Convert(v, acc_t);
    if (r.op == ReduceKind::kAbsMax) return "kiln::abs_(" + x.code + ")";
    return x.code;
  };
  // Combines the reduction into dst: clear ? acc : op(dst, acc).
  auto finish = [&](const std::vector<Expr>& di,
                    const std::string& acc) -> absl::Status {
    std::string v = acc;
    if (!r.clear) {
      auto cur = LoadValue(dst->name, di);
      if (!cur.ok()) return cur.status();
      v = op_name + "()((" + acc_type + ")" + Convert(*cur, acc_t).code + ", " +
          acc + ")";
    }
    const std::string tmp = StrCat("kiln_red", uid_++);
    Line("const " + acc_type + " " + tmp + " = " + v + ";");
    vars_[tmp] = {tmp, acc_t};
    auto s = StoreCode(dst->name, di, AssignOp::kSet, Expr::Var(tmp));
    if (!s.ok()) return s.status();
    Line(*s);
    return absl::OkStatus();
  };
  // Declares kiln_v and combines into it, in order, the `parts` partials in
  // the scratch of one row (partial k at `at(k)`); `unroll`: the loop is
  // unrolled (a loop inside a per-register loop).
  auto combine_partials =
      [&](const std::string& k, int64_t parts,
          const std::function<std::string(const std::string&)>& at,
          bool unroll) {
        Line(acc_type + " kiln_v = " + init + ";");
        if (unroll) Line("#pragma unroll");
        Line(StrCat("for (int ", k, " = 0; ", k, " < ", parts, "; ++", k,
                    ") kiln_v = ", op_name, "()(kiln_v, (", acc_type,
                    ")kiln_scr[", at(k), "]);"));
      };
  // After a barrier: one thread per row of dst combines the row's `parts`
  // partials in the scratch (partial k of row rr at `at(k_var, rr_var)`),
  // then finishes it into dst.
  auto combine_rows =
      [&](int id, int64_t rows, int64_t parts, const std::string& k,
          const std::function<std::string(
              const std::string&, const std::string&)>& at) -> absl::Status {
    Barrier();
    const std::string rr = StrCat("kiln_rr", id);
    vars_[rr] = {rr, Type::Int()};
    Open(StrCat("for (int ", rr, " = threadIdx.x; ", rr, " < ", rows, "; ", rr,
                " += ", threads_, ")"));
    combine_partials(
        k, parts, [&](const std::string& kv) { return at(kv, rr); }, false);
    KILN_GPU_RETURN_IF_ERROR(
        finish(dst->Indices({Expr::Var(rr)}, false), "kiln_v"));
    Close();
    return absl::OkStatus();
  };

  if (src->buf->reg) {
    // Row reduction of an mma accumulator: per thread over its columns, then
    // over the lanes sharing a row, then over the warps sharing a row.
    const RegisterFragment& rf = *src->buf->reg;
    const AccumulatorShape& as = dialect_.acc;
    const int wave = dialect_.wave_size;
    const std::string L = src->buf->layout;
    const std::string x = src->buf->code;
    const int id = uid_++;
    Open("");
    Line(StrCat("const int kiln_lane = threadIdx.x % ", wave,
                ", kiln_warp = threadIdx.x / ", wave, ";"));
    Line("(void)kiln_lane;");
    Line("(void)kiln_warp;");
    Line(StrCat("float* const kiln_scr = reinterpret_cast<float*>(kiln_smem + ",
                kp_.shared.scratch_offset, ");"));
    Line("#pragma unroll");
    Open(StrCat("for (int kiln_mi = 0; kiln_mi < ", L, "::kTm; ++kiln_mi)"));
    Line("#pragma unroll");
    Open(StrCat("for (int kiln_h = 0; kiln_h < ", as.rows_per_lane,
                "; ++kiln_h)"));
    Line(acc_type + " kiln_v = " + init + ";");
    Line("#pragma unroll");
    Open(StrCat("for (int kiln_ni = 0; kiln_ni < ", L, "::kTn; ++kiln_ni)"));
    for (int e = 0; e < as.cols_per_row; ++e) {
      CExpr v{
          StrCat(x, "[(kiln_mi * ", L, "::kTn + kiln_ni) * ", as.regs_per_tile,
                 " + kiln_h * ", as.cols_per_row, " + ", e, "]"),
          Type::Of(DType::kF32)};
      Line("kiln_v = " + op_name + "()(kiln_v, (" + acc_type + ")" +
           element(v) + ");");
    }
    Close();
    Line("kiln_v = " + dialect_.row_group_reduce + "(kiln_v, " + op_name +
         "());");
    Line(StrCat("const long long kiln_row", id, " = ", L, "::row((kiln_mi * ",
                L, "::kTn) * ", as.regs_per_tile, " + kiln_h * ",
                as.cols_per_row, ");"));
    vars_[StrCat("kiln_row", id)] = {StrCat("kiln_row", id), Type::Int()};
    if (dst->buf->row && rf.warps_n == 1) {
      // Every lane of the row group holds the row's value.
      std::string saved_q = row_q_, saved_var = row_var_;
      row_q_ = StrCat("(kiln_mi * ", as.rows_per_lane, " + kiln_h)");
      row_var_ = StrCat("kiln_row", id);
      absl::Status st = finish(
          dst->Indices({Expr::Var(StrCat("kiln_row", id))}, false), "kiln_v");
      row_q_ = saved_q;
      row_var_ = saved_var;
      KILN_GPU_RETURN_IF_ERROR(st);
    } else if (rf.warps_n == 1) {
      Open(StrCat("if (kiln_lane % ", as.row_group_lanes, " == 0)"));
      KILN_GPU_RETURN_IF_ERROR(finish(
          dst->Indices({Expr::Var(StrCat("kiln_row", id))}, false), "kiln_v"));
      Close();
    } else {
      Open(StrCat("if (kiln_lane % ", as.row_group_lanes, " == 0)"));
      // The row's partial of this warp's (warpgroup's) column slice.
      Line(StrCat("kiln_scr[(", rf.warpgroup ? "kiln_warp / 4" : "kiln_warp",
                  " % ", rf.warps_n, ") * ", rf.m, " + kiln_row", id,
                  "] = (float)kiln_v;"));
      Close();
    }
    Close();
    Close();
    if (rf.warps_n > 1 && dst->buf->row) {
      // Rows in registers, a copy per column slice: after a barrier each
      // thread combines its own rows' partials, in one order for all
      // copies, so that the copies agree.
      Barrier();
      const std::string q = StrCat("kiln_rq", id), row = StrCat("kiln_rr", id);
      Line("#pragma unroll");
      Open(StrCat("for (int ", q, " = 0; ", q, " < ", dst->buf->row->regs(),
                  "; ++", q, ")"));
      Line(StrCat("const long long ", row, " = ", dst->buf->layout, "::row(", q,
                  ");"));
      vars_[row] = {row, Type::Int()};
      combine_partials(
          "kiln_w", rf.warps_n,
          [&](const std::string& w) {
            return StrCat(w, " * ", rf.m, " + ", row);
          },
          true);
      std::string saved_q = row_q_, saved_var = row_var_;
      row_q_ = q;
      row_var_ = row;
      absl::Status st = finish(dst->Indices({Expr::Var(row)}, false), "kiln_v");
      row_q_ = saved_q;
      row_var_ = saved_var;
      KILN_GPU_RETURN_IF_ERROR(st);
      Close();
    } else if (rf.warps_n > 1) {
      KILN_GPU_RETURN_IF_ERROR(
          combine_rows(id, rf.m, rf.warps_n, "kiln_w",
                       [&](const std::string& w, const std::string& rr) {
                         return StrCat(w, " * ", rf.m, " + ", rr);
                       }));
    }
    Close();
    return absl::OkStatus();
  }

  // The fused parallel's body at the element `e` of the source (its
  // variables bound to e; its owned accesses are this element's).
  auto FusedElement = [&](const std::vector<Expr>& e) -> absl::Status {
    const ParallelStmt& p = *fused_producer_;
    const std::vector<std::string> saved = own_vars_;
    Open("");
    for (size_t d = 0; d < p.vars.size(); ++d) {
      const std::string v = Mangle(p.vars[d]);
      Line("const long long " + v + " = " + e[d].name + ";");
      vars_[p.vars[d]] = {v, Type::Int()};
    }
    own_vars_ = p.vars;
    absl::Status st = ElementBody(*fused_body_);
    own_vars_ = saved;
    Close();
    return st;
  };

  // Opens a loop over a thread-owned source's chunks (variable `c`) that
  // combines each chunk's elements into kiln_v; the caller adds what is
  // done with kiln_v and closes the loop.
  auto open_chunk_partials = [&](const Buf& ob, const std::string& c,
                                 const std::string& u) -> absl::Status {
    const OwnedFragment& of = *ob.own;
    Line("#pragma unroll");
    Open(StrCat("for (int ", c, " = 0; ", c, " < ", of.regs() / of.vec, "; ++",
                c, ")"));
    Line(acc_type + " kiln_v = " + init + ";");
    Line("#pragma unroll");
    Open(StrCat("for (int ", u, " = 0; ", u, " < ", of.vec, "; ++", u, ")"));
    KILN_GPU_RETURN_IF_ERROR(
        AtOwned(ob, StrCat(c, " * ", of.vec), u,
                [&](const std::vector<Expr>& e) -> absl::Status {
                  if (fused_producer_ != nullptr) {
                    KILN_GPU_RETURN_IF_ERROR(FusedElement(e));
                  }
                  auto v = LoadValue(src->name, src->Indices(e, false));
                  if (!v.ok()) return v.status();
                  Line("kiln_v = " + op_name + "()(kiln_v, (" + acc_type + ")" +
                       element(*v) + ");");
                  return absl::OkStatus();
                }));
    Close();
    return absl::OkStatus();
  };

  // Declares `part[rows]` and combines into part[c / group] each of the
  // thread's chunks c of a thread-owned source (a row wider than the
  // block's chunks lies in `group` consecutive chunks of every thread).
  auto combine_row_chunks =
      [&](const Buf& ob, const std::string& part, int64_t rows, int64_t group,
          const std::string& c, const std::string& u) -> absl::Status {
    Line(StrCat(acc_type, " ", part, "[", rows, "];"));
    Line("#pragma unroll");
    Line(StrCat("for (int ", c, " = 0; ", c, " < ", rows, "; ++", c, ") ", part,
                "[", c, "] = ", init, ";"));
    KILN_GPU_RETURN_IF_ERROR(open_chunk_partials(ob, c, u));
    Line(StrCat(part, "[", c, " / ", group, "] = ", op_name, "()(", part, "[",
                c, " / ", group, "], kiln_v);"));
    Close();
    return absl::OkStatus();
  };

  if (src->buf->own && dst->buf->row && dst->buf->row->owned()) {
    // Into the row registers of the same layout (owned_rows.cc): each thread
    // combines each of its chunks, then the lanes of the chunk's row combine
    // theirs with a butterfly, within a wave, and across the waves of a row
    // through the scratch; every lane of the row ends with the row's value.
    const Buf& ob = *src->buf;
    const OwnedFragment& of = *ob.own;
    const RowFragment& rf = *dst->buf->row;
    const int64_t wave = dialect_.wave_size;
    const int64_t lanes = rf.own_lanes();
    const int64_t waves_per_row = rf.own_across_waves ? lanes / wave : 1;
    const int id = uid_++;
    const std::string c = StrCat("kiln_c", id), u = StrCat("kiln_u", id);
    const std::string part = StrCat("kiln_part", id);
    const std::string rowv = StrCat("kiln_row", id);
    vars_[u] = {u, Type::Int()};
    vars_[rowv] = {rowv, Type::Int()};
    Open("");
    const int64_t group = rf.own_group();
    if (group == 1) {
      Line(StrCat(acc_type, " ", part, "[", rf.regs(), "];"));
      KILN_GPU_RETURN_IF_ERROR(open_chunk_partials(ob, c, u));
      Line(StrCat(part, "[", c, "] = kiln::group_reduce<",
                  std::min<int64_t>(lanes, wave), ">(kiln_v, ", op_name,
                  "());"));
      Close();
    } else {
      // Each thread's chunks of one row combine first, then one butterfly
      // per row register.
      KILN_GPU_RETURN_IF_ERROR(
          combine_row_chunks(ob, part, rf.regs(), group, c, u));
      Line("#pragma unroll");
      Line(StrCat("for (int ", c, " = 0; ", c, " < ", rf.regs(), "; ++", c,
                  ") ", part, "[", c, "] = kiln::group_reduce<",
                  std::min<int64_t>(lanes, wave), ">(", part, "[", c, "], ",
                  op_name, "());"));
    }
    if (waves_per_row > 1) {
      // One partial per wave of a row; every lane reads its row's.
      Line(StrCat(acc_type, "* const kiln_scr = reinterpret_cast<", acc_type,
                  "*>(kiln_smem + ", kp_.shared.scratch_offset, ");"));
      Line("#pragma unroll");
      Open(StrCat("for (int ", c, " = 0; ", c, " < ", rf.regs(), "; ++", c,
                  ")"));
      Line(StrCat("if (threadIdx.x % ", wave, " == 0) kiln_scr[(", c, " * ",
                  of.threads, " + (int)threadIdx.x) / ", wave, "] = ", part,
                  "[", c, "];"));
      Close();
      Barrier();
      Line("#pragma unroll");
      Open(StrCat("for (int ", c, " = 0; ", c, " < ", rf.regs(), "; ++", c,
                  ")"));
      Line(StrCat("const int kiln_first = ((", c, " * ", of.threads,
                  " + (int)threadIdx.x) / ", lanes, ") * ", waves_per_row,
                  ";"));
      Line(StrCat(acc_type, " kiln_v = ", init, ";"));
      Line(StrCat("for (int kiln_w = 0; kiln_w < ", waves_per_row,
                  "; ++kiln_w) kiln_v = ", op_name, "()(kiln_v, kiln_scr[",
                  "kiln_first + kiln_w]);"));
      Line(StrCat(part, "[", c, "] = kiln_v;"));
      Close();
      Barrier();
    }
    // The row registers take the combined partials.
    Line("#pragma unroll");
    Open(StrCat("for (int ", c, " = 0; ", c, " < ", rf.regs(), "; ++", c, ")"));
    Line(StrCat("const long long ", rowv, " = ", dst->buf->layout, "::row(", c,
                ");"));
    {
      std::string saved_q = row_q_, saved_var = row_var_;
      row_q_ = c;
      row_var_ = rowv;
      absl::Status st = finish(dst->Indices({Expr::Var(rowv)}, false),
                               StrCat(part, "[", c, "]"));
      row_q_ = saved_q;
      row_var_ = saved_var;
      KILN_GPU_RETURN_IF_ERROR(st);
    }
    Close();
    Close();
    return absl::OkStatus();
  }

  if (src->buf->own) {
    // A thread-owned fragment along its columns: each thread combines each
    // of its chunks (one row's columns), the lanes of a warp whose chunks
    // share a row combine theirs, and the partials go through the scratch
    // to one thread per row.
    const Buf& ob = *src->buf;
    const OwnedFragment& of = *ob.own;
    const int64_t wave = dialect_.wave_size;
    const int64_t row_chunks = of.cols / of.vec;
    const bool by_warp = row_chunks % wave == 0 && of.threads % wave == 0;
    const int64_t group = by_warp ? wave : 1;
    // A row of more chunks than threads (a multiple of them) lies in
    // `mine` consecutive chunks of every thread: they combine in the
    // thread first, then one warp reduction per row.
    const int64_t mine =
        by_warp && row_chunks > of.threads && row_chunks % of.threads == 0
            ? row_chunks / of.threads
            : 1;
    const int64_t per_row = row_chunks / group / mine;
    const int id = uid_++;
    const std::string c = StrCat("kiln_c", id), u = StrCat("kiln_u", id);
    vars_[u] = {u, Type::Int()};
    Open("");
    Line(StrCat(acc_type, "* const kiln_scr = reinterpret_cast<", acc_type,
                "*>(kiln_smem + ", kp_.shared.scratch_offset, ");"));
    if (mine > 1) {
      const int64_t rows_mine = of.regs() / of.vec / mine;
      const std::string part = StrCat("kiln_part", id);
      KILN_GPU_RETURN_IF_ERROR(
          combine_row_chunks(ob, part, rows_mine, mine, c, u));
      Line("#pragma unroll");
      Open(StrCat("for (int ", c, " = 0; ", c, " < ", rows_mine, "; ++", c,
                  ")"));
      Line(StrCat("const ", acc_type, " kiln_v = kiln::warp_reduce(", part, "[",
                  c, "], ", op_name, "());"));
      Line(StrCat("if (threadIdx.x % ", wave, " == 0) kiln_scr[(", c, " * ",
                  of.threads, " + (int)threadIdx.x) / ", wave, "] = kiln_v;"));
      Close();
    } else {
      KILN_GPU_RETURN_IF_ERROR(open_chunk_partials(ob, c, u));
      if (by_warp) {
        Line("kiln_v = kiln::warp_reduce(kiln_v, " + op_name + "());");
        Line(StrCat("if (threadIdx.x % ", wave, " == 0) kiln_scr[(", c, " * ",
                    of.threads, " + (int)threadIdx.x) / ", wave,
                    "] = kiln_v;"));
      } else {
        Line(StrCat("kiln_scr[", c, " * ", of.threads,
                    " + (int)threadIdx.x] = kiln_v;"));
      }
      Close();
    }
    KILN_GPU_RETURN_IF_ERROR(
        combine_rows(id, of.rows, per_row, "kiln_k",
                     [&](const std::string& k, const std::string& rr) {
                       return StrCat(rr, " * ", per_row, " + ", k);
                     }));
    Close();
    return absl::OkStatus();
  }

  std::vector<Expr> se = src->FreeExtents(false);
  if (r.dim < 0 || r.dim >= static_cast<int64_t>(se.size())) {
    return LocatedError(loc, "reduce dim out of range");
  }
  auto rn = FoldInt(se[r.dim]);
  if (!rn) return LocatedError(loc, "reduce extent is not a constant");
  std::vector<Expr> outer;
  for (size_t d = 0; d < se.size(); ++d) {
    if (static_cast<int64_t>(d) != r.dim) outer.push_back(se[d]);
  }
  std::vector<int64_t> oext;
  int64_t total = 1;
  for (const Expr& e : outer) {
    auto c = FoldInt(e);
    if (!c) return LocatedError(loc, "reduce extent is not a constant");
    oext.push_back(*c);
    total *= *c;
  }
  const int id = uid_++;
  const int64_t wave = dialect_.wave_size;
  const int64_t warps = threads_ / wave;
  const bool warp_per_output = threads_ % wave == 0 && *rn >= wave;
  const std::string o = StrCat("kiln_o", id), rv = StrCat("kiln_r", id);
  Open("");
  if (warp_per_output) {
    Line(StrCat("const int kiln_lane = threadIdx.x % ", wave, ";"));
    Open(StrCat("for (int ", o, " = threadIdx.x / ", wave, "; ", o, " < ",
                total, "; ", o, " += ", warps, ")"));
  } else {
    Open(StrCat("for (int ", o, " = threadIdx.x; ", o, " < ", total, "; ", o,
                " += ", threads_, ")"));
  }
  std::vector<Expr> ivs;
  int64_t inner = total;
  for (size_t d = 0; d < oext.size(); ++d) {
    inner /= oext[d];
    const std::string v = StrCat("kiln_o", id, "_", d);
    std::string val = inner == 1 ? o : StrCat(o, " / ", inner);
    if (d > 0) val = StrCat("(", val, ") % ", oext[d]);
    Line("const long long " + v + " = " + val + ";");
    vars_[v] = {v, Type::Int()};
    ivs.push_back(Expr::Var(v));
  }
  vars_[rv] = {rv, Type::Int()};
  std::vector<Expr> full = ivs;
  full.insert(full.begin() + r.dim, Expr::Var(rv));
  auto sv = LoadValue(src->name, src->Indices(full, false));
  if (!sv.ok()) return sv.status();
  Line(acc_type + " kiln_v = " + init + ";");
  if (warp_per_output) {
    Line(StrCat("for (long long ", rv, " = kiln_lane; ", rv, " < ", *rn, "; ",
                rv, " += ", wave, ")"));
  } else {
    Line(StrCat("for (long long ", rv, " = 0; ", rv, " < ", *rn, "; ++", rv,
                ")"));
  }
  Line("  kiln_v = " + op_name + "()(kiln_v, (" + acc_type + ")" +
       element(*sv) + ");");
  if (warp_per_output) {
    Line("kiln_v = kiln::warp_reduce(kiln_v, " + op_name + "());");
    Open("if (kiln_lane == 0)");
  }
  KILN_GPU_RETURN_IF_ERROR(finish(dst->Indices(ivs, false), "kiln_v"));
  if (warp_per_output) Close();
  Close();
  Close();
  return absl::OkStatus();
}

}  // namespace kiln::compiler::gpu::internal
