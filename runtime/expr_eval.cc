#include "runtime/expr_eval.h"

#include <cctype>
#include <charconv>
#include <set>

#include "absl/strings/str_cat.h"

namespace kiln::runtime {
namespace {

constexpr int kMaxDepth = 256;

struct OpInfo {
  std::string_view spelling;
  int min_args;
  int max_args;  // -1: unbounded
};

bool IsNameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

std::optional<int64_t> FloorDiv(int64_t a, int64_t b) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

std::optional<int64_t> FloorMod(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

std::optional<int64_t> CeilDiv(int64_t a, int64_t b) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) == (b < 0))) ++q;
  return q;
}

}  // namespace

class IntExpr::Parser {
 public:
  Parser(std::string_view text, IntExpr* out) : text_(text), out_(out) {}

  absl::StatusOr<int> ParseNode(int depth) {
    SkipSpace();
    if (depth > kMaxDepth) return Error("nests deeper than 256 levels");
    if (pos_ >= text_.size()) return Error("unexpected end");
    if (text_[pos_] == ')') return Error("unexpected ')'");
    if (text_[pos_] != '(') return ParseAtom();
    ++pos_;
    SkipSpace();
    const size_t op_start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ' ' && text_[pos_] != '(' &&
           text_[pos_] != ')' && text_[pos_] != '\t') {
      ++pos_;
    }
    std::string_view spelling = text_.substr(op_start, pos_ - op_start);
    std::optional<std::pair<Op, OpInfo>> op = LookupOp(spelling);
    if (!op) {
      pos_ = op_start;
      return Error(
          absl::StrCat("unknown operator '", std::string(spelling), "'"));
    }
    Node node;
    node.kind = Node::Kind::kOp;
    node.op = op->first;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size()) return Error("missing ')'");
      if (text_[pos_] == ')') {
        ++pos_;
        break;
      }
      absl::StatusOr<int> arg = ParseNode(depth + 1);
      if (!arg.ok()) return arg.status();
      node.args.push_back(*arg);
    }
    const int n = static_cast<int>(node.args.size());
    const OpInfo& info = op->second;
    if (n < info.min_args || (info.max_args >= 0 && n > info.max_args)) {
      return Error(absl::StrCat(
          "'", std::string(info.spelling), "' takes ",
          info.max_args < 0 ? absl::StrCat("at least ", info.min_args)
                            : absl::StrCat(info.min_args),
          info.min_args == 1 && info.max_args == 1 ? " argument" : " arguments",
          "; found ", n));
    }
    out_->nodes_.push_back(std::move(node));
    return static_cast<int>(out_->nodes_.size()) - 1;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "expression '", std::string(text_), "' at offset ", pos_, ": ", what));
  }

 private:
  static std::optional<std::pair<Op, OpInfo>> LookupOp(std::string_view s) {
    static const std::pair<Op, OpInfo> kOps[] = {
        {Op::kAdd, {"+", 2, -1}},   {Op::kSub, {"-", 2, 2}},
        {Op::kMul, {"*", 2, -1}},   {Op::kDiv, {"/", 2, 2}},
        {Op::kMod, {"%", 2, 2}},    {Op::kMin, {"min", 2, -1}},
        {Op::kMax, {"max", 2, -1}}, {Op::kCeilDiv, {"ceildiv", 2, 2}},
        {Op::kNeg, {"neg", 1, 1}},  {Op::kEq, {"==", 2, 2}},
        {Op::kNe, {"!=", 2, 2}},    {Op::kLt, {"<", 2, 2}},
        {Op::kLe, {"<=", 2, 2}},    {Op::kGt, {">", 2, 2}},
        {Op::kGe, {">=", 2, 2}},    {Op::kAnd, {"&&", 2, -1}},
        {Op::kOr, {"||", 2, -1}},   {Op::kNot, {"!", 1, 1}},
    };
    for (const auto& op : kOps) {
      if (op.second.spelling == s) return op;
    }
    return std::nullopt;
  }

  absl::StatusOr<int> ParseAtom() {
    const size_t start = pos_;
    Node node;
    if (IsNameStart(text_[pos_])) {
      while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
      node.kind = Node::Kind::kName;
      node.name = std::string(text_.substr(start, pos_ - start));
    } else {
      size_t digits = pos_ + (text_[pos_] == '-' ? 1 : 0);
      size_t end = digits;
      while (end < text_.size() &&
             std::isdigit(static_cast<unsigned char>(text_[end]))) {
        ++end;
      }
      if (end == digits) return Error("expected a number, a name or '('");
      auto [ptr, ec] =
          std::from_chars(text_.data() + start, text_.data() + end, node.value);
      if (ec != std::errc() || ptr != text_.data() + end) {
        return Error("integer literal outside the int64 range");
      }
      pos_ = end;
    }
    if (pos_ < text_.size() && text_[pos_] != ' ' && text_[pos_] != ')' &&
        text_[pos_] != '(' && text_[pos_] != '\t') {
      return Error("unexpected character");
    }
    out_->nodes_.push_back(std::move(node));
    return static_cast<int>(out_->nodes_.size()) - 1;
  }

  std::string_view text_;
  IntExpr* out_;
  size_t pos_ = 0;
};

