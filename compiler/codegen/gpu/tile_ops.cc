// Element-wise tile ops of the GPU emitter: copy (with the async / 16-byte
// and vectorised fast paths), fill, atomic_add, parallel, cumsum, and gemm
// (matrix cores for register accumulators, a per-thread dot product
// otherwise).
#include <algorithm>
#include <array>

#include "compiler/codegen/cuda/hopper/tma_maps.h"
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/ir/expr_uses.h"

namespace kiln::compiler::gpu::internal {
namespace {

// The C++ declarations of `lo` and `hi`: of `span` elements from index
// `start` (a C++ name) along a dim of `size` elements, those at lo <= i <
// hi (relative to start) lie inside the dim.
std::array<std::string, 2> InsideSpan(const std::string& lo,
                                      const std::string& hi,
                                      const std::string& start,
                                      const std::string& size, int64_t span) {
  return {StrCat("const int ", lo, " = (int)kiln::min_(kiln::max_(-", start,
                 ", 0LL), ", span, "LL);"),
          StrCat("const int ", hi, " = (int)kiln::max_(kiln::min_(", size,
                 " - ", start, ", ", span, "LL), 0LL);")};
}

}  // namespace

absl::Status Emitter::EmitCopy(const CopyStmt& c, const Stmt& at) {
  auto src = MakeAccess(c.src);
  if (!src.ok()) return src.status();
  auto dst = MakeAccess(c.dst);
  if (!dst.ok()) return dst.status();
  absl::Status st;
  if (!dst->buf->packed_from.empty()) {
    const RegisterFragment& acc = *src->buf->reg;
    Line(StrCat(acc.warpgroup ? "kiln::acc_to_a_operand_wg<"
                              : "kiln::acc_to_a_operand<",
                NarrowTag(dst->buf->dtype), ", ", acc.m, ", ", acc.n, ", ",
                acc.warps_m, ">(", dst->buf->code, ", ", src->buf->code, ");"));
    return absl::OkStatus();
  }
  if (src->buf->own || dst->buf->own) {
    const bool whole = full_ && std::count(full_->copies.begin(),
                                           full_->copies.end(), &at) > 0;
    return EmitOwnedCopy(*src, *dst, whole);
  }
  if (src->buf->reg && dst->buf->tensor && src->buf->packed_from.empty()) {
    const auto box = RegisterBox(c.src, *src->buf->reg);
    if (box && (box->start[0] != 0 || box->start[1] != 0 ||
                box->extent[0] != src->buf->reg->m ||
                box->extent[1] != src->buf->reg->n)) {
      return EmitRegisterBoxStore(*src, *dst, *box);
    }
  }
  if (TryFastCopy(*src, *dst, &at, "", true, &st)) return st;
  const RegisterFragment* reg = src->buf->reg ? src->buf->reg : dst->buf->reg;
  const std::string layout = src->buf->reg ? src->buf->layout
                             : dst->buf    ? dst->buf->layout
                                           : "";
  // Extents: from the side whose extents are constants.
  std::vector<Expr> ext = dst->FreeExtents(true);
  for (const Expr& e : ext) {
    if (!FoldInt(e)) {
      ext = src->FreeExtents(true);
      break;
    }
  }
  if (reg) ext = (src->buf->reg ? src : dst)->FreeExtents(false);
  const Buf* row = src->buf->row   ? src->buf
                   : dst->buf->row ? dst->buf
                                   : nullptr;
  if (row) ext = (src->buf->row ? src : dst)->FreeExtents(false);
  // A row vector stored to memory: one lane of each row group writes.
  const bool lane0 = src->buf->row && !dst->buf->row && !dst->buf->reg;
  Open("");
  st = ForElements(
      ext, row ? nullptr : reg, layout,
      [&](const std::vector<Expr>& ivs) {
        return CopyElement(*src, *dst, src->Indices(ivs, !src->buf->reg),
                           dst->Indices(ivs, !dst->buf->reg));
      },
      row, lane0);
  Close();
  return st;
}

// A constant box of a register fragment stored to a tensor: every thread
// walks its own elements and stores those inside the box, at the tensor
// region's start plus the element's offset in the box (the tensor's two
// free dims in order, unit ones included).
absl::Status Emitter::EmitRegisterBoxStore(const Access& src, const Access& dst,
                                           const FragmentBox& box) {
  const RegisterFragment& f = *src.buf->reg;
  if (dst.LoopDims(false).size() != 2) {
    return absl::InternalError("a register box stored to a tensor region of " +
                               std::to_string(dst.LoopDims(false).size()) +
                               " free dims");
  }
  const int64_t dims[2] = {f.m, f.n};
  Open("");
  absl::Status st = ForElements(
      {Expr::Int(box.extent[0]), Expr::Int(box.extent[1])}, &f, src.buf->layout,
      [&](const std::vector<Expr>& ivs) {
        Expr in_box = Expr::Bool(true);
        std::vector<Expr> rel;
        for (size_t d = 0; d < 2; ++d) {
          const int64_t lo = box.start[d], hi = lo + box.extent[d];
          if (lo > 0) {
            in_box = RegionSlices::AndTrue(
                std::move(in_box),
                Expr::Binary(BinaryOp::kLe, Expr::Int(lo), ivs[d]));
          }
          if (hi < dims[d]) {
            in_box = RegionSlices::AndTrue(
                std::move(in_box),
                Expr::Binary(BinaryOp::kLt, ivs[d], Expr::Int(hi)));
          }
          rel.push_back(
              lo > 0 ? Expr::Binary(BinaryOp::kSub, ivs[d], Expr::Int(lo))
                     : ivs[d]);
        }
        const std::vector<Expr> di = dst.Indices(rel, false);
        Stmt store = Guarded(dst.Guard(di),
                             StoreOf(dst.name, di, Expr::Load(src.name, ivs)),
                             std::nullopt);
        return EmitStmt(
            Guarded(std::move(in_box), std::move(store), std::nullopt), true);
      });
  Close();
  return st;
}

absl::Status Emitter::CopyElement(const Access& src, const Access& dst,
                                  const std::vector<Expr>& si,
                                  const std::vector<Expr>& di) {
  Stmt s;
  if (src.buf->tensor) {
    s = Guarded(src.Guard(si), StoreOf(dst.name, di, Expr::Load(src.name, si)),
                StoreOf(dst.name, di, Expr::Int(0)));
  } else {
    s = Guarded(dst.Guard(di), StoreOf(dst.name, di, Expr::Load(src.name, si)),
                std::nullopt);
  }
  return EmitStmt(s, true);
}

bool Emitter::OwnedChunks(const Access& x, const Buf& ob) const {
  const DType xd = x.buf->dtype;
  int last_free = -1;
  for (size_t d = 0; d < x.free.size(); ++d) {
    if (x.free[d] && !x.unit[d]) last_free = static_cast<int>(d);
  }
  return x.buf->tensor && ob.own->vec > 1 && ob.dims.back() != 1 &&
         last_free == static_cast<int>(x.free.size()) - 1 &&
         x.buf->strides.back() == "1LL" && xd != DType::kI4 &&
         xd != DType::kU4 && xd != DType::kBool;
}

absl::Status Emitter::EmitOwnedCopy(const Access& src, const Access& dst,
                                    bool whole) {
  const bool into = dst.buf->own != nullptr;
  const Access& o = into ? dst : src;  // the whole owned fragment
  const Access& x = into ? src : dst;  // the other side
  const Buf& ob = *o.buf;
  const OwnedFragment& of = *ob.own;
  // The fragment's dims other than unit ones map, in order, onto the other
  // side's free dims other than unit ones.
  auto other = [&](const std::vector<Expr>& ivs) {
    std::vector<Expr> nu;
    for (size_t d = 0; d < ivs.size(); ++d) {
      if (ob.dims[d] != 1) nu.push_back(ivs[d]);
    }
    if (x.buf->own) return x.Indices(ivs, false);
    return x.Indices(nu, true);
  };
  auto element = [&](const std::vector<Expr>& ivs) {
    const std::vector<Expr> oi = o.Indices(ivs, false), xi = other(ivs);
    return CopyElement(src, dst, into ? xi : oi, into ? oi : xi);
  };
  const DType xd = x.buf->dtype;
  Open("");
  if (!OwnedChunks(x, ob)) {
    absl::Status st = ForOwned(ob, element);
    Close();
    return st;
  }
  const int id = uid_++;
  const std::string c = StrCat("kiln_c", id), u = StrCat("kiln_u", id);
  const std::string raw = StrCat("kiln_raw", id);
  Buf& rb = bufs_[raw];
  rb.dtype = xd;
  rb.scope = Scope::kLocal;
  rb.code = raw;
  rb.dims = {of.vec};
  rb.shape = {Expr::Int(of.vec)};
  vars_[u] = {u, Type::Int()};
  const int64_t chunk_bytes = StorageBytes(xd, of.vec);
  // The edge path's frame, computed once before its chunk loop: for each
  // dim of the tensor the fragment runs along, the fragment indices inside
  // the tensor (lo <= i < hi); whether the region's other dims are inside;
  // whether its chunks are aligned. A chunk's tests are then comparisons of
  // constants (the loop is unrolled) with these, not 64-bit index sums per
  // element: at 128 registers per thread a fragment whose edge path tests
  // each element in full leaves ptxas too few registers to keep it.
  const std::vector<size_t> along = x.LoopDims(true);
  std::vector<std::string> lo(along.size()), hi(along.size());
  const std::string in_name = StrCat("kiln_in", id),
                    al_name = StrCat("kiln_al", id);
  auto frame = [&]() -> absl::Status {
    std::vector<int64_t> spans;
    for (int64_t n : ob.dims) {
      if (n != 1) spans.push_back(n);
    }
    if (spans.size() != along.size()) {
      return absl::InternalError("owned copy: fragment and region dims differ");
    }
    Expr others = Expr::Bool(true);
    for (size_t d = 0; d < x.starts.size(); ++d) {
      if (std::find(along.begin(), along.end(), d) != along.end()) continue;
      others = Expr::Binary(
          BinaryOp::kAnd, std::move(others),
          Expr::Binary(
              BinaryOp::kAnd,
              Expr::Binary(BinaryOp::kLe, Expr::Int(0), x.starts[d]),
              Expr::Binary(BinaryOp::kLt, x.starts[d], x.buf->shape[d])));
    }
    auto in = Value(FoldConstants(others));
    if (!in.ok()) return in.status();
    Line(StrCat("const bool ", in_name, " = ", in->code, ";"));
    auto aligned = WholeRegion(x, ob.dims, of.vec, chunk_bytes, false);
    if (!aligned.ok()) return aligned.status();
    Line(StrCat("const bool ", al_name, " = ", *aligned, ";"));
    vars_[in_name] = {in_name, Type::Of(DType::kBool)};
    vars_[al_name] = {al_name, Type::Of(DType::kBool)};
    for (size_t k = 0; k < along.size(); ++k) {
      const size_t d = along[k];
      auto start = Index(x.starts[d]);
      if (!start.ok()) return start.status();
      auto size = Index(x.buf->shape[d]);
      if (!size.ok()) return size.status();
      lo[k] = StrCat("kiln_lo", id, "_", k);
      hi[k] = StrCat("kiln_hi", id, "_", k);
      const std::string s0 = StrCat("kiln_s", id, "_", k);
      Line(StrCat("const long long ", s0, " = ", *start, ";"));
      for (const std::string& l :
           InsideSpan(lo[k], hi[k], s0, *size, spans[k])) {
        Line(l);
      }
      vars_[lo[k]] = {lo[k], Type::Int()};
      vars_[hi[k]] = {hi[k], Type::Int()};
    }
    return absl::OkStatus();
  };
  // Whether the rows of the chunk at `ivs` (every dim but the last) lie
  // inside the tensor, by the frame.
  auto rows_in = [&](const std::vector<Expr>& ivs) {
    Expr in = Expr::Var(in_name);
    size_t k = 0;
    for (size_t d = 0; d + 1 < ivs.size() && k + 1 < lo.size(); ++d) {
      if (ob.dims[d] == 1) continue;
      in = Expr::Binary(
          BinaryOp::kAnd, std::move(in),
          Expr::Binary(BinaryOp::kAnd,
                       Expr::Binary(BinaryOp::kLe, Expr::Var(lo[k]), ivs[d]),
                       Expr::Binary(BinaryOp::kLt, ivs[d], Expr::Var(hi[k]))));
      ++k;
    }
    return in;
  };
  // Every chunk of this thread: its pointer on the other side and the one
  // chunk copy emitted for it; `checked`: only the part of the chunk inside
  // the tensor, by the frame (whole where it all is and aligned).
  auto chunk_loop = [&](bool checked) -> absl::Status {
    if (checked) KILN_GPU_RETURN_IF_ERROR(frame());
    Line("#pragma unroll");
    Open(StrCat("for (int ", c, " = 0; ", c, " < ", of.regs() / of.vec, "; ++",
                c, ")"));
    absl::Status st = AtOwned(
        ob, StrCat(c, " * ", of.vec), "",
        [&](const std::vector<Expr>& first) -> absl::Status {
          const std::vector<Expr> xf = other(first);
          auto off = Offset(*x.buf, xf);
          if (!off.ok()) return off.status();
          const std::string ptr = StrCat(x.buf->code, " + ", *off);
          // An edge chunk: the part of it inside the tensor, [f, e).
          std::string part;
          if (checked) {
            auto ok = Value(FoldConstants(rows_in(first)));
            if (!ok.ok()) return ok.status();
            auto col = Index(first.back());
            if (!col.ok()) return col.status();
            const std::string f = StrCat("kiln_f", id),
                              e = StrCat("kiln_e", id);
            Open("");
            Line(StrCat("const bool kiln_ok", id, " = ", ok->code, ";"));
            Line(StrCat("const int ", f, " = kiln_ok", id,
                        " ? (int)kiln::max_((long long)", lo.back(), " - (",
                        *col, "), 0LL) : ", of.vec, ";"));
            Line(StrCat("const int ", e, " = kiln_ok", id,
                        " ? (int)kiln::min_((long long)", hi.back(), " - (",
                        *col, "), ", of.vec, "LL) : 0;"));
            part = StrCat(", ", f, ", ", e, ", ", al_name);
          }
          const std::string move =
              checked ? (into ? "load_chunk_part" : "store_chunk_part")
                      : "copy_chunk";
          Line(StrCat("alignas(16) ", StorageType(xd), " ", raw, "[", of.vec,
                      "];"));
          if (into) {
            Line(StrCat("kiln::", move, "<", of.vec, ">(", raw, ", ", ptr, part,
                        ");"));
          }
          Line("#pragma unroll");
          Open(StrCat("for (int ", u, " = 0; ", u, " < ", of.vec, "; ++", u,
                      ")"));
          KILN_GPU_RETURN_IF_ERROR(AtOwned(
              ob, StrCat(c, " * ", of.vec), u,
              [&](const std::vector<Expr>& e) -> absl::Status {
                const Expr r = Expr::Load(raw, {Expr::Var(u)});
                auto code = into ? StoreCode(o.name, o.Indices(e, false),
                                             AssignOp::kSet, r)
                                 : StoreCode(raw, {Expr::Var(u)},
                                             AssignOp::kSet, o.Load(e));
                if (!code.ok()) return code.status();
                Line(*code);
                return absl::OkStatus();
              }));
          Close();
          if (!into) {
            Line(StrCat("kiln::", move, "<", of.vec, ">(", ptr, ", ", raw, part,
                        ");"));
          }
          if (checked) Close();
          return absl::OkStatus();
        });
    Close();
    return st;
  };
  // One test for the whole region, the same for every thread: inside the
  // tensor, its first element aligned to a chunk and every row stride a
  // whole number of chunks. It holds for every tile but the edge ones, so
  // the chunks go unchecked there whatever the shapes' spelling (constant
  // or run-time).
  if (whole) {
    // (A split loop's first part: every chunk inside and aligned.)
    absl::Status st = chunk_loop(false);
    Close();
    bufs_.erase(raw);
    return st;
  }
  auto test = WholeRegion(x, ob.dims, of.vec, chunk_bytes);
  if (!test.ok()) return test.status();
  Open(StrCat("if (", *test, ")"));
  absl::Status st = chunk_loop(false);
  if (st.ok()) {
    Close("} else {");
    ++indent_;
    st = chunk_loop(true);
  }
  Close();
  Close();
  bufs_.erase(raw);
  return st;
}

absl::StatusOr<std::string> Emitter::WholeRegion(
    const Access& x, const std::vector<int64_t>& dims, int vec,
    int64_t chunk_bytes, bool bounds) {
  const Buf& b = *x.buf;
  // The fragment's dims other than unit ones lie, in order, along the
  // region's free dims other than unit ones (EmitOwnedCopy's mapping).
  std::vector<int64_t> along;
  for (int64_t n : dims) {
    if (n != 1) along.push_back(n);
  }
  size_t next = 0;
  std::vector<Expr> spans;  // elements touched along each dim
  std::string strides;
  for (size_t d = 0; d < b.shape.size(); ++d) {
    int64_t n = 1;
    if (x.free[d] && !x.unit[d]) {
      if (next == along.size()) return std::string("false");
      n = along[next++];
      if (d + 1 < b.shape.size()) {
        StrAppend(&strides, " && (", b.strides[d], ") % ", vec, " == 0");
      }
    }
    spans.push_back(Expr::Int(n));
  }
  if (next != along.size()) return std::string("false");
  const Expr in = x.SpanInBounds(spans, b.shape);
  auto test = Value(FoldConstants(in));
  if (!test.ok()) return test.status();
  auto off = Offset(b, x.starts);
  if (!off.ok()) return off.status();
  return StrCat(bounds ? StrCat("(", test->code, ") && ") : std::string(),
                "kiln::chunk_aligned(", b.code, " + ", *off, ", ", chunk_bytes,
                ")", strides);
}

absl::Status Emitter::EmitStagedStore(const Stmt& first, const Stmt& second) {
  const auto& c1 = std::get<CopyStmt>(first.node);
  const auto& c2 = std::get<CopyStmt>(second.node);
  Line(StrCat("// tiles ", At(first.loc), " and ", At(second.loc), ": ",
              c1.src.name, " straight to ", c2.dst.name, " (", c1.dst.name,
              " is not needed)"));
  auto src = MakeAccess(c1.src);
  if (!src.ok()) return src.status();
  auto dst = MakeAccess(c2.dst);
  if (!dst.ok()) return dst.status();
  absl::Status st;
  if (!TryFastCopy(*src, *dst, &first, "", false, &st)) {
    return LocatedError(second.loc,
                        StrCat("the store of ", c1.src.name, " to ",
                               c2.dst.name, " was planned but does not apply"),
                        absl::StatusCode::kInternal);
  }
  return st;
}

absl::StatusOr<int> Emitter::TmaStoreMap(const Stmt* at) const {
  if (at == nullptr) return -1;
  auto it = kp_.tma.stores.find(at);
  if (it == kp_.tma.stores.end()) return -1;
  const int map = TmaMapIndex(kp_.tma, it->second);
  if (map < 0) {
    return LocatedError(at->loc,
                        StrCat("the TMA store to ", it->second.param,
                               " has no planned tensor map"),
                        absl::StatusCode::kInternal);
  }
  return map;
}

// A whole rank-2 shared tile <-> a rank-2 global region whose last dim is
// contiguous: 16-byte chunks (cp.async where the target has it) and 16-byte
// stores, with edge predication.
bool Emitter::TryFastCopy(const Access& src, const Access& dst, const Stmt* at,
                          const std::string& dst_ptr_override, bool wait,
                          absl::Status* st) {
  const bool g2s = src.buf->tensor && Shared(dst.name);
  const bool s2g = dst.buf->tensor && Shared(src.name);
  // A whole register accumulator to f16/bf16/f32 global memory: paired
  // stores (kiln::r2g_acc).
  const DType out = dst.buf->dtype;
  const bool r2g =
      dialect_.acc_pair_stores && dst.buf->tensor && src.buf->reg &&
      src.buf->packed_from.empty() &&
      (out == DType::kF16 || out == DType::kBF16 || out == DType::kF32);
  if (!g2s && !s2g && !r2g) return false;
  const Access& g = g2s ? src : dst;
  const Access& t = g2s ? dst : src;
  const Buf& tb = *t.buf;
  // A rank-1 shared tile moves as one row (RowMajor<1, N>) of a region
  // whose one free dim is the tensor's contiguous innermost.
  const bool row1 = !r2g && tb.dims.size() == 1;
  if (row1) {
    const std::vector<int64_t> dims{1, tb.dims[0]};
    if (!ChunkedRows(tb.dtype, dims, tb.pad, g.buf->dtype) || !t.free[0] ||
        !TensorRowRegion(tb.dims[0], g.free, g.extents,
                         g.buf->strides.back() == "1LL")) {
      return false;
    }
  } else if (r2g) {
    if (tb.dims.size() != 2 || tb.reg->m != tb.dims[0] ||
        tb.reg->n != tb.dims[1]) {
      return false;
    }
  } else if (tb.layout.empty() ||
             !ChunkedRows(tb.dtype, tb.dims, tb.pad, g.buf->dtype)) {
    return false;
  }
  for (bool f : t.free) {
    if (!f) return false;
  }
  // (4-bit tiles never get here: ChunkedRows refuses them, and register
  // accumulators are f32.)
  const DType dt = tb.dtype;
  // The global region's two free dims, rows then columns (a row tile: its
  // one free dim as the columns; kNoRow marks the row dim it lacks).
  constexpr size_t kNoRow = ~size_t{0};
  const auto free_dims =
      row1 ? std::optional<std::array<size_t, 2>>(
                 std::array<size_t, 2>{kNoRow, g.free.size() - 1})
           : TensorTileRegion(tb.dims, g.free, g.extents,
                              g.buf->strides.back() == "1LL");
  if (!free_dims) return false;
  const std::array<size_t, 2>& fd = *free_dims;
  const std::string layout =
      row1 ? StrCat("kiln::RowMajor<1, ", tb.dims[0], ", 0>") : tb.layout;
  const std::vector<int64_t> tdims =
      row1 ? std::vector<int64_t>{1, tb.dims[0]} : tb.dims;
  const std::string row_stride = row1 ? "0LL" : g.buf->strides[fd[0]];
  auto emit = [&]() -> absl::Status {
    std::vector<std::string> start;
    for (size_t d = 0; d < g.starts.size(); ++d) {
      auto s = Index(g.starts[d]);
      if (!s.ok()) return s.status();
      start.push_back(*s);
    }
    std::string base_off;
    for (size_t d = 0; d < start.size(); ++d) {
      if (d) base_off += " + ";
      base_off += "(" + start[d] + ") * " + g.buf->strides[d];
    }
    auto dimsz = [&](size_t d) -> absl::StatusOr<std::string> {
      return Index(g.buf->shape[d]);
    };
    auto r_dim = row1 ? absl::StatusOr<std::string>("1LL") : dimsz(fd[0]);
    auto c_dim = dimsz(fd[1]);
    if (!r_dim.ok()) return r_dim.status();
    if (!c_dim.ok()) return c_dim.status();
    const std::string r0 = row1 ? "0LL" : start[fd[0]], c0 = start[fd[1]];
    Open("");
    Line("const long long kiln_r0 = " + r0 + ", kiln_c0 = " + c0 + ";");
    for (const std::string& l :
         InsideSpan("kiln_rlo", "kiln_rhi", "kiln_r0", *r_dim, tdims[0])) {
      Line(l);
    }
    for (const std::string& l :
         InsideSpan("kiln_clo", "kiln_chi", "kiln_c0", *c_dim, tdims[1])) {
      Line(l);
    }
    const std::string st_type = StorageType(dt);
    const std::string gp = g.buf->code + " + (" + base_off + ")";
    const std::string tp =
        dst_ptr_override.empty() ? tb.code : dst_ptr_override;
    if (r2g) {
      const std::string tag =
          out == DType::kF32 ? std::string("float") : NarrowTag(out);
      const std::string stores = StrCat(
          "kiln::r2g_acc<", tag, ", ", layout, ">(", gp, ", ", row_stride, ", ",
          tb.code, ", kiln_rlo, kiln_rhi, kiln_clo, kiln_chi);");
      absl::StatusOr<int> map = TmaStoreMap(at);
      if (!map.ok()) return map.status();
      if (*map >= 0) {
        // The tile's first element, innermost dim first.
        std::string at;
        for (size_t d = start.size(); d-- > 0;) {
          StrAppend(&at, at.empty() ? "" : ", ", "(int)(", start[d], ")");
        }
        Open("if (kiln_tma)");
        Line(StrCat("kiln::r2g_acc_tma<", tag, ", ", layout, ", ",
                    start.size() - 1 - fd[0], ">(&kiln_map", *map,
                    ", kiln_smem + ", kp_.shared.tma_staging, ", ", tb.code,
                    ", {", at, "});"));
        Close();
        Open("else");
        Line(stores);
        Close();
      } else {
        Line(stores);
      }
    } else if (g2s && g2s_mode_ == G2sMode::kTestWhole) {
      Line(StrCat("kiln_whole = kiln_whole && kiln::g2s_tile_whole<", st_type,
                  ", ", layout, ">(", gp, ", ", row_stride,
                  ", kiln_rlo, kiln_rhi, kiln_clo, kiln_chi);"));
    } else if (g2s) {
      Line(StrCat("kiln::g2s_tile_async<", st_type, ", ", layout, ", ",
                  threads_, g2s_mode_ == G2sMode::kCopyWhole ? ", true" : "",
                  ">(", tp, ", ", gp, ", ", g.buf->code, ", ", row_stride,
                  ", kiln_rlo, kiln_rhi, kiln_clo, kiln_chi);"));
    } else {
      Line(StrCat("kiln::s2g_tile<", st_type, ", ", layout, ", ", threads_,
                  ">(", gp, ", ", row_stride, ", ", tb.code,
                  ", kiln_rlo, kiln_rhi, kiln_clo, kiln_chi);"));
    }
    Close();
    if (g2s && wait) {
      Line("kiln::cp_async_commit();");
      async_pending_ = true;  // waited for by the next Barrier()
      if (pipelined_ > 0) Barrier();
    }
    return absl::OkStatus();
  };
  *st = emit();
  return true;
}

bool ChunkedRows(DType tile, const std::vector<int64_t>& dims, int64_t pad,
                 DType tensor) {
  if (dims.size() != 2 || pad != 0 || tile != tensor) return false;
  if (tile == DType::kI4 || tile == DType::kU4) return false;
  const int64_t eb = DTypeBits(tile) / 8;
  return eb >= 1 && (dims[1] * eb) % 16 == 0;
}

std::optional<std::array<size_t, 2>> TensorTileRegion(
    const std::vector<int64_t>& dims, const std::vector<bool>& free,
    const std::vector<Expr>& extents, bool inner_contiguous) {
  std::vector<size_t> fd;
  for (size_t d = 0; d < free.size(); ++d) {
    if (free[d]) fd.push_back(d);
  }
  if (dims.size() != 2 || fd.size() != 2 || fd[1] != free.size() - 1 ||
      !inner_contiguous) {
    return std::nullopt;
  }
  for (int i = 0; i < 2; ++i) {
    auto e = FoldInt(extents[fd[i]]);
    if (!e || *e != dims[i]) return std::nullopt;
  }
  return std::array<size_t, 2>{fd[0], fd[1]};
}

bool TensorRowRegion(int64_t n, const std::vector<bool>& free,
                     const std::vector<Expr>& extents, bool inner_contiguous) {
  if (free.empty() || !inner_contiguous) return false;
  for (size_t d = 0; d < free.size(); ++d) {
    if (free[d] != (d + 1 == free.size())) return false;
  }
  auto e = FoldInt(extents.back());
  return e && *e == n;
}

namespace {

// A region of tensor parameter `p` as the emitter addresses it
// (MakeAccess: a dim is free unless indexed; its extent the slice's, or
// the tensor's for a whole dim); returns whether the innermost dim is
// contiguous.
bool ParamRegionDims(const Param& p, const Region& r, std::vector<bool>* free,
                     std::vector<Expr>* extents) {
  for (size_t d = 0; d < p.shape.size(); ++d) {
    Slice s;
    if (r.has_slices && d < r.slices.size()) s = r.slices[d];
    free->push_back(s.kind != Slice::Kind::kIndex);
    extents->push_back(s.kind == Slice::Kind::kRange  ? FoldConstants(s.extent)
                       : s.kind == Slice::Kind::kFull ? p.shape[d]
                                                      : Expr::Int(1));
  }
  if (p.strides.empty()) return true;
  auto c = FoldInt(p.strides.back());
  return c && *c == 1;
}

}  // namespace

std::optional<std::array<size_t, 2>> ParamTileRegion(
    const Param& p, const Region& r, const std::vector<int64_t>& dims) {
  std::vector<bool> free;
  std::vector<Expr> extents;
  const bool contiguous = ParamRegionDims(p, r, &free, &extents);
  return TensorTileRegion(dims, free, extents, contiguous);
}

bool ParamRowRegion(const Param& p, const Region& r, int64_t n) {
  std::vector<bool> free;
  std::vector<Expr> extents;
  const bool contiguous = ParamRegionDims(p, r, &free, &extents);
  return TensorRowRegion(n, free, extents, contiguous);
}

absl::Status Emitter::EmitFill(const FillStmt& f, const Loc& loc) {
  auto dst = MakeAccess(f.dst);
  if (!dst.ok()) return dst.status();
  const RegisterFragment* reg = dst->buf->reg;
  const bool whole = reg || dst->buf->row;
  if (dst->buf->own) {
    Open("");
    absl::Status st = ForOwned(*dst->buf, [&](const std::vector<Expr>& ivs) {
      return EmitStmt(StoreOf(dst->name, dst->Indices(ivs, false), f.value),
                      true);
    });
    Close();
    return st;
  }
  Open("");
  absl::Status st = ForElements(
      dst->FreeExtents(!whole), reg, dst->buf->layout,
      [&](const std::vector<Expr>& ivs) {
        return EmitStmt(StoreOf(dst->name, dst->Indices(ivs, !whole), f.value),
                        true);
      },
      dst->buf->row ? dst->buf : nullptr);
  Close();
  (void)loc;
  return st;
}

absl::Status Emitter::EmitAtomicAdd(const AtomicAddStmt& a, const Loc& loc) {
  auto src = MakeAccess(a.src);
  if (!src.ok()) return src.status();
  auto dst = MakeAccess(a.dst);
  if (!dst.ok()) return dst.status();
  const RegisterFragment* reg = src->buf->reg;
  const Buf* row = src->buf->row ? src->buf : nullptr;
  std::vector<Expr> ext =
      reg || row ? src->FreeExtents(false) : dst->FreeExtents(true);
  for (const Expr& e : ext) {
    if (!FoldInt(e)) ext = src->FreeExtents(true);
  }
  Open("");
  absl::Status st = ForElements(
      ext, reg, src->buf->layout,
      [&](const std::vector<Expr>& ivs) {
        std::vector<Expr> di = dst->Indices(ivs, true);
        return EmitStmt(
            Guarded(
                dst->Guard(di),
                StoreOf(dst->name, di,
                        Expr::Load(src->name, src->Indices(ivs, !reg && !row)),
                        AssignOp::kAdd),
                std::nullopt),
            true);
      },
      row, row != nullptr);
  Close();
  (void)loc;
  return st;
}

namespace {

// An integer expression split as sum(coef[v] * v) + sum(scale * term) over
// a parallel's element variables v, the terms free of them.
struct ElementSplit {
  std::map<std::string, int64_t> coef;
  std::vector<std::pair<int64_t, Expr>> rest;
};

// Splits `scale * e`; false when the element variables do not appear
// linearly (sums, differences, negation, products with an integer literal).
bool SplitElements(const Expr& e, int64_t scale,
                   const std::set<std::string>& elem, ElementSplit* out) {
  if (scale > (1 << 20) || scale < -(1 << 20)) return false;
  if (!UsesAnyOf(e, elem)) {
    out->rest.push_back({scale, e});
    return true;
  }
  if (e.kind == ExprKind::kVar) {
    out->coef[e.name] += scale;
    return true;
  }
  if (e.kind == ExprKind::kUnary && e.unary_op == UnaryOp::kNeg) {
    return SplitElements(e.args[0], -scale, elem, out);
  }
  if (e.kind != ExprKind::kBinary) return false;
  const Expr& a = e.args[0];
  const Expr& b = e.args[1];
  switch (e.binary_op) {
    case BinaryOp::kAdd:
      return SplitElements(a, scale, elem, out) &&
             SplitElements(b, scale, elem, out);
    case BinaryOp::kSub:
      return SplitElements(a, scale, elem, out) &&
             SplitElements(b, -scale, elem, out);
    case BinaryOp::kMul:
      if (a.kind == ExprKind::kInt) {
        return SplitElements(b, scale * a.int_value, elem, out);
      }
      if (b.kind == ExprKind::kInt) {
        return SplitElements(a, scale * b.int_value, elem, out);
      }
      return false;
    default:
      return false;
  }
}

}  // namespace

bool AffineIn(const Expr& e, const std::string& var) {
  ElementSplit split;
  return SplitElements(e, 1, {var}, &split);
}

std::optional<std::pair<int64_t, Expr>> AffineSplit(const Expr& e,
                                                    const std::string& var) {
  ElementSplit split;
  if (!SplitElements(e, 1, {var}, &split)) return std::nullopt;
  std::optional<Expr> rest;
  for (const auto& [scale, t] : split.rest) {
    Expr term =
        scale == 1 ? t : Expr::Binary(BinaryOp::kMul, Expr::Int(scale), t);
    rest = rest ? Expr::Binary(BinaryOp::kAdd, *rest, term) : term;
  }
  return std::make_pair(split.coef[var],
                        FoldConstants(rest.value_or(Expr::Int(0))));
}

namespace {

bool IsComparison(BinaryOp op) {
  return op == BinaryOp::kLt || op == BinaryOp::kLe || op == BinaryOp::kGt ||
         op == BinaryOp::kGe || op == BinaryOp::kEq || op == BinaryOp::kNe;
}

}  // namespace

// Comparisons `A OP B` in a parallel body whose integer operands are the
// element variables (linearly) plus terms free of them become
// `(int)L OP bound`: L the element part, whose range the extents bound,
// and `bound` the rest, computed once before the element loop and clamped
// to L's range widened by one (which keeps every comparison's outcome).
// A mask like `k * BN + j < S` then costs one 32-bit compare per element
// instead of 64-bit index arithmetic.
absl::StatusOr<Emitter::HoistedBody> Emitter::HoistElementComparisons(
    const ParallelStmt& p, const std::vector<Expr>& extents) {
  std::set<std::string> elem(p.vars.begin(), p.vars.end());
  std::map<std::string, int64_t> ext;
  for (size_t d = 0; d < p.vars.size() && d < extents.size(); ++d) {
    auto n = FoldInt(extents[d]);
    if (!n || *n < 1 || *n > (1 << 20)) return HoistedBody{p.body, {}, ""};
    ext[p.vars[d]] = *n;
  }
  // The hoisted bounds whose comparison holds for every element when
  // (C++) the test beside them does.
  std::map<std::string, std::string> all_true;
  // The monotone comparisons' values at the two ends of L's range.
  std::map<std::string, std::pair<std::string, std::string>> uniform;
  std::set<std::string> inner, unused;  // names the body declares
  CollectUses(p.body, &unused, &inner);
  // A term free of the element variables, hoistable before the loop: an
  // integer of 64 bits over names bound outside the body.
  auto hoistable = [&](const Expr& t) {
    std::set<std::string> used;
    ExprUses(t, &used);
    for (const std::string& n : used) {
      if (inner.count(n) || !vars_.count(n)) return false;
    }
    // (A signed integer of any width: a let loaded from an i32 tensor, a
    // sequence length from cu_seqlens, compares as the index would.)
    auto v = Value(t);
    return v.ok() && (v->type == Type::Int() ||
                      (v->type.IsInteger() && IsSigned(v->type.dtype)));
  };
  std::function<Expr(const Expr&)> rewrite = [&](const Expr& e) -> Expr {
    Expr out = e;
    for (Expr& a : out.args) a = rewrite(a);
    if (e.kind != ExprKind::kBinary || !IsComparison(e.binary_op)) return out;
    ElementSplit split;
    if (!SplitElements(e.args[0], 1, elem, &split) ||
        !SplitElements(e.args[1], -1, elem, &split)) {
      return out;
    }
    int64_t lo = 0, hi = 0;
    std::optional<Expr> l;
    for (const auto& [v, c] : split.coef) {
      if (c == 0) continue;
      const int64_t last = c * (ext.at(v) - 1);
      lo += std::min<int64_t>(0, last);
      hi += std::max<int64_t>(0, last);
      // (In 32 bits throughout.)
      const Expr var = Expr::Cast(DType::kI32, Expr::Var(v));
      if (l && (c == 1 || c == -1)) {
        l = Expr::Binary(c == 1 ? BinaryOp::kAdd : BinaryOp::kSub, *l, var);
        continue;
      }
      Expr term =
          c == 1 ? var
                 : Expr::Binary(BinaryOp::kMul,
                                Expr::Cast(DType::kI32, Expr::Int(c)), var);
      l = l ? Expr::Binary(BinaryOp::kAdd, *l, term) : term;
    }
    if (!l || lo < -(1 << 30) || hi > (1 << 30)) return out;
    // A OP B  <=>  A - B OP 0  <=>  L OP -(rest).
    std::string bound;
    for (const auto& [scale, t] : split.rest) {
      if (!hoistable(t)) return out;
      auto code = Index(t);
      if (!code.ok()) return out;
      StrAppend(&bound, " + (", -scale, "LL) * ", *code);
    }
    const std::string name = StrCat("kiln_cmp", uid_++);
    Line(StrCat("const int ", name, " = (int)kiln::min_(kiln::max_(0LL", bound,
                ", ", lo - 1, "LL), ", hi + 1, "LL);"));
    vars_[name] = {name, Type::Of(DType::kI32)};
    // L takes values in [lo, hi]; a comparison of L with a bound is
    // monotone in L, so it holds for every element when it holds at the
    // end of the range that is hardest to satisfy, and is the same for
    // every element when it is the same at both ends.
    std::string op;
    switch (e.binary_op) {
      case BinaryOp::kLt:
        op = " < ";
        all_true[name] = StrCat(hi, op, name);
        break;
      case BinaryOp::kLe:
        op = " <= ";
        all_true[name] = StrCat(hi, op, name);
        break;
      case BinaryOp::kGt:
        op = " > ";
        all_true[name] = StrCat(lo, op, name);
        break;
      case BinaryOp::kGe:
        op = " >= ";
        all_true[name] = StrCat(lo, op, name);
        break;
      default:
        break;
    }
    if (!op.empty()) {
      uniform[name] = {StrCat("(", lo, op, name, ")"),
                       StrCat("(", hi, op, name, ")")};
    }
    return Expr::Binary(e.binary_op, *l, Expr::Var(name), e.loc);
  };
  // The same body with those comparisons true.
  std::function<Expr(const Expr&)> assume = [&](const Expr& e) -> Expr {
    if (e.kind == ExprKind::kBinary && IsComparison(e.binary_op) &&
        e.args[1].kind == ExprKind::kVar && all_true.count(e.args[1].name)) {
      return Expr::Bool(true, e.loc);
    }
    Expr out = e;
    for (Expr& a : out.args) a = assume(a);
    return out;
  };
  // The same body with each monotone comparison replaced by its value for
  // the whole tile (a bool computed once).
  std::map<std::string, std::string> uniform_value;
  std::function<Expr(const Expr&)> uniformly = [&](const Expr& e) -> Expr {
    if (e.kind == ExprKind::kBinary && IsComparison(e.binary_op) &&
        e.args[1].kind == ExprKind::kVar &&
        uniform_value.count(e.args[1].name)) {
      return Expr::Var(uniform_value.at(e.args[1].name), e.loc);
    }
    Expr out = e;
    for (Expr& a : out.args) a = uniformly(a);
    return out;
  };
  std::function<Block(const Block&, const std::function<Expr(const Expr&)>&)>
      block = [&](const Block& b, const std::function<Expr(const Expr&)>& f) {
        Block out = b;
        for (Stmt& s : out) {
          if (auto* x = std::get_if<LetStmt>(&s.node)) {
            x->value = f(x->value);
          } else if (auto* x = std::get_if<StoreStmt>(&s.node)) {
            x->value = f(x->value);
          } else if (auto* x = std::get_if<IfStmt>(&s.node)) {
            x->cond = f(x->cond);
            x->then_body = block(x->then_body, f);
            x->else_body = block(x->else_body, f);
          }
        }
        return out;
      };
  HoistedBody out;
  out.body = block(p.body, rewrite);
  if (!all_true.empty()) {
    out.all_true_body = block(out.body, assume);
    for (const auto& [name, test] : all_true) {
      out.all_true += (out.all_true.empty() ? "" : " && ") + test;
    }
  }
  // Masks that are uniform but not all true (varlen attention's interior
  // tile: `i < j || i >= q_len || j >= kv_len` false throughout).
  if (uniform.size() > 1) {
    for (const auto& [name, ends] : uniform) {
      const std::string u = StrCat("kiln_uni", uid_++);
      Line(StrCat("const bool ", u, " = ", ends.first, ";"));
      vars_[u] = {u, Type::Of(DType::kBool)};
      uniform_value[name] = u;
      out.uniform += StrCat(out.uniform.empty() ? "" : " && ", ends.first,
                            " == ", ends.second);
    }
    out.uniform_body = block(out.body, uniformly);
  }
  return out;
}

absl::Status Emitter::EmitParallel(const ParallelStmt& p, const Loc& loc) {
  if (full_ && !folded_parallel_) {
    // In a split loop's first part: the body's conditions the in-bounds
    // facts decide (a mask past the sequence end) fold away.
    facts_->Push();
    for (size_t d = 0; d < p.vars.size() && d < p.extents.size(); ++d) {
      facts_->AddRange(p.vars[d], Expr::Int(0), p.extents[d]);
    }
    fold_ints_.insert(p.vars.begin(), p.vars.end());
    ParallelStmt q = p;
    q.body = FoldDecided(p.body);
    for (const std::string& v : p.vars) fold_ints_.erase(v);
    if (q.body.empty()) {
      facts_->Pop();
      return absl::OkStatus();
    }
    folded_parallel_ = true;
    absl::Status st = EmitParallel(q, loc);
    folded_parallel_ = false;
    facts_->Pop();
    return st;
  }
  // A parallel over a register fragment's index space runs over the
  // fragment's own elements (fragment_plan.h guarantees one layout).
  const Buf* reg_buf = nullptr;
  const Buf* row_buf = nullptr;
  const Buf* own_buf = nullptr;
  // Over a row vector's rows, a body that stores only into memory (the
  // plan allows no register stores beside those) runs on one lane of each
  // row group: every lane holds the row, one stores it.
  bool stores_memory = false;
  std::function<void(const Block&)> scan = [&](const Block& b) {
    for (const Stmt& s : b) {
      auto note = [&](const std::string& n) {
        const Buf* bb = FindBuf(n);
        if (bb && bb->reg && !reg_buf) reg_buf = bb;
        if (bb && bb->row && !row_buf) row_buf = bb;
        // (The loop runs over a full-rank owned tile's elements.)
        if (bb && bb->own &&
            (!own_buf || (own_buf->own->rank < bb->own->rank &&
                          bb->own->rank == static_cast<int>(p.vars.size())))) {
          own_buf = bb;
        }
      };
      if (auto* st = std::get_if<StoreStmt>(&s.node)) {
        note(st->name);
        const Buf* bb = FindBuf(st->name);
        // (A fragment the plan keeps in shared memory is memory too: its
        // rows' copies would each read-modify-write the one element.)
        stores_memory |= !bb || bb->tensor || Shared(st->name);
      }
      std::function<void(const Expr&)> ex = [&](const Expr& e) {
        if (e.kind == ExprKind::kLoad) note(e.name);
        for (const Expr& a : e.args) ex(a);
      };
      std::visit(
          [&](const auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, LetStmt>) ex(n.value);
            if constexpr (std::is_same_v<T, StoreStmt>) {
              ex(n.value);
              for (const Expr& i : n.indices) ex(i);
            }
            if constexpr (std::is_same_v<T, IfStmt>) {
              ex(n.cond);
              scan(n.then_body);
              scan(n.else_body);
            }
            if constexpr (std::is_same_v<T, ForStmt>) {
              ex(n.stop);
              if (n.start) ex(*n.start);
              scan(n.body);
            }
          },
          s.node);
    }
  };
  scan(p.body);
  std::vector<Expr> ext;
  for (const Expr& e : p.extents) ext.push_back(FoldConstants(e));
  Open("");
  auto hoisted = HoistElementComparisons(p, ext);
  if (!hoisted.ok()) return hoisted.status();
  const Block* body = &hoisted->body;
  // Rows of thread-owned fragments are read by a parallel over those
  // fragments' elements like the elements themselves (owned_rows.cc).
  const bool owned_rows = row_buf && row_buf->row->owned();
  auto loop = [&]() -> absl::Status {
    if (own_buf && !reg_buf && (!row_buf || owned_rows)) {
      // Over the thread-owned fragments' elements (one layout for all:
      // fragment_plan.h); element accesses name the parallel variables.
      auto element = [&](const std::vector<Expr>& ivs) {
        for (size_t d = 0; d < p.vars.size(); ++d) {
          const std::string v = Mangle(p.vars[d]);
          Line("const long long " + v + " = " + ivs[d].name + ";");
          vars_[p.vars[d]] = {v, Type::Int()};
        }
        own_vars_ = p.vars;
        return ElementBody(*body);
      };
      const std::vector<const StoreStmt*> chunked =
          ChunkedStores(*body, p.vars, *own_buf);
      if (!chunked.empty()) return ForOwnedChunks(*own_buf, chunked, element);
      return ForOwned(*own_buf, element);
    }
    return ForElements(
        ext, reg_buf ? reg_buf->reg : nullptr, reg_buf ? reg_buf->layout : "",
        [&](const std::vector<Expr>& ivs) -> absl::Status {
          for (size_t d = 0; d < p.vars.size(); ++d) {
            const std::string v = Mangle(p.vars[d]);
            Line("const long long " + v + " = " + ivs[d].name + ";");
            vars_[p.vars[d]] = {v, Type::Int()};
          }
          if (reg_buf) {
            // Element accesses name the parallel variables.
            for (size_t d = 0; d < 2 && d < p.vars.size(); ++d) {
              reg_vars_[d] = p.vars[d];
            }
          } else if (row_buf) {
            row_var_ = p.vars[0];
          }
          return ElementBody(*body);
        },
        reg_buf ? nullptr : row_buf, !reg_buf && row_buf && stores_memory);
  };
  // Every element passes the masks (a whole tile inside the bounds): the
  // body without them; else every mask is the same for the whole tile: the
  // body with them computed once; else the body as written.
  std::vector<std::pair<std::string, const Block*>> versions;
  if (!hoisted->all_true.empty()) {
    versions.push_back({hoisted->all_true, &hoisted->all_true_body});
  }
  if (!hoisted->uniform.empty()) {
    versions.push_back({hoisted->uniform, &hoisted->uniform_body});
  }
  absl::Status st;
  for (const auto& [test, version] : versions) {
    Line(StrCat(&test == &versions.front().first ? "if (" : "else if (", test,
                ")"));
    Open("");
    body = version;
    st = loop();
    Close();
    if (!st.ok()) return st;
  }
  if (!versions.empty()) {
    Line("else");
    Open("");
  }
  body = &hoisted->body;
  st = loop();
  if (!versions.empty()) Close();
  Close();
  (void)loc;
  return st;
}

