// The CUDA parity tests' main: without a GPU nothing can run, so say so and exit 77, which
// ctest reports as "skipped" (not passed). Listing the tests needs no GPU (scripts/gpu_check.sh
// lists them to rerun each failing case in its own process).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "headwise/core/device_memory.hpp"

namespace {
bool asks_for_a_listing(int argc, char* argv[]) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--list", 6) == 0 || std::strcmp(argv[i], "-l") == 0) return true;
  return false;
}
}  // namespace

int main(int argc, char* argv[]) {
  if (asks_for_a_listing(argc, argv)) return Catch::Session().run(argc, argv);
  if (!hw::device::available()) {
    std::printf("CUDA parity tests skipped: %s\n", hw::device::describe().c_str());
    return 77;
  }
  std::printf("CUDA parity tests on %s\n", hw::device::describe().c_str());
  return Catch::Session().run(argc, argv);
}
