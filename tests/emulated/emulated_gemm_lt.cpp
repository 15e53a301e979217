// The block emulator's GemmLt (declared in shim/kernels/cuda/gemm_lt.hpp): stands in for
// cuBLASLt with plain loops, so the CUDA backend object runs on the CPU. Only the semantics of
// src/kernels/cuda/gemm_lt.cpp are reproduced, not cuBLASLt's algorithms:
// - D[M,N] = op(A) @ op(B) (+ bias[N]) (+ beta * D), row-major, with gemm_lt.cpp's mapping of
//   the three dense layers (forward overwrites; backward accumulates with beta = 1);
// - products accumulate in double (at least fp32's precision, in a fixed order); TF32 rounds
//   each input to 10 mantissa bits as cvt.rna.tf32.f32 does (tiles/mma_tf32.hpp);
// - bf16 inputs are read as bf16; each output is rounded once, through fp32, to its type (a
//   bf16 dinp is read, added in fp32 and rounded once; an fp32 dW accumulates in fp32);
// - the GELU_AUX epilogue stores the pre-activation and the tanh GELU (the CPU op's formula,
//   tiles/pointwise_math.hpp) of the unrounded fp32 result, and is refused (false, nothing
//   done) exactly when gemm_lt.cpp refuses it: O % 8 != 0 or an empty shape;
// - the shape and type checks of gemm_lt.cpp throw hw::Error as cuBLASLt's refusals do there.
#include <algorithm>
#include <string>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/kernels/tiles/mma_tf32.hpp"
#include "headwise/kernels/tiles/pointwise_math.hpp"
#include "kernels/cuda/gemm_lt.hpp"

namespace hw::cuda {

namespace {

float load(const void* p, cudaDataType_t t, int64_t i) {
  return t == CUDA_R_16BF ? to_float(static_cast<const bf16*>(p)[i]) : static_cast<const float*>(p)[i];
}

void store(void* p, cudaDataType_t t, int64_t i, float v) {
  if (t == CUDA_R_16BF)
    static_cast<bf16*>(p)[i] = to_bf16(v);
  else
    static_cast<float*>(p)[i] = v;
}

float as_tf32(float x) { return tiles::mma::tf32_bits_to_float(tiles::mma::tf32_round(x)); }

std::string describe(const RowMajorGemm& g, GemmPrecision p) {
  return "M=" + std::to_string(g.M) + " N=" + std::to_string(g.N) + " K=" + std::to_string(g.K) +
         " trans_a=" + (g.trans_a ? "T" : "N") + " trans_b=" + (g.trans_b ? "T" : "N") +
         " lda=" + std::to_string(g.lda) + " ldb=" + std::to_string(g.ldb) + " ldd=" + std::to_string(g.ldd) +
         (p == GemmPrecision::Tf32 ? " tf32" : " fp32") + " ab=" + (g.ab_type == CUDA_R_16BF ? "bf16" : "fp32") +
         " cd=" + (g.cd_type == CUDA_R_16BF ? "bf16" : "fp32");
}

// gemm_lt.cpp's check_shape, in row-major terms.
void check_shape(const RowMajorGemm& g, GemmPrecision p) {
  check(g.M > 0 && g.N > 0 && g.K > 0 && g.lda >= (g.trans_a ? g.M : g.K) && g.ldb >= (g.trans_b ? g.K : g.N) &&
            g.ldd >= g.N,
        "cuBLASLt GEMM with an invalid shape: " + describe(g, p));
}

// The type combinations gemm_lt.cpp documents as supported; anything else has no algorithm.
bool has_algorithm(const RowMajorGemm& g, GemmPrecision p) {
  if (g.ab_type == CUDA_R_32F) return g.cd_type == CUDA_R_32F;
  return p == GemmPrecision::Fp32 && g.ab_type == CUDA_R_16BF && (g.cd_type == CUDA_R_16BF || g.cd_type == CUDA_R_32F);
}

void compute(const RowMajorGemm& g, GemmPrecision p) {
  const bool tf32 = p == GemmPrecision::Tf32;
  const size_t K = static_cast<size_t>(g.K), N = static_cast<size_t>(g.N);
  // op(A) as [M,K] and op(B) as [K,N] in double, widened (and tf32-rounded) once. Each output
  // sums its K products in k order; the n loop is innermost so the compiler can vectorise it.
  std::vector<double> a(static_cast<size_t>(g.M) * K), b(K * N), acc(N);
  for (int64_t m = 0; m < g.M; m++)
    for (int64_t k = 0; k < g.K; k++) {
      const float x = load(g.A, g.ab_type, g.trans_a ? k * g.lda + m : m * g.lda + k);
      a[static_cast<size_t>(m) * K + static_cast<size_t>(k)] = tf32 ? as_tf32(x) : x;
    }
  for (int64_t k = 0; k < g.K; k++)
    for (int64_t n = 0; n < g.N; n++) {
      const float x = load(g.B, g.ab_type, g.trans_b ? n * g.ldb + k : k * g.ldb + n);
      b[static_cast<size_t>(k) * N + static_cast<size_t>(n)] = tf32 ? as_tf32(x) : x;
    }
  for (int64_t m = 0; m < g.M; m++) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t k = 0; k < K; k++) {
      const double x = a[static_cast<size_t>(m) * K + k];
      const double* br = b.data() + k * N;
      for (size_t n = 0; n < N; n++) acc[n] += x * br[n];
    }
    for (int64_t n = 0; n < g.N; n++) {
      double v = acc[static_cast<size_t>(n)];
      const int64_t d = m * g.ldd + n;
      if (g.beta != 0.0f) v += double(g.beta) * double(load(g.D, g.cd_type, d));  // beta = 0: D is not read
      if (g.bias) v += double(load(g.bias, g.cd_type, n));
      const float r = static_cast<float>(v);  // the fp32 result cuBLASLt holds before storing
      if (g.gelu_pre) {
        store(g.gelu_pre, g.cd_type, d, r);
        store(g.D, g.cd_type, d, tiles::gelu_value(r));
      } else {
        store(g.D, g.cd_type, d, r);
      }
    }
  }
}