absl::Status Emitter::EmitCumsum(const CumsumStmt& c, const Loc& loc) {
  auto src = MakeAccess(c.src);
  if (!src.ok()) return src.status();
  auto dst = MakeAccess(c.dst);
  if (!dst.ok()) return dst.status();
  std::vector<Expr> se = src->FreeExtents(false);
  if (c.dim < 0 || c.dim >= static_cast<int64_t>(se.size())) {
    return LocatedError(loc, "cumsum dim out of range");
  }
  auto n = FoldInt(se[c.dim]);
  if (!n) return LocatedError(loc, "cumsum extent is not a constant");
  std::vector<Expr> others;
  for (size_t d = 0; d < se.size(); ++d) {
    if (static_cast<int64_t>(d) != c.dim) others.push_back(se[d]);
  }
  // One thread per line; the line is scanned serially (running value in a
  // register, stored as it goes: src and dst may be the same tile).
  Open("");
  absl::Status st =
      ForElements(others, nullptr, "", [&](const std::vector<Expr>& o) {
        auto with_t = [&](Expr t) {
          std::vector<Expr> ivs = o;
          ivs.insert(ivs.begin() + c.dim, std::move(t));
          return ivs;
        };
        const int id = uid_++;
        const std::string t = StrCat("kiln_t", id);
        const std::string acc = StrCat("kiln_acc", id);
        vars_[t] = {t, Type::Int()};
        auto v0 =
            LoadValue(src->name, src->Indices(with_t(Expr::Int(0)), false));
        if (!v0.ok()) return v0.status();
        const Type dt = Type::Of(dst->buf->dtype);
        Line(RegType(dt) + " " + acc + " = 0;");
        vars_[acc] = {acc, dt};
        Line(StrCat("for (long long ", t, " = 0; ", t, " < ", *n, "; ++", t,
                    ")"));
        Open("");
        Expr pos = c.reverse ? Expr::Binary(BinaryOp::kSub, Expr::Int(*n - 1),
                                            Expr::Var(t))
                             : Expr::Var(t);
        auto sv = Value(Expr::Binary(
            BinaryOp::kAdd, Expr::Var(acc),
            Expr::Load(src->name, src->Indices(with_t(pos), false))));
        if (!sv.ok()) return sv.status();
        Line(acc + " = " + Convert(*sv, dt).code + ";");
        auto store = StoreCode(dst->name, dst->Indices(with_t(pos), false),
                               AssignOp::kSet, Expr::Var(acc));
        if (!store.ok()) return store.status();
        Line(*store);
        Close();
        return absl::OkStatus();
      });
  Close();
  return st;
}

