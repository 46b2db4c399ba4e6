// 1. Split into lines; skip comments and blank lines; the first record must
//    be `kiln-kernel 1`.
// 2. Split each record into fields at parenthesis depth 0 (an `assume`
//    keeps the rest of its line verbatim as the text).
// 3. Parse each record into KernelMetadata, rejecting duplicates.
// 4. Validate across records: required records present, every dim symbol
//    listed, every listed symbol bound by a dim, every expression's names
//    bindable at launch.
#include "runtime/kernel_metadata.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kiln::runtime {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  int bits;
};

constexpr std::array<DTypeInfo, 15> kDTypes = {{
    {DType::kBool, "bool", 8},
    {DType::kI8, "i8", 8},
    {DType::kU8, "u8", 8},
    {DType::kI16, "i16", 16},
    {DType::kI32, "i32", 32},
    {DType::kI64, "i64", 64},
    {DType::kU32, "u32", 32},
    {DType::kF16, "f16", 16},
    {DType::kBF16, "bf16", 16},
    {DType::kF32, "f32", 32},
    {DType::kF64, "f64", 64},
    {DType::kF8E4M3, "f8e4m3", 8},
    {DType::kF8E5M2, "f8e5m2", 8},
    {DType::kI4, "i4", 4},
    {DType::kU4, "u4", 4},
}};

bool IsName(std::string_view s) {
  if (s.empty() ||
      !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) {
    return false;
  }
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

class MetadataParser {
 public:
  absl::StatusOr<KernelMetadata> Parse(std::string_view text);

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("line ", line_, ": ", what));
  }
  // Splits at depth 0; false on unbalanced parentheses.
  bool Split(std::string_view line, std::vector<std::string_view>* fields);
  absl::Status Record(std::string_view line);
  absl::Status Once(const std::string& record);
  absl::StatusOr<IntExpr> Expression(std::string_view field);
  absl::Status Triple(const std::vector<std::string_view>& f,
                      std::array<IntExpr, 3>* out);
  absl::Status Param(const std::vector<std::string_view>& f);
  absl::Status Strides(const std::vector<std::string_view>& f);
  absl::Status Validate();

  KernelMetadata md_;
  int line_ = 0;
  std::set<std::string> seen_;
  std::vector<std::pair<int, std::string>> dim_symbols_;
  std::vector<int> tensor_map_lines_;  // line of each tensor map
};

bool MetadataParser::Split(std::string_view line,
                           std::vector<std::string_view>* fields) {
  int depth = 0;
  size_t start = std::string_view::npos;
  for (size_t i = 0; i <= line.size(); ++i) {
    const char c = i < line.size() ? line[i] : ' ';
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) return false;
    if (c == ' ' && depth == 0) {
      if (start != std::string_view::npos) {
        fields->push_back(line.substr(start, i - start));
      }
      start = std::string_view::npos;
    } else if (start == std::string_view::npos) {
      start = i;
    }
  }
  return depth == 0;
}

absl::Status MetadataParser::Once(const std::string& record) {
  if (!seen_.insert(record).second) {
    return Error(absl::StrCat("duplicate '", record, "' record"));
  }
  return absl::OkStatus();
}

absl::StatusOr<IntExpr> MetadataParser::Expression(std::string_view field) {
  absl::StatusOr<IntExpr> e = IntExpr::Parse(field);
  if (!e.ok()) return Error(std::string(e.status().message()));
  return e;
}

absl::Status MetadataParser::Triple(const std::vector<std::string_view>& f,
                                    std::array<IntExpr, 3>* out) {
  if (f.size() != 4) {
    return Error(absl::StrCat("'", std::string(f[0]),
                              "' takes 3 expressions; found ", f.size() - 1));
  }
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<IntExpr> e = Expression(f[i + 1]);
    if (!e.ok()) return e.status();
    (*out)[i] = std::move(*e);
  }
  return absl::OkStatus();
}

