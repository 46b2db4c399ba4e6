#include "compiler/tuning_space.h"

#include <algorithm>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/rewrite.h"

namespace kiln::compiler {

bool SatisfiesConstraints(const Kernel& kernel, const TunableValues& values) {
  std::map<std::string, Expr> subst;
  for (const Tunable& t : kernel.tunables) {
    auto it = values.find(t.name);
    if (it == values.end()) return false;
    if (std::find(t.candidates.begin(), t.candidates.end(), it->second) ==
        t.candidates.end()) {
      return false;
    }
    subst[t.name] = Expr::Int(it->second);
  }
  for (const Expr& c : kernel.constraints) {
    std::optional<bool> holds = FoldBool(Substitute(c, subst));
    if (!holds || !*holds) return false;
  }
  return true;
}

std::vector<TunableValues> EnumerateTuningSpace(const Kernel& kernel,
                                                size_t limit) {
  std::vector<TunableValues> out;
  const auto& ts = kernel.tunables;
  for (const Tunable& t : ts) {
    if (t.candidates.empty()) return out;
  }
  std::vector<size_t> pos(ts.size(), 0);
  while (out.size() < limit) {
    TunableValues v;
    for (size_t i = 0; i < ts.size(); ++i)
      v[ts[i].name] = ts[i].candidates[pos[i]];
    if (SatisfiesConstraints(kernel, v)) out.push_back(std::move(v));
    // Odometer step: the last tunable varies fastest.
    size_t i = ts.size();
    while (i > 0) {
      --i;
      if (++pos[i] < ts[i].candidates.size()) break;
      pos[i] = 0;
      if (i == 0) return out;
    }
    if (ts.empty()) return out;
  }
  return out;
}

}  // namespace kiln::compiler