void Emitter::WgIssued(const GemmStmt& g, const std::string& acc_code) {
  if (wg_lazy_ == 0) {
    Line("kiln::wgmma_wait<0>();");
    return;
  }
  wg_groups_.push_back({acc_code, {g.c.name}, {g.a.name, g.b.name}});
}

absl::Status Emitter::EmitGemm(const GemmStmt& g, const Loc& loc) {
  auto a = MakeAccess(g.a);
  if (!a.ok()) return a.status();
  auto b = MakeAccess(g.b);
  if (!b.ok()) return b.status();
  auto c = MakeAccess(g.c);
  if (!c.ok()) return c.status();
  std::vector<Expr> ce = c->FreeExtents(false), ae = a->FreeExtents(false);
  if (ce.size() != 2 || ae.size() != 2 || b->FreeExtents(false).size() != 2) {
    return LocatedError(loc, "gemm needs rank-2 operands",
                        absl::StatusCode::kUnimplemented);
  }
  auto m = FoldInt(ce[0]), n = FoldInt(ce[1]);
  auto kd = FoldInt(g.transpose_a ? ae[0] : ae[1]);
  if (!m || !n || !kd) {
    return LocatedError(loc, "gemm extents are not constants");
  }
  if (c->buf->reg) {
    // Matrix cores from swizzled shared tiles (the library's gemm_ss:
    // ldmatrix + mma.sync on CUDA, MFMA on HIP).
    const RegisterFragment& rf = *c->buf->reg;
    const std::string tag = NarrowTag(a->buf->dtype);
    if (g.clear_accum) {
      Line("#pragma unroll");
      Line(StrCat("for (int kiln_z = 0; kiln_z < ", rf.regs(), "; ++kiln_z) ",
                  c->buf->code, "[kiln_z] = 0.0f;"));
    }
    if (rf.warpgroup && !a->buf->packed_from.empty()) {
      // Hopper, A in registers (P of attention): the register-A wgmma.
      const std::string instr =
          WgmmaInstr(rf.n, a->buf->dtype, false, !g.transpose_b, true);
      Line(StrCat("kiln::gemm_wg_rs<", instr, ", ", rf.m, ", ", rf.n, ", ", *kd,
                  ", ", rf.warps_m, ", ", g.transpose_b ? "true" : "false",
                  ", ", b->buf->layout, ">(", c->buf->code, ", ", a->buf->code,
                  ", ", b->buf->code, ");"));
      if (!defer_wgmma_wait_) WgIssued(g, c->buf->code);
      return absl::OkStatus();
    }
    if (rf.warpgroup) {
      // Hopper: one wgmma group per gemm, waited for at once (or by the
      // pipelined loop); fp8 promotes each tile's product to f32 itself.
      const bool fp8 = DTypeBits(a->buf->dtype) == 8;
      // fp8 promotes its product in column chunks (kiln::gemm_wg_promoted's
      // NC) where the whole product does not fit beside the accumulator. A
      // column split (16-bit only) issues each warpgroup's columns.
      int64_t chunk = rf.n / rf.warps_n;
      while (fp8 && rf.regs() + rf.regs() * chunk / rf.n > kFp8Regs &&
             chunk % 16 == 0) {
        chunk /= 2;
      }
      const std::string instr =
          WgmmaInstr(chunk, a->buf->dtype, g.transpose_a, !g.transpose_b);
      Line(StrCat(fp8 ? "kiln::gemm_wg_promoted<" : "kiln::gemm_wg<", instr,
                  ", ", rf.m, ", ", rf.n, ", ", *kd, ", ", fp8 ? 32 : 16, ", ",
                  rf.warps_m, ", ", g.transpose_a ? "true" : "false", ", ",
                  g.transpose_b ? "true" : "false", ", ", a->buf->layout, ", ",
                  b->buf->layout,
                  fp8 && chunk != rf.n ? StrCat(", ", chunk) : "",
                  rf.warps_n > 1 ? StrCat(", ", rf.warps_n) : "", ">(",
                  c->buf->code, ", ", a->buf->code, ", ", b->buf->code, ");"));
      if (!defer_wgmma_wait_ && !fp8) WgIssued(g, c->buf->code);
      return absl::OkStatus();
    }
    if (!a->buf->packed_from.empty()) {
      Line(StrCat("kiln::gemm_rs<", tag, ", ", rf.m, ", ", rf.n, ", ", *kd,
                  ", ", rf.warps_m, ", ", g.transpose_b ? "true" : "false",
                  ", ", b->buf->layout, ">(", c->buf->code, ", ", a->buf->code,
                  ", ", b->buf->code, ");"));
      return absl::OkStatus();
    }
    Line(StrCat("kiln::gemm_ss<", tag, ", ", rf.m, ", ", rf.n, ", ", *kd, ", ",
                rf.warps_m, ", ", rf.warps_n, ", ",
                g.transpose_a ? "true" : "false", ", ",
                g.transpose_b ? "true" : "false", ", ", a->buf->layout, ", ",
                b->buf->layout, ">(", c->buf->code, ", ", a->buf->code, ", ",
                b->buf->code, ");"));
    return absl::OkStatus();
  }
  // Generic: one thread per element of C, a serial dot product in C's type.
  const DType acc = c->buf->dtype;
  const Type at = Type::Of(acc);
  const int id = uid_++;
  const std::string kv = StrCat("kiln_k", id), av = StrCat("kiln_a", id);
  Open("");
  absl::Status st = ForElements(
      {Expr::Int(*m), Expr::Int(*n)}, nullptr, "",
      [&](const std::vector<Expr>& ij) -> absl::Status {
        const Expr& i = ij[0];
        const Expr& j = ij[1];
        std::vector<Expr> ci = c->Indices(ij, false);
        if (g.clear_accum) {
          Line(RegType(at) + " " + av + " = 0;");
        } else {
          auto cur = LoadValue(c->name, ci);
          if (!cur.ok()) return cur.status();
          Line(RegType(at) + " " + av + " = " + Convert(*cur, at).code + ";");
        }
        vars_[av] = {av, at};
        vars_[kv] = {kv, Type::Int()};
        Expr kk = Expr::Var(kv);
        Expr prod = Expr::Binary(
            BinaryOp::kMul,
            Expr::Cast(acc, a->Load(g.transpose_a ? std::vector<Expr>{kk, i}
                                                  : std::vector<Expr>{i, kk})),
            Expr::Cast(acc, b->Load(g.transpose_b ? std::vector<Expr>{j, kk}
                                                  : std::vector<Expr>{kk, j})));
        auto sum = Value(Expr::Binary(BinaryOp::kAdd, Expr::Var(av), prod));
        if (!sum.ok()) return sum.status();
        Line(StrCat("for (long long ", kv, " = 0; ", kv, " < ", *kd, "; ++", kv,
                    ")"));
        Line("  " + av + " = " + Convert(*sum, at).code + ";");
        auto s = StoreCode(c->name, ci, AssignOp::kSet, Expr::Var(av));
        if (!s.ok()) return s.status();
        Line(*s);
        return absl::OkStatus();
      });
  Close();
  return st;
}

