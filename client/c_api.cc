// The C ABI (client/kiln.h) over kiln::client::Client and Kernel.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/client.h"
#include "client/embedded.h"
#include "client/kernel.h"
#include "client/kiln.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/kernel_metadata.h"

struct kiln_client {
  std::unique_ptr<kiln::client::Client> client;
};

struct kiln_kernel {
  kiln::client::Kernel kernel;
};

namespace {

thread_local std::string last_error;

int Fail(const absl::Status& status) {
  last_error = std::string(status.message());
  return static_cast<int>(status.code());
}

int Fail(absl::StatusCode code, std::string message) {
  return Fail(absl::Status(code, message));
}

// Runs `body`, turning an escaping C++ exception (e.g. std::bad_alloc) into
// an error code instead of letting it cross the C boundary.
template <typename Body>
int Guarded(Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Fail(absl::StatusCode::kInternal,
                absl::StrCat("kiln: unexpected exception: ", e.what()));
  } catch (...) {
    return Fail(absl::StatusCode::kInternal, "kiln: unexpected exception");
  }
}

absl::Duration Timeout(double seconds, absl::Duration otherwise) {
  return seconds > 0 ? absl::Seconds(seconds) : otherwise;
}

// `text` as a JSON string literal.
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Copies `bindings` into `out`; false (with the error set) for a NULL name.
bool CopyBindings(const char* what, const kiln_binding* bindings, size_t n,
                  google::protobuf::Map<std::string, int64_t>* out) {
  for (size_t i = 0; i < n; ++i) {
    if (bindings[i].name == nullptr) {
      Fail(absl::StatusCode::kInvalidArgument,
           absl::StrCat("kiln_autotune: ", what, " ", i, " has no name"));
      return false;
    }
    (*out)[bindings[i].name] = bindings[i].value;
  }
  return true;
}

int Return(absl::StatusOr<kiln::client::Kernel> kernel, kiln_kernel** out) {
  if (!kernel.ok()) return Fail(kernel.status());
  *out = new kiln_kernel{*std::move(kernel)};
  return KILN_OK;
}

}  // namespace

extern "C" {

const char* kiln_version(void) { return KILN_VERSION; }

const char* kiln_last_error(void) { return last_error.c_str(); }

int kiln_connect(const char* address, double timeout_seconds,
                 kiln_client** out) {
  return Guarded([&] {
    if (out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "out is NULL");
    }
    kiln::client::ConnectOptions options;
    options.timeout = Timeout(timeout_seconds, absl::Seconds(2));
    auto client = kiln::client::Client::Connect(
        address == nullptr ? "" : address, options);
    if (!client.ok()) return Fail(client.status());
    *out = new kiln_client{*std::move(client)};
    return KILN_OK;
  });
}

int kiln_embedded(const char* cache_dir, int worker_threads,
                  kiln_client** out) {
  return Guarded([&] {
    if (out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "out is NULL");
    }
    kiln::client::EmbeddedOptions options;
    if (cache_dir != nullptr) options.cache_dir = cache_dir;
    options.worker_threads = worker_threads > 0 ? worker_threads : 0;
    auto client = kiln::client::Embedded(options);
    if (!client.ok()) return Fail(client.status());
    *out = new kiln_client{*std::move(client)};
    return KILN_OK;
  });
}

void kiln_client_free(kiln_client* client) { delete client; }

int kiln_compile(kiln_client* client, const char* ir_text, const char* kernel,
                 const char* target, const kiln_binding* bindings,
                 size_t num_bindings, const char* filename,
                 double timeout_seconds, kiln_kernel** out) {
  return Guarded([&] {
    if (client == nullptr || ir_text == nullptr || out == nullptr ||
        (bindings == nullptr && num_bindings > 0)) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "kiln_compile: client, ir_text and out must not be NULL");
    }
    kiln::client::KernelRequest request;
    request.ir_text = ir_text;
    if (kernel != nullptr) request.kernel = kernel;
    if (target != nullptr && *target != '\0') request.target = target;
    for (size_t i = 0; i < num_bindings; ++i) {
      if (bindings[i].name == nullptr) {
        return Fail(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("kiln_compile: binding ", i, " has no name"));
      }
      request.bindings[bindings[i].name] = bindings[i].value;
    }
    if (filename != nullptr) request.filename = filename;
    request.timeout = Timeout(timeout_seconds, absl::InfiniteDuration());
    return Return(client->client->Compile(request), out);
  });
}

