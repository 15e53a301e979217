// The GPU's measured dense GEMM rate, which `headwise bench` quotes MFU against: square
// n x n products through cuBLASLt, a few warm-up runs, then timed runs between two CUDA
// events on a private stream. Inputs are pseudo-random (not constant) so the tensor cores
// toggle as they would on real data. Declared in headwise/kernels/cuda_backend.hpp.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "headwise/core/device_memory.hpp"
#include "headwise/core/error.hpp"
#include "headwise/kernels/cuda_backend.hpp"
#include "kernels/cuda/cublaslt_objects.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_stream.hpp"

namespace hw {

namespace {

constexpr int kWarmupRuns = 3;
constexpr int kTimedRuns = 10;
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// One cudaMalloc'd block, freed with its owner.
class DeviceBlock {
 public:
  DeviceBlock(size_t bytes, const std::string& what) : ptr_(device::alloc(bytes, what)) {}
  ~DeviceBlock() { device::free(ptr_); }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_;
};

// bf16 is the top half of an fp32 (round to nearest even; the values here are finite).
uint16_t to_bf16_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Fills `bytes` of device memory with a repeated block of pseudo-random values in [-1, 1)
// (a 32-bit LCG; the values only need to be non-trivial, not independent).
void fill_random(void* dst, size_t bytes, bool bf16, cudaStream_t stream) {
  constexpr size_t kChunk = size_t(1) << 20;  // elements per host block
  const size_t elem = bf16 ? 2 : 4;
  std::vector<unsigned char> host(kChunk * elem);
  uint32_t state = 12345u;
  for (size_t i = 0; i < kChunk; i++) {
    state = state * 1664525u + 1013904223u;
    const float v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
    if (bf16) {
      const uint16_t b = to_bf16_bits(v);
      std::memcpy(&host[i * elem], &b, elem);
    } else {
      std::memcpy(&host[i * elem], &v, elem);
    }
  }
  auto* out = static_cast<unsigned char*>(dst);
  for (size_t off = 0; off < bytes; off += host.size()) {
    const size_t n = std::min(host.size(), bytes - off);
    HW_CUDA_CHECK(cudaMemcpyAsync(out + off, host.data(), n, cudaMemcpyHostToDevice, stream));
    // The host block is reused for the next copy: wait for this one.
    HW_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

// Times D = A @ B for square n x n matrices of `type` with compute type `compute`.
double measure_gemm_tflops(int n, cudaDataType_t type, cublasComputeType_t compute, const char* what) {
  check(n > 0, std::string(what) + " GEMM rate: matrix size n=" + std::to_string(n) + " must be positive");
  check(device::available(), std::string(what) + " GEMM rate: " + device::describe());
  const bool bf16 = type == CUDA_R_16BF;
  const size_t bytes = size_t(n) * size_t(n) * (bf16 ? 2 : 4);
  cuda::Stream stream;
  DeviceBlock a(bytes, "GEMM rate matrix A"), b(bytes, "GEMM rate matrix B"), d(bytes, "GEMM rate matrix D");
  DeviceBlock workspace(kWorkspaceBytes, "GEMM rate cuBLASLt workspace");
  fill_random(a.get(), bytes, bf16, stream.get());
  fill_random(b.get(), bytes, bf16, stream.get());

  cuda::LtHandle handle = cuda::make_lt_handle();
  cuda::LtMatmulDesc desc = cuda::make_matmul_desc(compute);
  cuda::LtLayout layout = cuda::make_layout(type, n, n, n);  // A, B and D alike
  cuda::LtPreference pref = cuda::make_preference(kWorkspaceBytes);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  HW_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle.get(), desc.get(), layout.get(), layout.get(), layout.get(),
                                                 layout.get(), pref.get(), 1, &result, &found));
  check(found > 0, std::string(what) + " GEMM rate: cuBLASLt has no algorithm for n=" + std::to_string(n));
  const float alpha = 1.0f, beta = 0.0f;
  const auto product = [&] {
    HW_CUBLAS_CHECK(cublasLtMatmul(handle.get(), desc.get(), &alpha, a.get(), layout.get(), b.get(), layout.get(),
                                   &beta, d.get(), layout.get(), d.get(), layout.get(), &result.algo, workspace.get(),
                                   kWorkspaceBytes, stream.get()));
  };
  for (int i = 0; i < kWarmupRuns; i++) product();
  cuda::Event start, stop;
  start.record(stream.get());
  for (int i = 0; i < kTimedRuns; i++) product();
  stop.record(stream.get());
  stop.synchronize();
  const double seconds = double(stop.elapsed_ms_since(start)) * 1e-3;
  const double flops = 2.0 * double(n) * double(n) * double(n) * kTimedRuns;
  return seconds > 0.0 ? flops / seconds * 1e-12 : 0.0;
}

}  // namespace

double measure_bf16_gemm_tflops(int n) { return measure_gemm_tflops(n, CUDA_R_16BF, CUBLAS_COMPUTE_32F, "bf16"); }

double measure_tf32_gemm_tflops(int n) {
  return measure_gemm_tflops(n, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, "TF32");
}

}  // namespace hw
