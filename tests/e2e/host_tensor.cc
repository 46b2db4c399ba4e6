// The guard-page registry is a fixed array written only by the test's
// thread (tensors are created and destroyed outside launches) and read by
// the signal handler, which uses async-signal-safe calls only.
#include "tests/e2e/host_tensor.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kiln::e2e {
namespace {

struct GuardPage {
  uintptr_t begin = 0;  // 0: a free slot
  uintptr_t end = 0;
  char what[160] = {};
};
constexpr int kMaxGuardPages = 4096;
GuardPage g_guard_pages[kMaxGuardPages];

int64_t PageBytes() {
  static const int64_t page = sysconf(_SC_PAGESIZE);
  return page;
}

void RegisterGuardPage(uintptr_t begin, uintptr_t end, const std::string& w) {
  for (GuardPage& g : g_guard_pages) {
    if (g.begin != 0) continue;
    std::snprintf(g.what, sizeof(g.what), "%s", w.c_str());
    g.end = end;
    g.begin = begin;
    return;
  }
}

void UnregisterGuardPage(uintptr_t begin) {
  for (GuardPage& g : g_guard_pages) {
    if (g.begin == begin) g.begin = 0;
  }
}

void WriteStderr(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void OnFault(int sig, siginfo_t* info, void*) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const GuardPage& g : g_guard_pages) {
    if (g.begin != 0 && addr >= g.begin && addr < g.end) {
      WriteStderr("\n*** e2e: a kernel accessed memory past the end of ");
      WriteStderr(g.what);
      WriteStderr(" (the inaccessible page after its data) ***\n");
      break;
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

std::string Describe(DType dtype, const std::vector<int64_t>& shape) {
  std::string text =
      absl::StrCat("a ", std::string(runtime::DTypeName(dtype)), " tensor [");
  for (size_t d = 0; d < shape.size(); ++d) {
    absl::StrAppend(&text, d ? ", " : "", shape[d]);
  }
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  absl::StrAppend(&text, "]");
  if (info != nullptr) {
    absl::StrAppend(&text, " in ", info->test_suite_name(), ".", info->name());
  }
  return text;
}

}  // namespace

void InstallGuardPageReporter() {
  static const bool installed = [] {
    struct sigaction sa = {};
    sa.sa_sigaction = OnFault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    return true;
  }();
  (void)installed;
}

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::Uniform(double lo, double hi) {
  const double u = static_cast<double>(Next() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}

int64_t Rng::UniformInt(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == UINT64_MAX) return static_cast<int64_t>(Next());
  return lo + static_cast<int64_t>(Next() % (span + 1));
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape,
                       std::vector<int64_t> strides)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)) {
  eff_strides_ = strides_;
  if (eff_strides_.empty()) {
    eff_strides_.assign(shape_.size(), 1);
    for (size_t d = shape_.size(); d-- > 1;) {
      eff_strides_[d - 1] = eff_strides_[d] * shape_[d];
    }
  }
  storage_elements_ = num_elements() == 0 ? 0 : 1;
  for (size_t d = 0; d < shape_.size() && storage_elements_ > 0; ++d) {
    storage_elements_ += (shape_[d] - 1) * eff_strides_[d];
  }
  const bool nibbles = dtype_ == DType::kI4 || dtype_ == DType::kU4;
  payload_bytes_ = nibbles ? (storage_elements_ + 1) / 2
                           : storage_elements_ * ElementBytes(dtype_);
  Map();
  std::memset(payload(), 0, payload_bytes_);
}

HostTensor::HostTensor(const HostTensor& other)
    : dtype_(other.dtype_),
      shape_(other.shape_),
      strides_(other.strides_),
      eff_strides_(other.eff_strides_),
      storage_elements_(other.storage_elements_),
      payload_bytes_(other.payload_bytes_) {
  Map();
  std::memcpy(payload(), other.payload(), payload_bytes_);
}

