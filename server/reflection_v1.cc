#include "server/reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/grpcpp.h>

#include <set>
#include <utility>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace kiln::server {
namespace {

namespace v1 = ::grpc::reflection::v1;
using ::google::protobuf::Descriptor;
using ::google::protobuf::DescriptorPool;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::FileDescriptor;
using ::google::protobuf::FileDescriptorProto;

class ReflectionV1 final : public v1::ServerReflection::Service {
 public:
  explicit ReflectionV1(std::vector<std::string> services)
      : services_(std::move(services)) {
    services_.push_back(v1::ServerReflection::service_full_name());
  }

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* /*context*/,
      grpc::ServerReaderWriter<v1::ServerReflectionResponse,
                               v1::ServerReflectionRequest>* stream) override {
    // Files already sent on this stream are not sent again (clients keep
    // what they got, as the protocol allows).
    std::set<std::string> sent;
    v1::ServerReflectionRequest request;
    while (stream->Read(&request)) {
      v1::ServerReflectionResponse response;
      response.set_valid_host(request.host());
      *response.mutable_original_request() = request;
      Answer(request, &sent, &response);
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

 private:
  void Answer(const v1::ServerReflectionRequest& request,
              std::set<std::string>* sent,
              v1::ServerReflectionResponse* response) const {
    const DescriptorPool* pool = DescriptorPool::generated_pool();
    using R = v1::ServerReflectionRequest;
    switch (request.message_request_case()) {
      case R::kFileByFilename: {
        const FileDescriptor* f =
            pool->FindFileByName(request.file_by_filename());
        if (f == nullptr) {
          return Error(grpc::StatusCode::NOT_FOUND,
                       "no file named '" + request.file_by_filename() + "'",
                       response);
        }
        return Files(f, sent, response);
      }
      case R::kFileContainingSymbol: {
        const FileDescriptor* f =
            pool->FindFileContainingSymbol(request.file_containing_symbol());
        if (f == nullptr) {
          return Error(grpc::StatusCode::NOT_FOUND,
                       "no symbol '" + request.file_containing_symbol() + "'",
                       response);
        }
        return Files(f, sent, response);
      }
      case R::kFileContainingExtension: {
        const v1::ExtensionRequest& e = request.file_containing_extension();
        const Descriptor* type =
            pool->FindMessageTypeByName(e.containing_type());
        const FieldDescriptor* ext =
            type == nullptr
                ? nullptr
                : pool->FindExtensionByNumber(type, e.extension_number());
        if (ext == nullptr) {
          return Error(grpc::StatusCode::NOT_FOUND,
                       "no extension " + std::to_string(e.extension_number()) +
                           " of '" + e.containing_type() + "'",
                       response);
        }
        return Files(ext->file(), sent, response);
      }
      case R::kAllExtensionNumbersOfType: {
        const std::string& name = request.all_extension_numbers_of_type();
        const Descriptor* type = pool->FindMessageTypeByName(name);
        if (type == nullptr) {
          return Error(grpc::StatusCode::NOT_FOUND,
                       "no message type '" + name + "'", response);
        }
        std::vector<const FieldDescriptor*> extensions;
        pool->FindAllExtensions(type, &extensions);
        v1::ExtensionNumberResponse* out =
            response->mutable_all_extension_numbers_response();
        out->set_base_type_name(type->full_name());
        for (const FieldDescriptor* f : extensions) {
          out->add_extension_number(f->number());
        }
        return;
      }
      case R::kListServices: {
        v1::ListServiceResponse* out =
            response->mutable_list_services_response();
        for (const std::string& s : services_) out->add_service()->set_name(s);
        return;
      }
      default:
        return Error(grpc::StatusCode::INVALID_ARGUMENT,
                     "the request names no reflection query", response);
    }
  }

  // `f` and the files it imports (depth first, imports first), less those
  // sent already on the stream. `f` itself is always sent.
  static void Files(const FileDescriptor* f, std::set<std::string>* sent,
                    v1::ServerReflectionResponse* response) {
    v1::FileDescriptorResponse* out =
        response->mutable_file_descriptor_response();
    std::vector<const FileDescriptor*> stack = {f};
    std::set<std::string> queued = {f->name()};
    while (!stack.empty()) {
      const FileDescriptor* file = stack.back();
      stack.pop_back();
      if (file != f && sent->count(file->name())) continue;
      sent->insert(file->name());
      FileDescriptorProto proto;
      file->CopyTo(&proto);
      proto.SerializeToString(out->add_file_descriptor_proto());
      for (int i = 0; i < file->dependency_count(); ++i) {
        const FileDescriptor* dep = file->dependency(i);
        if (queued.insert(dep->name()).second) stack.push_back(dep);
      }
    }
  }

  static void Error(grpc::StatusCode code, const std::string& message,
                    v1::ServerReflectionResponse* response) {
    v1::ErrorResponse* e = response->mutable_error_response();
    e->set_error_code(static_cast<int32_t>(code));
    e->set_error_message(message);
  }

  std::vector<std::string> services_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeReflectionV1Service(
    std::vector<std::string> services) {
  return std::make_unique<ReflectionV1>(std::move(services));
}

}  // namespace kiln::server
