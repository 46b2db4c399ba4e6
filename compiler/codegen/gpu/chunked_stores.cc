// Element stores into tensors from a parallel over thread-owned fragments,
// a chunk at a time (TileLang's scatter epilogues: a KV-cache write
// `Cache[slot / S, slot % S, h, d] = k[i, d]`, a varlen output row).
//
// A thread owns its fragment elements in chunks of `vec` consecutive
// columns of one row (kiln::OwnLayout). A store whose last index is the
// parallel's column variable plus a term that does not vary along the
// chunk, whose other indices and enclosing conditions do not vary along it
// either, writes `vec` consecutive elements of the tensor's contiguous
// innermost dim per chunk, all or none of them. Such stores are emitted as
// the body run over the chunk's `vec` elements, each value kept in a
// chunk buffer, and then one vector store (copy_chunk) of the buffer where
// the address is aligned, element stores where it is not. The body must
// not read the tensors it stores this way (a later element would read a
// store not yet made).
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/ir/expr_uses.h"

namespace kiln::compiler::gpu::internal {
namespace {

// The names whose value varies along a chunk: the column variable and the
// lets computed from it, collected over `b` in order.
struct ChunkScan {
  const std::map<std::string, Buf>* bufs;
  std::string col;                // the parallel's last variable
  std::set<std::string> varying;  // it and the lets computed from it
  std::set<std::string> stored;   // tensors of the chunked stores
  std::vector<const StoreStmt*> stores;
  bool ok = true;

