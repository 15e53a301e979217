// Dense layers on cuBLASLt.
//
// Row-major <-> column-major. The backend's matrices are row-major; cuBLASLt's are
// column-major. A row-major X[r,c] with row stride ld is, byte for byte, the column-major
// X^T[c,r] with leading dimension ld. So the row-major product D[M,N] = op(A) @ op(B) is
// computed as the column-major product D^T[N,M] = op(B)^T @ op(A)^T, with no copy:
//   cuBLASLt A := our B (transa = our trans_b, ld = ldb)
//   cuBLASLt B := our A (transb = our trans_a, ld = lda)
//   cuBLASLt m, n, k := N, M, K;  C = D := our D (ld = ldd)
// A row-major bias over D's columns (length N) is then a bias over the column-major D's rows
// (length m), which is what CUBLASLT_EPILOGUE_BIAS broadcasts, and the GELU aux matrix has
// D's layout (ld = ldd).
//
// Bias gradient: not here. cuBLASLt's BGRADA/BGRADB epilogues STORE the bias gradient (they
// do not accumulate with beta; cublasLt.h on CUBLASLT_EPILOGUE_BGRADB: "Stores Bias gradient"),
// while the Backend accumulates; the backend adds it with launch_bias_column_sum instead.
//
// Mixed precision: bf16 A and B with a bf16 D (forward, dinp) or an fp32 D (weight
// gradients), compute CUBLAS_COMPUTE_32F and fp32 alpha/beta, are cublasLtMatmul's documented
// "CUBLAS_COMPUTE_32F / CUDA_R_32F scale / CUDA_R_16BF A,B / CUDA_R_16BF or CUDA_R_32F C,D"
// combinations. With beta = 1 cuBLASLt reads C (= D) in its own type, adds in fp32 and rounds
// once when it stores D, which is the ComputeOps accumulation rule (split-K algorithms that
// would add partial sums in bf16 are filtered out when the plan is built). The bias and the GELU aux
// take D's type (cuBLASLt's default for both), so the bf16 forward's bias and pre are bf16.
//
// Determinism: the algorithm is chosen once per plan and reused, and every cuBLASLt
// reduction scheme is ordered (in-place split-K uses counters "to guarantee the
// sequentiality"), so equal inputs give equal bits.
#include "kernels/cuda/gemm_lt.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "headwise/core/error.hpp"
#include "kernels/cuda/cublaslt_objects.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace hw::cuda {

namespace {

// Algorithms asked of the heuristic per plan: the first that cuBLASLt reports as usable is taken
// (asking for one only would leave nothing to fall back on when that one is not).
constexpr int kHeuristicCandidates = 8;

// The largest power of two (at most 256, cuBLASLt's default requirement) dividing the
// address; a null pointer counts as fully aligned. The floor of 2 is a bf16 element's own
// alignment (an fp32 pointer is always at least 4-aligned, so its result is unchanged).
uint32_t alignment_of(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 2 && addr % a != 0) a /= 2;
  return a;
}

