// Device memory through the CUDA runtime. Every failure becomes one hw::Error line naming the
// call and its owner; nothing here aborts the process.
#include "headwise/core/device_memory.hpp"

#include <cuda_runtime.h>

#include "headwise/core/error.hpp"

namespace hw::device {

namespace {
void ok(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fail(what + ": " + cudaGetErrorString(e));
}

// cudaGetDeviceCount's answer. A failure is not always "no GPU": a driver older than the
// runtime, a missing device node or a broken driver install also end here, and the error's own
// text is what tells them apart, so describe() passes it on.
struct Probe {
  int n = 0;
  cudaError_t err = cudaSuccess;
};
Probe probe() {
  Probe p;
  p.err = cudaGetDeviceCount(&p.n);
  if (p.err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error
    p.n = 0;
  }
  return p;
}

}  // namespace

int count() { return probe().n; }

bool available() { return count() > 0; }

std::string describe() {
  const Probe probed = probe();
  if (probed.err != cudaSuccess)
    return std::string("no GPU usable by the CUDA runtime: cudaGetDeviceCount failed with ") +
           cudaGetErrorName(probed.err) + " (" + cudaGetErrorString(probed.err) + ")";
  const int n = probed.n;
  if (n == 0) return "no GPU visible to the CUDA runtime";
  int dev = 0;
  ok(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp p{};
  ok(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  return std::string(p.name) + " (GPU " + std::to_string(dev) + " of " + std::to_string(n) + ", sm_" +
         std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 20) + " MiB)";
}

void select(int index) {
  const int n = count();
  check(index >= 0 && index < n, "GPU " + std::to_string(index) + " does not exist (" + std::to_string(n) +
                                     " visible; check CUDA_VISIBLE_DEVICES)");
  ok(cudaSetDevice(index), "cudaSetDevice(" + std::to_string(index) + ")");
}

void* alloc(size_t bytes, const std::string& what) {
  void* p = nullptr;
  ok(cudaMalloc(&p, bytes), what + ": cudaMalloc of " + std::to_string(bytes) + " bytes");
  return p;
}

void free(void* ptr) noexcept {
  if (ptr) (void)cudaFree(ptr);
}

// cudaMemset and a pageable host-to-device cudaMemcpy may return before the device has
// finished, and they run on the legacy default stream, which backends' non-blocking streams do
// not wait for. Both are rare (allocation, init, checkpoints), so finish them here.
void zero(void* ptr, size_t bytes) {
  if (!bytes) return;
  ok(cudaMemset(ptr, 0, bytes), "cudaMemset");
  ok(cudaDeviceSynchronize(), "cudaMemset (synchronise)");
}

void copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (!bytes) return;
  ok(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "copy to the GPU");
  ok(cudaDeviceSynchronize(), "copy to the GPU (synchronise)");
}

void copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes) ok(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "copy from the GPU");
}

}  // namespace hw::device
