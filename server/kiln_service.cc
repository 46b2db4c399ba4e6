#include "server/kiln_service.h"

#include <utility>

namespace kiln::server {
namespace {

kiln::v1::TargetKind KindToProto(Target::Kind kind) {
  switch (kind) {
    case Target::Kind::kCpu:
      return kiln::v1::TARGET_KIND_CPU;
    case Target::Kind::kCuda:
      return kiln::v1::TARGET_KIND_CUDA;
    case Target::Kind::kHip:
      return kiln::v1::TARGET_KIND_HIP;
  }
  return kiln::v1::TARGET_KIND_UNSPECIFIED;
}

}  // namespace

void CapabilitiesToProto(const HostCapabilities& capabilities,
                         kiln::v1::CapabilitiesResponse* response) {
  response->Clear();
  response->set_server_version(capabilities.server_version);
  for (const Target& target : capabilities.targets) {
    kiln::v1::Target* out = response->add_targets();
    out->set_name(target.name);
    out->set_kind(KindToProto(target.kind));
  }
  for (const auto& [name, version] : capabilities.toolchain_versions) {
    (*response->mutable_toolchain_versions())[name] = version;
  }
}

KilnService::KilnService(HostCapabilities capabilities)
    : capabilities_(std::move(capabilities)) {}

grpc::Status KilnService::Capabilities(
    grpc::ServerContext* context, const kiln::v1::CapabilitiesRequest* request,
    kiln::v1::CapabilitiesResponse* response) {
  CapabilitiesToProto(capabilities_, response);
  return grpc::Status::OK;
}

}  // namespace kiln::server
