#pragma once
// Process set-up shared by the subcommands that compute: thread count and logging.
#include <omp.h>
#include <spdlog/spdlog.h>

#include "kernels/cpu/cblas.hpp"

namespace hw::cli {

// One thread count for both pools: OpenMP's and the BLAS library's own (a pthread OpenBLAS
// otherwise starts one thread per core whatever train.threads says, and the two pools fight).
inline void set_threads(int threads) {
  if (threads <= 0) return;
  omp_set_num_threads(threads);
  blas::set_threads(threads);
}

}  // namespace hw::cli
