// Tests of kilnd's settings: defaults, flags, the TOML config file, and
// logging set-up.
#include "server/config.h"

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/logging.h"
#include "tests/support/subprocess.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;

// Parses `args` (without the program name) into a config.
ServerConfig Parse(std::vector<std::string> args) {
  CLI::App app;
  ServerConfig config = ServerConfig::Defaults();
  AddServerFlags(app, &config);
  args.insert(args.begin(), "kilnd");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return config;
}

TEST(ConfigTest, DefaultsComeFromTheEnvironment) {
  ServerConfig config = ServerConfig::Defaults();
  EXPECT_THAT(config.socket_path, HasSubstr("kilnd.sock"));
  EXPECT_THAT(config.cache_dir, HasSubstr("kiln"));
  EXPECT_EQ(config.log_format, "text");
  EXPECT_EQ(config.log_level, "info");
  EXPECT_TRUE(config.listen_tcp.empty());
  EXPECT_FALSE(config.insecure_loopback);
}

TEST(ConfigTest, FlagsSetEverySetting) {
  ServerConfig config =
      Parse({"--socket", "/tmp/x.sock", "--listen-tcp", "127.0.0.1:0",
             "--insecure-loopback", "--cache-dir", "/tmp/c", "--log-format",
             "json", "--log-level", "debug", "--shutdown-timeout", "2.5"});
  EXPECT_EQ(config.socket_path, "/tmp/x.sock");
  EXPECT_EQ(config.listen_tcp, "127.0.0.1:0");
  EXPECT_TRUE(config.insecure_loopback);
  EXPECT_EQ(config.cache_dir, "/tmp/c");
  EXPECT_EQ(config.log_format, "json");
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_DOUBLE_EQ(config.shutdown_timeout_s, 2.5);
}

TEST(ConfigTest, EveryFlagIsAConfigKeyAndTheCommandLineWins) {
  testing::TempDir dir;
  std::string file = dir.File("kilnd.toml");
  testing::WriteFile(file,
                     "# kilnd settings\n"
                     "socket = \"/tmp/from-file.sock\"\n"
                     "listen-tcp = \"127.0.0.1:7000\"\n"
                     "insecure-loopback = true\n"
                     "cache-dir = \"/tmp/file-cache\"\n"
                     "log-format = \"json\"\n"
                     "log-level = \"warn\"\n"
                     "shutdown-timeout = 3\n");
  ServerConfig config = Parse({"--config", file, "--log-level", "error"});
  EXPECT_EQ(config.socket_path, "/tmp/from-file.sock");
  EXPECT_EQ(config.listen_tcp, "127.0.0.1:7000");
  EXPECT_TRUE(config.insecure_loopback);
  EXPECT_EQ(config.cache_dir, "/tmp/file-cache");
  EXPECT_EQ(config.log_format, "json");
  EXPECT_EQ(config.log_level, "error");  // the flag beats the file
  EXPECT_DOUBLE_EQ(config.shutdown_timeout_s, 3);
}

TEST(ConfigTest, UnknownConfigKeyIsAnError) {
  testing::TempDir dir;
  std::string file = dir.File("kilnd.toml");
  testing::WriteFile(file, "log-levle = \"debug\"\n");
  EXPECT_THROW(Parse({"--config", file}), CLI::ConfigError);
}

TEST(ConfigTest, BadValuesAreRejected) {
  EXPECT_THROW(Parse({"--log-format", "xml"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--log-level", "loud"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--shutdown-timeout", "-1"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--no-such-flag"}), CLI::ExtrasError);
}

TEST(LoggingTest, JsonEscape) {
  EXPECT_EQ(JsonEscape("plain"), "plain");
  EXPECT_EQ(JsonEscape("a \"q\" \\ b"), "a \\\"q\\\" \\\\ b");
  EXPECT_EQ(JsonEscape("l1\nl2\tx\r"), "l1\\nl2\\tx\\r");
  EXPECT_EQ(JsonEscape(std::string("\x01", 1)), "\\u0001");
  EXPECT_EQ(JsonEscape("caf\xc3\xa9"), "caf\xc3\xa9");
}

TEST(LoggingTest, RejectsUnknownFormatsAndLevels) {
  EXPECT_EQ(SetUpLogging("xml", "info").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SetUpLogging("text", "loud").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SetUpLogging("json", "off").ok());
  EXPECT_TRUE(SetUpLogging("text", "info").ok());
}

}  // namespace
}  // namespace kiln::server
