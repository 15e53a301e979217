// Synthetic-input timing of the CUDA attention of one layer (attention_bench.hpp). Inputs are
// uniform in [-1, 1) from a hash of the index; static heads get uniform weights (alpha = rho
// = 0, log_z[i] = log(i + 1), exactly normalised), linear heads L = I over min(4, head_dim)
// groups, so every head computes what it would in training at the same cost. Activations are
// fp32 or bf16 (the mixed-precision overloads).
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/attention_storage.hpp"
#include "kernels/cuda/attention_bench.hpp"
#include "kernels/cuda/attention_launch.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"

namespace hw::cuda {
namespace {

template <class T>
__global__ void fill_uniform_kernel(T* x, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    tiles::store_from_float(x + i, static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

// Device buffer freed on scope exit (the bench throws on CUDA errors).
struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(size_t bytes) { HW_CUDA_CHECK(cudaMalloc(&ptr, bytes > 0 ? bytes : 4)); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* f() const { return static_cast<float*>(ptr); }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

template <class T>
void fill(T* x, int64_t n, uint32_t seed) {
  if (n == 0) return;
  launch_kernel(fill_uniform_kernel<T>, 1024, 256, 0, nullptr, x, n, seed);
  check_launch("fill_uniform_kernel");
}

template <class T>
void upload(void* dst, const std::vector<T>& v) {
  HW_CUDA_CHECK(cudaMemcpy(dst, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// The timing with activations of type A (float or bf16).
template <class A>
AttentionTiming time_with(const attn::LayerPlan& plan, int n_kv_head, int head_dim, int64_t B, int64_t T, int reps) {
  const int H = static_cast<int>(plan.size());
  const attn::LayerLayout layout = attn::LayerLayout::build(plan, H, n_kv_head, head_dim);
  const attn::AttnDims dims{B, T};
  const int64_t N = B * T;
  Buffer qkv(sizeof(A) * size_t(N * layout.qkv_width())), dqkv(sizeof(A) * size_t(N * layout.qkv_width()));
  Buffer out(sizeof(A) * size_t(N * layout.out_width())), dout(sizeof(A) * size_t(N * layout.out_width()));
  Buffer stats(sizeof(float) * size_t(B * H * T));
  Buffer ws(sizeof(float) * size_t(attention_workspace_floats(plan, layout, dims)));
  fill(qkv.as<A>(), N * layout.qkv_width(), 1u);
  fill(dout.as<A>(), N * layout.out_width(), 2u);

  const int G = head_dim < 4 ? head_dim : 4, G1 = G + 1;
  std::vector<float> zeros(static_cast<size_t>(T), 0.f), log_z(static_cast<size_t>(T));
  std::vector<float> eye(static_cast<size_t>(G1 * G1), 0.f), dl(static_cast<size_t>(G1 * G1), 0.f);
  for (int64_t i = 0; i < T; ++i) log_z[size_t(i)] = std::log(float(i + 1));
  for (int a = 0; a < G1; ++a) eye[size_t(a * G1 + a)] = 1.f;
  std::vector<int32_t> groups(static_cast<size_t>(head_dim));
  for (int r = 0; r < head_dim; ++r) groups[size_t(r)] = 1 + r % G;
  Buffer d_zeros(sizeof(float) * size_t(T)), d_logz(sizeof(float) * size_t(T)), d_eye(sizeof(float) * eye.size()),
      d_dl(sizeof(float) * dl.size()), d_groups(sizeof(int32_t) * groups.size());
  upload(d_zeros.ptr, zeros);
  upload(d_logz.ptr, log_z);
  upload(d_eye.ptr, eye);
  upload(d_dl.ptr, dl);
  upload(d_groups.ptr, groups);
  attn::LayerHeadParams<float> params;
  for (int h = 0; h < H; ++h) {
    params.statics.push_back({d_zeros.f(), d_zeros.f(), d_logz.f(), nullptr, nullptr});
    params.linears.push_back({d_eye.f(), d_dl.f(), static_cast<const int32_t*>(d_groups.ptr), G});
  }

  cudaStream_t stream = nullptr;
  auto forward = [&] {
    launch_attention_forward(stream, plan, layout, dims, params, qkv.as<A>(), out.as<A>(), stats.f(), ws.f());
  };
  auto backward = [&] {
    launch_attention_backward(stream, plan, layout, dims, params, qkv.as<A>(), out.as<A>(), stats.f(), dout.as<A>(),
                              dqkv.as<A>(), ws.f());
  };
  cudaEvent_t e0, e1, e2;
  HW_CUDA_CHECK(cudaEventCreate(&e0));
  HW_CUDA_CHECK(cudaEventCreate(&e1));
  HW_CUDA_CHECK(cudaEventCreate(&e2));
  forward();  // warm-up (also caches the schedules)
  backward();
  HW_CUDA_CHECK(cudaEventRecord(e0, stream));
  for (int r = 0; r < reps; ++r) forward();
  HW_CUDA_CHECK(cudaEventRecord(e1, stream));
  for (int r = 0; r < reps; ++r) backward();
  HW_CUDA_CHECK(cudaEventRecord(e2, stream));
  HW_CUDA_CHECK(cudaEventSynchronize(e2));
  float fwd = 0, bwd = 0;
  HW_CUDA_CHECK(cudaEventElapsedTime(&fwd, e0, e1));
  HW_CUDA_CHECK(cudaEventElapsedTime(&bwd, e1, e2));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
  const int n = reps > 0 ? reps : 1;
  return {double(fwd) / n, double(bwd) / n};
}

}  // namespace

AttentionTiming time_attention_ms(const attn::LayerPlan& plan, int n_kv_head, int head_dim, int64_t B, int64_t T,
                                  int reps, bool bf16) {
  return bf16 ? time_with<hw::bf16>(plan, n_kv_head, head_dim, B, T, reps)
              : time_with<float>(plan, n_kv_head, head_dim, B, T, reps);
}

}  // namespace hw::cuda