int kiln_get_kernel(kiln_client* client, const char* key, kiln_kernel** out) {
  return Guarded([&] {
    if (client == nullptr || key == nullptr || out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "kiln_get_kernel: arguments must not be NULL");
    }
    return Return(client->client->GetKernel(key), out);
  });
}

int kiln_kernel_from_parts(const void* binary, size_t binary_size,
                           const char* metadata, kiln_kernel** out) {
  return Guarded([&] {
    if ((binary == nullptr && binary_size > 0) || metadata == nullptr ||
        out == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "kiln_kernel_from_parts: arguments must not be NULL");
    }
    kiln::client::KernelParts parts;
    parts.binary.assign(static_cast<const char*>(binary), binary_size);
    parts.metadata = metadata;
    return Return(kiln::client::Kernel::Load(std::move(parts)), out);
  });
}

void kiln_kernel_free(kiln_kernel* kernel) { delete kernel; }

int kiln_autotune(kiln_client* client, const char* ir_text, const char* kernel,
                  const char* target, const kiln_binding* shape,
                  size_t num_shape, const kiln_binding* fixed, size_t num_fixed,
                  const char* const* config_names, size_t num_config_names,
                  const int64_t* config_values, size_t num_configs,
                  int max_candidates, int force, double timeout_seconds,
                  char** out_json) {
  return Guarded([&] {
    if (client == nullptr || ir_text == nullptr || out_json == nullptr ||
        (shape == nullptr && num_shape > 0) ||
        (fixed == nullptr && num_fixed > 0) ||
        (num_configs > 0 &&
         (config_names == nullptr || config_values == nullptr ||
          num_config_names == 0))) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "kiln_autotune: client, ir_text and out_json must not be "
                  "NULL, nor shape, fixed, config_names or config_values "
                  "when their counts are not 0");
    }
    kiln::v1::AutotuneRequest request;
    request.set_ir_text(ir_text);
    if (kernel != nullptr) request.set_kernel(kernel);
    request.set_target(target != nullptr && *target != '\0' ? target : "auto");
    if (!CopyBindings("shape", shape, num_shape, request.mutable_shape()) ||
        !CopyBindings("fixed binding", fixed, num_fixed,
                      request.mutable_fixed_bindings())) {
      return static_cast<int>(absl::StatusCode::kInvalidArgument);
    }
    for (size_t i = 0; i < num_configs; ++i) {
      auto* config = request.add_configs()->mutable_bindings();
      for (size_t j = 0; j < num_config_names; ++j) {
        if (config_names[j] == nullptr) {
          return Fail(
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("kiln_autotune: config name ", j, " is NULL"));
        }
        (*config)[config_names[j]] = config_values[i * num_config_names + j];
      }
    }
    request.mutable_options()->set_max_candidates(std::max(0, max_candidates));
    request.mutable_options()->set_force(force != 0);
    absl::StatusOr<kiln::v1::AutotuneResult> result = client->client->Autotune(
        request, nullptr, Timeout(timeout_seconds, absl::InfiniteDuration()));
    if (!result.ok()) return Fail(result.status());
    std::map<std::string, int64_t> best(result->best_bindings().begin(),
                                        result->best_bindings().end());
    std::string best_json;
    for (const auto& [name, value] : best) {
      absl::StrAppend(&best_json, best_json.empty() ? "" : ", ",
                      JsonString(name), ": ", value);
    }
    int ran = 0;
    for (const auto& c : result->candidates()) {
      ran += c.status() == kiln::v1::CANDIDATE_STATUS_BENCHMARKED;
    }
    std::vector<std::string> excluded;
    for (const std::string& e : result->excluded_configs()) {
      excluded.push_back(JsonString(e));
    }
    std::string full;
    google::protobuf::util::JsonPrintOptions print;
    print.preserve_proto_field_names = true;
    if (auto s =
            google::protobuf::util::MessageToJsonString(*result, &full, print);
        !s.ok()) {
      return Fail(absl::StatusCode::kInternal,
                  "kiln_autotune: cannot write the result as JSON: " +
                      std::string(s.message()));
    }
    const std::string json = absl::StrCat(
        "{\"tuning_key\": ", JsonString(result->tuning_key()),
        ", \"cached\": ", result->cached() ? "true" : "false",
        ", \"kernel\": ", JsonString(result->kernel_name()),
        ", \"target\": ", JsonString(result->target()), ", \"best\": {",
        best_json, "}, \"best_label\": ", JsonString(result->best_label()),
        ", \"best_kernel_key\": ", JsonString(result->best_kernel_key()),
        ", \"best_median_us\": ",
        absl::StrFormat("%.3f", result->best_median_us()),
        ", \"candidates\": ", result->candidates_size(), ", \"ran\": ", ran,
        ", \"excluded\": [", absl::StrJoin(excluded, ", "),
        "], \"result\": ", full, "}");
    char* copy = static_cast<char*>(std::malloc(json.size() + 1));
    if (copy == nullptr) {
      return Fail(absl::StatusCode::kResourceExhausted, "out of memory");
    }
    std::memcpy(copy, json.c_str(), json.size() + 1);
    *out_json = copy;
    return KILN_OK;
  });
}

