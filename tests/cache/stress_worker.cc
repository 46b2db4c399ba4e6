// A separate process that hammers one cache directory, for the crash and
// multi-process tests (run by stress_test.cc, never by hand).
//
//   kiln_cache_stress_worker DIR crash SEED
//       Mixed puts, gets, removes and gc on shared keys until killed. A size
//       cap keeps evictions running.
//   kiln_cache_stress_worker DIR mixed ID OPS SYNC
//       OPS operations on keys owned by worker ID (and some shared ones);
//       then writes DIR/../expect-ID listing the owned keys that must exist.
//
// Exit status: 0 done; 3 a get returned wrong content; 4 an operation failed.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "cache/local_store.h"
#include "tests/cache/test_util.h"

namespace kiln::cache {
namespace {

using testing::KeyFor;
using testing::MakeEntry;
using testing::MatchesEntry;

// Sizes vary by key so entries differ in size and eviction has work.
size_t SizeFor(uint64_t n) { return 500 + (n * 7919) % 20000; }

int Fail(int code, const std::string& what, const absl::Status& status) {
  std::cerr << "worker: " << what << ": " << status << "\n";
  return code;
}

// Checks a get: either a miss or exactly the entry `n` was built from.
int CheckGet(LocalStore& store, uint64_t n, bool* hit) {
  absl::StatusOr<Entry> got = store.Get(KeyFor(n));
  if (got.ok()) {
    if (!MatchesEntry(*got, n, SizeFor(n))) {
      std::cerr << "worker: wrong content for key " << n << "\n";
      return 3;
    }
    if (hit) *hit = true;
    return 0;
  }
  if (hit) *hit = false;
  if (absl::IsNotFound(got.status())) return 0;
  return Fail(4, absl::StrCat("get ", n), got.status());
}

int Crash(const std::string& dir, uint64_t seed) {
  LocalStoreOptions options;
  options.max_size = 256 * 1024;
  options.touch_interval = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<LocalStore>> store =
      LocalStore::Open(dir, options);
  if (!store.ok()) return Fail(4, "open", store.status());
  std::mt19937_64 rng(seed);
  while (true) {
    const uint64_t n = rng() % 48;
    const int op = static_cast<int>(rng() % 20);
    if (op < 10) {
      absl::Status s = (*store)->Put(KeyFor(n), MakeEntry(n, SizeFor(n)));
      if (!s.ok()) return Fail(4, absl::StrCat("put ", n), s);
    } else if (op < 16) {
      if (int rc = CheckGet(**store, n, nullptr); rc != 0) return rc;
    } else if (op < 19) {
      absl::Status s = (*store)->Remove(KeyFor(n));
      if (!s.ok() && !absl::IsNotFound(s)) return Fail(4, "remove", s);
    } else {
      GcOptions gc;
      gc.max_size = 128 * 1024;
      gc.grace = absl::ZeroDuration();  // the only writer: nothing in flight
      absl::StatusOr<GcReport> r = (*store)->Gc(gc);
      if (!r.ok()) return Fail(4, "gc", r.status());
    }
  }
}

int Mixed(const std::string& dir, int id, int ops, bool sync) {
  LocalStoreOptions options;
  options.fsync = sync;
  absl::StatusOr<std::unique_ptr<LocalStore>> store =
      LocalStore::Open(dir, options);
  if (!store.ok()) return Fail(4, "open", store.status());
  std::mt19937_64 rng(1000 + id);
  std::set<uint64_t> present;  // owned keys this worker put and kept
  const uint64_t own_base = 1000000ull * (id + 1);
  for (int i = 0; i < ops; ++i) {
    const int op = static_cast<int>(rng() % 100);
    const bool shared = rng() % 4 == 0;
    const uint64_t n = shared ? rng() % 32 : own_base + rng() % 150;
    if (op < 35) {
      absl::Status s = (*store)->Put(KeyFor(n), MakeEntry(n, SizeFor(n)));
      if (!s.ok()) return Fail(4, absl::StrCat("put ", n), s);
      if (!shared) present.insert(n);
    } else if (op < 75) {
      bool hit = false;
      if (int rc = CheckGet(**store, n, &hit); rc != 0) return rc;
      if (!shared && hit != present.contains(n)) {
        std::cerr << "worker " << id << ": key " << n
                  << (hit ? " present after remove" : " lost") << "\n";
        return 3;
      }
    } else if (op < 85) {
      absl::Status s = (*store)->Remove(KeyFor(n));
      if (!s.ok() && !absl::IsNotFound(s)) return Fail(4, "remove", s);
      if (!shared) present.erase(n);
    } else if (op < 95) {
      absl::StatusOr<EntryInfo> info = (*store)->Stat(KeyFor(n));
      if (!info.ok() && !absl::IsNotFound(info.status())) {
        return Fail(4, "stat", info.status());
      }
    } else if (op < 99) {
      EntryFilter filter;
      filter.limit = 20;
      absl::StatusOr<std::vector<EntryInfo>> list = (*store)->List(filter);
      if (!list.ok()) return Fail(4, "list", list.status());
    } else {
      GcOptions gc;  // default grace: never touches other workers' files
      absl::StatusOr<GcReport> r = (*store)->Gc(gc);
      if (!r.ok()) return Fail(4, "gc", r.status());
    }
  }
  std::ofstream out(absl::StrCat(dir, "/../expect-", id));
  for (uint64_t n : present) out << n << "\n";
  return out.good() ? 0 : 4;
}

}  // namespace
}  // namespace kiln::cache

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[2]) == "crash") {
    return kiln::cache::Crash(argv[1], std::strtoull(argv[3], nullptr, 10));
  }
  if (argc >= 6 && std::string(argv[2]) == "mixed") {
    return kiln::cache::Mixed(argv[1], std::atoi(argv[3]), std::atoi(argv[4]),
                              std::string(argv[5]) == "1");
  }
  std::cerr << "usage: " << argv[0]
            << " DIR crash SEED | DIR mixed ID OPS SYNC(0|1)\n";
  return 2;
}