absl::Status MetadataParser::Param(const std::vector<std::string_view>& f) {
  if (f.size() < 4) {
    return Error("'param' takes NAME tensor|scalar DTYPE [DIMS...]");
  }
  MetadataParam p;
  p.name = std::string(f[1]);
  if (!IsName(p.name)) return Error("bad parameter name '" + p.name + "'");
  for (const MetadataParam& q : md_.params) {
    if (q.name == p.name) return Error("duplicate parameter '" + p.name + "'");
  }
  if (f[2] != "tensor" && f[2] != "scalar") {
    return Error("parameter kind must be 'tensor' or 'scalar'; found '" +
                 std::string(f[2]) + "'");
  }
  p.is_tensor = f[2] == "tensor";
  std::optional<DType> dt = ParseDType(f[3]);
  if (!dt) return Error("unknown dtype '" + std::string(f[3]) + "'");
  p.dtype = *dt;
  if (!p.is_tensor && f.size() != 4) {
    return Error("scalar parameter '" + p.name + "' takes no dims");
  }
  for (size_t i = 4; i < f.size(); ++i) {
    MetadataDim d;
    if (std::optional<int64_t> v = ParseInt(f[i])) {
      if (*v < 0) return Error("negative dim " + std::string(f[i]));
      d.value = *v;
    } else if (IsName(f[i])) {
      d.symbol = std::string(f[i]);
      dim_symbols_.emplace_back(line_, d.symbol);
    } else {
      return Error("dim '" + std::string(f[i]) +
                   "' is neither an integer nor a symbol");
    }
    p.shape.push_back(std::move(d));
  }
  md_.params.push_back(std::move(p));
  return absl::OkStatus();
}

absl::Status MetadataParser::Strides(const std::vector<std::string_view>& f) {
  if (f.size() < 2) return Error("'strides' takes NAME E...");
  for (MetadataParam& p : md_.params) {
    if (p.name != f[1]) continue;
    if (!p.is_tensor)
      return Error("strides for scalar parameter '" + p.name + "'");
    if (!p.strides.empty())
      return Error("duplicate strides for '" + p.name + "'");
    if (f.size() - 2 != p.shape.size()) {
      return Error(absl::StrCat("'", p.name, "' has ", p.shape.size(),
                                " dims but ", f.size() - 2, " strides"));
    }
    for (size_t i = 2; i < f.size(); ++i) {
      absl::StatusOr<IntExpr> e = Expression(f[i]);
      if (!e.ok()) return e.status();
      p.strides.push_back(std::move(*e));
    }
    return absl::OkStatus();
  }
  return Error("strides for unknown parameter '" + std::string(f[1]) + "'");
}

