// Canonical kernel hash.
//
// 1. Walk the kernel in source order; every binder of a local name (block
//    index, alloc, let, for, parallel) gets the next positional name: tiles
//    t0, t1, ...; every other local v0, v1, ...
// 2. Rewrite every use through the map. Parameters, symbols and tunables keep
//    their names: they are the kernel's interface (a launch binds them).
// 3. Hash a version tag plus the canonical print of the renamed kernel.
#include "compiler/ir/canonical_hash.h"

#include <openssl/evp.h>

#include <map>

#include "compiler/ir/format.h"
#include "compiler/ir/printer.h"

namespace kiln::compiler {
namespace {

// Bumped whenever the hashed form changes meaning.
constexpr std::string_view kHashTag = "kiln-tile-ir-hash-v1\n";

class Renamer {
 public:
  void Run(Kernel* k) {
    for (std::string& v : k->block_vars) Bind(&v, false);
    for (Expr& e : k->grid) Rewrite(&e);
    Rewrite(&k->threads);
    for (Expr& e : k->cluster) Rewrite(&e);
    RewriteBlock(&k->body);
  }

 private:
  void Bind(std::string* name, bool tile) {
    std::string fresh = tile ? StrCat("$t", tiles_++) : StrCat("$v", others_++);
    map_[*name] = fresh;
    *name = fresh;
  }
  void Use(std::string* name) const {
    auto it = map_.find(*name);
    if (it != map_.end()) *name = it->second;
  }

  void Rewrite(Expr* e) {
    if (e->kind == ExprKind::kVar || e->kind == ExprKind::kLoad) Use(&e->name);
    for (Expr& a : e->args) Rewrite(&a);
  }
  void Rewrite(Region* r) {
    Use(&r->name);
    for (Slice& s : r->slices) {
      Rewrite(&s.start);
      Rewrite(&s.extent);
    }
  }

  void RewriteBlock(Block* block) {
    for (Stmt& s : *block) std::visit([&](auto& n) { Visit(&n); }, s.node);
  }

  void Visit(AllocStmt* a) {
    for (Expr& e : a->shape) Rewrite(&e);
    Bind(&a->name, true);
  }
  void Visit(CopyStmt* c) {
    Rewrite(&c->src);
    Rewrite(&c->dst);
  }
  void Visit(FillStmt* f) {
    Rewrite(&f->dst);
    Rewrite(&f->value);
  }
  void Visit(GemmStmt* g) {
    Rewrite(&g->a);
    Rewrite(&g->b);
    Rewrite(&g->c);
  }
  void Visit(ReduceStmt* r) {
    Rewrite(&r->src);
    Rewrite(&r->dst);
  }
  void Visit(CumsumStmt* c) {
    Rewrite(&c->src);
    Rewrite(&c->dst);
  }
  void Visit(AtomicAddStmt* a) {
    Rewrite(&a->dst);
    Rewrite(&a->src);
  }
  void Visit(ParallelStmt* p) {
    for (Expr& e : p->extents) Rewrite(&e);
    for (std::string& v : p->vars) Bind(&v, false);
    RewriteBlock(&p->body);
  }
  void Visit(ForStmt* f) {
    if (f->start) Rewrite(&*f->start);
    Rewrite(&f->stop);
    if (f->stages) Rewrite(&*f->stages);
    Bind(&f->var, false);
    RewriteBlock(&f->body);
  }
  void Visit(IfStmt* s) {
    Rewrite(&s->cond);
    RewriteBlock(&s->then_body);
    RewriteBlock(&s->else_body);
  }
  void Visit(LetStmt* l) {
    Rewrite(&l->value);
    Bind(&l->name, false);
  }
  void Visit(StoreStmt* s) {
    Use(&s->name);
    for (Expr& e : s->indices) Rewrite(&e);
    Rewrite(&s->value);
  }
  void Visit(RasterizeStmt* r) { Rewrite(&r->panel); }

  std::map<std::string, std::string> map_;
  int tiles_ = 0;
  int others_ = 0;
};

}  // namespace

Kernel CanonicalizeLocalNames(const Kernel& kernel) {
  Kernel k = kernel;
  Renamer().Run(&k);
  return k;
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

std::string KernelHash(const Kernel& kernel) {
  return Sha256Hex(StrCat(kHashTag, Print(CanonicalizeLocalNames(kernel))));
}

}  // namespace kiln::compiler
