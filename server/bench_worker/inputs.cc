#include "server/bench_worker/inputs.h"

#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

namespace kiln::bench {
namespace {

using runtime::DType;

// A random bit pattern of a narrow float: sign, an exponent between
// `min_exp` and `max_exp` (biased), any mantissa of `mantissa_bits`.
uint32_t NarrowFloat(std::mt19937_64& rng, int exp_shift, int min_exp,
                     int max_exp, int mantissa_bits, int sign_shift) {
  const uint32_t sign = rng() & 1;
  const uint32_t exp =
      static_cast<uint32_t>(min_exp + rng() % (max_exp - min_exp + 1));
  const uint32_t mantissa =
      static_cast<uint32_t>(rng() & ((1u << mantissa_bits) - 1));
  return (sign << sign_shift) | (exp << exp_shift) | mantissa;
}

double Real(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> magnitude(1.0 / 32, 1.0);
  const double v = magnitude(rng);
  return (rng() & 1) ? -v : v;
}

int64_t SignedInt(std::mt19937_64& rng) {
  const int64_t v = 1 + static_cast<int64_t>(rng() % 8);
  return (rng() & 1) ? -v : v;
}

template <typename T>
void Store(unsigned char* at, T value) {
  std::memcpy(at, &value, sizeof(T));
}

void Fill(DType dtype, int64_t elements, std::mt19937_64& rng,
          unsigned char* out) {
  switch (dtype) {
    case DType::kI4:
    case DType::kU4:
      for (uint64_t i = 0; i < TensorBytes(dtype, elements); ++i) {
        // Nibbles in [1, 7]: non-zero, and positive read signed or not.
        out[i] = static_cast<unsigned char>((1 + rng() % 7) |
                                            ((1 + rng() % 7) << 4));
      }
      return;
    default:
      break;
  }
  const int size = runtime::DTypeBits(dtype) / 8;
  for (int64_t i = 0; i < elements; ++i) {
    unsigned char* at = out + i * size;
    switch (dtype) {
      case DType::kBool:
        *at = static_cast<unsigned char>(rng() & 1);
        break;
      case DType::kI8:
        Store(at, static_cast<int8_t>(SignedInt(rng)));
        break;
      case DType::kU8:
        Store(at, static_cast<uint8_t>(1 + rng() % 15));
        break;
      case DType::kI16:
        Store(at, static_cast<int16_t>(SignedInt(rng)));
        break;
      case DType::kI32:
        Store(at, static_cast<int32_t>(SignedInt(rng)));
        break;
      case DType::kI64:
        Store(at, SignedInt(rng));
        break;
      case DType::kU32:
        Store(at, static_cast<uint32_t>(1 + rng() % 15));
        break;
      case DType::kF16:  // 2^-5 .. 2^0
        Store(at, static_cast<uint16_t>(NarrowFloat(rng, 10, 10, 14, 10, 15)));
        break;
      case DType::kBF16:  // 2^-5 .. 2^0
        Store(at, static_cast<uint16_t>(NarrowFloat(rng, 7, 122, 126, 7, 15)));
        break;
      case DType::kF8E4M3:  // 2^-5 .. 2^0
        *at = static_cast<unsigned char>(NarrowFloat(rng, 3, 2, 6, 3, 7));
        break;
      case DType::kF8E5M2:  // 2^-5 .. 2^0
        *at = static_cast<unsigned char>(NarrowFloat(rng, 2, 10, 14, 2, 7));
        break;
      case DType::kF32:
        Store(at, static_cast<float>(Real(rng)));
        break;
      case DType::kF64:
        Store(at, Real(rng));
        break;
      case DType::kI4:
      case DType::kU4:
        break;
    }
  }
}

}  // namespace

uint64_t TensorBytes(DType dtype, int64_t elements) {
  const uint64_t n = static_cast<uint64_t>(elements);
  if (dtype == DType::kI4 || dtype == DType::kU4) return (n + 1) / 2;
  return n * static_cast<uint64_t>(runtime::DTypeBits(dtype) / 8);
}

absl::StatusOr<Inputs> MakeInputs(const runtime::KernelMetadata& metadata,
                                  const ShapeValues& shape, uint64_t seed,
                                  uint64_t max_bytes) {
  std::mt19937_64 rng(seed);
  runtime::NameValues values(shape.begin(), shape.end());
  Inputs inputs;
  inputs.buffers.resize(metadata.params.size());
  uint64_t total = 0;
  for (size_t p = 0; p < metadata.params.size(); ++p) {
    const runtime::MetadataParam& param = metadata.params[p];
    if (!param.is_tensor) {
      if (runtime::IsIntegerOrBool(param.dtype)) {
        auto it = shape.find(param.name);
        const int64_t v = it != shape.end() ? it->second : 1;
        switch (param.dtype) {
          case DType::kBool:
            inputs.args.push_back(runtime::ArgValue::Bool(v != 0));
            break;
          case DType::kI64:
            inputs.args.push_back(runtime::ArgValue::I64(v));
            break;
          case DType::kU32:
            inputs.args.push_back(
                runtime::ArgValue::U32(static_cast<uint32_t>(v)));
            break;
          default:
            inputs.args.push_back(runtime::ArgValue::Scalar(
                param.dtype, static_cast<int32_t>(v)));
            if (param.dtype == DType::kI8 || param.dtype == DType::kU8) {
              inputs.args.back() = runtime::ArgValue::Scalar(
                  param.dtype, static_cast<int8_t>(v));
            } else if (param.dtype == DType::kI16) {
              inputs.args.back() = runtime::ArgValue::Scalar(
                  param.dtype, static_cast<int16_t>(v));
            }
            break;
        }
        continue;
      }
      const double v = 0.5 + std::uniform_real_distribution<double>(0, 1)(rng);
      switch (param.dtype) {
        case DType::kF64:
          inputs.args.push_back(runtime::ArgValue::F64(v));
          break;
        case DType::kF32:
          inputs.args.push_back(runtime::ArgValue::F32(static_cast<float>(v)));
          break;
        default: {
          // Narrow float scalars: a random pattern of the tensor fill.
          unsigned char bytes[2] = {};
          Fill(param.dtype, 1, rng, bytes);
          uint16_t bits = 0;
          std::memcpy(&bits, bytes, runtime::DTypeBits(param.dtype) / 8);
          inputs.args.push_back(runtime::ArgValue::Scalar(param.dtype, bits));
          break;
        }
      }
      continue;
    }
    std::vector<int64_t> dims;
    for (size_t d = 0; d < param.shape.size(); ++d) {
      const runtime::MetadataDim& dim = param.shape[d];
      int64_t v = dim.value;
      if (dim.is_symbol()) {
        auto it = shape.find(dim.symbol);
        if (it == shape.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat("no value for symbol ", dim.symbol, " (dim ", d,
                           " of parameter '", param.name, "')"));
        }
        v = it->second;
      }
      if (v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", param.name, "' dim ", d, " is ", v));
      }
      dims.push_back(v);
    }
    std::vector<int64_t> strides;
    int64_t elements = 1;
    if (param.strides.empty()) {
      for (int64_t d : dims) {
        if (d != 0 && elements > (int64_t{1} << 40) / d) {
          return absl::InvalidArgumentError(
              absl::StrCat("parameter '", param.name, "' is too large"));
        }
        elements *= d;
      }
    } else {
      // The span a strided tensor touches: 1 + sum((dim - 1) * stride).
      int64_t span = 1;
      for (size_t d = 0; d < dims.size(); ++d) {
        absl::StatusOr<int64_t> s = param.strides[d].Evaluate(values);
        if (!s.ok()) return s.status();
        strides.push_back(*s);
        if (dims[d] == 0) span = 0;
        if (span > 0) span += (dims[d] - 1) * *s;
      }
      elements = span;
    }
    const uint64_t bytes = TensorBytes(param.dtype, elements);
    total += bytes;
    if (total > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the inputs need more than ", max_bytes >> 20, " MiB at this shape"));
    }
    std::vector<unsigned char>& buffer = inputs.buffers[p];
    buffer.resize(bytes);
    Fill(param.dtype, elements, rng, buffer.data());
    inputs.args.push_back(runtime::ArgValue::Tensor(
        buffer.data(), param.dtype, std::move(dims), std::move(strides)));
  }
  return inputs;
}

}  // namespace kiln::bench
