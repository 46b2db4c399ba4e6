// The attacks on kilnd's cache, each against a real kilnd (and the `kiln`
// CLI): a damaged or edited index, damaged blobs, a full disk, long echoed
// inputs, the socket's mode, a cache directory others can write. Whatever
// the damage, every Compile is answered with the binary of the kernel asked
// for (from the cache or compiled afresh), never another kernel's, and
// never fails where a compile can answer.
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cache/blob_directory.h"
#include "cache/digest.h"
#include "cache/local_store.h"
#include "cache/sqlite_db.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/kiln.grpc.pb.h"
#include "tests/cache/test_util.h"
#include "tests/support/kilnd_process.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using ::kiln::cache::testing::FlipBit;
using ::kiln::testing::KilndProcess;
using ::kiln::testing::TempDir;
using ::testing::HasSubstr;

constexpr int kKernels = 4;

// Kernel `n`: the same name and signature for every n, a different body.
std::string KernelText(int n) {
  return absl::StrCat(R"(
kernel scale(X: f32[N], Y: f32[N], a: f32)
  grid(ceildiv(N, 64)) threads(32) (bx) {
  alloc fragment T: f32[64]
  copy X[bx * 64:+64] -> T
  parallel (i) in (64) {
    T[i] = T[i] * a + )",
                      n + 1, R"(.0
  }
  copy T -> Y[bx * 64:+64]
}
)");
}

class Kilnd {
 public:
  // kilnd on `cache_dir`, with `extra` arguments; `launcher` (a script that
  // execs its arguments) when given.
  explicit Kilnd(const std::string& cache_dir,
                 std::vector<std::string> extra = {},
                 const std::string& launcher = "") {
    std::vector<std::string> args = {"--cache-dir", cache_dir};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<KilndProcess>> p = KilndProcess::Start(
        launcher.empty() ? KILN_KILND_PATH : launcher, args);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return;
    process_ = *std::move(p);
    channel_ = grpc::CreateChannel(process_->address(),
                                   grpc::InsecureChannelCredentials());
    stub_ = kiln::v1::Kiln::NewStub(channel_);
  }
  ~Kilnd() { Stop(); }

  bool ok() const { return stub_ != nullptr; }

  grpc::Status Compile(const std::string& text, kiln::v1::CompileResponse* out,
                       const std::string& target = "cpu",
                       const std::string& kernel = "scale",
                       const std::string& filename = "k.tile") {
    kiln::v1::CompileRequest request;
    request.set_ir_text(text);
    request.set_target(target);
    request.set_kernel(kernel);
    request.set_filename(filename);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(60));
    return stub_->Compile(&context, request, out);
  }

  grpc::Status Get(const std::string& key, kiln::v1::GetKernelResponse* out) {
    kiln::v1::GetKernelRequest request;
    request.set_key(key);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    return stub_->GetKernel(&context, request, out);
  }

  std::string Stderr() { return process_ ? process_->process().Stderr() : ""; }
  pid_t pid() { return process_->process().pid(); }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  kiln::v1::Kiln::Stub& stub() { return *stub_; }

  void Stop() {
    if (!process_ || !process_->process().running()) return;
    process_->process().Signal(SIGTERM);
    absl::StatusOr<int> code = process_->process().Wait(absl::Seconds(20));
    EXPECT_TRUE(code.ok() && *code == 0) << Stderr();
  }

 private:
  std::unique_ptr<KilndProcess> process_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<kiln::v1::Kiln::Stub> stub_;
};

struct Compiled {
  std::string key;
  std::string binary;
};