cublasLtEpilogue_t epilogue_of(const RowMajorGemm& g) {
  if (g.gelu_pre) return g.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  return g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

cublasComputeType_t compute_type_of(GemmPrecision p) {
  return p == GemmPrecision::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

const char* type_name(cudaDataType_t t) { return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_32F ? "fp32" : "other"; }

std::string describe(const GemmLt::PlanKey& k) {
  return "m=" + std::to_string(k.m) + " n=" + std::to_string(k.n) + " k=" + std::to_string(k.k) +
         " transa=" + (k.trans_a ? "T" : "N") + " transb=" + (k.trans_b ? "T" : "N") +
         " lda=" + std::to_string(k.lda) + " ldb=" + std::to_string(k.ldb) + " ldc=" + std::to_string(k.ldc) +
         " epilogue=" + std::to_string(k.epilogue) + (k.precision == GemmPrecision::Tf32 ? " tf32" : " fp32") +
         " ab=" + type_name(k.ab_type) + " cd=" + type_name(k.cd_type);
}

// The cuBLASLt (column-major) description of a row-major GEMM; see the top of this file.
GemmLt::PlanKey key_of(const RowMajorGemm& g, GemmPrecision precision) {
  GemmLt::PlanKey k;
  k.trans_a = g.trans_b;
  k.trans_b = g.trans_a;
  k.m = g.N;
  k.n = g.M;
  k.k = g.K;
  k.lda = g.ldb;
  k.ldb = g.lda;
  k.ldc = g.ldd;
  k.epilogue = static_cast<uint32_t>(epilogue_of(g));
  k.precision = precision;
  k.ab_type = g.ab_type;
  k.cd_type = g.cd_type;
  k.align_a = alignment_of(g.B);
  k.align_b = alignment_of(g.A);
  k.align_c = alignment_of(g.D);
  k.align_bias = alignment_of(g.bias);
  k.align_aux = alignment_of(g.gelu_pre);
  return k;
}

// A bad leading dimension is a bug in this file's callers; say which one.
void check_shape(const GemmLt::PlanKey& k) {
  const int64_t a_rows = k.trans_a ? k.k : k.m;
  const int64_t b_rows = k.trans_b ? k.n : k.k;
  check(k.m > 0 && k.n > 0 && k.k > 0 && k.lda >= std::max<int64_t>(a_rows, 1) &&
            k.ldb >= std::max<int64_t>(b_rows, 1) && k.ldc >= std::max<int64_t>(k.m, 1),
        "cuBLASLt GEMM with an invalid shape: " + describe(k));
}

}  // namespace

struct GemmLt::Plan {
  LtMatmulDesc desc;
  LtLayout a, b, c;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;
};

GemmLt::GemmLt(cudaStream_t stream, void* workspace, size_t workspace_bytes, GemmPrecision precision)
    : stream_(stream),
      workspace_(workspace),
      workspace_bytes_(workspace_bytes),
      precision_(precision),
      handle_(make_lt_handle()) {}

GemmLt::~GemmLt() = default;

size_t GemmLt::plan_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

const GemmLt::Plan& GemmLt::plan_for(const PlanKey& key, const RowMajorGemm& g) const {
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  check_shape(key);
  auto plan = std::make_unique<Plan>();
  plan->desc = make_matmul_desc(compute_type_of(key.precision));
  cublasLtMatmulDesc_t desc = plan->desc.get();
  set_desc_attr(desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
  set_desc_attr(desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N));
  set_desc_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, key.epilogue);
  // The heuristic reads these pointers' alignment (it does not dereference them).
  if (g.bias) set_desc_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.gelu_pre) {
    set_desc_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.gelu_pre);
    set_desc_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.ldc);
  }
  // Stored shapes (before transposition), column-major.
  plan->a = make_layout(key.ab_type, key.trans_a ? key.k : key.m, key.trans_a ? key.m : key.k, key.lda);
  plan->b = make_layout(key.ab_type, key.trans_b ? key.n : key.k, key.trans_b ? key.k : key.n, key.ldb);
  plan->c = make_layout(key.cd_type, key.m, key.n, key.ldc);

  // A bf16 D is rounded once (see the top of the file): the split-K schemes that add partial
  // sums in the output type (INPLACE: "using the output buffer (and output data type)", and
  // OUTPUT_TYPE) would round every partial to bf16. Unsplit algorithms (scheme NONE) and fp32
  // partials (COMPUTE_TYPE) stay allowed; fp32 outputs keep every scheme.
  const auto preference = [&](bool fp32_partials_only) {
    LtPreference pref = make_preference(workspace_bytes_);
    set_pref_attr(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
    set_pref_attr(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
    set_pref_attr(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
    set_pref_attr(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
    if (fp32_partials_only)
      set_pref_attr(pref.get(), CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                    static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
    return pref;
  };
  const auto candidates = [&](cublasLtMatmulPreference_t p) {
    std::vector<cublasLtMatmulHeuristicResult_t> found(kHeuristicCandidates);
    int n = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_.get(), desc, plan->a.get(), plan->b.get(),
                                                                  plan->c.get(), plan->c.get(), p,
                                                                  kHeuristicCandidates, found.data(), &n);
    // NOT_SUPPORTED means "no algorithm for this configuration": remembered, not retried.
    if (status != CUBLAS_STATUS_NOT_SUPPORTED)
      check_cublas(status, ("cublasLtMatmulAlgoGetHeuristic for " + describe(key)).c_str());
    found.resize(status == CUBLAS_STATUS_SUCCESS ? static_cast<size_t>(std::max(n, 0)) : 0);
    std::erase_if(found, [](const cublasLtMatmulHeuristicResult_t& r) { return r.state != CUBLAS_STATUS_SUCCESS; });
    return found;
  };
  std::vector<cublasLtMatmulHeuristicResult_t> found = candidates(preference(key.cd_type == CUDA_R_16BF).get());
  if (found.empty() && key.cd_type == CUDA_R_16BF) {
    // Nothing under the mask (hardware and library version decide; never seen yet): ask again
    // without it and keep the unsplit algorithms, which round once too. Only when there is none
    // of those either, take a split one and say that its partial sums may be rounded to bf16.
    const std::vector<cublasLtMatmulHeuristicResult_t> any = candidates(preference(false).get());
    const auto unsplit = std::find_if(any.begin(), any.end(), [](const cublasLtMatmulHeuristicResult_t& r) {
      int32_t splits = 1;
      size_t written = 0;
      return cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits),
                                                  &written) == CUBLAS_STATUS_SUCCESS &&
             splits <= 1;
    });
    if (unsplit != any.end()) {
      found.assign(1, *unsplit);
    } else if (!any.empty()) {
      spdlog::warn("cuBLASLt offers only split-K algorithms whose partial sums may be rounded to bf16 for the GEMM {}",
                   describe(key));
      found.assign(1, any.front());
    }
  }
  plan->has_algo = !found.empty();
  if (plan->has_algo) plan->algo = found.front().algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

bool GemmLt::try_run(const RowMajorGemm& g, GemmPrecision precision) const {
  const PlanKey key = key_of(g, precision);
  std::lock_guard<std::mutex> lock(mutex_);
  const Plan& plan = plan_for(key, g);
  if (!plan.has_algo) return false;
  // The descriptor is shared by every call of this shape; only the epilogue pointers change.
  if (g.bias) set_desc_attr(plan.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.gelu_pre) set_desc_attr(plan.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.gelu_pre);
  const float alpha = 1.0f;
  const float beta = g.beta;
  // cuBLASLt's A is our B and its B is our A (column-major view, see the top of the file).
  HW_CUBLAS_CHECK(cublasLtMatmul(handle_.get(), plan.desc.get(), &alpha, g.B, plan.a.get(), g.A, plan.b.get(), &beta,
                                 g.D, plan.c.get(), g.D, plan.c.get(), &plan.algo, workspace_, workspace_bytes_,
                                 stream_));
  return true;
}

void GemmLt::run(const RowMajorGemm& g, GemmPrecision precision) const {
  if (!try_run(g, precision)) fail("cuBLASLt has no algorithm for the GEMM " + describe(key_of(g, precision)));
}

}  // namespace hw::cuda
