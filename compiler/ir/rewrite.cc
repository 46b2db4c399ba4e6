#include "compiler/ir/rewrite.h"

#include "compiler/ir/format.h"

namespace kiln::compiler {
namespace {

using Fn = std::function<void(Expr&)>;

void VisitRegion(Region& r, const Fn& fn) {
  for (Slice& s : r.slices) {
    if (s.kind != Slice::Kind::kFull) fn(s.start);
    if (s.kind == Slice::Kind::kRange) fn(s.extent);
  }
}

struct StmtVisitor {
  const Fn& fn;
  void operator()(AllocStmt& a) const {
    for (Expr& e : a.shape) fn(e);
  }
  void operator()(CopyStmt& c) const {
    VisitRegion(c.src, fn);
    VisitRegion(c.dst, fn);
  }
  void operator()(FillStmt& f) const {
    VisitRegion(f.dst, fn);
    fn(f.value);
  }
  void operator()(GemmStmt& g) const {
    VisitRegion(g.a, fn);
    VisitRegion(g.b, fn);
    VisitRegion(g.c, fn);
  }
  void operator()(ReduceStmt& r) const {
    VisitRegion(r.src, fn);
    VisitRegion(r.dst, fn);
  }
  void operator()(CumsumStmt& c) const {
    VisitRegion(c.src, fn);
    VisitRegion(c.dst, fn);
  }
  void operator()(AtomicAddStmt& a) const {
    VisitRegion(a.dst, fn);
    VisitRegion(a.src, fn);
  }
  void operator()(ParallelStmt& p) const {
    for (Expr& e : p.extents) fn(e);
    ForEachExpr(p.body, fn);
  }
  void operator()(ForStmt& f) const {
    if (f.start) fn(*f.start);
    fn(f.stop);
    if (f.stages) fn(*f.stages);
    ForEachExpr(f.body, fn);
  }
  void operator()(IfStmt& s) const {
    fn(s.cond);
    ForEachExpr(s.then_body, fn);
    ForEachExpr(s.else_body, fn);
  }
  void operator()(LetStmt& l) const { fn(l.value); }
  void operator()(StoreStmt& s) const {
    for (Expr& e : s.indices) fn(e);
    fn(s.value);
  }
  void operator()(RasterizeStmt& r) const { fn(r.panel); }
};

void CollectExprNames(const Expr& e, std::set<std::string>* out) {
  if (e.kind == ExprKind::kVar || e.kind == ExprKind::kLoad)
    out->insert(e.name);
  for (const Expr& a : e.args) CollectExprNames(a, out);
}

void CollectBlockNames(const Block& block, std::set<std::string>* out) {
  for (const Stmt& s : block) {
    if (auto* a = std::get_if<AllocStmt>(&s.node)) out->insert(a->name);
    if (auto* l = std::get_if<LetStmt>(&s.node)) out->insert(l->name);
    if (auto* st = std::get_if<StoreStmt>(&s.node)) out->insert(st->name);
    if (auto* f = std::get_if<ForStmt>(&s.node)) {
      out->insert(f->var);
      CollectBlockNames(f->body, out);
    }
    if (auto* p = std::get_if<ParallelStmt>(&s.node)) {
      out->insert(p->vars.begin(), p->vars.end());
      CollectBlockNames(p->body, out);
    }
    if (auto* i = std::get_if<IfStmt>(&s.node)) {
      CollectBlockNames(i->then_body, out);
      CollectBlockNames(i->else_body, out);
    }
  }
}

}  // namespace

void ForEachExpr(Block& block, const Fn& fn) {
  for (Stmt& s : block) std::visit(StmtVisitor{fn}, s.node);
}

void ForEachExpr(Kernel& k, const Fn& fn) {
  for (Param& p : k.params) {
    for (Expr& e : p.shape) fn(e);
    for (Expr& e : p.strides) fn(e);
  }
  for (Expr& e : k.constraints) fn(e);
  for (Expr& e : k.assumptions) fn(e);
  for (Expr& e : k.grid) fn(e);
  fn(k.threads);
  for (Expr& e : k.cluster) fn(e);
  ForEachExpr(k.body, fn);
}

Expr Substitute(const Expr& e, const std::map<std::string, Expr>& values) {
  if (e.kind == ExprKind::kVar) {
    auto it = values.find(e.name);
    if (it != values.end()) {
      Expr v = it->second;
      v.loc = e.loc;
      return v;
    }
    return e;
  }
  Expr out = e;
  for (Expr& a : out.args) a = Substitute(a, values);
  return out;
}

std::set<std::string> CollectNames(const Kernel& k) {
  std::set<std::string> names;
  for (const Param& p : k.params) {
    names.insert(p.name);
    for (const Expr& e : p.shape) CollectExprNames(e, &names);
  }
  for (const Tunable& t : k.tunables) names.insert(t.name);
  names.insert(k.block_vars.begin(), k.block_vars.end());
  CollectBlockNames(k.body, &names);
  Kernel copy = k;
  ForEachExpr(copy, [&](Expr& e) { CollectExprNames(e, &names); });
  return names;
}

std::string NameGenerator::Fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; taken_.count(name); ++i) name = StrCat(base, "_", i);
  taken_.insert(name);
  return name;
}

}  // namespace kiln::compiler
