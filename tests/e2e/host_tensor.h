// A tensor in host memory for the end-to-end tests: any dtype (i4/u4 packed
// two per byte), optional element strides, out-of-bounds detection,
// poisoning, and random fills with valid values.
//
// Out of bounds: the data ends exactly where an inaccessible page begins
// (ElectricFence-style), so any read or write past the end faults, and a
// guard band of known bytes before the data catches writes before it. A
// fault in a guard page is reported (tensor, test) by the handler that
// InstallGuardPageReporter() installs before the process dies.
#ifndef KILN_TESTS_E2E_HOST_TENSOR_H_
#define KILN_TESTS_E2E_HOST_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/launch_args.h"
#include "tests/e2e/dtype_codec.h"

namespace kiln::e2e {

// A small, seedable, platform-independent generator (SplitMix64): the same
// seed gives the same inputs with every standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi);
  // Uniform integer in [lo, hi].
  int64_t UniformInt(int64_t lo, int64_t hi);

 private:
  uint64_t state_;
};

// Installs (once) a SIGSEGV/SIGBUS handler that names the tensor whose
// guard page was hit, then lets the signal kill the process.
void InstallGuardPageReporter();

class HostTensor {
 public:
  // A tensor of `shape` (elements per dim). `strides` (elements; empty:
  // row-major) may repeat memory, e.g. a broadcast dim of stride 0: storage
  // then holds only the distinct elements. The data starts zeroed.
  HostTensor(DType dtype, std::vector<int64_t> shape,
             std::vector<int64_t> strides = {});
  ~HostTensor();
  HostTensor(const HostTensor& other);  // a deep copy
  HostTensor(HostTensor&& other) noexcept;
  HostTensor& operator=(const HostTensor&) = delete;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const;  // logical elements (product of the shape)
  void* data() { return payload(); }

  // Launch argument for this tensor (with its strides when given).
  runtime::ArgValue Arg();

  // Logical element `index` (row-major over the shape), decoded.
  double Get(int64_t index) const;
  // Stores `value` into logical element `index`, encoded (floats rounded).
  void Set(int64_t index, double value);
  // Every logical element, decoded, row-major.
  std::vector<double> Values() const;
  void SetValues(const std::vector<double>& values);

  // Floats: uniform in [lo, hi) rounded to the dtype. Integers: uniform in
  // [lo, hi] (clamped to the dtype's range). Never all zeros unless the
  // range is [0, 0].
  void FillRandom(Rng& rng, double lo, double hi);
  // Every storage element set to PoisonBits(dtype): what a kernel must
  // overwrite.
  void Poison();

  // True when the guard band before the data is untouched. `where` gets a
  // description of the first damaged byte. (Past the end, a write faults.)
  bool GuardsIntact(std::string* where) const;
  // True when the data bytes are equal to `other`'s.
  bool SameBytes(const HostTensor& other) const;

 private:
  static constexpr int64_t kGuardBytes = 4096;  // at least, before the data
  static constexpr unsigned char kGuardByte = 0xCD;

  void Map();                                 // allocates the pages
  int64_t StorageIndex(int64_t index) const;  // logical -> storage element
  uint64_t LoadBits(int64_t storage) const;
  void StoreBits(int64_t storage, uint64_t bits);
  const unsigned char* payload() const { return base_ + front_bytes_; }
  unsigned char* payload() { return base_ + front_bytes_; }

  DType dtype_;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;      // as given (empty: row-major)
  std::vector<int64_t> eff_strides_;  // the strides in use
  int64_t storage_elements_ = 0;
  int64_t payload_bytes_ = 0;
  // mmap'ed: guard band (front_bytes_) | payload | inaccessible page.
  unsigned char* base_ = nullptr;
  int64_t front_bytes_ = 0;
  int64_t mapped_bytes_ = 0;
};

}  // namespace kiln::e2e

#endif  // KILN_TESTS_E2E_HOST_TENSOR_H_
