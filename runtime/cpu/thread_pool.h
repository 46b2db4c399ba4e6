// A fixed pool of threads with large stacks that runs the blocks of CPU
// kernels (tiles live on the stack: each thread gets 64 MiB by default).
#ifndef KILN_RUNTIME_CPU_THREAD_POOL_H_
#define KILN_RUNTIME_CPU_THREAD_POOL_H_

#include <pthread.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace kiln::runtime {

class ThreadPool {
 public:
  static constexpr size_t kDefaultStackBytes = size_t{64} << 20;

  // Starts `num_threads` threads (0: one per hardware thread), each with
  // `stack_bytes` of stack. Internal error if a thread cannot be created.
  static absl::StatusOr<std::unique_ptr<ThreadPool>> Create(
      int num_threads, size_t stack_bytes = kDefaultStackBytes);

  // The process-wide pool (one thread per hardware thread, 64 MiB stacks),
  // created on first use and never destroyed.
  static absl::StatusOr<ThreadPool*> Default();

  // Joins the threads. No ParallelFor may be running.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Calls fn(begin, end) over chunks of [0, n) (at most `chunk` indices each;
  // 0 picks a size giving each thread several chunks) on the pool's threads
  // — never on the calling thread, whose stack may be small — and returns
  // when every chunk has run. Thread-safe: concurrent callers share the
  // threads. Must not be called from inside `fn` (it would wait on itself).
  void ParallelFor(int64_t n, int64_t chunk,
                   absl::FunctionRef<void(int64_t, int64_t)> fn);

  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  struct Job;

  ThreadPool() = default;
  static void* ThreadMain(void* pool);
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  // jobs with unclaimed chunks
  bool stopping_ = false;
  std::vector<pthread_t> threads_;
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_CPU_THREAD_POOL_H_
