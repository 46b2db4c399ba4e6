#include "compiler/ir/written_buffers.h"

#include <type_traits>
#include <variant>

namespace kiln::compiler {

void AddWrittenBuffers(const Block& b, std::set<std::string>* out) {
  for (const Stmt& s : b) {
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, CopyStmt> ||
                        std::is_same_v<T, FillStmt> ||
                        std::is_same_v<T, ReduceStmt> ||
                        std::is_same_v<T, CumsumStmt> ||
                        std::is_same_v<T, AtomicAddStmt>) {
            out->insert(n.dst.name);
          } else if constexpr (std::is_same_v<T, GemmStmt>) {
            out->insert(n.c.name);
          } else if constexpr (std::is_same_v<T, StoreStmt>) {
            out->insert(n.name);
          } else if constexpr (std::is_same_v<T, ParallelStmt> ||
                               std::is_same_v<T, ForStmt>) {
            AddWrittenBuffers(n.body, out);
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            AddWrittenBuffers(n.then_body, out);
            AddWrittenBuffers(n.else_body, out);
          }
        },
        s.node);
  }
}

std::vector<std::string> WrittenTensorParams(const Kernel& k) {
  std::set<std::string> written;
  AddWrittenBuffers(k.body, &written);
  std::vector<std::string> out;
  for (const Param& p : k.params) {
    if (p.is_tensor && written.count(p.name)) out.push_back(p.name);
  }
  return out;
}

}  // namespace kiln::compiler
