// BindLaunch:
// 1. argument count; per parameter: tensor/scalar, dtype;
// 2. tensors: rank, dims (constants must match; a symbol's first binder
//    fixes it, later ones must agree), data present, i4/u4 last dim even;
//    integer scalars bind their names;
// 3. strides (after every symbol is bound: kernel strides may use them);
// 4. assumptions, then the grid.
#include "runtime/launch_args.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::runtime {
namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

std::vector<int64_t> RowMajor(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// Do two stride lists address the same elements of `shape`? Dims of extent
// 0 or 1 never step, so their strides do not matter.
bool SameLayout(const std::vector<int64_t>& shape,
                const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] > 1 && a[d] != b[d]) return false;
  }
  return true;
}

std::string List(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

}  // namespace

ArgValue ArgValue::Tensor(void* data, DType dtype, std::vector<int64_t> shape,
                          std::vector<int64_t> strides) {
  ArgValue a;
  a.is_tensor = true;
  a.dtype = dtype;
  a.data = data;
  a.shape = std::move(shape);
  a.strides = std::move(strides);
  return a;
}

std::optional<int64_t> ArgValue::IntegerValue() const {
  if (is_tensor) return std::nullopt;
  auto get = [&](auto v) {
    std::memcpy(&v, scalar, sizeof(v));
    return static_cast<int64_t>(v);
  };
  switch (dtype) {
    case DType::kBool:
      return scalar[0] != 0 ? 1 : 0;
    case DType::kI8:
      return get(int8_t{});
    case DType::kU8:
      return get(uint8_t{});
    case DType::kI16:
      return get(int16_t{});
    case DType::kI32:
      return get(int32_t{});
    case DType::kI64:
      return get(int64_t{});
    case DType::kU32:
      return get(uint32_t{});
    case DType::kI4:  // low nibble, sign-extended
      return static_cast<int64_t>(static_cast<int8_t>(scalar[0] << 4) >> 4);
    case DType::kU4:
      return scalar[0] & 0xF;
    default:
      return std::nullopt;
  }
}

