// Little-endian fixed-width integers and length-prefixed strings, for the
// binary formats the cache writes (blob file headers, remote entries).
// The reader never trusts a length: every read is bounds-checked.
#ifndef KILN_CACHE_WIRE_H_
#define KILN_CACHE_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln::cache {

class WireWriter {
 public:
  explicit WireWriter(std::string* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Fixed(v, 4); }
  void U64(uint64_t v) { Fixed(v, 8); }
  void I64(int64_t v) { Fixed(static_cast<uint64_t>(v), 8); }
  void Raw(absl::string_view bytes) {
    out_->append(bytes.data(), bytes.size());
  }
  // A u32 length then the bytes.
  void String(absl::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Raw(s);
  }

 private:
  void Fixed(uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      out_->push_back(static_cast<char>(v >> (8 * i)));
  }
  std::string* out_;
};

// Each read returns false (and leaves the reader failed) when the input is
// too short or a length exceeds `max`; check ok() once at the end or each
// return value as convenient.
class WireReader {
 public:
  explicit WireReader(absl::string_view in) : in_(in) {}

  bool U8(uint8_t* v);
  bool U32(uint32_t* v);
  bool U64(uint64_t* v);
  bool I64(int64_t* v);
  bool Raw(size_t n, absl::string_view* out);
  bool String(absl::string_view* out, size_t max);
  bool String(std::string* out, size_t max);

  bool ok() const { return ok_; }
  size_t remaining() const { return in_.size(); }

 private:
  bool Fixed(int n, uint64_t* v);
  absl::string_view in_;
  bool ok_ = true;
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_WIRE_H_
