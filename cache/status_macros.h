// Early-return helpers for absl::Status / absl::StatusOr inside cache/.
// Private to the cache module (not included by its public headers' users).
#ifndef KILN_CACHE_STATUS_MACROS_H_
#define KILN_CACHE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CACHE_RETURN_IF_ERROR(expr)                    \
  do {                                                 \
    if (absl::Status _s = (expr); !_s.ok()) return _s; \
  } while (0)

#define CACHE_CONCAT_INNER_(a, b) a##b
#define CACHE_CONCAT_(a, b) CACHE_CONCAT_INNER_(a, b)

// CACHE_ASSIGN_OR_RETURN(auto x, Foo()); declares or assigns the value of a
// StatusOr, returning its status on error.
#define CACHE_ASSIGN_OR_RETURN(lhs, expr) \
  CACHE_ASSIGN_OR_RETURN_IMPL_(CACHE_CONCAT_(_statusor_, __LINE__), lhs, expr)
#define CACHE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(*tmp)

#endif  // KILN_CACHE_STATUS_MACROS_H_