  void Scan(const Block& b) {
    for (const Stmt& s : b) {
      if (!ok) return;
      if (auto* l = std::get_if<LetStmt>(&s.node)) {
        if (UsesAnyOf(l->value, varying)) varying.insert(l->name);
      } else if (auto* st = std::get_if<StoreStmt>(&s.node)) {
        Store(*st);
      } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
        if (UsesAnyOf(i->cond, varying)) {
          // A chunk's elements would take different branches: chunked
          // stores under it could be partly made.
          ok = !Stores(i->then_body) && !Stores(i->else_body);
          continue;
        }
        Scan(i->then_body);
        Scan(i->else_body);
      } else {
        ok = false;  // loops and the rest: element by element
      }
    }
  }
  bool Stores(const Block& b) const {
    for (const Stmt& s : b) {
      if (auto* st = std::get_if<StoreStmt>(&s.node)) {
        auto it = bufs->find(st->name);
        if (it != bufs->end() && it->second.tensor) return true;
      }
      if (auto* i = std::get_if<IfStmt>(&s.node)) {
        if (Stores(i->then_body) || Stores(i->else_body)) return true;
      }
    }
    return false;
  }
  void Store(const StoreStmt& st) {
    auto it = bufs->find(st.name);
    if (it == bufs->end() || !it->second.tensor) return;  // a fragment
    const Buf& b = it->second;
    const DType t = b.dtype;
    if (st.op != AssignOp::kSet || st.indices.empty() ||
        b.strides.back() != "1LL" || t == DType::kBool || t == DType::kI4 ||
        t == DType::kU4) {
      ok = false;
      return;
    }
    for (size_t d = 0; d + 1 < st.indices.size(); ++d) {
      if (UsesAnyOf(st.indices[d], varying)) {
        ok = false;
        return;
      }
    }
    const Expr& last = st.indices.back();
    auto split = AffineSplit(last, col);
    bool unit = false;
    if (split && split->first == 1) {
      std::set<std::string> others = varying;
      others.erase(col);
      unit = !UsesAnyOf(split->second, others);
    }
    if (!unit) {
      ok = false;
      return;
    }
    stored.insert(st.name);
    stores.push_back(&st);
  }
};

// Whether `b` reads any of `names` (loads in lets, values, indices and
// conditions).
bool Reads(const Block& b, const std::set<std::string>& names) {
  for (const Stmt& s : b) {
    if (auto* l = std::get_if<LetStmt>(&s.node)) {
      if (UsesAnyOf(l->value, names)) return true;
    } else if (auto* st = std::get_if<StoreStmt>(&s.node)) {
      if (UsesAnyOf(st->value, names)) return true;
      for (const Expr& i : st->indices) {
        if (UsesAnyOf(i, names)) return true;
      }
    } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
      if (UsesAnyOf(i->cond, names) || Reads(i->then_body, names) ||
          Reads(i->else_body, names)) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::vector<const StoreStmt*> Emitter::ChunkedStores(
    const Block& body, const std::vector<std::string>& vars,
    const Buf& own) const {
  if (!own.own || own.own->vec < 2 || vars.empty() ||
      static_cast<int>(vars.size()) != own.own->rank) {
    return {};
  }
  ChunkScan scan{&bufs_, vars.back(), {vars.back()}, {}, {}};
  scan.Scan(body);
  if (!scan.ok || scan.stores.empty() || Reads(body, scan.stored)) return {};
  return scan.stores;
}

absl::Status Emitter::ForOwnedChunks(
    const Buf& own, const std::vector<const StoreStmt*>& stores,
    const std::function<absl::Status(const std::vector<Expr>&)>& body) {
  const OwnedFragment& of = *own.own;
  const int id = uid_++;
  const std::string c = StrCat("kiln_c", id), u = StrCat("kiln_u", id);
  vars_[u] = {u, Type::Int()};
  std::vector<std::string> raws;
  Line("#pragma unroll");
  Open(StrCat("for (int ", c, " = 0; ", c, " < ", of.regs() / of.vec, "; ++", c,
              ")"));
  for (size_t k = 0; k < stores.size(); ++k) {
    const Buf& t = bufs_.at(stores[k]->name);
    ChunkStore cs;
    cs.raw = StrCat("kiln_vs", id, "_", k);
    cs.on = StrCat("kiln_von", id, "_", k);
    cs.off = StrCat("kiln_voff", id, "_", k);
    cs.u = u;
    Buf& rb = bufs_[cs.raw];
    rb.dtype = t.dtype;
    rb.scope = Scope::kLocal;
    rb.code = cs.raw;
    rb.dims = {of.vec};
    rb.shape = {Expr::Int(of.vec)};
    raws.push_back(cs.raw);
    Line(StrCat("alignas(16) ", StorageType(t.dtype), " ", cs.raw, "[", of.vec,
                "];"));
    Line(StrCat("bool ", cs.on, " = false;"));
    Line(StrCat("long long ", cs.off, " = 0;"));
    chunk_stores_[stores[k]] = cs;
  }
  Line("#pragma unroll");
  Open(StrCat("for (int ", u, " = 0; ", u, " < ", of.vec, "; ++", u, ")"));
  absl::Status st = AtOwned(own, StrCat(c, " * ", of.vec), u, body);
  Close();
  for (size_t k = 0; k < stores.size() && st.ok(); ++k) {
    const ChunkStore& cs = chunk_stores_.at(stores[k]);
    const Buf& t = bufs_.at(stores[k]->name);
    const std::string ptr = StrCat(t.code, " + ", cs.off);
    Open(StrCat("if (", cs.on, ")"));
    Open(StrCat("if (kiln::chunk_aligned(", ptr, ", ",
                StorageBytes(t.dtype, of.vec), "))"));
    Line(StrCat("kiln::copy_chunk<", of.vec, ">(", ptr, ", ", cs.raw, ");"));
    Close("} else {");
    ++indent_;
    Line("#pragma unroll");
    Open(StrCat("for (int ", u, " = 0; ", u, " < ", of.vec, "; ++", u, ")"));
    Line(StrCat(t.code, "[", cs.off, " + ", u, "] = ", cs.raw, "[", u, "];"));
    Close();
    Close();
    Close();
  }
  Close();
  for (const StoreStmt* s : stores) chunk_stores_.erase(s);
  for (const std::string& r : raws) bufs_.erase(r);
  return st;
}

absl::Status Emitter::EmitChunkStore(const StoreStmt& n, const ChunkStore& cs) {
  auto off = Offset(bufs_.at(n.name), n.indices);
  if (!off.ok()) return off.status();
  auto code = StoreCode(cs.raw, {Expr::Var(cs.u)}, AssignOp::kSet, n.value);
  if (!code.ok()) return code.status();
  Line(*code);
  Line(StrCat(cs.on, " = true;"));
  // The element's offset less its place in the chunk: the chunk's start
  // (the last index is the column plus a chunk-invariant term, the
  // innermost stride 1).
  Line(StrCat(cs.off, " = ", *off, " - ", cs.u, ";"));
  return absl::OkStatus();
}

}  // namespace kiln::compiler::gpu::internal
