#pragma once
// Process set-up shared by the subcommands that compute: thread count and logging.
#include <omp.h>
#include <spdlog/spdlog.h>

namespace hw::cli {

inline void set_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

}  // namespace hw::cli
