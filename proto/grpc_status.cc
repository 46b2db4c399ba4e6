#include "proto/grpc_status.h"

#include <string>

namespace kiln::proto {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxStatusMessageBytes) {
    size_t cut = kMaxStatusMessageBytes;
    // Not inside a UTF-8 sequence: back up over continuation bytes.
    while (cut > 0 &&
           (static_cast<unsigned char>(message[cut]) & 0xc0) == 0x80) {
      --cut;
    }
    const size_t dropped = message.size() - cut;
    message.resize(cut);
    message += "... (" + std::to_string(dropped) + " more bytes cut)";
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::move(message));
}

absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace kiln::proto
