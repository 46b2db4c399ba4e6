// A split serial loop (kp_.full_tiles, plan_full_tiles.cc) as two C++
// loops: the iterations whose owned copies move whole, aligned tiles, with
// those copies unchecked and the conditions the in-bounds facts decide
// folded away, then the edge iterations as written.
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/ir/rewrite.h"

namespace kiln::compiler::gpu::internal {
bool Emitter::IntegerOnly(const Expr& e) const {
  switch (e.kind) {
    case ExprKind::kInt:
    case ExprKind::kBool:
      return true;
    case ExprKind::kVar: {
      if (fold_ints_.count(e.name)) return true;
      auto it = vars_.find(e.name);
      return it != vars_.end() &&
             (it->second.second.IsInteger() || it->second.second.IsBool());
    }
    case ExprKind::kUnary:
    case ExprKind::kBinary:
      break;
    case ExprKind::kCall:
      if (e.name != "min" && e.name != "max" && e.name != "ceildiv" &&
          e.name != "select" && e.name != "abs") {
        return false;
      }
      break;
    default:
      return false;  // loads, float literals, casts
  }
  for (const Expr& a : e.args) {
    if (!IntegerOnly(a)) return false;
  }
  return true;
}

std::map<std::string, Expr> Emitter::KnownLets() const {
  std::map<std::string, Expr> known;
  for (const auto& scope : known_lets_) {
    for (const auto& [name, v] : scope) {
      if (v) {
        known[name] = *v;
      } else {
        known.erase(name);
      }
    }
  }
  return known;
}

void Emitter::NoteLet(const LetStmt& l) {
  if (known_lets_.empty()) return;
  std::optional<Expr> value;
  if (full_) {
    value = Substitute(l.value, KnownLets());
    if (!IntegerOnly(*value)) value.reset();
  }
  known_lets_.back()[l.name] = std::move(value);
}

std::optional<bool> Emitter::Decide(const Expr& cond) {
  if (!full_ || !facts_) return std::nullopt;
  const Expr c = Substitute(cond, KnownLets());
  if (!IntegerOnly(c)) return std::nullopt;
  if (facts_->CanProve(c)) return true;
  if (facts_->CanProve(Expr::Unary(UnaryOp::kNot, c))) return false;
  return std::nullopt;
}

Block Emitter::FoldDecided(const Block& b) {
  known_lets_.emplace_back();
  Block out;
  for (const Stmt& s : b) {
    if (auto* l = std::get_if<LetStmt>(&s.node)) NoteLet(*l);
    auto* i = std::get_if<IfStmt>(&s.node);
    if (!i) {
      out.push_back(s);
      continue;
    }
    Stmt folded = s;
    auto& fi = std::get<IfStmt>(folded.node);
    if (const std::optional<bool> known = Decide(i->cond)) {
      if (!*known && !i->has_else) continue;
      fi.cond = Expr::Bool(true, i->cond.loc);
      fi.then_body = FoldDecided(*known ? i->then_body : i->else_body);
      fi.else_body.clear();
      fi.has_else = false;
    } else {
      fi.then_body = FoldDecided(i->then_body);
      fi.else_body = FoldDecided(i->else_body);
    }
    out.push_back(std::move(folded));
  }
  known_lets_.pop_back();
  return out;
}

absl::Status Emitter::EmitFullTilesFor(const ForStmt& f,
                                       const FullTilesPlan& p) {
  Flush();
  // Every unchecked copy aligned at the first two iterations (its address
  // moves by a constant step: aligned at every one).
  std::string aligned;
  for (size_t i = 0; i < p.copies.size(); ++i) {
    const auto& c = std::get<CopyStmt>(p.copies[i]->node);
    const bool into = plan_.owned.count(c.dst.name) > 0;
    const Buf* ob = FindBuf(into ? c.dst.name : c.src.name);
    if (!ob || !ob->own) {
      return LocatedError(p.copies[i]->loc,
                          "a whole-tile copy was planned for a fragment the "
                          "threads do not own",
                          absl::StatusCode::kInternal);
    }
    for (const Region* r : {&p.first[i], &p.second[i]}) {
      auto x = MakeAccess(*r);
      if (!x.ok()) return x.status();
      if (!OwnedChunks(*x, *ob)) break;
      const int64_t chunk_bytes = StorageBytes(x->buf->dtype, ob->own->vec);
      auto test = WholeRegion(*x, ob->dims, ob->own->vec, chunk_bytes,
                              /*bounds=*/false);
      if (!test.ok()) return test.status();
      StrAppend(&aligned, aligned.empty() ? "" : " && ", "(", *test, ")");
    }
  }
  auto lo = f.start ? Index(*f.start) : absl::StatusOr<std::string>("0LL");
  if (!lo.ok()) return lo.status();
  auto full = Index(p.full_stop);
  if (!full.ok()) return full.status();
  auto stop = Index(f.stop);
  if (!stop.ok()) return stop.status();
  const std::string end = StrCat("kiln_full", uid_++);
  Line(StrCat("// loop ", f.var,
              ": the iterations whose tiles are whole, then ",
              "the edge ones"));
  Line(StrCat("const long long ", end, " = ",
              aligned.empty() ? *full
                              : StrCat("(", aligned, ") ? ", *full, " : ",
                                       "(long long)(", *lo, ")"),
              ";"));
  auto range = BindLoop(f);
  if (!range.ok()) return range.status();
  const std::string& v = range->var;
  // The first part, under its facts.
  const FullTilesPlan* outer = full_;
  std::unique_ptr<Prover> outer_facts = std::move(facts_);
  full_ = &p;
  facts_ = std::make_unique<Prover>();
  for (const Param& param : k_.params) {
    for (const Expr& d : param.shape) {
      if (d.kind == ExprKind::kVar) {
        facts_->AddFact(Expr::Binary(BinaryOp::kGe, d, Expr::Int(0)));
      }
    }
  }
  for (const Expr& a : k_.assumptions) facts_->AddFact(a);
  facts_->AddFact(Expr::Binary(BinaryOp::kGe, Expr::Var(f.var),
                               f.start ? *f.start : Expr::Int(0)));
  for (const Expr& e : p.facts) facts_->AddFact(e);
  Open(StrCat("for (long long ", v, " = ", *lo, "; ", v, " < ", end, "; ++", v,
              ")"));
  absl::Status st = EmitBlock(f.body, false);
  full_ = outer;
  facts_ = std::move(outer_facts);
  KILN_GPU_RETURN_IF_ERROR(st);
  Flush();
  Close();
  // The edge iterations, as written.
  Open(StrCat("for (long long ", v, " = ", end, "; ", v, " < ", *stop, "; ++",
              v, ")"));
  KILN_GPU_RETURN_IF_ERROR(EmitBlock(f.body, false));
  Flush();
  Close();
  return absl::OkStatus();
}

}  // namespace kiln::compiler::gpu::internal
