#include "server/tuning/output_check.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/kernel_metadata.h"

namespace kiln::server::tuning {
namespace {

using runtime::DType;

double HalfToDouble(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mantissa = h & 1023;
  double v;
  if (exp == 0) {
    v = std::ldexp(mantissa, -24);
  } else if (exp == 31) {
    v = mantissa ? NAN : INFINITY;
  } else {
    v = std::ldexp(1024 + mantissa, exp - 25);
  }
  return sign ? -v : v;
}

// Every f16 value as a float, made once: outputs of GEMM shapes hold tens
// of millions of elements, and std::ldexp per element costs more than the
// rest of the comparison.
float HalfToFloat(uint16_t h) {
  static const std::vector<float>* const table = [] {
    auto* t = new std::vector<float>(65536);
    for (uint32_t v = 0; v < 65536; ++v) {
      (*t)[v] = static_cast<float>(HalfToDouble(static_cast<uint16_t>(v)));
    }
    return t;
  }();
  return (*table)[h];
}

double E4M3ToDouble(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 15, mantissa = b & 7;
  double v;
  if (exp == 15 && mantissa == 7) {
    v = NAN;
  } else if (exp == 0) {
    v = std::ldexp(mantissa, -9);
  } else {
    v = std::ldexp(8 + mantissa, exp - 10);
  }
  return sign ? -v : v;
}

// Element `i` of `data` as a double (integers exactly up to 2^53).
double Element(DType dtype, const std::string& data, size_t i) {
  const char* p = data.data();
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p + i * sizeof v, sizeof v);
    return v;
  };
  switch (dtype) {
    case DType::kBool:
    case DType::kU8:
      return load(uint8_t{});
    case DType::kI8:
      return load(int8_t{});
    case DType::kI16:
      return load(int16_t{});
    case DType::kI32:
      return load(int32_t{});
    case DType::kI64:
      return static_cast<double>(load(int64_t{}));
    case DType::kU32:
      return load(uint32_t{});
    case DType::kF16:
      return HalfToFloat(load(uint16_t{}));
    case DType::kBF16: {
      const uint32_t bits = static_cast<uint32_t>(load(uint16_t{})) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::kF8E4M3:
      return E4M3ToDouble(load(uint8_t{}));
    case DType::kF8E5M2:
      return HalfToFloat(static_cast<uint16_t>(load(uint8_t{}) << 8));
    case DType::kF32:
      return load(float{});
    case DType::kF64:
      return load(double{});
    case DType::kI4:
    case DType::kU4: {
      const uint8_t byte = static_cast<uint8_t>(p[i / 2]);
      const int nibble = (i % 2) ? byte >> 4 : byte & 15;
      return dtype == DType::kI4 && nibble >= 8 ? nibble - 16 : nibble;
    }
  }
  return 0;
}

size_t Elements(DType dtype, size_t bytes) {
  if (dtype == DType::kI4 || dtype == DType::kU4) return bytes * 2;
  return bytes /
         static_cast<size_t>(std::max(1, runtime::DTypeBits(dtype) / 8));
}

double Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return 1e-9;
    case DType::kF32:
      return 1e-3;
    case DType::kF16:
    case DType::kBF16:
      return 2e-2;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return 1.5e-1;
    default:
      return 0;
  }
}

}  // namespace

std::string CompareOutputs(const Tensors& got, const Tensors& expected) {
  if (got.size() != expected.size()) {
    return absl::StrCat("returned ", got.size(), " tensors, expected ",
                        expected.size());
  }
  for (int t = 0; t < got.size(); ++t) {
    const auto& g = got[t];
    const auto& e = expected[t];
    if (g.name() == e.name() && g.unchanged() != e.unchanged()) {
      return g.unchanged()
                 ? absl::StrCat("left ", g.name(),
                                " as it was, which the reference writes")
                 : absl::StrCat("wrote ", g.name(),
                                ", which the reference leaves as it was");
    }
    if (g.unchanged() && e.unchanged() && g.name() == e.name() &&
        g.dtype() == e.dtype()) {
      continue;
    }
    if (g.name() != e.name() || g.dtype() != e.dtype() ||
        g.data().size() != e.data().size()) {
      return absl::StrCat("tensor ", t, " is ", g.name(), ":", g.dtype(), " (",
                          g.data().size(), " bytes), expected ", e.name(), ":",
                          e.dtype(), " (", e.data().size(), " bytes)");
    }
    if (g.data() == e.data()) continue;  // bit for bit: no need to look
    std::optional<DType> dtype = runtime::ParseDType(g.dtype());
    if (!dtype.has_value()) {
      if (g.data() != e.data()) return absl::StrCat(g.name(), " differs");
      continue;
    }
    const double tol = Tolerance(*dtype);
    const size_t n = Elements(*dtype, g.data().size());
    size_t mismatches = 0;
    std::string first;
    for (size_t i = 0; i < n; ++i) {
      const double a = Element(*dtype, g.data(), i);
      const double b = Element(*dtype, e.data(), i);
      const bool ok = std::isnan(b)
                          ? std::isnan(a)
                          : std::fabs(a - b) <= tol + tol * std::fabs(b);
      if (ok) continue;
      if (mismatches++ == 0) {
        first = absl::StrCat(g.name(), "[", i, "] is ", a, ", expected ", b,
                             " (tolerance ", tol + tol * std::fabs(b), ")");
      }
    }
    if (mismatches > 0) {
      return absl::StrCat(first, "; ", mismatches, " of ", n,
                          " elements differ");
    }
  }
  return "";
}

}  // namespace kiln::server::tuning
