//===- Parallel.cpp - the thread pool of compiled parallel loops ----------===//
//
// `tdf-parallelize` cuts a large loop nest into chunks (an `scf.parallel`),
// `tdf-outline-parallel` makes the body a function and `tdf-launch-parallel`
// calls `tdf_rt_parallel_for(task, context, n)`, defined here: `task(context,
// t)` for every t in [0, n), on the calling thread and the pool's workers,
// returning when all have returned.
//
// - One pool per process, its workers made on first use (as many as the
//   largest call asked for, less the caller) and never joined: they sleep
//   on a condition variable between jobs, after a short spin. A caller whose
//   own tasks are done spins as long for the workers' last ones before it
//   sleeps (waking a sleeping thread costs tens of microseconds on a VM).
// - Calls from several threads at once each queue a job; the caller takes
//   tasks of its own job too, so every call finishes even when the workers
//   are busy with other jobs (or could not be made).
// - A worker runs a task with the caller's floating-point mode (MXCSR).
// - A task's code is never running when the call returns: a worker counts
//   a task done after the task returned, in this file's code, so a program
//   may be freed as soon as its call returns.
// - In a child forked from the process that made the pool (fork copies only
//   the calling thread), every task runs on the calling thread.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#include <unistd.h>

#if defined(__SSE__)
#include <immintrin.h>
#endif

namespace {

using TaskFn = void (*)(void *, int64_t);

/// The workers a pool makes at most.
constexpr int64_t kMaxWorkers = 255;
/// How many pause instructions a worker spins for a next job before it
/// sleeps (about 45 microseconds here: back-to-back parallel loop nests find
/// it awake, and a BLAS call's threads after them lose little of a core).
constexpr int kSpins = 2000;

unsigned fpMode() {
#if defined(__SSE__)
  return _mm_getcsr();
#else
  return 0;
#endif
}

void setFpMode(unsigned mode) {
#if defined(__SSE__)
  _mm_setcsr(mode);
#else
  (void)mode;
#endif
}

void spinPause() {
#if defined(__SSE__)
  _mm_pause();
#endif
}

/// One call's tasks. Lives on the caller's stack; every field but the
/// constants is guarded by the pool's mutex.
struct Job {
  TaskFn fn;
  void *context;
  int64_t n;
  unsigned mode;
  int64_t next = 0; // the next task to take
  // Tasks not yet returned: changed with the mutex held, read without it by
  // the caller spinning for the last ones.
  std::atomic<int64_t> pending{0};
};

struct Pool {
  std::mutex mutex;
  std::condition_variable work; // a job was queued
  std::condition_variable done; // a job's last task returned
  std::deque<Job *> jobs;       // jobs with tasks left to take
  int64_t workers = 0;
  int64_t sleeping = 0;
  std::atomic<uint64_t> queued{
      0}; // jobs ever queued (spinning workers watch it)
};

/// The pool (never destroyed: workers may wait on it while the process
/// exits).
Pool &pool() {
  static Pool *instance = new Pool;
  return *instance;
}

/// The process whose workers the pool has.
const pid_t loadPid = getpid();

/// Takes the next task of `job` (the mutex held); a job whose last task is
/// taken leaves the queue.
int64_t take(Pool &p, Job &job) {
  int64_t task = job.next++;
  if (job.next >= job.n) {
    auto it = std::find(p.jobs.begin(), p.jobs.end(), &job);
    if (it != p.jobs.end())
      p.jobs.erase(it);
  }
  return task;
}

void workerLoop(Pool &p) {
  std::unique_lock<std::mutex> lock(p.mutex);
  for (;;) {
    if (p.jobs.empty()) {
      uint64_t seen = p.queued.load(std::memory_order_relaxed);
      lock.unlock();
      for (int i = 0;
           i < kSpins && p.queued.load(std::memory_order_acquire) == seen; ++i)
        spinPause();
      lock.lock();
      if (p.jobs.empty()) {
        ++p.sleeping;
        p.work.wait(lock, [&] { return !p.jobs.empty(); });
        --p.sleeping;
      }
      continue;
    }
    Job &job = *p.jobs.front();
    int64_t task = take(p, job);
    lock.unlock();
    setFpMode(job.mode);
    job.fn(job.context, task);
    lock.lock();
    // The last access to `job`: the caller may return (and the job leave
    // its stack) as soon as it reads 0.
    if (job.pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
      p.done.notify_all();
  }
}

/// At least `wanted` workers (the mutex held); fewer when threads cannot be
/// made.
void ensureWorkers(Pool &p, int64_t wanted) {
  wanted = std::min(wanted, kMaxWorkers);
  while (p.workers < wanted) {
    try {
      std::thread(workerLoop, std::ref(p)).detach();
    } catch (const std::system_error &) {
      return;
    }
    ++p.workers;
  }
}

} // namespace

/// Runs `fn(context, t)` for every t in [0, n) on the calling thread and
/// the pool's workers; returns when every task has returned.
extern "C" void tdf_rt_parallel_for(TaskFn fn, void *context, int64_t n) {
  if (n <= 1 || getpid() != loadPid) {
    for (int64_t t = 0; t < n; ++t)
      fn(context, t);
    return;
  }
  Pool &p = pool();
  Job job{fn, context, n, fpMode()};
  job.pending = n;
  std::unique_lock<std::mutex> lock(p.mutex);
  ensureWorkers(p, n - 1);
  p.jobs.push_back(&job);
  p.queued.fetch_add(1, std::memory_order_release);
  if (p.sleeping)
    p.work.notify_all();
  while (job.next < job.n) {
    int64_t task = take(p, job);
    lock.unlock();
    fn(context, task);
    lock.lock();
    job.pending.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (job.pending.load(std::memory_order_acquire) == 0)
    return;
  // The workers' last tasks are running: spin for them before sleeping (a
  // sleeping caller's wake-up costs tens of microseconds, as much as a
  // short loop nest's whole run on one core).
  lock.unlock();
  for (int i = 0; i < kSpins; ++i) {
    if (job.pending.load(std::memory_order_acquire) == 0)
      return;
    spinPause();
  }
  lock.lock();
  p.done.wait(lock,
              [&] { return job.pending.load(std::memory_order_acquire) == 0; });
}
