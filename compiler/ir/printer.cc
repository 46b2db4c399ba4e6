// Canonical printer (tile-ir.md §7).
//
// 1. Headers print in a fixed order: params, one `tune` line per tunable,
//    `where`, `assume`, then the launch line.
// 2. Statements print one per line, two spaces per nesting level.
// 3. Expressions print with the fewest parentheses that keep the tree: a child
//    is parenthesised when it binds looser than its parent, or equally loose
//    on the right (all operators are left-associative; comparisons do not
//    chain, so they parenthesise equal-precedence children on both sides).
// 4. Floats print in their shortest round-trip spelling, always with a '.' or
//    an exponent, so they re-lex as floats.
#include "compiler/ir/printer.h"

#include <charconv>
#include <cmath>
#include <type_traits>

#include "compiler/ir/format.h"

namespace kiln::compiler {
namespace {

constexpr int kPrecUnary = 10;
constexpr int kPrecPrimary = 11;
constexpr int kPrecCompare = 6;

int Precedence(BinaryOp op) {
  switch (op) {
    case BinaryOp::kOr:
      return 1;
    case BinaryOp::kAnd:
      return 2;
    case BinaryOp::kBitOr:
      return 3;
    case BinaryOp::kBitXor:
      return 4;
    case BinaryOp::kBitAnd:
      return 5;
    case BinaryOp::kEq:
    case BinaryOp::kNe:
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
      return kPrecCompare;
    case BinaryOp::kShl:
    case BinaryOp::kShr:
      return 7;
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
      return 8;
    case BinaryOp::kMul:
    case BinaryOp::kDiv:
    case BinaryOp::kMod:
      return 9;
  }
  return 0;
}

int Precedence(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kBinary:
      return Precedence(e.binary_op);
    case ExprKind::kUnary:
      return kPrecUnary;
    case ExprKind::kInt:
      return e.int_value < 0 ? kPrecUnary : kPrecPrimary;
    case ExprKind::kFloat:
      return std::signbit(e.float_value) ? kPrecUnary : kPrecPrimary;
    default:
      return kPrecPrimary;
  }
}

std::string FloatSpelling(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (std::isnan(v))
    return "nan";  // not expressible in source; diagnostics only
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void PrintExpr(const Expr& e, std::string* out);

void PrintOperand(const Expr& e, bool parens, std::string* out) {
  if (parens) out->push_back('(');
  PrintExpr(e, out);
  if (parens) out->push_back(')');
}

void PrintList(const std::vector<Expr>& list, std::string* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out->append(", ");
    PrintExpr(list[i], out);
  }
}

void PrintExpr(const Expr& e, std::string* out) {
  switch (e.kind) {
    case ExprKind::kInt:
      StrAppend(out, e.int_value);
      return;
    case ExprKind::kFloat:
      out->append(FloatSpelling(e.float_value));
      return;
    case ExprKind::kBool:
      out->append(e.bool_value ? "true" : "false");
      return;
    case ExprKind::kVar:
      out->append(e.name);
      return;
    case ExprKind::kUnary:
      out->append(UnaryOpSpelling(e.unary_op));
      if (e.args.size() == 1) {
        PrintOperand(e.args[0], Precedence(e.args[0]) < kPrecUnary, out);
      }
      return;
    case ExprKind::kBinary: {
      if (e.args.size() != 2) return;
      int prec = Precedence(e.binary_op);
      bool compare = prec == kPrecCompare;
      int lp = Precedence(e.args[0]);
      int rp = Precedence(e.args[1]);
      PrintOperand(e.args[0], lp < prec || (compare && lp == prec), out);
      StrAppend(out, " ", BinaryOpSpelling(e.binary_op), " ");
      PrintOperand(e.args[1], rp <= prec, out);
      return;
    }
    case ExprKind::kCall:
      StrAppend(out, e.name, "(");
      PrintList(e.args, out);
      out->push_back(')');
      return;
    case ExprKind::kCast:
      StrAppend(out, DTypeName(e.dtype), "(");
      PrintList(e.args, out);
      out->push_back(')');
      return;
    case ExprKind::kLoad:
      StrAppend(out, e.name, "[");
      PrintList(e.args, out);
      out->push_back(']');
      return;
  }
}

std::string ExprText(const Expr& e) {
  std::string s;
  PrintExpr(e, &s);
  return s;
}

std::string ListText(const std::vector<Expr>& list) {
  std::string s;
  PrintList(list, &s);
  return s;
}

std::string RegionText(const Region& r) {
  if (!r.has_slices) return r.name;
  std::string s = StrCat(r.name, "[");
  for (size_t i = 0; i < r.slices.size(); ++i) {
    if (i > 0) s.append(", ");
    const Slice& sl = r.slices[i];
    switch (sl.kind) {
      case Slice::Kind::kFull:
        s.append(":");
        break;
      case Slice::Kind::kIndex:
        PrintExpr(sl.start, &s);
        break;
      case Slice::Kind::kRange:
        PrintExpr(sl.start, &s);
        s.append(":+");
        PrintExpr(sl.extent, &s);
        break;
    }
  }
  s.push_back(']');
  return s;
}

class StmtPrinter {
 public:
  explicit StmtPrinter(std::string* out) : out_(out) {}

