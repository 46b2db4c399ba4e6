#include "cache/wire.h"

namespace kiln::cache {

bool WireReader::Fixed(int n, uint64_t* v) {
  if (!ok_ || in_.size() < static_cast<size_t>(n)) return ok_ = false;
  uint64_t out = 0;
  for (int i = 0; i < n; ++i) {
    out |= static_cast<uint64_t>(static_cast<uint8_t>(in_[i])) << (8 * i);
  }
  in_.remove_prefix(n);
  *v = out;
  return true;
}

bool WireReader::U8(uint8_t* v) {
  uint64_t x;
  if (!Fixed(1, &x)) return false;
  *v = static_cast<uint8_t>(x);
  return true;
}

bool WireReader::U32(uint32_t* v) {
  uint64_t x;
  if (!Fixed(4, &x)) return false;
  *v = static_cast<uint32_t>(x);
  return true;
}

bool WireReader::U64(uint64_t* v) { return Fixed(8, v); }

bool WireReader::I64(int64_t* v) {
  uint64_t x;
  if (!Fixed(8, &x)) return false;
  *v = static_cast<int64_t>(x);
  return true;
}

bool WireReader::Raw(size_t n, absl::string_view* out) {
  if (!ok_ || in_.size() < n) return ok_ = false;
  *out = in_.substr(0, n);
  in_.remove_prefix(n);
  return true;
}

bool WireReader::String(absl::string_view* out, size_t max) {
  uint32_t n;
  if (!U32(&n)) return false;
  if (n > max) return ok_ = false;
  return Raw(n, out);
}

bool WireReader::String(std::string* out, size_t max) {
  absl::string_view view;
  if (!String(&view, max)) return false;
  out->assign(view.data(), view.size());
  return true;
}

}  // namespace kiln::cache
