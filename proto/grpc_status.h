// Conversions between absl::Status (used at every module boundary) and
// grpc::Status (used on the wire). The two code sets are the same, value for
// value, so a conversion keeps the code and the message (bounded in size).
#ifndef KILN_PROTO_GRPC_STATUS_H_
#define KILN_PROTO_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace kiln::proto {

// Messages longer than kMaxStatusMessageBytes are cut there (at a character
// boundary, saying how much went): an error that echoes a huge input must
// still fit gRPC's metadata limit, or the client sees only that limit.
inline constexpr size_t kMaxStatusMessageBytes = 1024;
grpc::Status ToGrpcStatus(const absl::Status& status);

absl::Status ToAbslStatus(const grpc::Status& status);

}  // namespace kiln::proto

#endif  // KILN_PROTO_GRPC_STATUS_H_