  void PrintBlock(const Block& block, int depth) {
    for (const Stmt& s : block) PrintStmt(s, depth);
  }

 private:
  void Line(int depth, std::string_view text) {
    out_->append(2 * depth, ' ');
    StrAppend(out_, text, "\n");
  }

  void Open(int depth, std::string_view head, const Block& body) {
    Line(depth, StrCat(head, " {"));
    PrintBlock(body, depth + 1);
  }

  void PrintStmt(const Stmt& s, int depth) {
    std::visit([&](const auto& n) { Print(n, depth); }, s.node);
  }

  void Print(const AllocStmt& a, int depth) {
    std::string text = StrCat("alloc ", ScopeName(a.scope), " ", a.name, ": ",
                              DTypeName(a.dtype), "[", ListText(a.shape), "]");
    switch (a.layout.kind) {
      case Layout::Kind::kNone:
        break;
      case Layout::Kind::kRowMajor:
        text.append(" layout row_major");
        break;
      case Layout::Kind::kSwizzle:
        StrAppend(&text, " layout swizzle(", a.layout.param, ")");
        break;
      case Layout::Kind::kPadded:
        StrAppend(&text, " layout padded(", a.layout.param, ")");
        break;
    }
    Line(depth, text);
  }
  void Print(const CopyStmt& c, int depth) {
    Line(depth, StrCat("copy ", RegionText(c.src), " -> ", RegionText(c.dst)));
  }
  void Print(const FillStmt& f, int depth) {
    if (f.is_clear) {
      Line(depth, StrCat("clear ", RegionText(f.dst)));
    } else {
      Line(depth, StrCat("fill ", RegionText(f.dst), ", ", ExprText(f.value)));
    }
  }
  void Print(const GemmStmt& g, int depth) {
    std::string text = StrCat("gemm ", RegionText(g.a), ", ", RegionText(g.b),
                              " -> ", RegionText(g.c));
    if (g.transpose_a) text.append(" transpose_a");
    if (g.transpose_b) text.append(" transpose_b");
    if (g.clear_accum) text.append(" clear_accum");
    if (g.policy != GemmPolicy::kSquare) {
      StrAppend(&text, " policy=", PolicyName(g.policy));
    }
    Line(depth, text);
  }
  void Print(const ReduceStmt& r, int depth) {
    std::string text =
        StrCat("reduce.", ReduceName(r.op), " ", RegionText(r.src), " -> ",
               RegionText(r.dst), ", dim=", r.dim);
    if (!r.clear) text.append(", clear=false");
    Line(depth, text);
  }
  void Print(const CumsumStmt& c, int depth) {
    std::string text = StrCat("cumsum ", RegionText(c.src), " -> ",
                              RegionText(c.dst), ", dim=", c.dim);
    if (c.reverse) text.append(", reverse=true");
    Line(depth, text);
  }
  void Print(const AtomicAddStmt& a, int depth) {
    Line(depth,
         StrCat("atomic_add ", RegionText(a.dst), ", ", RegionText(a.src)));
  }
  void Print(const ParallelStmt& p, int depth) {
    Open(depth,
         StrCat("parallel (", StrJoin(p.vars, ", "), ") in (",
                ListText(p.extents), ")"),
         p.body);
    Line(depth, "}");
  }
  void Print(const ForStmt& f, int depth) {
    std::string range;
    if (f.start) StrAppend(&range, ExprText(*f.start), ", ");
    StrAppend(&range, ExprText(f.stop));
    if (f.stages) StrAppend(&range, ", stages=", ExprText(*f.stages));
    Open(depth,
         StrCat("for ", f.var, " in ", LoopName(f.loop), "(", range, ")"),
         f.body);
    Line(depth, "}");
  }
  void Print(const IfStmt& s, int depth) {
    Open(depth, StrCat("if ", ExprText(s.cond)), s.then_body);
    PrintElse(s, depth);
  }
  // `} else if c {` when the else block is exactly one if (that is how the
  // parser represents an else-if chain), otherwise `} else {`.
  void PrintElse(const IfStmt& s, int depth) {
    if (!s.has_else) {
      Line(depth, "}");
      return;
    }
    if (s.else_body.size() == 1) {
      if (const auto* nested = std::get_if<IfStmt>(&s.else_body[0].node)) {
        Line(depth, StrCat("} else if ", ExprText(nested->cond), " {"));
        PrintBlock(nested->then_body, depth + 1);
        PrintElse(*nested, depth);
        return;
      }
    }
    Line(depth, "} else {");
    PrintBlock(s.else_body, depth + 1);
    Line(depth, "}");
  }
  void Print(const LetStmt& l, int depth) {
    Line(depth, StrCat("let ", l.name, " = ", ExprText(l.value)));
  }
  void Print(const StoreStmt& s, int depth) {
    Line(depth,
         StrCat(s.name, "[", ListText(s.indices), "] ", AssignOpSpelling(s.op),
                " ", ExprText(s.value), s.shared_atomic ? "  // atomic" : ""));
  }
  void Print(const RasterizeStmt& r, int depth) {
    std::string text = StrCat("rasterize(panel=", ExprText(r.panel));
    if (r.order == RasterOrder::kColumn) text.append(", order=column");
    text.append(")");
    Line(depth, text);
  }