absl::Status MetadataParser::Record(std::string_view line) {
  std::vector<std::string_view> f;
  if (!Split(line, &f)) return Error("unbalanced parentheses");
  const std::string rec(f[0]);
  auto one_field = [&](std::string* out) -> absl::Status {
    if (absl::Status s = Once(rec); !s.ok()) return s;
    if (f.size() != 2) return Error("'" + rec + "' takes one field");
    *out = std::string(f[1]);
    return absl::OkStatus();
  };
  if (rec == "name") return one_field(&md_.name);
  if (rec == "target") return one_field(&md_.target);
  if (rec == "entry") return one_field(&md_.entry);
  if (rec == "param") return Param(f);
  if (rec == "strides") return Strides(f);
  if (rec == "symbols") {
    if (absl::Status s = Once(rec); !s.ok()) return s;
    for (size_t i = 1; i < f.size(); ++i) {
      std::string s(f[i]);
      if (!IsName(s)) return Error("bad symbol name '" + s + "'");
      for (const std::string& t : md_.symbols) {
        if (t == s) return Error("duplicate symbol '" + s + "'");
      }
      md_.symbols.push_back(std::move(s));
    }
    return absl::OkStatus();
  }
  if (rec == "grid" || rec == "block" || rec == "cluster") {
    if (absl::Status s = Once(rec); !s.ok()) return s;
    std::array<IntExpr, 3>* out = rec == "grid"    ? &md_.grid
                                  : rec == "block" ? &md_.block
                                                   : &md_.cluster;
    return Triple(f, out);
  }
  if (rec == "shared-bytes") {
    std::string v;
    if (absl::Status s = one_field(&v); !s.ok()) return s;
    std::optional<int64_t> n = ParseInt(v);
    if (!n || *n < 0) return Error("bad shared-bytes '" + v + "'");
    md_.shared_bytes = *n;
    return absl::OkStatus();
  }
  if (rec == "ptxas") {
    // ptxas registers R spill-stores S spill-loads L stack B static-shared B
    if (absl::Status s = Once(rec); !s.ok()) return s;
    if (f.size() % 2 != 1) return Error("'ptxas' takes KEY VALUE pairs");
    for (size_t i = 1; i + 1 < f.size(); i += 2) {
      std::optional<int64_t> n = ParseInt(f[i + 1]);
      if (!n || *n < 0) {
        return Error("bad ptxas value '" + std::string(f[i + 1]) + "'");
      }
      const std::string key(f[i]);
      if (key == "registers") {
        md_.ptxas.registers = *n;
      } else if (key == "spill-stores") {
        md_.ptxas.spill_stores = *n;
      } else if (key == "spill-loads") {
        md_.ptxas.spill_loads = *n;
      } else if (key == "stack") {
        md_.ptxas.stack_bytes = *n;
      } else if (key == "static-shared") {
        md_.ptxas.static_shared_bytes = *n;
      } else {
        return Error("unknown ptxas key '" + key + "'");
      }
    }
    return absl::OkStatus();
  }
  if (rec == "writes") {
    // writes NAME...: the tensor parameters (declared above) a launch may
    // change.
    if (absl::Status s = Once(rec); !s.ok()) return s;
    if (f.size() < 2) return Error("'writes' takes one or more parameters");
    for (size_t i = 1; i < f.size(); ++i) {
      auto p =
          std::find_if(md_.params.begin(), md_.params.end(),
                       [&](const MetadataParam& q) { return q.name == f[i]; });
      if (p == md_.params.end()) {
        return Error("'writes' names unknown parameter '" + std::string(f[i]) +
                     "'");
      }
      if (!p->is_tensor) {
        return Error("'writes' names scalar parameter '" + p->name + "'");
      }
      p->written = true;
    }
    return absl::OkStatus();
  }
  if (rec == "persistent") {
    if (absl::Status s = Once(rec); !s.ok()) return s;
    if (f.size() != 1) return Error("'persistent' takes no fields");
    md_.persistent = true;
    return absl::OkStatus();
  }
  if (rec == "tensormap") {
    // tensormap PARAM SWIZZLE BOX... (checked against the param in Validate)
    if (f.size() < 4) {
      return Error("'tensormap' takes a parameter, a swizzle and a box");
    }
    MetadataTensorMap m;
    m.param = std::string(f[1]);
    std::optional<int64_t> sw = ParseInt(f[2]);
    if (!sw || (*sw != 0 && *sw != 32 && *sw != 64 && *sw != 128)) {
      return Error("bad tensormap swizzle '" + std::string(f[2]) +
                   "' (0, 32, 64 or 128)");
    }
    m.swizzle = static_cast<int>(*sw);
    for (size_t i = 3; i < f.size(); ++i) {
      std::optional<int64_t> b = ParseInt(f[i]);
      if (!b || *b < 1 || *b > 256) {
        return Error("bad tensormap box dim '" + std::string(f[i]) +
                     "' (1 to 256)");
      }
      m.box.push_back(*b);
    }
    tensor_map_lines_.push_back(line_);
    md_.tensor_maps.push_back(std::move(m));
    return absl::OkStatus();
  }
  if (rec == "assume") {
    if (f.size() < 2) return Error("'assume' takes an expression and its text");
    absl::StatusOr<IntExpr> e = Expression(f[1]);
    if (!e.ok()) return e.status();
    // The text is the rest of the line after the expression, verbatim.
    const size_t end = (f[1].data() - line.data()) + f[1].size();
    std::string_view text = line.substr(end);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    md_.assumptions.push_back(
        {std::move(*e), text.empty() ? std::string(f[1]) : std::string(text)});
    return absl::OkStatus();
  }
  return Error("unknown record '" + rec +
               "' (metadata from a newer compiler?)");
}