absl::StatusOr<LaunchPlan> BindLaunch(const KernelMetadata& md,
                                      absl::Span<const ArgValue> args) {
  if (args.size() != md.params.size()) {
    return Invalid(absl::StrCat("kernel '", md.name, "' takes ",
                                md.params.size(), " arguments; got ",
                                args.size()));
  }
  LaunchPlan plan;
  std::map<std::string, std::string> binder;  // symbol -> parameter
  for (size_t i = 0; i < args.size(); ++i) {
    const MetadataParam& p = md.params[i];
    const ArgValue& a = args[i];
    const std::string param = absl::StrCat("parameter '", p.name, "'");
    if (a.is_tensor != p.is_tensor) {
      return Invalid(absl::StrCat(
          param, " is a ", p.is_tensor ? "tensor" : "scalar",
          " but the argument is a ", a.is_tensor ? "tensor" : "scalar"));
    }
    if (a.dtype != p.dtype) {
      return Invalid(absl::StrCat(
          param, " is ", std::string(DTypeName(a.dtype)),
          " but the kernel takes ", std::string(DTypeName(p.dtype))));
    }
    plan.args.push_back(a.address());
    if (!p.is_tensor) {
      if (std::optional<int64_t> v = a.IntegerValue()) plan.values[p.name] = *v;
      continue;
    }
    if (a.shape.size() != p.shape.size()) {
      return Invalid(absl::StrCat(param, " has ", p.shape.size(),
                                  " dims but the argument has ",
                                  a.shape.size()));
    }
    int64_t elements = 1;
    for (size_t d = 0; d < p.shape.size(); ++d) {
      const int64_t n = a.shape[d];
      if (n < 0) return Invalid(absl::StrCat(param, " dim ", d, " is ", n));
      if (__builtin_mul_overflow(elements, n, &elements)) {
        return Invalid(absl::StrCat(param, " has too many elements"));
      }
      const MetadataDim& dim = p.shape[d];
      if (!dim.is_symbol()) {
        if (n != dim.value) {
          return Invalid(absl::StrCat(param, " dim ", d, " is ", n,
                                      " but the kernel was compiled for ",
                                      dim.value));
        }
        continue;
      }
      auto [it, inserted] = plan.values.emplace(dim.symbol, n);
      if (inserted) {
        binder[dim.symbol] = p.name;
      } else if (it->second != n) {
        return Invalid(absl::StrCat(
            param, " dim ", d, " is ", n, " but symbol ", dim.symbol, " is ",
            it->second, " from '", binder[dim.symbol], "'"));
      }
    }
    if ((p.dtype == DType::kI4 || p.dtype == DType::kU4) && !a.shape.empty() &&
        a.shape.back() % 2 != 0) {
      return Invalid(absl::StrCat(
          param, " is ", std::string(DTypeName(p.dtype)),
          " (two per byte) with an odd last dim ", a.shape.back()));
    }
    if (elements > 0 && a.data == nullptr) {
      return Invalid(absl::StrCat(param, " has ", elements,
                                  " elements but no data (null pointer)"));
    }
    if (!a.strides.empty() && a.strides.size() != a.shape.size()) {
      return Invalid(absl::StrCat(param, " has ", a.shape.size(), " dims but ",
                                  a.strides.size(), " strides"));
    }
  }
  for (const std::string& s : md.symbols) {
    auto it = plan.values.find(s);
    if (it == plan.values.end()) {
      return Invalid(absl::StrCat("symbol ", s, " is bound by no argument"));
    }
    plan.symbols.push_back(it->second);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const MetadataParam& p = md.params[i];
    const ArgValue& a = args[i];
    if (!p.is_tensor) continue;
    std::vector<int64_t> want = RowMajor(a.shape);
    if (!p.strides.empty()) {
      for (size_t d = 0; d < p.strides.size(); ++d) {
        absl::StatusOr<int64_t> v = p.strides[d].Evaluate(plan.values);
        if (!v.ok()) return v.status();
        want[d] = *v;
      }
    }
    const std::vector<int64_t>& have =
        a.strides.empty() ? RowMajor(a.shape) : a.strides;
    if (!SameLayout(a.shape, want, have)) {
      return Invalid(absl::StrCat("parameter '", p.name, "' has strides ",
                                  List(have), " but the kernel expects ",
                                  List(want)));
    }
  }
  for (const MetadataAssumption& assumption : md.assumptions) {
    absl::StatusOr<int64_t> v = assumption.expr.Evaluate(plan.values);
    if (v.ok() && *v != 0) continue;
    std::vector<std::string> bound;
    for (const std::string& n : assumption.expr.Names()) {
      auto it = plan.values.find(n);
      if (it != plan.values.end()) {
        bound.push_back(absl::StrCat(n, " = ", it->second));
      }
    }
    if (!v.ok()) {
      return Invalid(absl::StrCat(
          "assumption '", assumption.text,
          "' cannot be evaluated: ", std::string(v.status().message())));
    }
    return Invalid(
        absl::StrCat("assumption '", assumption.text,
                     "' does not hold: ", absl::StrJoin(bound, ", ")));
  }
  int64_t blocks = 1;
  for (int d = 0; d < 3; ++d) {
    absl::StatusOr<int64_t> v = md.grid[d].Evaluate(plan.values);
    if (!v.ok()) return v.status();
    if (*v < 0) {
      return Invalid(absl::StrCat("grid extent ", d, " '", md.grid[d].text(),
                                  "' is ", *v));
    }
    plan.grid[d] = *v;
    if (__builtin_mul_overflow(blocks, *v, &blocks)) {
      return Invalid("the grid has more blocks than int64 counts");
    }
  }
  return plan;
}

}  // namespace kiln::runtime