// Compiles every kernel once into `cache_dir`; their keys and binaries.
std::vector<Compiled> Prime(const std::string& cache_dir) {
  Kilnd kilnd(cache_dir);
  std::vector<Compiled> out;
  for (int n = 0; n < kKernels; ++n) {
    kiln::v1::CompileResponse response;
    grpc::Status status = kilnd.Compile(KernelText(n), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    out.push_back({response.kernel().key(), response.kernel().binary()});
  }
  for (int a = 0; a < kKernels; ++a) {
    for (int b = a + 1; b < kKernels; ++b) {
      EXPECT_NE(out[a].binary, out[b].binary) << "kernels must differ";
    }
  }
  return out;
}

// Every kernel is answered, with its own binary; GetKernel by key gives the
// same binary or NOT_FOUND. `salt` makes the request text new (so kilnd's
// memory of served requests does not answer it).
void ExpectRightAnswers(Kilnd& kilnd, const std::vector<Compiled>& kernels,
                        const std::string& context, const std::string& salt) {
  for (int n = 0; n < kKernels; ++n) {
    kiln::v1::GetKernelResponse got;
    grpc::Status status = kilnd.Get(kernels[n].key, &got);
    if (status.ok()) {
      EXPECT_EQ(got.kernel().binary(), kernels[n].binary)
          << context << ": GetKernel " << n << " served another binary";
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND)
          << context << ": GetKernel " << n << ": " << status.error_message();
    }
    kiln::v1::CompileResponse response;
    status = kilnd.Compile(KernelText(n) + "// " + salt + "\n", &response);
    ASSERT_TRUE(status.ok())
        << context << ": kernel " << n << ": " << status.error_message();
    EXPECT_EQ(response.kernel().key(), kernels[n].key) << context;
    EXPECT_EQ(response.kernel().binary(), kernels[n].binary)
        << context << ": kernel " << n << " answered with another binary";
  }
}

std::string IndexOf(const std::string& dir) {
  return absl::StrCat(dir, "/", cache::kIndexFileName);
}

void Sql(const std::string& dir, const std::string& sql) {
  absl::StatusOr<std::unique_ptr<cache::SqliteDb>> db =
      cache::SqliteDb::Open(IndexOf(dir), absl::Seconds(5), false);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Exec(sql).ok()) << sql;
}

// The digest of blob `name` of the entry under `key`.
std::string BlobDigest(const std::string& dir, const std::string& key,
                       const std::string& name) {
  absl::StatusOr<std::unique_ptr<cache::LocalStore>> store =
      cache::LocalStore::Open(dir);
  EXPECT_TRUE(store.ok()) << store.status();
  absl::StatusOr<cache::EntryInfo> info =
      (*store)->Stat(*cache::Digest::Parse(key));
  EXPECT_TRUE(info.ok()) << info.status();
  for (const cache::BlobInfo& b : info->blobs) {
    if (b.name == name) return b.digest.hex();
  }
  return "";
}

// Rewrites the file of blob `name` of the entry under `key` with `edit`.
void RewriteBlobFile(const std::string& dir, const std::string& key,
                     const std::string& name,
                     const std::function<void(std::string&)>& edit) {
  const std::string path = cache::BlobDirectory(dir).PathOf(
      *cache::Digest::Parse(BlobDigest(dir, key, name)));
  std::string bytes = testing::ReadFile(path);
  edit(bytes);
  fs::remove(path);  // blob files are read-only
  testing::WriteFile(path, bytes);
}

