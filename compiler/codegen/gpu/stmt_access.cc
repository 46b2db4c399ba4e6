#include "compiler/codegen/gpu/stmt_access.h"

#include <type_traits>
#include <variant>

namespace kiln::compiler::gpu {

void StmtAccesses(const Stmt& s, const FragmentPlan& fragments,
                  const BufferPred& counts, std::set<std::string>* r,
                  std::set<std::string>* w) {
  auto rd = [&](const std::string& n) {
    if (counts(n)) r->insert(n);
  };
  auto wr = [&](const std::string& n) {
    if (counts(n)) w->insert(n);
  };
  std::function<void(const Expr&)> ex = [&](const Expr& e) {
    if (e.kind == ExprKind::kLoad) rd(e.name);
    for (const Expr& a : e.args) ex(a);
  };
  auto body = [&](const Block& b) {
    for (const Stmt& x : b) StmtAccesses(x, fragments, counts, r, w);
  };
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, CopyStmt>) {
          rd(n.src.name);
          wr(n.dst.name);
        } else if constexpr (std::is_same_v<T, FillStmt>) {
          wr(n.dst.name);
        } else if constexpr (std::is_same_v<T, GemmStmt>) {
          rd(n.a.name);
          rd(n.b.name);
          rd(n.c.name);
          wr(n.c.name);
        } else if constexpr (std::is_same_v<T, ReduceStmt>) {
          rd(n.src.name);
          rd(n.dst.name);
          wr(n.dst.name);
          auto f = fragments.registers.find(n.src.name);
          // Into owned rows within a wave, lanes combine by shuffles alone.
          auto row = fragments.rows.find(n.dst.name);
          const bool in_lanes = row != fragments.rows.end() &&
                                row->second.owned() &&
                                !row->second.own_across_waves;
          if ((f != fragments.registers.end() && f->second.warps_n > 1) ||
              (fragments.owned.count(n.src.name) && !in_lanes)) {
            r->insert("kiln_scratch");
            w->insert("kiln_scratch");
          }
        } else if constexpr (std::is_same_v<T, CumsumStmt>) {
          rd(n.src.name);
          rd(n.dst.name);
          wr(n.dst.name);
        } else if constexpr (std::is_same_v<T, AtomicAddStmt>) {
          rd(n.src.name);
          wr(n.dst.name);  // (a tensor region: not a shared buffer)
        } else if constexpr (std::is_same_v<T, ParallelStmt>) {
          body(n.body);
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          if (n.start) ex(*n.start);
          ex(n.stop);
          body(n.body);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          ex(n.cond);
          body(n.then_body);
          body(n.else_body);
        } else if constexpr (std::is_same_v<T, LetStmt>) {
          ex(n.value);
        } else if constexpr (std::is_same_v<T, StoreStmt>) {
          for (const Expr& i : n.indices) ex(i);
          ex(n.value);
          wr(n.name);
          if (n.op != AssignOp::kSet) rd(n.name);
        }
      },
      s.node);
}

void AllStmtAccesses(const Stmt& s, const FragmentPlan& fragments,
                     std::set<std::string>* r, std::set<std::string>* w) {
  StmtAccesses(
      s, fragments, [](const std::string&) { return true; }, r, w);
}

std::map<std::string, int> TopLevelUsers(const Kernel& k,
                                         const FragmentPlan& fragments) {
  std::map<std::string, int> users;
  for (const Stmt& s : k.body) {
    if (std::holds_alternative<AllocStmt>(s.node)) continue;
    std::set<std::string> r, w;
    AllStmtAccesses(s, fragments, &r, &w);
    r.insert(w.begin(), w.end());
    for (const std::string& n : r) ++users[n];
  }
  return users;
}

void ForEachNested(const Stmt& s, const std::function<void(const Stmt&)>& fn) {
  fn(s);
  auto block = [&](const Block& b) {
    for (const Stmt& t : b) ForEachNested(t, fn);
  };
  if (auto* f = std::get_if<ForStmt>(&s.node)) block(f->body);
  if (auto* i = std::get_if<IfStmt>(&s.node)) {
    block(i->then_body);
    block(i->else_body);
  }
}

bool InSharedMemory(const FragmentPlan& fragments, const std::string& n) {
  auto t = fragments.tiles.find(n);
  return t != fragments.tiles.end() && t->second.scope != Scope::kLocal &&
         !fragments.registers.count(n) && !fragments.rows.count(n) &&
         !fragments.packed.count(n) && !fragments.owned.count(n);
}

}  // namespace kiln::compiler::gpu
