// The CPU runtime's thread pool (runtime/cpu/thread_pool.h).
#include <pthread.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln::runtime {
namespace {

TEST(CpuThreadPoolTest, EveryIndexRunsExactlyOnce) {
  auto pool = ThreadPool::Create(4);
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (int64_t n : {1, 3, 64, 1000, 12345}) {
    for (int64_t chunk : {0, 1, 7, 100000}) {
      std::vector<std::atomic<int>> hits(n);
      (*pool)->ParallelFor(n, chunk, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[i].load(), 1) << n << " " << i;
    }
  }
  (*pool)->ParallelFor(0, 0, [](int64_t, int64_t) { FAIL(); });
}

TEST(CpuThreadPoolTest, WorkRunsOnPoolThreadsWithLargeStacks) {
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool.ok());
  const pthread_t caller = pthread_self();
  std::atomic<bool> on_caller{false};
  std::atomic<size_t> min_stack{SIZE_MAX};
  (*pool)->ParallelFor(16, 1, [&](int64_t, int64_t) {
    if (pthread_equal(pthread_self(), caller)) on_caller = true;
    pthread_attr_t attr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstacksize(&attr, &size);
      pthread_attr_destroy(&attr);
    }
    size_t cur = min_stack.load();
    while (size < cur && !min_stack.compare_exchange_weak(cur, size)) {
    }
  });
  EXPECT_FALSE(on_caller.load());
  EXPECT_GE(min_stack.load(), ThreadPool::kDefaultStackBytes);
}

TEST(CpuThreadPoolTest, ConcurrentCallersShareThePool) {
  auto pool = ThreadPool::Create(3);
  ASSERT_TRUE(pool.ok());
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        (*pool)->ParallelFor(100, 0, [&](int64_t begin, int64_t end) {
          total.fetch_add(end - begin);
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 6 * 20 * 100);
}

TEST(CpuThreadPoolTest, DefaultPoolExists) {
  absl::StatusOr<ThreadPool*> pool = ThreadPool::Default();
  ASSERT_TRUE(pool.ok());
  EXPECT_GE((*pool)->num_threads(), 1);
  EXPECT_EQ(*pool, *ThreadPool::Default());
}

}  // namespace
}  // namespace kiln::runtime