IntExpr::IntExpr() : nodes_(1), text_("0") {}

IntExpr IntExpr::Constant(int64_t value) {
  IntExpr e;
  e.nodes_[0].value = value;
  e.text_ = absl::StrCat(value);
  return e;
}

absl::StatusOr<IntExpr> IntExpr::Parse(std::string_view text) {
  IntExpr e;
  e.nodes_.clear();
  e.text_ = std::string(text);
  Parser parser(text, &e);
  absl::StatusOr<int> root = parser.ParseNode(0);
  if (!root.ok()) return root.status();
  if (!parser.AtEnd()) return parser.Error("unexpected text after the end");
  e.root_ = *root;
  return e;
}

std::vector<std::string> IntExpr::Names() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  // Nodes are stored children first; walk from the root for source order.
  std::vector<int> stack = {root_};
  while (!stack.empty()) {
    const Node& n = nodes_[stack.back()];
    stack.pop_back();
    if (n.kind == Node::Kind::kName && seen.insert(n.name).second) {
      out.push_back(n.name);
    }
    for (auto it = n.args.rbegin(); it != n.args.rend(); ++it) {
      stack.push_back(*it);
    }
  }
  return out;
}

std::optional<int64_t> IntExpr::AsConstant() const {
  if (!Names().empty()) return std::nullopt;
  absl::StatusOr<int64_t> v = Evaluate({});
  if (!v.ok()) return std::nullopt;
  return *v;
}

absl::Status IntExpr::Overflow() const {
  return absl::InvalidArgumentError(
      absl::StrCat("expression '", text_, "' overflows int64"));
}

absl::StatusOr<int64_t> IntExpr::Evaluate(const NameValues& values) const {
  return Eval(root_, values);
}

absl::StatusOr<int64_t> IntExpr::Eval(int index,
                                      const NameValues& values) const {
  const Node& n = nodes_[index];
  if (n.kind == Node::Kind::kInt) return n.value;
  if (n.kind == Node::Kind::kName) {
    auto it = values.find(n.name);
    if (it == values.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expression '", text_, "' uses '", n.name, "', which is not bound"));
    }
    return it->second;
  }
  std::vector<int64_t> a;
  a.reserve(n.args.size());
  for (int arg : n.args) {
    absl::StatusOr<int64_t> v = Eval(arg, values);
    if (!v.ok()) return v.status();
    a.push_back(*v);
  }
  int64_t r = a[0];
  auto fold = [&](auto step) -> absl::StatusOr<int64_t> {
    for (size_t i = 1; i < a.size(); ++i) {
      if (!step(r, a[i], &r)) return Overflow();
    }
    return r;
  };
  auto division = [&](std::optional<int64_t> v) -> absl::StatusOr<int64_t> {
    if (v) return *v;
    if (a[1] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("expression '", text_, "' divides by zero"));
    }
    return Overflow();
  };
  switch (n.op) {
    case Op::kAdd:
      return fold([](int64_t x, int64_t y, int64_t* out) {
        return !__builtin_add_overflow(x, y, out);
      });
    case Op::kMul:
      return fold([](int64_t x, int64_t y, int64_t* out) {
        return !__builtin_mul_overflow(x, y, out);
      });
    case Op::kSub:
      if (__builtin_sub_overflow(a[0], a[1], &r)) return Overflow();
      return r;
    case Op::kMin:
      for (int64_t v : a) r = std::min(r, v);
      return r;
    case Op::kMax:
      for (int64_t v : a) r = std::max(r, v);
      return r;
    case Op::kDiv:
      return division(FloorDiv(a[0], a[1]));
    case Op::kMod:
      return division(FloorMod(a[0], a[1]));
    case Op::kCeilDiv:
      return division(CeilDiv(a[0], a[1]));
    case Op::kNeg:
      if (a[0] == INT64_MIN) return Overflow();
      return -a[0];
    case Op::kEq:
      return int64_t{a[0] == a[1]};
    case Op::kNe:
      return int64_t{a[0] != a[1]};
    case Op::kLt:
      return int64_t{a[0] < a[1]};
    case Op::kLe:
      return int64_t{a[0] <= a[1]};
    case Op::kGt:
      return int64_t{a[0] > a[1]};
    case Op::kGe:
      return int64_t{a[0] >= a[1]};
    case Op::kAnd:
      for (int64_t v : a) {
        if (v == 0) return int64_t{0};
      }
      return int64_t{1};
    case Op::kOr:
      for (int64_t v : a) {
        if (v != 0) return int64_t{1};
      }
      return int64_t{0};
    case Op::kNot:
      return int64_t{a[0] == 0};
  }
  return absl::InternalError("unknown operator");
}

}  // namespace kiln::runtime