void kiln_string_free(char* s) { std::free(s); }

const char* kiln_kernel_key(const kiln_kernel* k) {
  return k->kernel.key().c_str();
}
const char* kiln_kernel_name(const kiln_kernel* k) {
  return k->kernel.name().c_str();
}
const char* kiln_kernel_target(const kiln_kernel* k) {
  return k->kernel.target().c_str();
}
const char* kiln_kernel_tier(const kiln_kernel* k) {
  return k->kernel.tier().c_str();
}
const char* kiln_kernel_metadata(const kiln_kernel* k) {
  return k->kernel.metadata_text().c_str();
}
const char* kiln_kernel_compile_log(const kiln_kernel* k) {
  return k->kernel.compile_log().c_str();
}
size_t kiln_kernel_binary(const kiln_kernel* k, const void** data) {
  if (data != nullptr) *data = k->kernel.binary().data();
  return k->kernel.binary().size();
}

int kiln_kernel_launch(const kiln_kernel* kernel, const kiln_arg* args,
                       size_t num_args, void* stream) {
  return Guarded([&] {
    if (kernel == nullptr || (args == nullptr && num_args > 0)) {
      return Fail(absl::StatusCode::kInvalidArgument,
                  "kiln_kernel_launch: kernel and args must not be NULL");
    }
    std::vector<kiln::runtime::ArgValue> values(num_args);
    for (size_t i = 0; i < num_args; ++i) {
      const kiln_arg& a = args[i];
      std::optional<kiln::runtime::DType> dtype =
          a.dtype == nullptr ? std::nullopt
                             : kiln::runtime::ParseDType(a.dtype);
      if (!dtype.has_value()) {
        return Fail(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("argument ", i, " has an unknown dtype '",
                                 a.dtype == nullptr ? "(null)" : a.dtype, "'"));
      }
      kiln::runtime::ArgValue& v = values[i];
      v.dtype = *dtype;
      if (a.is_tensor) {
        if (a.rank < 0 || a.rank > 16 || (a.rank > 0 && a.shape == nullptr)) {
          return Fail(absl::StatusCode::kInvalidArgument,
                      absl::StrCat("argument ", i, " has a bad rank ", a.rank,
                                   " or no shape"));
        }
        v.is_tensor = true;
        v.data = a.data;
        v.shape.assign(a.shape, a.shape + a.rank);
        if (a.strides != nullptr)
          v.strides.assign(a.strides, a.strides + a.rank);
      } else {
        std::memcpy(v.scalar, a.scalar, sizeof(v.scalar));
      }
    }
    absl::Status status = kernel->kernel.Launch(values, stream);
    if (!status.ok()) return Fail(status);
    return KILN_OK;
  });
}

}  // extern "C"
