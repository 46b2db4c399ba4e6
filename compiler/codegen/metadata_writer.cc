// 1. Collect the dynamic symbols (tensor dims that are still names) and the
//    integer/bool scalar parameters: the names the runtime can bind.
// 2. Write the records in the order of kernel-handle.md's example; every
//    launch expression goes through ToSExpr and a check of its names.
#include "compiler/codegen/metadata_writer.h"

#include <algorithm>
#include <set>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/written_buffers.h"

namespace kiln::compiler {
namespace {

std::optional<std::string_view> SExprOp(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kEq:
      return "==";
    case BinaryOp::kNe:
      return "!=";
    case BinaryOp::kLt:
      return "<";
    case BinaryOp::kLe:
      return "<=";
    case BinaryOp::kGt:
      return ">";
    case BinaryOp::kGe:
      return ">=";
    case BinaryOp::kAnd:
      return "&&";
    case BinaryOp::kOr:
      return "||";
    default:
      return std::nullopt;
  }
}

std::optional<std::string> SExprRec(const Expr& e, int depth);

// Bit operations the format can say exactly with a power of two: `a << k`
// is (* a 2^k), `a >> k` (arithmetic) is the floor division (/ a 2^k), and
// `a & (2^k - 1)` is the floor modulo (% a 2^k), for constant k in 0..62.
std::optional<std::string> PowerOfTwoForm(const Expr& e, int depth) {
  const BinaryOp op = e.binary_op;
  if (op != BinaryOp::kShl && op != BinaryOp::kShr && op != BinaryOp::kBitAnd) {
    return std::nullopt;
  }
  int value_side = 0;
  std::optional<int64_t> c = FoldInt(e.args[1]);
  if (!c && op == BinaryOp::kBitAnd) {
    c = FoldInt(e.args[0]);
    value_side = 1;
  }
  if (!c) return std::nullopt;
  int64_t power;
  if (op == BinaryOp::kBitAnd) {
    if (*c <= 0 || *c == INT64_MAX || ((*c + 1) & *c) != 0) {
      return std::nullopt;
    }
    power = *c + 1;
  } else {
    if (*c < 0 || *c > 62) return std::nullopt;
    power = int64_t{1} << *c;
  }
  std::optional<std::string> a = SExprRec(e.args[value_side], depth + 1);
  if (!a) return std::nullopt;
  const char* sop = op == BinaryOp::kShl   ? "*"
                    : op == BinaryOp::kShr ? "/"
                                           : "%";
  return StrCat("(", sop, " ", *a, " ", power, ")");
}

std::optional<std::string> SExprRec(const Expr& e, int depth) {
  if (depth > 256) return std::nullopt;
  auto list = [&](std::string_view op) -> std::optional<std::string> {
    std::string out = StrCat("(", op);
    for (const Expr& arg : e.args) {
      std::optional<std::string> a = SExprRec(arg, depth + 1);
      if (!a) return std::nullopt;
      StrAppend(&out, " ", *a);
    }
    return out + ")";
  };
  switch (e.kind) {
    case ExprKind::kInt:
      return StrCat(e.int_value);
    case ExprKind::kBool:
      return std::string(e.bool_value ? "1" : "0");
    case ExprKind::kVar:
      return e.name;
    case ExprKind::kUnary:
      if (e.args.size() != 1) return std::nullopt;
      if (e.unary_op == UnaryOp::kNeg) return list("neg");
      if (e.unary_op == UnaryOp::kNot) return list("!");
      return std::nullopt;
    case ExprKind::kBinary: {
      if (e.args.size() != 2) return std::nullopt;
      if (std::optional<std::string_view> op = SExprOp(e.binary_op)) {
        return list(*op);
      }
      return PowerOfTwoForm(e, depth);
    }
    case ExprKind::kCall:
      if ((e.name == "min" || e.name == "max" || e.name == "ceildiv") &&
          e.args.size() == 2) {
        return list(e.name);
      }
      if (e.name == "abs" && e.args.size() == 1) {
        std::optional<std::string> a = SExprRec(e.args[0], depth + 1);
        if (!a) return std::nullopt;
        return StrCat("(max ", *a, " (neg ", *a, "))");
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

void CollectNames(const Expr& e, std::set<std::string>* out) {
  if (e.kind == ExprKind::kVar) out->insert(e.name);
  for (const Expr& a : e.args) CollectNames(a, out);
}

class Writer {
 public:
  explicit Writer(const Kernel& k) {
    for (const std::string& s : DynamicSymbols(k)) bindable_.insert(s);
    for (const Param& p : k.params) {
      if (!p.is_tensor && (IsInteger(p.dtype) || p.dtype == DType::kBool)) {
        bindable_.insert(p.name);
      } else if (!p.is_tensor) {
        float_scalars_.insert(p.name);
      }
    }
  }

  // Does `e` compute with floats (a float literal, scalar, cast or builtin)?
  bool InvolvesFloat(const Expr& e) const {
    switch (e.kind) {
      case ExprKind::kFloat:
      case ExprKind::kLoad:
        return true;
      case ExprKind::kVar:
        return float_scalars_.contains(e.name);
      case ExprKind::kCast:
        if (IsFloat(e.dtype)) return true;
        break;
      case ExprKind::kCall:
        if (e.name != "min" && e.name != "max" && e.name != "abs" &&
            e.name != "ceildiv" && e.name != "select" &&
            e.name != "if_then_else") {
          return true;
        }
        break;
      default:
        break;
    }
    for (const Expr& a : e.args) {
      if (InvolvesFloat(a)) return true;
    }
    return false;
  }

  // `e` as an S-expression whose names the runtime can bind.
  absl::StatusOr<std::string> Launch(const Expr& e, std::string_view what) {
    std::optional<std::string> s = ToSExpr(e);
    if (!s) {
      return absl::InvalidArgumentError(
          StrCat(Where(e), what, " '", Print(e),
                 "' is not an integer expression the launch metadata can "
                 "carry (only + - * / % min max ceildiv abs, comparisons and "
                 "&& || ! over integers, symbols and integer scalars)"));
    }
    std::set<std::string> names;
    CollectNames(e, &names);
    for (const std::string& n : names) {
      if (!bindable_.contains(n)) {
        return absl::InvalidArgumentError(
            StrCat(Where(e), what, " '", Print(e), "' uses '", n,
                   "', which is neither a dynamic symbol nor an integer "
                   "scalar parameter, so it cannot be evaluated at launch"));
      }
    }
    return *s;
  }

 private:
  static std::string Where(const Expr& e) {
    return e.loc.line > 0 ? StrCat(e.loc.line, ":", e.loc.col, ": ") : "";
  }

  std::set<std::string> bindable_;
  std::set<std::string> float_scalars_;
};

}  // namespace

std::optional<std::string> ToSExpr(const Expr& e) { return SExprRec(e, 0); }

std::vector<std::string> DynamicSymbols(const Kernel& kernel) {
  std::vector<std::string> out;
  for (const Param& p : kernel.params) {
    if (!p.is_tensor) continue;
    for (const Expr& d : p.shape) {
      if (d.kind != ExprKind::kVar) continue;
      if (std::find(out.begin(), out.end(), d.name) == out.end()) {
        out.push_back(d.name);
      }
    }
  }
  return out;
}

absl::StatusOr<std::string> WriteKernelMetadata(
    const Kernel& lowered, const MetadataOptions& options) {
  Writer w(lowered);
  std::string out = "kiln-kernel 1\n";
  StrAppend(&out, "name ", lowered.name, "\n");
  StrAppend(&out, "target ", options.target, "\n");
  StrAppend(&out, "entry ", options.entry, "\n");
  out += "symbols";
  for (const std::string& s : DynamicSymbols(lowered)) StrAppend(&out, " ", s);
  out += "\n";

  std::string strides;
  for (const Param& p : lowered.params) {
    if (!p.is_tensor) {
      StrAppend(&out, "param ", p.name, " scalar ", DTypeName(p.dtype), "\n");
      continue;
    }
    StrAppend(&out, "param ", p.name, " tensor ", DTypeName(p.dtype));
    for (const Expr& d : p.shape) {
      if (d.kind == ExprKind::kInt) {
        StrAppend(&out, " ", d.int_value);
      } else if (d.kind == ExprKind::kVar) {
        StrAppend(&out, " ", d.name);
      } else {
        return absl::InvalidArgumentError(
            StrCat("parameter '", p.name, "' has dim '", Print(d),
                   "', which is neither an integer nor a symbol"));
      }
    }
    out += "\n";
    if (p.strides.empty()) continue;
    StrAppend(&strides, "strides ", p.name);
    for (const Expr& s : p.strides) {
      absl::StatusOr<std::string> e =
          w.Launch(s, StrCat("stride of '", p.name, "'"));
      if (!e.ok()) return e.status();
      StrAppend(&strides, " ", *e);
    }
    strides += "\n";
  }
  out += strides;
  if (std::vector<std::string> written = WrittenTensorParams(lowered);
      !written.empty()) {
    out += "writes";
    for (const std::string& name : written) StrAppend(&out, " ", name);
    out += "\n";
  }

  if (lowered.grid.empty() || lowered.grid.size() > 3) {
    return absl::InvalidArgumentError(StrCat("kernel '", lowered.name, "' has ",
                                             lowered.grid.size(),
                                             " grid extents; expected 1 to 3"));
  }
  out += "grid";
  for (size_t i = 0; i < 3; ++i) {
    if (i >= lowered.grid.size()) {
      out += " 1";
      continue;
    }
    absl::StatusOr<std::string> e = w.Launch(lowered.grid[i], "grid extent");
    if (!e.ok()) return e.status();
    StrAppend(&out, " ", *e);
  }
  absl::StatusOr<std::string> threads = w.Launch(lowered.threads, "threads");
  if (!threads.ok()) return threads.status();
  if (options.block_threads > 0) *threads = StrCat(options.block_threads);
  StrAppend(&out, "\nblock ", *threads, " 1 1\n");
  out += "cluster";
  if (options.cluster) {
    for (int64_t c : *options.cluster) StrAppend(&out, " ", c);
  } else if (lowered.cluster.empty()) {
    out += " 1 1 1";
  } else {
    for (const Expr& c : lowered.cluster) {
      absl::StatusOr<std::string> e = w.Launch(c, "cluster extent");
      if (!e.ok()) return e.status();
      StrAppend(&out, " ", *e);
    }
  }
  StrAppend(&out, "\nshared-bytes ", options.shared_bytes, "\n");
  if (options.persistent) out += "persistent\n";
  for (const TensorMapSpec& m : options.tensor_maps) {
    StrAppend(&out, "tensormap ", m.param, " ", m.swizzle);
    for (int64_t b : m.box) StrAppend(&out, " ", b);
    out += "\n";
  }
  for (const Expr& a : lowered.assumptions) {
    std::string text = Print(a);
    std::replace(text.begin(), text.end(), '\n', ' ');
    absl::StatusOr<std::string> e = w.Launch(a, "assumption");
    if (e.ok()) {
      StrAppend(&out, "assume ", *e, " ", text, "\n");
    } else if (w.InvolvesFloat(a)) {
      // The verifier rejects these (assumptions are integer facts); a kernel
      // built by hand must not get a launch check silently dropped.
      return absl::InvalidArgumentError(
          StrCat("assumption '", text,
                 "' is over floats; assumptions are integer facts checked at "
                 "launch (tile-ir.md, verifier rule 4)"));
    } else {
      return e.status();
    }
  }
  return out;
}

}  // namespace kiln::compiler
