// The CUDA parity tests' main: without a GPU nothing can run, so say so and exit 77, which
// ctest reports as "skipped" (not passed).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "headwise/core/device_memory.hpp"

int main(int argc, char* argv[]) {
  if (!hw::device::available()) {
    std::printf("CUDA parity tests skipped: %s\n", hw::device::describe().c_str());
    return 77;
  }
  std::printf("CUDA parity tests on %s\n", hw::device::describe().c_str());
  return Catch::Session().run(argc, argv);
}
