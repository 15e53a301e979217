// The block emulator's GemmLt (declared in shim/kernels/cuda/gemm_lt.hpp): stands in for
// cuBLASLt with plain loops, so the CUDA backend object runs on the CPU. Only the semantics of
// src/kernels/cuda/gemm_lt.cpp are reproduced, not cuBLASLt's algorithms:
// - D[M,N] = op(A) @ op(B) (+ bias[N]) (+ beta * D), row-major; the three dense layers' mapping
//   to such GEMMs is the real one (src/kernels/cuda/gemm_layers.cpp, compiled in too);
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

}  // namespace

GemmLt::GemmLt(cudaStream_t, void*, size_t, GemmPrecision precision) : precision_(precision) {}

size_t GemmLt::plan_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shapes_.size();
}

void GemmLt::run(const RowMajorGemm& g, GemmPrecision precision) const {
  if (!try_run(g, precision)) fail("cuBLASLt has no algorithm for the GEMM " + describe(g, precision));
}

bool GemmLt::try_run(const RowMajorGemm& g, GemmPrecision precision) const {
  check_shape(g, precision);
  if (!has_algorithm(g, precision)) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shapes_.emplace(g.trans_a, g.trans_b, g.M, g.N, g.K, g.lda, g.ldb, g.ldd, static_cast<int>(g.ab_type),
                    static_cast<int>(g.cd_type), static_cast<int>(precision), g.bias != nullptr,
                    g.gelu_pre != nullptr);
  }
  compute(g, precision);
  return true;
}

}  // namespace hw::cuda
