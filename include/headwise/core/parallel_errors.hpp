#pragma once
// An exception must not leave an OpenMP parallel region: the runtime then calls std::terminate
// (no `error:` line, no cleanup of temp files). Every region whose body can throw (a check, an
// allocation) runs its body through ParallelErrors::run, which keeps the first exception and
// makes the remaining iterations return at once; rethrow() after the region throws it on the
// calling thread, where the usual handlers and destructors run.
//
//   ParallelErrors errors;
//   #pragma omp parallel for
//   for (int64_t i = 0; i < n; ++i) errors.run([&] { body(i); });
//   errors.rethrow();
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>

namespace hw {

class ParallelErrors {
 public:
  template <class Fn>
  void run(Fn&& fn) noexcept {
    if (failed_.load(std::memory_order_relaxed)) return;  // the region is failing: skip the work
    try {
      fn();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!first_) first_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  void rethrow() {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace hw