  std::string* out_;
};

std::string ParamText(const Param& p) {
  std::string s = StrCat(p.name, ": ", DTypeName(p.dtype));
  if (!p.is_tensor) return s;
  StrAppend(&s, "[", ListText(p.shape), "]");
  if (!p.strides.empty()) StrAppend(&s, " strides [", ListText(p.strides), "]");
  return s;
}

}  // namespace

std::string Print(const Expr& expr) { return ExprText(expr); }

std::string Print(const Kernel& k) {
  std::string out = StrCat("kernel ", k.name, "(");
  for (size_t i = 0; i < k.params.size(); ++i) {
    if (i > 0) out.append(", ");
    out.append(ParamText(k.params[i]));
  }
  out.append(")\n");
  for (const Tunable& t : k.tunables) {
    StrAppend(&out, "  tune ", t.name, " in [", StrJoin(t.candidates, ", "),
              "]\n");
  }
  for (const Expr& c : k.constraints) {
    StrAppend(&out, "  where ", ExprText(c), "\n");
  }
  for (const Expr& a : k.assumptions) {
    StrAppend(&out, "  assume ", ExprText(a), "\n");
  }
  StrAppend(&out, "  grid(", ListText(k.grid), ") threads(",
            ExprText(k.threads), ")");
  if (!k.cluster.empty()) {
    StrAppend(&out, " cluster(", ListText(k.cluster), ")");
  }
  StrAppend(&out, " (", StrJoin(k.block_vars, ", "), ") {\n");
  StmtPrinter(&out).PrintBlock(k.body, 1);
  out.append("}\n");
  return out;
}

std::string Print(const Region& region) { return RegionText(region); }

std::string Print(const Program& program) {
  std::string out;
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    if (i > 0) out.append("\n");
    out.append(Print(program.kernels[i]));
  }
  return out;
}

}  // namespace kiln::compiler
