// The CUDA backend's three dense layers (GemmLt::matmul_*, gemm_lt.hpp) as row-major GEMMs:
// which operand is transposed, the leading dimensions, beta, the data types, when the GELU
// epilogue is refused. Only run()/try_run() reach cuBLASLt (gemm_lt.cpp), so this file is
// the same code on the GPU and in the CPU block emulator, which stands in for those two.
#include <cstdint>
#include <string>

#include "headwise/core/error.hpp"
#include "kernels/cuda/gemm_lt.hpp"

namespace hw::cuda {

namespace {

// The three dense layers as row-major GEMMs, whatever the element types (set by the caller).
RowMajorGemm forward_gemm(void* out, const void* inp, const void* w, const void* bias, int64_t N, int64_t I, int64_t O,
                          bool w_out_in) {
  RowMajorGemm g;
  g.M = N, g.N = O, g.K = I;
  g.A = inp, g.lda = I;
  g.B = w, g.trans_b = w_out_in, g.ldb = w_out_in ? I : O;  // W [O,I] is used transposed
  g.D = out, g.ldd = O;
  g.bias = bias;
  return g;
}

// dinp[N,I] += dout[N,O] @ W^T  (W^T is W[I,O] transposed, or W[O,I] as stored)
RowMajorGemm backward_input_gemm(void* dinp, const void* dout, const void* w, int64_t N, int64_t I, int64_t O,
                                 bool w_out_in) {
  RowMajorGemm g;
  g.M = N, g.N = I, g.K = O;
  g.A = dout, g.lda = O;
  g.B = w, g.trans_b = !w_out_in, g.ldb = w_out_in ? I : O;
  g.D = dinp, g.ldd = I, g.beta = 1.0f;
  return g;
}

RowMajorGemm backward_weight_gemm(void* dw, const void* dout, const void* inp, int64_t N, int64_t I, int64_t O,
                                  bool w_out_in) {
  RowMajorGemm g;
  g.K = N, g.trans_a = true, g.beta = 1.0f;
  if (w_out_in) {  // dW[O,I] += dout^T @ inp
    g.M = O, g.N = I;
    g.A = dout, g.lda = O;
    g.B = inp, g.ldb = I;
    g.D = dw, g.ldd = I;
  } else {  // dW[I,O] += inp^T @ dout
    g.M = I, g.N = O;
    g.A = inp, g.lda = I;
    g.B = dout, g.ldb = O;
    g.D = dw, g.ldd = O;
  }
  return g;
}

RowMajorGemm with_types(RowMajorGemm g, cudaDataType_t ab, cudaDataType_t cd) {
  g.ab_type = ab;
  g.cd_type = cd;
  return g;
}

// An empty output is nothing to do; an empty inner dimension under a non-empty output is a
// caller's bug (cuBLASLt takes no k = 0), refused with the sizes.
bool skip_forward(int64_t N, int64_t I, int64_t O) {
  if (N == 0 || O == 0) return true;
  check(I > 0, "matmul_forward on CUDA: the input width I is 0 (N=" + std::to_string(N) + ", O=" + std::to_string(O) +
                   ")");
  return false;
}

// cublasLt.h: the GELU aux leading dimension "must be divisible by 8".
bool gelu_epilogue_fits(int64_t N, int64_t I, int64_t O) { return N > 0 && O > 0 && I > 0 && O % 8 == 0; }

}  // namespace

void GemmLt::matmul_forward(float* out, const float* inp, const float* w, const float* bias, int64_t N, int64_t I,
                            int64_t O, bool w_out_in) const {
  if (skip_forward(N, I, O)) return;
  run(forward_gemm(out, inp, w, bias, N, I, O, w_out_in), precision_);
}

bool GemmLt::matmul_gelu_forward(float* pre, float* out, const float* inp, const float* w, const float* bias,
                                 int64_t N, int64_t I, int64_t O, bool w_out_in) const {
  if (!gelu_epilogue_fits(N, I, O)) return false;
  RowMajorGemm g = forward_gemm(out, inp, w, bias, N, I, O, w_out_in);
  g.gelu_pre = pre;
  return try_run(g, precision_);
}

void GemmLt::matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, int64_t N,
                             int64_t I, int64_t O, bool w_out_in) const {
  if (N == 0 || O == 0 || I == 0) return;
  if (dinp) run(backward_input_gemm(dinp, dout, w, N, I, O, w_out_in), precision_);
  if (dw) run(backward_weight_gemm(dw, dout, inp, N, I, O, w_out_in), precision_);
}

void GemmLt::matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N, int64_t I,
                            int64_t O, bool w_out_in) const {
  if (skip_forward(N, I, O)) return;
  run(with_types(forward_gemm(out, inp, w, bias, N, I, O, w_out_in), CUDA_R_16BF, CUDA_R_16BF), GemmPrecision::Fp32);
}

bool GemmLt::matmul_gelu_forward(bf16* pre, bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int64_t N,
                                 int64_t I, int64_t O, bool w_out_in) const {
  if (!gelu_epilogue_fits(N, I, O)) return false;
  RowMajorGemm g = with_types(forward_gemm(out, inp, w, bias, N, I, O, w_out_in), CUDA_R_16BF, CUDA_R_16BF);
  g.gelu_pre = pre;
  return try_run(g, GemmPrecision::Fp32);
}

void GemmLt::matmul_backward(bf16* dinp, float* dw, const bf16* dout, const bf16* inp, const bf16* w, int64_t N,
                             int64_t I, int64_t O, bool w_out_in) const {
  if (N == 0 || O == 0 || I == 0) return;
  if (dinp)
    run(with_types(backward_input_gemm(dinp, dout, w, N, I, O, w_out_in), CUDA_R_16BF, CUDA_R_16BF),
        GemmPrecision::Fp32);
  if (dw)
    run(with_types(backward_weight_gemm(dw, dout, inp, N, I, O, w_out_in), CUDA_R_16BF, CUDA_R_32F),
        GemmPrecision::Fp32);
}

}  // namespace hw::cuda