HostTensor::HostTensor(HostTensor&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      strides_(std::move(other.strides_)),
      eff_strides_(std::move(other.eff_strides_)),
      storage_elements_(other.storage_elements_),
      payload_bytes_(other.payload_bytes_),
      base_(other.base_),
      front_bytes_(other.front_bytes_),
      mapped_bytes_(other.mapped_bytes_) {
  other.base_ = nullptr;
}

HostTensor::~HostTensor() {
  if (base_ == nullptr) return;  // moved from
  UnregisterGuardPage(reinterpret_cast<uintptr_t>(base_) + mapped_bytes_ -
                      PageBytes());
  munmap(base_, mapped_bytes_);
}

void HostTensor::Map() {
  const int64_t page = PageBytes();
  // The data ends exactly at a page boundary: the next page is the guard.
  const int64_t front_and_data =
      (kGuardBytes + payload_bytes_ + page - 1) / page * page;
  front_bytes_ = front_and_data - payload_bytes_;
  mapped_bytes_ = front_and_data + page;
  void* p = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  base_ = static_cast<unsigned char*>(p);
  std::memset(base_, kGuardByte, front_bytes_);
  mprotect(base_ + front_and_data, page, PROT_NONE);
  const uintptr_t guard = reinterpret_cast<uintptr_t>(base_) + front_and_data;
  RegisterGuardPage(guard, guard + page, Describe(dtype_, shape_));
}

int64_t HostTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

runtime::ArgValue HostTensor::Arg() {
  return runtime::ArgValue::Tensor(data(), dtype_, shape_, strides_);
}

int64_t HostTensor::StorageIndex(int64_t index) const {
  int64_t s = 0;
  for (size_t d = shape_.size(); d-- > 0;) {
    s += (index % shape_[d]) * eff_strides_[d];
    index /= shape_[d];
  }
  return s;
}

uint64_t HostTensor::LoadBits(int64_t storage) const {
  if (dtype_ == DType::kI4 || dtype_ == DType::kU4) {
    const unsigned char byte = payload()[storage / 2];
    return storage % 2 == 0 ? byte & 0xF : byte >> 4;
  }
  uint64_t bits = 0;
  std::memcpy(&bits, payload() + storage * ElementBytes(dtype_),
              ElementBytes(dtype_));  // little-endian host
  return bits;
}

void HostTensor::StoreBits(int64_t storage, uint64_t bits) {
  if (dtype_ == DType::kI4 || dtype_ == DType::kU4) {
    unsigned char& byte = payload()[storage / 2];
    byte = storage % 2 == 0 ? (byte & 0xF0) | (bits & 0xF)
                            : (byte & 0x0F) | ((bits & 0xF) << 4);
    return;
  }
  std::memcpy(payload() + storage * ElementBytes(dtype_), &bits,
              ElementBytes(dtype_));
}

double HostTensor::Get(int64_t index) const {
  return Decode(dtype_, LoadBits(StorageIndex(index)));
}

void HostTensor::Set(int64_t index, double value) {
  StoreBits(StorageIndex(index), Encode(dtype_, value));
}

std::vector<double> HostTensor::Values() const {
  std::vector<double> v(num_elements());
  for (int64_t i = 0; i < num_elements(); ++i) v[i] = Get(i);
  return v;
}

void HostTensor::SetValues(const std::vector<double>& values) {
  for (int64_t i = 0; i < num_elements(); ++i) Set(i, values[i]);
}

void HostTensor::FillRandom(Rng& rng, double lo, double hi) {
  const bool is_float = IsFloat(dtype_);
  if (!is_float) {
    lo = std::max<double>(lo, static_cast<double>(IntMin(dtype_)));
    hi = std::min<double>(hi, static_cast<double>(IntMax(dtype_)));
  }
  bool any_nonzero = false;
  for (int64_t s = 0; s < storage_elements_; ++s) {
    const double v =
        is_float ? rng.Uniform(lo, hi)
                 : static_cast<double>(rng.UniformInt(
                       static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
    const uint64_t bits = Encode(dtype_, v);
    any_nonzero |= Decode(dtype_, bits) != 0;
    StoreBits(s, bits);
  }
  if (!any_nonzero && storage_elements_ > 0 && (lo != 0 || hi != 0)) {
    // A tiny range can round every value to zero: force one non-zero (a
    // range of only zero, e.g. the labels of a 1-class problem, stays).
    StoreBits(0, Encode(dtype_, hi != 0 ? hi : lo));
  }
}

void HostTensor::Poison() {
  const uint64_t bits = PoisonBits(dtype_);
  for (int64_t s = 0; s < storage_elements_; ++s) StoreBits(s, bits);
}

bool HostTensor::GuardsIntact(std::string* where) const {
  for (int64_t i = 0; i < front_bytes_; ++i) {
    if (base_[i] != kGuardByte) {
      if (where != nullptr) {
        *where = absl::StrCat(front_bytes_ - i, " bytes before the data");
      }
      return false;
    }
  }
  return true;
}

bool HostTensor::SameBytes(const HostTensor& other) const {
  return payload_bytes_ == other.payload_bytes_ &&
         std::memcmp(payload(), other.payload(), payload_bytes_) == 0;
}

}  // namespace kiln::e2e