absl::Status MetadataParser::Validate() {
  for (const char* r :
       {"name", "target", "entry", "symbols", "grid", "block"}) {
    if (!seen_.contains(r)) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing '", r, "' record"));
    }
  }
  std::set<std::string> symbols(md_.symbols.begin(), md_.symbols.end());
  std::set<std::string> bound;
  for (const auto& [line, s] : dim_symbols_) {
    if (!symbols.contains(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line, ": dim symbol '", s,
                       "' is not in the symbols record"));
    }
    bound.insert(s);
  }
  for (const std::string& s : md_.symbols) {
    if (!bound.contains(s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "symbol '", s, "' is not a dim of any tensor parameter"));
    }
  }
  for (size_t i = 0; i < md_.tensor_maps.size(); ++i) {
    const MetadataTensorMap& m = md_.tensor_maps[i];
    const MetadataParam* p = nullptr;
    for (const MetadataParam& q : md_.params) {
      if (q.name == m.param) p = &q;
    }
    if (p == nullptr || !p->is_tensor) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", tensor_map_lines_[i], ": tensormap of '",
                       m.param, "', which is not a tensor parameter"));
    }
    if (m.box.size() != p->shape.size() || m.box.size() > 5) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", tensor_map_lines_[i], ": tensormap of '", m.param,
          "' has a box of rank ", m.box.size(), "; the tensor has rank ",
          p->shape.size(), " (at most 5)"));
    }
  }
  std::set<std::string> bindable = symbols;
  for (const MetadataParam& p : md_.params) {
    if (!p.is_tensor && IsIntegerOrBool(p.dtype)) bindable.insert(p.name);
  }
  auto check = [&](const IntExpr& e, const std::string& where) -> absl::Status {
    for (const std::string& n : e.Names()) {
      if (!bindable.contains(n)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "expression '", e.text(), "' uses '", n,
            "', which is neither a dynamic symbol nor an integer scalar "
            "parameter"));
      }
    }
    return absl::OkStatus();
  };
  for (const MetadataParam& p : md_.params) {
    for (const IntExpr& e : p.strides) {
      if (absl::Status s = check(e, "strides of '" + p.name + "': "); !s.ok()) {
        return s;
      }
    }
  }
  for (const auto* triple : {&md_.grid, &md_.block, &md_.cluster}) {
    for (const IntExpr& e : *triple) {
      if (absl::Status s = check(e, "launch: "); !s.ok()) return s;
    }
  }
  for (const MetadataAssumption& a : md_.assumptions) {
    if (absl::Status s = check(a.expr, "assume: "); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelMetadata> MetadataParser::Parse(std::string_view text) {
  bool have_version = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (line.front() == '#') continue;
    if (!have_version) {
      std::vector<std::string_view> f;
      Split(line, &f);
      if (f.size() != 2 || f[0] != "kiln-kernel") {
        return Error("expected 'kiln-kernel 1' as the first record");
      }
      if (f[1] != "1") {
        return Error("metadata version " + std::string(f[1]) +
                     " is not supported (this reader knows version 1)");
      }
      have_version = true;
      continue;
    }
    if (absl::Status s = Record(line); !s.ok()) return s;
  }
  if (!have_version) {
    return absl::InvalidArgumentError("empty metadata: no 'kiln-kernel 1'");
  }
  if (absl::Status s = Validate(); !s.ok()) return s;
  return std::move(md_);
}

}  // namespace

std::string_view DTypeName(DType t) {
  return kDTypes[static_cast<int>(t)].name;
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.type;
  }
  return std::nullopt;
}

int DTypeBits(DType t) { return kDTypes[static_cast<int>(t)].bits; }

bool IsIntegerOrBool(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF32:
    case DType::kF64:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return false;
    default:
      return true;
  }
}

absl::StatusOr<KernelMetadata> ParseKernelMetadata(std::string_view text) {
  return MetadataParser().Parse(text);
}

}  // namespace kiln::runtime
