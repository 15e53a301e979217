#pragma once
// Raw memory of a CUDA device, for arenas and backends. In a build without CUDA every
// function is present but reports that CUDA is missing (device_available() is false and the
// others throw hw::Error), so code above it is written once, without build switches.
#include <cstddef>
#include <string>

namespace hw::device {

// True when this build has CUDA and at least one GPU is visible.
bool available();
// Number of visible GPUs (0 without CUDA).
int count();
// One line describing why there is no usable GPU, or the current GPU's name and memory.
std::string describe();
// Make GPU `index` current for this thread (throws naming the index when it does not exist).
void select(int index);

// Device allocations. `what` names the owner in the error message (arena role, tensor).
void* alloc(size_t bytes, const std::string& what);
void free(void* ptr) noexcept;
// Blocking operations on device memory (synchronous with respect to the host).
void zero(void* ptr, size_t bytes);
void copy_to_device(void* dst, const void* host_src, size_t bytes);
void copy_to_host(void* host_dst, const void* src, size_t bytes);

}  // namespace hw::device
