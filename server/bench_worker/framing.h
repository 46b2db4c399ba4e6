// Length-prefixed frames over a stream socket: the wire format between kilnd
// and its benchmark worker (bench.proto). A frame is a 4-byte little-endian
// length followed by that many bytes.
#ifndef KILN_SERVER_BENCH_WORKER_FRAMING_H_
#define KILN_SERVER_BENCH_WORKER_FRAMING_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kiln::bench {

// Largest frame either side accepts (outputs of a large GEMM fit).
inline constexpr uint32_t kMaxFrameBytes = 1u << 30;

// Writes one frame to `fd`. Never raises SIGPIPE (a socket is written with
// MSG_NOSIGNAL). Unavailable when the peer has gone away.
absl::Status WriteFrame(int fd, std::string_view payload);

// Reads one frame from `fd` into `payload`, waiting until `deadline`.
// DeadlineExceeded when it passes first; Unavailable at end of stream (the
// peer closed or died); DataLoss for a frame over kMaxFrameBytes.
absl::Status ReadFrame(int fd, std::string* payload,
                       absl::Time deadline = absl::InfiniteFuture());

}  // namespace kiln::bench

#endif  // KILN_SERVER_BENCH_WORKER_FRAMING_H_