std::string Emitter::WgmmaInstr(int64_t n, DType dtype, bool trans_a,
                                bool trans_b, bool a_regs) {
  const bool fp8 = dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2;
  const std::string type = dtype == DType::kBF16     ? "bf16"
                           : dtype == DType::kF8E4M3 ? "e4m3"
                           : dtype == DType::kF8E5M2 ? "e5m2"
                                                     : "f16";
  const int k = fp8 ? 32 : 16;
  const std::string name =
      StrCat("kiln_wgmma_m64n", n, "k", k, "_", type, "_",
             a_regs ? "r" : (trans_a ? "t" : "n"), trans_b ? "t" : "n");
  if (wgmma_instrs_.count(name)) return name;
  // The wrapper's PTX is the device library's (kiln/wgmma_instr.cuh); the
  // immediates after scale-d: the operand scales (1), and for 16-bit types
  // which shared operands are MN-major (8-bit types have none: both
  // operands are K-major; a register A has none).
  std::string imms = "1, 1";
  if (!fp8 && !a_regs) StrAppend(&imms, ", ", trans_a ? 1 : 0);
  if (!fp8) StrAppend(&imms, ", ", trans_b ? 1 : 0);
  std::string def =
      StrCat(a_regs ? "KILN_WGMMA_RS(" : "KILN_WGMMA_SS(", name, ", ", n, ", ",
             n / 2, ", ", k, ", ", type, ", \"", imms, "\");");
  wgmma_instrs_[name] = std::move(def);
  return name;
}

}  // namespace kiln::compiler::gpu::internal
