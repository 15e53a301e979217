// The CUDA parity tests' main. Without a GPU nothing can run: say so and exit 77, which ctest
// reports as "skipped" (not passed). But where a GPU is expected (HEADWISE_EXPECT_GPU=1, which
// scripts/gpu_check.sh sets once nvidia-smi has answered, or an NVIDIA device node exists), a
// CUDA runtime that finds none is a failure: exit 1 with the runtime's own error text (a driver
// older than the runtime, a missing device node), never a silent "skipped" on a GPU machine.
// Listing the tests needs no GPU (gpu_check.sh lists them to rerun each failing case alone).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "headwise/core/device_memory.hpp"

namespace {
bool asks_for_a_listing(int argc, char* argv[]) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--list", 6) == 0 || std::strcmp(argv[i], "-l") == 0) return true;
  return false;
}

bool gpu_expected() {
  const char* e = std::getenv("HEADWISE_EXPECT_GPU");
  if (e && std::strcmp(e, "1") == 0) return true;
  std::error_code ec;
  return std::filesystem::exists("/dev/nvidiactl", ec);
}
}  // namespace

int main(int argc, char* argv[]) {
  if (asks_for_a_listing(argc, argv)) return Catch::Session().run(argc, argv);
  if (!hw::device::available()) {
    if (gpu_expected()) {
      std::printf("CUDA parity tests FAILED before any test: a GPU is expected here, but %s\n",
                  hw::device::describe().c_str());
      return 1;
    }
    std::printf("CUDA parity tests skipped: %s\n", hw::device::describe().c_str());
    return 77;
  }
  std::printf("CUDA parity tests on %s\n", hw::device::describe().c_str());
  return Catch::Session().run(argc, argv);
}
