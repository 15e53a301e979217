#pragma once
// Internal: when a kernel is worth an OpenMP team. Forking and joining costs microseconds
// (far more on a loaded machine), so loops touching fewer elements than this run serially.
// Results never depend on this choice: every reduction has a fixed order either way.
#include <cstdint>

namespace hw::cpu::detail {

constexpr int64_t kParallelMinWork = 1 << 14;

inline bool worth_parallel(int64_t elements) { return elements >= kParallelMinWork; }

}  // namespace hw::cpu::detail
