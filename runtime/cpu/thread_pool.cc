// A job is a range split into chunks. Workers take the front job, claim its
// next chunk with an atomic counter, and drop the job from the queue once
// every chunk is claimed. The caller waits until the done count reaches the
// chunk count. Workers hold the job by shared_ptr, so a worker that claims
// past the end after the caller returned still touches live memory; `fn`
// (on the caller's stack) is only called for claimed, unfinished chunks.
#include "runtime/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kiln::runtime {

struct ThreadPool::Job {
  Job(int64_t n, int64_t chunk, absl::FunctionRef<void(int64_t, int64_t)> f)
      : n(n), chunk(chunk), chunks((n + chunk - 1) / chunk), fn(f) {}
  const int64_t n;
  const int64_t chunk;
  const int64_t chunks;
  absl::FunctionRef<void(int64_t, int64_t)> fn;
  std::atomic<int64_t> next{0};  // next chunk to claim
  std::mutex mu;
  std::condition_variable done_cv;
  int64_t done = 0;  // guarded by mu
};

absl::StatusOr<std::unique_ptr<ThreadPool>> ThreadPool::Create(
    int num_threads, size_t stack_bytes) {
  if (num_threads <= 0) {
    num_threads = std::max(1u, std::thread::hardware_concurrency());
  }
  std::unique_ptr<ThreadPool> pool(new ThreadPool);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  int rc = pthread_attr_setstacksize(&attr, stack_bytes);
  if (rc != 0) {
    pthread_attr_destroy(&attr);
    return absl::InvalidArgumentError(absl::StrCat(
        "thread pool: stack size ", stack_bytes, ": ", std::strerror(rc)));
  }
  for (int i = 0; i < num_threads; ++i) {
    pthread_t t;
    rc = pthread_create(&t, &attr, &ThreadPool::ThreadMain, pool.get());
    if (rc != 0) {
      pthread_attr_destroy(&attr);
      // The destructor joins the threads started so far.
      return absl::InternalError(absl::StrCat(
          "thread pool: cannot start thread ", i, ": ", std::strerror(rc)));
    }
    pool->threads_.push_back(t);
  }
  pthread_attr_destroy(&attr);
  return pool;
}

absl::StatusOr<ThreadPool*> ThreadPool::Default() {
  static absl::StatusOr<ThreadPool*>* pool = [] {
    absl::StatusOr<std::unique_ptr<ThreadPool>> p = Create(0);
    if (!p.ok()) return new absl::StatusOr<ThreadPool*>(p.status());
    return new absl::StatusOr<ThreadPool*>(p->release());
  }();
  return *pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (pthread_t t : threads_) pthread_join(t, nullptr);
}

void* ThreadPool::ThreadMain(void* pool) {
  static_cast<ThreadPool*>(pool)->WorkerLoop();
  return nullptr;
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping
      job = jobs_.front();
    }
    while (true) {
      const int64_t c = job->next.fetch_add(1);
      if (c >= job->chunks) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!jobs_.empty() && jobs_.front() == job) jobs_.pop_front();
        break;
      }
      const int64_t begin = c * job->chunk;
      job->fn(begin, std::min(job->n, begin + job->chunk));
      std::lock_guard<std::mutex> lock(job->mu);
      if (++job->done == job->chunks) job->done_cv.notify_all();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t chunk,
                             absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  if (chunk <= 0) {
    chunk = std::max<int64_t>(1, n / (int64_t{4} * num_threads()));
  }
  auto job = std::make_shared<Job>(n, chunk, fn);
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(job);
  }
  if (job->chunks == 1) {
    work_cv_.notify_one();
  } else {
    work_cv_.notify_all();
  }
  std::unique_lock<std::mutex> lock(job->mu);
  job->done_cv.wait(lock, [&] { return job->done == job->chunks; });
}

}  // namespace kiln::runtime