// The three dense layers as row-major GEMMs: the same mapping as gemm_lt.cpp.
RowMajorGemm forward_gemm(void* out, const void* inp, const void* w, const void* bias, int64_t N, int64_t I, int64_t O,
                          bool w_out_in) {
  RowMajorGemm g;
  g.M = N, g.N = O, g.K = I;
  g.A = inp, g.lda = I;
  g.B = w, g.trans_b = w_out_in, g.ldb = w_out_in ? I : O;
  g.D = out, g.ldd = O;
  g.bias = bias;
  return g;
}

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

bool skip_forward(int64_t N, int64_t I, int64_t O) {
  if (N == 0 || O == 0) return true;
  check(I > 0, "matmul_forward on CUDA: the input width I is 0 (N=" + std::to_string(N) + ", O=" + std::to_string(O) +
                   ")");
  return false;
}

bool gelu_epilogue_fits(int64_t N, int64_t I, int64_t O) { return N > 0 && O > 0 && I > 0 && O % 8 == 0; }

}  // namespace

GemmLt::GemmLt(cudaStream_t, void*, size_t, GemmPrecision precision) : precision_(precision) {}

size_t GemmLt::plan_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shapes_.size();
}

void GemmLt::run(const RowMajorGemm& g, GemmPrecision precision) const {
  check_shape(g, precision);
  if (!has_algorithm(g, precision)) fail("cuBLASLt has no algorithm for the GEMM " + describe(g, precision));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shapes_.emplace(g.trans_a, g.trans_b, g.M, g.N, g.K, g.lda, g.ldb, g.ldd, static_cast<int>(g.ab_type),
                    static_cast<int>(g.cd_type), static_cast<int>(precision), g.bias != nullptr,
                    g.gelu_pre != nullptr);
  }
  compute(g, precision);
}

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
  run(g, precision_);
  return true;
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
  run(g, GemmPrecision::Fp32);
  return true;
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
