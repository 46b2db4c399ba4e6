#include "cache/units.h"

#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln::cache {
namespace {

// Splits "1.5GiB" into 1.5 and "gib"; false if the number part is malformed.
bool SplitNumber(absl::string_view text, double* value, std::string* unit) {
  size_t i = 0;
  bool digits = false, dot = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digits) return false;
  std::string number(text.substr(0, i));
  char* end = nullptr;
  *value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return false;
  *unit = absl::AsciiStrToLower(text.substr(i));
  return true;
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  double value = 0;
  std::string unit;
  if (!SplitNumber(text, &value, &unit)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid size \"", text, "\": expected a number with an optional ",
        "suffix K, M, G, T (1024-based) or KB, MB, GB, TB (1000-based)"));
  }
  double scale;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else if (unit == "k" || unit == "kib") {
    scale = 1024.0;
  } else if (unit == "m" || unit == "mib") {
    scale = 1024.0 * 1024;
  } else if (unit == "g" || unit == "gib") {
    scale = 1024.0 * 1024 * 1024;
  } else if (unit == "t" || unit == "tib") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else if (unit == "kb") {
    scale = 1e3;
  } else if (unit == "mb") {
    scale = 1e6;
  } else if (unit == "gb") {
    scale = 1e9;
  } else if (unit == "tb") {
    scale = 1e12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid size \"", text, "\": unknown unit \"", unit,
        "\" (use K, M, G, T, KB, MB, GB, TB, KiB, MiB, GiB or TiB)"));
  }
  double bytes = std::floor(value * scale);
  if (bytes >= 9.2e18) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid size \"", text, "\": too large"));
  }
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<absl::Duration> ParseAge(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  double value = 0;
  std::string unit;
  if (!SplitNumber(text, &value, &unit) || unit.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid age \"", text,
                     "\": expected a number and a unit s, m, h, d or w, "
                     "e.g. 7d or 12h"));
  }
  double seconds;
  if (unit == "s") {
    seconds = 1;
  } else if (unit == "m" || unit == "min") {
    seconds = 60;
  } else if (unit == "h") {
    seconds = 3600;
  } else if (unit == "d") {
    seconds = 86400;
  } else if (unit == "w") {
    seconds = 7 * 86400;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("invalid age \"", text,
                                                   "\": unknown unit \"", unit,
                                                   "\" (use s, m, h, d or w)"));
  }
  if (value * seconds > 1e12) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid age \"", text, "\": too large"));
  }
  return absl::Seconds(value * seconds);
}

std::string FormatSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string FormatAge(absl::Duration age) {
  if (age < absl::ZeroDuration()) age = absl::ZeroDuration();
  int64_t s = absl::ToInt64Seconds(age);
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 2 * 3600) return absl::StrCat(s / 60, "m");
  if (s < 2 * 86400) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

}  // namespace kiln::cache
