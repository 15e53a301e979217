#pragma once
// One head's causal attention output at chosen query positions, in double, for OAL's
// calibration and frozen-attention metrics: softmax (the target) and the grouped quadratic
// kernel of the `linear` head kind,
//   kappa(q, k) = eps + ||L^T s||^2,  s = [1, s_1..s_G],  s_g = sum_{r in g} q_r k_r / sqrt(d),
// evaluated directly over the keys j <= i (O(i d) per query: calibration reads 32 positions
// per sample, so the exact pairwise form is cheap). The model's linear head (src/attention)
// computes the same function with prefix states; tests/oal checks the two agree.
#include <cstdint>
#include <vector>

namespace hw::oal {

// Rows of one head in captured activations: row t of q is q + t * q_stride (d floats), etc.
struct HeadRows {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  int T = 0, d = 0;
};

struct GroupedKernel {
  int G = 1;
  std::vector<double> L;        // (G+1) x (G+1) row-major; only the lower triangle is used
  std::vector<int32_t> groups;  // [d], 1..G
  double eps = 1e-6;
};

// Softmax attention output at query i: out[d].
void softmax_output(const HeadRows& h, int i, double* out);
// Kernel output at query i: out[d]; den (optional) gets sum_{j<=i} kappa. A non-positive or
// non-finite denominator is an error.
void kernel_output(const HeadRows& h, const GroupedKernel& k, int i, double* out, double* den = nullptr);

// Loss = mean over the n positions and d channels of (y_hat - target)^2 (targets [n][d], the
// softmax outputs), and when dL is given its gradient with respect to L (lower triangle; the
// upper triangle's entries are 0), added into dL[(G+1)^2].
double kernel_loss(const HeadRows& h, const GroupedKernel& k, const int* positions, int n, const double* targets,
                   double* dL);

// L of the second-order Taylor kernel 1 + s + s^2/2 for G groups (s = s_1 + .. + s_G):
// column 0 = [1, 1/2, .., 1/2], column 1 = [0, 1/2, .., 1/2], the rest 0, so that
// L^T s = [1 + s/2, s/2, 0, ..] and ||L^T s||^2 = 1 + s + s^2/2.
std::vector<double> taylor_L(int G);
// A G = 1 kernel L1 = [[a, 0], [b, c]] embedded in G groups (every group shares its entries):
// column 0 = [a, b, .., b], column 1 = [0, c, .., c]; the kernel of any grouping is then the
// global one.
std::vector<double> embed_global(const std::vector<double>& L1, int G);

}  // namespace hw::oal
