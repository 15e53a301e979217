#pragma once
// The CUDA backend: the same ops as the CPU reference on the current GPU (src/kernels/cuda),
// plus the card's measured GEMM rates (for MFU). In a build without CUDA every function here
// throws hw::Error saying so.
#include <memory>

#include "headwise/kernels/backend.hpp"

namespace hw {

struct CudaBackendOptions {
  // GEMMs on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32), the training default; false
  // gives exact fp32 GEMMs (CUBLAS_COMPUTE_32F), which the parity tests use.
  bool tf32 = true;
  // matmul_gelu_forward as one GEMM with cuBLASLt's GELU_AUX(_BIAS) epilogue instead of a
  // GEMM then the GELU kernel. Off until a GPU run shows cuBLASLt's GELU is the tanh form of
  // the CPU reference (tests/cuda/test_gemm.cpp checks exactly that).
  bool gelu_epilogue = false;
};

// A new CUDA backend on this thread's current GPU: it owns its stream, cuBLASLt handle and
// scratch ("cuda.scratch" arena). Throws hw::Error when no GPU is visible (or no CUDA build).
std::unique_ptr<Backend<float>> make_cuda_backend(const CudaBackendOptions& opts = {});

// The process's default CUDA backend (default options; created on first use).
const Backend<float>& cuda_backend();

// Dense GEMM throughput of this GPU in TFLOP/s (2 n^3 flops per product), timed with CUDA
// events over repeated square n x n cuBLASLt products after warm-up: bf16 inputs and output
// with fp32 accumulation (the rate MFU is quoted against), and fp32 data on TF32 tensor
// cores. They allocate their own buffers (about 3 n^2 elements); call them outside training.
double measure_bf16_gemm_tflops(int n = 8192);
double measure_tf32_gemm_tflops(int n = 8192);

}  // namespace hw