testing::RunResult RunKiln(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {KILN_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<testing::RunResult> r = testing::Run(argv);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : testing::RunResult{};
}

TEST(CacheTrustTest, BitFlipsInTheIndexOfAStoppedKilndNeverServeAnother) {
  TempDir tmp;
  const std::string pristine = tmp.File("pristine");
  const std::vector<Compiled> kernels = Prime(pristine);
  const uint64_t bits = fs::file_size(IndexOf(pristine)) * 8;
  std::mt19937_64 rng(80);
  for (int i = 0; i < 24; ++i) {
    const std::string dir = tmp.File(absl::StrCat("flip", i));
    fs::copy(pristine, dir, fs::copy_options::recursive);
    const uint64_t bit = rng() % bits;
    FlipBit(IndexOf(dir), bit);
    Kilnd kilnd(dir);
    ASSERT_TRUE(kilnd.ok()) << "bit " << bit;
    ExpectRightAnswers(kilnd, kernels, absl::StrCat("bit ", bit), "a");
    ExpectRightAnswers(kilnd, kernels, absl::StrCat("bit ", bit, " again"),
                       "b");
    fs::remove_all(dir);
  }
}

TEST(CacheTrustTest, BitFlipsInTheIndexOfARunningKilndNeverServeAnother) {
  TempDir tmp;
  const std::string dir = tmp.File("cache");
  const std::vector<Compiled> kernels = Prime(dir);
  Kilnd kilnd(dir);
  ASSERT_TRUE(kilnd.ok());
  std::mt19937_64 rng(20);
  for (int i = 0; i < 20; ++i) {
    const uint64_t bit = rng() % (fs::file_size(IndexOf(dir)) * 8);
    FlipBit(IndexOf(dir), bit);
    ExpectRightAnswers(kilnd, kernels, absl::StrCat("flip ", i, " bit ", bit),
                       absl::StrCat("flip", i));
  }
}

TEST(CacheTrustTest, EditedRowsAreRecompiledAndVerifyReportsThem) {
  TempDir tmp;
  const std::string dir = tmp.File("cache");
  const std::vector<Compiled> kernels = Prime(dir);
  const std::string bin0 = BlobDigest(dir, kernels[0].key, "binary");
  const std::string bin1 = BlobDigest(dir, kernels[1].key, "binary");
  // Kernels 0 and 1 swap binaries; 2's binary row is renamed; 3's digest is
  // not hex.
  Sql(dir,
      absl::StrCat("UPDATE entry_blobs SET digest = '", bin1, "' WHERE key = '",
                   kernels[0].key, "' AND name = 'binary';",
                   "UPDATE entry_blobs SET digest = '", bin0, "' WHERE key = '",
                   kernels[1].key, "' AND name = 'binary';",
                   "UPDATE entry_blobs SET name = 'binarx' WHERE key = '",
                   kernels[2].key, "' AND name = 'binary';",
                   "UPDATE entry_blobs SET digest = 'Z' WHERE key = '",
                   kernels[3].key, "' AND name = 'metadata';"));
  // The operator sees them as damaged, and verify drops them.
  testing::RunResult ls = RunKiln({"cache", "ls", "--dir", dir});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_THAT(ls.out, HasSubstr("DAMAGED"));
  testing::RunResult verify = RunKiln({"cache", "verify", "--dir", dir});
  EXPECT_EQ(verify.exit_code, 1) << verify.out << verify.err;
  for (int n = 0; n < kKernels; ++n) {
    EXPECT_THAT(verify.out, HasSubstr("dropped entry " + kernels[n].key));
  }
  EXPECT_EQ(RunKiln({"cache", "verify", "--dir", dir}).exit_code, 0);

  // The same edits again, now served by a kilnd: every kernel compiles.
  const std::string again = tmp.File("again");
  const std::vector<Compiled> fresh = Prime(again);
  Sql(again,
      absl::StrCat("UPDATE entry_blobs SET name = 'binarx' WHERE key = '",
                   fresh[2].key,
                   "' AND name = 'binary';"
                   "UPDATE entry_blobs SET digest = 'Z' WHERE key = '",
                   fresh[3].key, "' AND name = 'metadata';"));
  Kilnd kilnd(again);
  ASSERT_TRUE(kilnd.ok());
  {
    // Listing over gRPC works, and offers only what can be served.
    kiln::v1::ListKernelsResponse listed;
    grpc::ClientContext context;
    grpc::Status status = kilnd.stub().ListKernels(
        &context, kiln::v1::ListKernelsRequest(), &listed);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(listed.kernels_size(), kKernels - 2);
  }
  for (int n : {2, 3}) {
    kiln::v1::CompileResponse response;
    grpc::Status status = kilnd.Compile(KernelText(n), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.tier(), kiln::v1::TIER_COMPILED) << n;
    EXPECT_EQ(response.kernel().binary(), fresh[n].binary);
  }
  {
    // Evict takes a damaged entry too.
    Sql(again, absl::StrCat("UPDATE entry_blobs SET digest = 'Z' WHERE key = '",
                            fresh[1].key, "' AND name = 'metadata';"));
    kiln::v1::EvictRequest request;
    request.add_keys(fresh[1].key);
    kiln::v1::EvictResponse evicted;
    grpc::ClientContext context;
    grpc::Status status = kilnd.stub().Evict(&context, request, &evicted);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  // `kiln cache rm` removes any entry, damaged or not.
  Sql(again, absl::StrCat("UPDATE entry_blobs SET digest = 'Z' WHERE key = '",
                          fresh[0].key, "' AND name = 'metadata';"));
  testing::RunResult rm =
      RunKiln({"cache", "rm", fresh[0].key, "--dir", again});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
}

TEST(CacheTrustTest, DamagedIndexPagesNeitherStopKilndNorFailCompiles) {
  TempDir tmp;
  const std::string pristine = tmp.File("pristine");
  const std::vector<Compiled> kernels = Prime(pristine);
  for (int page : {0, 1, 2}) {
    const std::string dir = tmp.File(absl::StrCat("page", page));
    fs::copy(pristine, dir, fs::copy_options::recursive);
    {
      std::fstream f(IndexOf(dir),
                     std::ios::binary | std::ios::in | std::ios::out);
      f.seekp(page * 4096);
      f << std::string(4096, '\0');
    }
    Kilnd kilnd(dir);
    ASSERT_TRUE(kilnd.ok()) << "page " << page;
    ExpectRightAnswers(kilnd, kernels, absl::StrCat("page ", page), "x");
    if (page == 0) EXPECT_THAT(kilnd.Stderr(), HasSubstr("damaged"));
  }
  // A page zeroed under a running kilnd.
  const std::string live = tmp.File("live");
  fs::copy(pristine, live, fs::copy_options::recursive);
  Kilnd kilnd(live);
  ASSERT_TRUE(kilnd.ok());
  {
    std::fstream f(IndexOf(live),
                   std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(2 * 4096);
    f << std::string(4096, '\0');
  }
  ExpectRightAnswers(kilnd, kernels, "zeroed while running", "y");
  ExpectRightAnswers(kilnd, kernels, "zeroed while running, again", "z");
}

TEST(CacheTrustTest, ABlobHeaderClaimingSixtyFourGibibytesIsRecompiled) {
  TempDir tmp;
  const std::string dir = tmp.File("cache");
  const std::vector<Compiled> kernels = Prime(dir);
  RewriteBlobFile(dir, kernels[0].key, "binary", [](std::string& bytes) {
    ASSERT_GE(bytes.size(), 16u);
    const uint64_t huge = 64ull << 30;
    for (int i = 0; i < 8; ++i) {
      bytes[8 + i] = static_cast<char>(huge >> (8 * i));
    }
  });
  Kilnd kilnd(dir);
  ASSERT_TRUE(kilnd.ok());
  ExpectRightAnswers(kilnd, kernels, "huge header", "1");
  ExpectRightAnswers(kilnd, kernels, "huge header, again", "2");
}

TEST(CacheTrustTest, ADamagedEntryOnAFullDiskStillCompilesAndServes) {
  TempDir tmp;
  const std::string dir = tmp.File("cache");
  const std::vector<Compiled> kernels = Prime(dir);
  // Kernel 0's binary is damaged...
  RewriteBlobFile(dir, kernels[0].key, "binary",
                  [](std::string& bytes) { bytes[bytes.size() / 2] ^= 0x20; });
  // ... and, once kilnd runs, the disk is full: no file of its may grow past
  // 4 KiB (the index and its WAL are larger already, so no index write gets
  // through, and no new blob file either). A write past the limit fails with
  // EFBIG, as one on a full disk fails with ENOSPC.
  const std::string launcher = tmp.File("ignore-sigxfsz.sh");
  testing::WriteFile(launcher, absl::StrCat("#!/bin/bash\n"
                                            "trap '' XFSZ\n"
                                            "exec '",
                                            KILN_KILND_PATH, "' \"$@\"\n"));
  fs::permissions(launcher, fs::perms::owner_all);
  Kilnd kilnd(dir, {}, launcher);
  ASSERT_TRUE(kilnd.ok());
  const struct rlimit full = {4096, 4096};
  ASSERT_EQ(prlimit(kilnd.pid(), RLIMIT_FSIZE, &full, nullptr), 0)
      << strerror(errno);
  for (int round = 0; round < 2; ++round) {
    for (int n = 0; n < kKernels; ++n) {
      kiln::v1::CompileResponse response;
      grpc::Status status = kilnd.Compile(
          KernelText(n) + absl::StrCat("// ", round, "\n"), &response);
      ASSERT_TRUE(status.ok()) << n << ": " << status.error_message();
      EXPECT_EQ(response.kernel().binary(), kernels[n].binary) << n;
    }
  }
  // A new kernel cannot be stored, but is served; the failure is logged.
  kiln::v1::CompileResponse response;
  ASSERT_TRUE(kilnd.Compile(KernelText(7), &response).ok());
  EXPECT_FALSE(response.kernel().binary().empty());
  EXPECT_THAT(kilnd.Stderr(), HasSubstr("storing ")) << kilnd.Stderr();
  EXPECT_THAT(kilnd.Stderr(), HasSubstr("failed"));
}

TEST(CacheTrustTest, AnUnusableCacheDirectoryStillServesFromATemporaryCache) {
  TempDir tmp;
  const std::string dir = tmp.File("cache");
  fs::create_directories(dir + "/" + cache::kIndexFileName);  // in the way
  std::string temporary;
  {
    Kilnd kilnd(dir);
    ASSERT_TRUE(kilnd.ok());
    const std::string log = kilnd.Stderr();
    const size_t at = log.find("temporary cache in ");
    ASSERT_NE(at, std::string::npos) << log;
    temporary = log.substr(at + 19, log.find(',', at) - at - 19);
    EXPECT_TRUE(fs::is_directory(temporary)) << temporary;
    kiln::v1::CompileResponse response;
    ASSERT_TRUE(kilnd.Compile(KernelText(0), &response).ok());
    EXPECT_EQ(response.tier(), kiln::v1::TIER_COMPILED);
    const std::string binary = response.kernel().binary();
    ASSERT_TRUE(kilnd.Compile(KernelText(0) + "// again\n", &response).ok());
    EXPECT_EQ(response.tier(), kiln::v1::TIER_LOCAL);
    EXPECT_EQ(response.kernel().binary(), binary);
  }
  EXPECT_FALSE(fs::exists(temporary)) << "left behind: " << temporary;
}

TEST(CacheTrustTest, ErrorsEchoAtMostAFewHundredBytesOfTheInput) {
  TempDir tmp;
  Kilnd kilnd(tmp.File("cache"));
  ASSERT_TRUE(kilnd.ok());
  kiln::v1::CompileResponse response;
  grpc::Status status =
      kilnd.Compile(KernelText(0), &response, std::string(10000, 't'));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message().substr(0, 200);
  EXPECT_LT(status.error_message().size(), 1200u);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown target"));

  // A program of 3000 kernels, none of them the one asked for, under a long
  // file name.
  std::string many;
  for (int i = 0; i < 3000; ++i) {
    many += absl::StrReplaceAll(KernelText(0),
                                {{"scale", absl::StrCat("scale_", i)}});
  }
  status = kilnd.Compile(many, &response, "cpu", std::string(5000, 'k'),
                         std::string(5000, 'f'));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND)
      << status.error_message().substr(0, 200);
  EXPECT_LT(status.error_message().size(), 1200u);
  EXPECT_THAT(status.error_message(), HasSubstr("bytes cut"));
}

TEST(CacheTrustTest, AnotherCompilerBuildsEntryMissesAndExplainSaysWhy) {
  TempDir tmp;
  const std::string dir = tmp.File("cache");
  const std::vector<Compiled> kernels = Prime(dir);
  std::string build;
  {
    // Make kernel 0's entry what another build of the compiler stored: the
    // same key text but for the compiler line, under that text's key.
    absl::StatusOr<std::unique_ptr<cache::LocalStore>> store =
        cache::LocalStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    const cache::Digest key = *cache::Digest::Parse(kernels[0].key);
    absl::StatusOr<cache::Entry> entry = (*store)->Get(key, false);
    ASSERT_TRUE(entry.ok()) << entry.status();
    cache::EntryData old{entry->info.metadata, entry->blobs};
    for (cache::Blob& b : old.blobs) {
      if (b.name != "key.txt") continue;
      const size_t at = b.data.find("\ncompiler ");
      ASSERT_NE(at, std::string::npos) << b.data;
      const size_t end = b.data.find('\n', at + 1);
      build = b.data.substr(at + 10, end - at - 10);
      b.data.replace(at + 10, end - at - 10, "kiln-0.0.9+0123456789abcdef");
      ASSERT_TRUE((*store)->Put(cache::Digest::Of(b.data), old).ok());
    }
    ASSERT_TRUE((*store)->Remove(key).ok());
  }
  ASSERT_THAT(build, ::testing::StartsWith("kiln-"));
  const std::string file = tmp.File("k.tile");
  testing::WriteFile(file, KernelText(0));
  testing::RunResult explain =
      RunKiln({"cache", "explain", file, "--dir", dir});
  EXPECT_EQ(explain.exit_code, 1) << explain.out << explain.err;
  EXPECT_THAT(explain.out,
              HasSubstr("compiler: request " + build +
                        ", stored kiln-0.0.9+0123456789abcdef (another Kiln "
                        "compiler build"));
  Kilnd kilnd(dir);
  ASSERT_TRUE(kilnd.ok());
  kiln::v1::CompileResponse response;
  ASSERT_TRUE(kilnd.Compile(KernelText(0), &response).ok());
  EXPECT_EQ(response.tier(), kiln::v1::TIER_COMPILED);
  EXPECT_EQ(response.kernel().key(), kernels[0].key);
  // Kernels this build compiled still hit.
  ASSERT_TRUE(kilnd.Compile(KernelText(1), &response).ok());
  EXPECT_EQ(response.tier(), kiln::v1::TIER_LOCAL);
}

TEST(CacheTrustTest, GarbageProtobufIsInvalidArgument) {
  TempDir tmp;
  Kilnd kilnd(tmp.File("cache"));
  ASSERT_TRUE(kilnd.ok());
  for (const char* method :
       {"/kiln.v1.Kiln/Compile", "/kiln.v1.Kiln/GetKernel"}) {
    const std::string garbage = "\xff\xff\xff\xff\x0f not a message";
    grpc::Slice slice(garbage);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    grpc::Status status =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
            kilnd.channel().get(),
            grpc::internal::RpcMethod(method,
                                      grpc::internal::RpcMethod::NORMAL_RPC),
            &context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("not a valid protobuf"));
  }
  // A well-formed call on the same server still works.
  kiln::v1::CompileResponse response;
  EXPECT_TRUE(kilnd.Compile(KernelText(0), &response).ok());
}

TEST(CacheTrustTest, TheSocketIsNeverOpenToOthersEvenUnderUmaskZero) {
  TempDir tmp;
  const mode_t old = umask(0);
  for (int start = 0; start < 10; ++start) {
    const std::string run = tmp.File(absl::StrCat("run", start));
    const std::string socket = run + "/kilnd.sock";
    std::atomic<bool> stop{false};
    std::atomic<int> first_mode{-1};
    std::thread watcher([&] {
      struct stat st;
      const absl::Time give_up = absl::Now() + absl::Seconds(30);
      while (!stop && absl::Now() < give_up) {
        if (lstat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
          first_mode = static_cast<int>(st.st_mode & 0777);
          return;
        }
      }
    });
    absl::StatusOr<testing::Subprocess> kilnd =
        testing::Subprocess::Start({KILN_KILND_PATH, "--socket", socket,
                                    "--cache-dir", tmp.File("cache")});
    ASSERT_TRUE(kilnd.ok()) << kilnd.status();
    const bool listening = testing::WaitForStderr(*kilnd, "listening on unix:");
    if (!listening) stop = true;
    watcher.join();  // it sees the socket, however late it got to run
    ASSERT_TRUE(listening) << kilnd->Stderr();
    EXPECT_EQ(first_mode.load(), 0660) << "start " << start;
  }
  umask(old);
}

TEST(CacheTrustTest, ACacheDirectoryOthersCanWriteIsRefusedUnlessAllowed) {
  TempDir tmp;
  const std::string dir = tmp.File("shared");
  fs::create_directory(dir);
  fs::permissions(dir, fs::perms::all);  // 0777
  std::vector<std::string> argv = {KILN_KILND_PATH, "--socket",
                                   tmp.File("s/kilnd.sock"), "--cache-dir",
                                   dir};
  absl::StatusOr<testing::RunResult> refused = testing::Run(argv);
  ASSERT_TRUE(refused.ok());
  EXPECT_NE(refused->exit_code, 0);
  EXPECT_THAT(refused->err, HasSubstr("writable by other users"));
  Kilnd allowed(dir, {"--allow-shared-cache-dir"});
  EXPECT_TRUE(allowed.ok());
  EXPECT_THAT(allowed.Stderr(), HasSubstr("--allow-shared-cache-dir"));
}

}  // namespace
}  // namespace kiln::server
