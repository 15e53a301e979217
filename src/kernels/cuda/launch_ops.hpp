#pragma once
// Launchers of the CUDA element, row and reduction ops (everything but GEMMs and attention).
// Each takes the stream to enqueue on and exactly the arguments of the Backend<float> op of
// the same name, with that op's meaning (kernels/cpu.hpp): backward ops accumulate, null
// gradient pointers skip, and so on. Launchers only enqueue work: they return before it runs
// and throw hw::Error only for a bad launch or invalid sizes they can see on the host.
// Deterministic: no atomics; every reduction has a fixed order that depends only on the sizes.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/adamw_step.hpp"

namespace hw::cuda {

// Device memory for reductions that return a double, owned by the backend: per-block partial
// sums and the final value.
struct ReductionScratch {
  double* partials;  // at least kReductionPartials doubles
  double* result;    // one double
};
constexpr int64_t kReductionPartials = 1024;

void launch_fill_zero(cudaStream_t stream, float* x, int64_t n);
void launch_scale(cudaStream_t stream, float* x, float s, int64_t n);
void launch_accumulate(cudaStream_t stream, float* dst, const float* src, int64_t n);
void launch_residual_forward(cudaStream_t stream, float* out, const float* a, const float* b, int64_t n);

void launch_gelu_forward(cudaStream_t stream, float* out, const float* inp, int64_t n);
void launch_gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout, int64_t n);

void launch_layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int64_t N, int64_t C, double eps);
void launch_layernorm_backward(cudaStream_t stream, float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, const float* mean, const float* rstd,
                               int64_t N, int64_t C);
// resid_out = a + b, then ln_out = LayerNorm(resid_out) (Backend::residual_layernorm_forward's
// default, in one pass over the rows). resid_out may alias a or b.
void launch_residual_layernorm_forward(cudaStream_t stream, float* resid_out, float* ln_out, float* mean,
                                       float* rstd, const float* a, const float* b, const float* weight,
                                       const float* bias, int64_t N, int64_t C, double eps);

void launch_encoder_forward(cudaStream_t stream, float* out, const int32_t* tokens, const float* wte,
                            const float* wpe, int64_t B, int64_t T, int64_t C);
void launch_encoder_backward(cudaStream_t stream, float* dwte, float* dwpe, const float* dout,
                             const int32_t* tokens, int64_t B, int64_t T, int64_t C);

void launch_rope_forward(cudaStream_t stream, float* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0,
                         int64_t n_heads, int64_t hd, double theta);
void launch_rope_backward(cudaStream_t stream, float* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0,
                          int64_t n_heads, int64_t hd, double theta);

// Leaves the sum of the row losses (what the CPU op returns) in *scratch.result. Targets are
// not validated on the host (they live on the device): a target outside [0, V) other than the
// ignore value gives that row a NaN loss and NaN gradient, which the trainer's NaN check reports.
void launch_crossentropy_forward_backward(cudaStream_t stream, float* losses, float* dlogits, const float* logits,
                                          const int32_t* targets, int64_t N, int64_t V, double dloss,
                                          const ReductionScratch& scratch);
// Leaves sum_i x[i]^2 (accumulated in double) in *scratch.result.
void launch_sum_squares(cudaStream_t stream, const float* x, int64_t n, const ReductionScratch& scratch);

// dbias[o] += sum over n of dout[n, o] (double accumulation, fixed order): matmul_backward's dbias.
void launch_bias_column_sum(cudaStream_t stream, float* dbias, const float* dout, int64_t N, int64_t O);

// Mixed precision (ComputeOps<bf16, float>): the same ops with bf16 activations and weight
// copies, fp32 LayerNorm weights, statistics and parameter gradients. Arithmetic and every
// reduction stay in fp32 (or double, as above); each bf16 output is rounded once, to nearest
// even, when stored. hw::bf16 has __nv_bfloat16's bits, so kernels may reinterpret the pointers.
void launch_fill_zero(cudaStream_t stream, bf16* x, int64_t n);
void launch_accumulate(cudaStream_t stream, bf16* dst, const bf16* src, int64_t n);
void launch_residual_forward(cudaStream_t stream, bf16* out, const bf16* a, const bf16* b, int64_t n);
void launch_gelu_forward(cudaStream_t stream, bf16* out, const bf16* inp, int64_t n);
void launch_gelu_backward(cudaStream_t stream, bf16* dinp, const bf16* inp, const bf16* dout, int64_t n);
void launch_layernorm_forward(cudaStream_t stream, bf16* out, float* mean, float* rstd, const bf16* inp,
                              const float* weight, const float* bias, int64_t N, int64_t C, double eps);
void launch_layernorm_backward(cudaStream_t stream, bf16* dinp, float* dweight, float* dbias, const bf16* dout,
                               const bf16* inp, const float* weight, const float* mean, const float* rstd,
                               int64_t N, int64_t C);
void launch_residual_layernorm_forward(cudaStream_t stream, bf16* resid_out, bf16* ln_out, float* mean, float* rstd,
                                       const bf16* a, const bf16* b, const float* weight, const float* bias,
                                       int64_t N, int64_t C, double eps);
void launch_encoder_forward(cudaStream_t stream, bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe,
                            int64_t B, int64_t T, int64_t C);
void launch_encoder_backward(cudaStream_t stream, float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens,
                             int64_t B, int64_t T, int64_t C);
void launch_rope_forward(cudaStream_t stream, bf16* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0,
                         int64_t n_heads, int64_t hd, double theta);
void launch_rope_backward(cudaStream_t stream, bf16* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0,
                          int64_t n_heads, int64_t hd, double theta);
void launch_crossentropy_forward_backward(cudaStream_t stream, float* losses, bf16* dlogits, const bf16* logits,
                                          const int32_t* targets, int64_t N, int64_t V, double dloss,
                                          const ReductionScratch& scratch);
void launch_bias_column_sum(cudaStream_t stream, float* dbias, const bf16* dout, int64_t N, int64_t O);
// dst[i] = src[i] rounded to nearest even (ComputeOps::round_weights).
void launch_round_to_bf16(cudaStream_t stream, bf16* dst, const float* src, int64_t n);

void launch_adamw_update(cudaStream_t stream, float* p, const float* g, float* m, float* v, int64_t n,
                         const AdamWStep& s);
// The same update on fp32 master weights, then p_bf16[i] = master[i] rounded stochastically to
// bf16 with the random bits tiles::rounding_bits(seed, i) (tiles/bf16_stochastic.hpp): the
// rounding is reproducible from the seed. i counts from 0 in every call, so give every step and
// every tensor (or shard) its own seed, e.g. a hash of (step, tensor index).
void launch_adamw_update_bf16_sr(cudaStream_t stream, float* master, __nv_bfloat16* p_bf16, const float* g,
                                 float* m, float* v, int64_t n, const AdamWStep& s, uint32_t seed);

}  // namespace hw::cuda
