#pragma once
// The CBLAS declarations of the configured library (CMake's HEADWISE_BLAS) and its thread-count
// calls, so no other file names a BLAS vendor: MKL names its header mkl_cblas.h; OpenBLAS and BLIS
// ship cblas.h; each library has its own pair of thread-count functions.
#if defined(HEADWISE_BLAS_MKL)
#include <mkl_cblas.h>
#include <mkl_service.h>
#elif defined(HEADWISE_BLAS_BLIS)
#include <blis.h>
#include <cblas.h>
#else
#include <cblas.h>
#endif

namespace hw::blas {

// Threads the library runs one call on.
inline int threads() {
#if defined(HEADWISE_BLAS_MKL)
  return mkl_get_max_threads();
#elif defined(HEADWISE_BLAS_BLIS)
  return static_cast<int>(bli_thread_get_num_threads());
#else
  return openblas_get_num_threads();
#endif
}

inline void set_threads(int n) {
#if defined(HEADWISE_BLAS_MKL)
  mkl_set_num_threads(n);
#elif defined(HEADWISE_BLAS_BLIS)
  bli_thread_set_num_threads(n);
#else
  openblas_set_num_threads(n);
#endif
}

// While alive, the library runs every call on the calling thread (its count restored after):
// for callers that are themselves one thread of an OpenMP team.
class SingleThreaded {
 public:
  SingleThreaded() : saved_(threads()) {
    if (saved_ != 1) set_threads(1);
  }
  ~SingleThreaded() {
    if (saved_ != 1) set_threads(saved_);
  }
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;

 private:
  int saved_;
};

}  // namespace hw::blas
