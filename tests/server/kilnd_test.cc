// End-to-end tests of the kilnd binary: it is started as a child process on
// a temporary unix socket and spoken to over gRPC with generated stubs.
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/kiln.grpc.pb.h"
#include "tests/server/reflection_subset.grpc.pb.h"
#include "tests/support/http_get.h"
#include "tests/support/kilnd_process.h"
#include "tests/support/test_kernels.h"

namespace kiln::server {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kExitTimeout = absl::Seconds(20);

std::shared_ptr<grpc::Channel> Connect(const std::string& target) {
  auto channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  EXPECT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() +
                                        std::chrono::seconds(10)))
      << target;
  return channel;
}

// The serving status of `service` ("" = the whole server).
HealthCheckResponse::ServingStatus CheckHealth(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  grpc::Status status =
      Health::NewStub(channel)->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

absl::StatusOr<std::unique_ptr<testing::KilndProcess>> StartKilnd(
    const std::vector<std::string>& args = {}) {
  return testing::KilndProcess::Start(KILN_KILND_PATH, args);
}

// Runs kilnd to completion with `args` (it is expected to refuse them).
testing::RunResult RunKilnd(std::vector<std::string> args) {
  testing::TempDir dir;
  std::vector<std::string> argv = {KILN_KILND_PATH, "--socket",
                                   dir.File("kilnd.sock"), "--cache-dir",
                                   dir.File("cache")};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<testing::RunResult> result = testing::Run(argv);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : testing::RunResult{};
}

TEST(KilndTest, ServesHealthAndCapabilitiesAndStopsOnSigterm) {
  auto kilnd = StartKilnd();
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  auto channel = Connect((*kilnd)->address());
  EXPECT_EQ(CheckHealth(channel, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(channel, "kiln.v1.Kiln"), HealthCheckResponse::SERVING);

  grpc::ClientContext context;
  kiln::v1::CapabilitiesResponse caps;
  grpc::Status status = kiln::v1::Kiln::NewStub(channel)->Capabilities(
      &context, kiln::v1::CapabilitiesRequest(), &caps);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(caps.server_version(), KILN_VERSION);
  ASSERT_GE(caps.targets_size(), 1);
  EXPECT_EQ(caps.targets(0).name(), "cpu");
  EXPECT_EQ(caps.targets(0).kind(), kiln::v1::TARGET_KIND_CPU);

  struct stat st;
  ASSERT_EQ(stat((*kilnd)->socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660);
  EXPECT_EQ(stat((*kilnd)->dir().File("cache").c_str(), &st), 0)
      << "cache directory not created";

  (*kilnd)->process().Signal(SIGTERM);
  absl::StatusOr<int> code = (*kilnd)->process().Wait(kExitTimeout);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*kilnd)->process().Stderr();
  EXPECT_NE(stat((*kilnd)->socket_path().c_str(), &st), 0)
      << "socket left behind";
  EXPECT_THAT((*kilnd)->process().Stderr(), HasSubstr("stopped"));
}

// The value of the sample line `name` of a metrics page ("" if absent).
std::string MetricValue(const std::string& page, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (absl::StartsWith(line, name + " ")) {
      return std::string(line.substr(name.size() + 1));
    }
  }
  return "";
}

TEST(KilndTest, ServesPrometheusMetricsThatCountCompilesAndHits) {
  auto kilnd = StartKilnd({"--metrics-address", "127.0.0.1:0"});
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  ASSERT_TRUE(testing::WaitForStderr((*kilnd)->process(), "/metrics"));
  std::smatch m;
  const std::string log = (*kilnd)->process().Stderr();
  ASSERT_TRUE(std::regex_search(
      log, m, std::regex(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)")))
      << log;
  const int port = std::stoi(m[1]);
  auto page = [&] {
    absl::StatusOr<std::string> r =
        testing::HttpRequest(port, "GET", "/metrics");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? testing::HttpBody(*r) : std::string();
  };
  std::string before = page();
  EXPECT_EQ(MetricValue(before, "kiln_compiles_total"), "0");
  EXPECT_EQ(MetricValue(before, "kiln_compile_duration_seconds_count"), "0");

  auto stub = kiln::v1::Kiln::NewStub(Connect((*kilnd)->address()));
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext context;
    kiln::v1::CompileRequest request;
    request.set_ir_text(testing::kScaleKernel);
    request.set_target("cpu");
    (*request.mutable_bindings())["B"] = 64;
    request.set_omit_binary(true);
    kiln::v1::CompileResponse response;
    grpc::Status status = stub->Compile(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  const std::string after = page();
  EXPECT_EQ(MetricValue(after, "kiln_compiles_total"), "1");
  EXPECT_EQ(MetricValue(after, "kiln_compile_duration_seconds_count"), "1");
  EXPECT_EQ(MetricValue(after, "kiln_requests_total{result=\"miss\"}"), "1");
  EXPECT_EQ(MetricValue(after, "kiln_requests_total{result=\"hit\"}"), "1");
  EXPECT_EQ(MetricValue(after, "kiln_cache_entries"), "1");
  // The finished compile leaves the queue (just after its waiters are
  // answered).
  std::string depth = MetricValue(after, "kiln_compile_queue_depth");
  for (int i = 0; i < 50 && depth != "0"; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    depth = MetricValue(page(), "kiln_compile_queue_depth");
  }
  EXPECT_EQ(depth, "0");
}

TEST(KilndTest, RefusesABadMetricsAddress) {
  testing::RunResult r = RunKilnd({"--metrics-address", "nowhere"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--metrics-address"));
}

TEST(KilndTest, StopsOnSigint) {
  auto kilnd = StartKilnd();
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  (*kilnd)->process().Signal(SIGINT);
  absl::StatusOr<int> code = (*kilnd)->process().Wait(kExitTimeout);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*kilnd)->process().Stderr();
}

TEST(KilndTest, ReflectionListsItsServices) {
  auto kilnd = StartKilnd();
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(
      Connect((*kilnd)->address()));
  grpc::ClientContext context;
  auto stream = stub->ServerReflectionInfo(&context);
  grpc::reflection::v1alpha::ServerReflectionRequest request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> services;
  for (const auto& service : response.list_services_response().service()) {
    services.push_back(service.name());
  }
  EXPECT_THAT(services, ::testing::IsSupersetOf(
                            {"kiln.v1.Kiln", "grpc.health.v1.Health"}));
  while (stream->Read(&response)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

TEST(KilndTest, ReflectionV1ListsServicesAndServesDescriptors) {
  namespace v1 = ::grpc::reflection::v1;
  auto kilnd = StartKilnd();
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  auto stub = v1::ServerReflection::NewStub(Connect((*kilnd)->address()));
  grpc::ClientContext context;
  auto stream = stub->ServerReflectionInfo(&context);
  auto ask = [&](const v1::ServerReflectionRequest& request) {
    v1::ServerReflectionResponse response;
    EXPECT_TRUE(stream->Write(request));
    EXPECT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.original_request().SerializeAsString(),
              request.SerializeAsString());
    return response;
  };
  v1::ServerReflectionRequest request;
  request.set_list_services("");
  v1::ServerReflectionResponse response = ask(request);
  std::vector<std::string> services;
  for (const auto& service : response.list_services_response().service()) {
    services.push_back(service.name());
  }
  EXPECT_THAT(services, ::testing::IsSupersetOf(
                            {"kiln.v1.Kiln", "grpc.health.v1.Health",
                             "grpc.reflection.v1.ServerReflection",
                             "grpc.reflection.v1alpha.ServerReflection"}));

  // The file defining the Kiln service, which declares it.
  request.set_file_containing_symbol("kiln.v1.Kiln");
  response = ask(request);
  ASSERT_GE(response.file_descriptor_response().file_descriptor_proto_size(),
            1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(
      response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "proto/kiln.proto");
  EXPECT_EQ(file.package(), "kiln.v1");
  ASSERT_GE(file.service_size(), 1);
  EXPECT_EQ(file.service(0).name(), "Kiln");
  // By file name (sent again when asked for by name).
  request.set_file_by_filename("proto/kiln.proto");
  response = ask(request);
  ASSERT_GE(response.file_descriptor_response().file_descriptor_proto_size(),
            1);
  ASSERT_TRUE(file.ParseFromString(
      response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "proto/kiln.proto");
  // Unknown names are NOT_FOUND errors on the stream, which goes on.
  request.set_file_by_filename("nope.proto");
  response = ask(request);
  EXPECT_EQ(response.error_response().error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(response.error_response().error_message(),
              HasSubstr("nope.proto"));
  request.set_all_extension_numbers_of_type("kiln.v1.CompileRequest");
  response = ask(request);
  EXPECT_EQ(response.all_extension_numbers_response().base_type_name(),
            "kiln.v1.CompileRequest");
  EXPECT_EQ(response.all_extension_numbers_response().extension_number_size(),
            0);
  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST(KilndTest, SecondDaemonOnTheSameSocketIsRefused) {
  auto kilnd = StartKilnd();
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  absl::StatusOr<testing::RunResult> second =
      testing::Run({KILN_KILND_PATH, "--socket", (*kilnd)->socket_path(),
                    "--cache-dir", (*kilnd)->dir().File("cache")});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->exit_code, 1);
  EXPECT_THAT(second->err, HasSubstr("another kilnd is already listening"));
  // The first one is unharmed.
  EXPECT_EQ(CheckHealth(Connect((*kilnd)->address()), ""),
            HealthCheckResponse::SERVING);
}

TEST(KilndTest, TcpWithoutInsecureLoopbackIsRefused) {
  testing::RunResult result = RunKilnd({"--listen-tcp", "127.0.0.1:0"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("without TLS"));
  EXPECT_THAT(result.err, HasSubstr("--insecure-loopback"));
}

TEST(KilndTest, NonLoopbackTcpIsRefusedEvenWithTheFlag) {
  testing::RunResult result =
      RunKilnd({"--listen-tcp", "0.0.0.0:0", "--insecure-loopback"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("without TLS or a bearer token"));
}

TEST(KilndTest, ServesLoopbackTcpWithTheFlag) {
  auto kilnd =
      StartKilnd({"--listen-tcp", "127.0.0.1:0", "--insecure-loopback"});
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  ASSERT_TRUE(
      testing::WaitForStderr((*kilnd)->process(), "listening on 127.0.0.1:"));
  std::smatch match;
  std::string err = (*kilnd)->process().Stderr();
  ASSERT_TRUE(std::regex_search(err, match,
                                std::regex("listening on 127\\.0\\.0\\.1:"
                                           "([0-9]+)")));
  EXPECT_NE(match[1], "0");
  auto channel = Connect("127.0.0.1:" + match[1].str());
  EXPECT_EQ(CheckHealth(channel, ""), HealthCheckResponse::SERVING);
}

TEST(KilndTest, LogsJsonLines) {
  testing::TempDir dir;
  std::string config = dir.File("kilnd.toml");
  testing::WriteFile(config, "log-format = \"json\"\nlog-level = \"debug\"\n");
  auto kilnd = StartKilnd({"--config", config});
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  (*kilnd)->process().Signal(SIGTERM);
  ASSERT_TRUE((*kilnd)->process().Wait(kExitTimeout).ok());
  std::string err = (*kilnd)->process().Stderr();
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(err, '\n', absl::SkipEmpty())) {
    // gRPC's own log lines (if any) are not ours to check.
    if (line.front() != '{') continue;
    ++lines;
    EXPECT_THAT(std::string(line),
                ::testing::MatchesRegex(R"(\{"time":"[^"]+","level":"[a-z]+",)"
                                        R"("msg":"([^"\\]|\\.)*"\})"));
  }
  EXPECT_GE(lines, 3) << err;
  EXPECT_THAT(err, HasSubstr(R"("level":"debug")"));
}

TEST(KilndTest, UsageErrorsExitWithTwo) {
  EXPECT_EQ(RunKilnd({"--log-format", "xml"}).exit_code, 2);
  EXPECT_EQ(RunKilnd({"--no-such-flag"}).exit_code, 2);
  testing::RunResult help = RunKilnd({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--listen-tcp"));
  EXPECT_THAT(help.out, Not(HasSubstr("106")));
}

}  // namespace
}  // namespace kiln::server
