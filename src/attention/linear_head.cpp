// Linear heads (OAL): weights kappa(q_i, k_j) / sum_{j'<=i} kappa(q_i, k_j') with the grouped
// quadratic kernel kappa(q, k) = eps + ||L^T s||^2, s = [1, s_1..s_G], s_g = sum_{r in g} q_r k_r / sqrt(D).
// The exact chunked evaluation (prefix state, GEMMs, O(T) time, memory independent of T) is the
// shared quadratic-kernel engine (quad_state.cpp); this file only names the kernel.
#include "attention/quad_state.hpp"
#include "attention/kind_table.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace hw::attn::detail {

template <class F>
QuadKernel<F> linear_kernel(const LinearHeadParams<F>& p, double eps, int D) {
  QuadKernel<F> k;
  k.L = p.L;
  k.groups = p.groups;
  k.n_groups = p.n_groups;
  k.eps = eps;
  k.scale = 1.0 / std::sqrt(double(D));
  return k;
}

template QuadKernel<float> linear_kernel(const LinearHeadParams<float>&, double, int);
template QuadKernel<double> linear_kernel(const LinearHeadParams<double>&, double, int);

// Cached decoding keeps the exclusive prefix state S = sum_j X(k_j) (x) [v_j, 1] ([Fw][D + 1])
// of a KV head and reads it with each linear query head's psi = w (.) X(q): one row at a time,
// the same kernel as the chunked evaluation.
void linear_state_add(float* St, const float* k, const float* v, int D, float* X) {
  quad_features(X, k, D);
  const int64_t Fw = 1 + D + int64_t(D) * (D + 1) / 2;
  const int D1 = D + 1;
  for (int64_t f = 0; f < Fw; ++f) {
    const float w = X[f];
    if (w == 0.f) continue;
    float* Sf = St + f * D1;
    for (int d = 0; d < D; ++d) Sf[d] += w * v[d];
    Sf[D] += w;
  }
}

bool linear_state_read(const float* St, const float* w, const float* q, int D, float* psi, float* acc, float* out) {
  quad_features(psi, q, D);
  const int64_t Fw = 1 + D + int64_t(D) * (D + 1) / 2;
  const int D1 = D + 1;
  std::fill(acc, acc + D1, 0.f);
  for (int64_t f = 0; f < Fw; ++f) {
    const float p = w[f] * psi[f];
    if (p == 0.f) continue;
    const float* Sf = St + f * D1;
    for (int d = 0; d < D1; ++d) acc[d] += p * Sf[d];
  }
  const float den = acc[D];
  if (!(den > 0.f) || !std::isfinite(den)) return false;
  const float inv = 1.f / den;
  for (int d = 0; d < D; ++d) out[d] = acc[d] * inv;
  return true;
}

int64_t linear_scratch(int D, int n_groups) { return quad_scratch(D, n_groups); }

template <class F>
int64_t linear_forward(const LinearHeadParams<F>& p, double eps, const HeadFwd<F>& a) {
  return quad_forward(linear_kernel(p, eps, a.D), a);
}

template <class F>
void linear_backward(const LinearHeadParams<F>& p, double eps, const HeadBwd<F>& a, F* A) {
  quad_backward(linear_kernel(p, eps, a.D), a, A);
}

template int64_t linear_forward<float>(const LinearHeadParams<float>&, double, const HeadFwd<float>&);
template int64_t linear_forward<double>(const LinearHeadParams<double>&, double, const HeadFwd<double>&);
template void linear_backward<float>(const LinearHeadParams<float>&, double, const HeadBwd<float>&, float*);
template void linear_backward<double>(const LinearHeadParams<double>&, double, const HeadBwd<double>&, double*);

// ---- the CPU table's entry (kind_table.hpp) ----
namespace {

class LinearKind final : public CpuKindOf<LinearKind> {
 public:
  HeadKind kind() const override { return HeadKind::Linear; }
  // n_groups <= head_dim is enforced, so size for G = D
  int64_t scratch(const HeadSpec&, int D) const override { return linear_scratch(D, D); }
  // the (G+1)x(G+1) partial sum A of dkappa * s s^T
  int64_t partials(const HeadSpec&, int64_t, int D) const override { return int64_t(D + 1) * (D + 1); }
  template <class F>
  void check_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, int D) const {
    hw::check(params.linears.size() > static_cast<size_t>(h), head_name(h) + " is linear but has no parameters");
    const auto& p = params.linears[static_cast<size_t>(h)];
    hw::check(p.L && p.groups, head_name(h) + " is linear but L or groups is null");
    hw::check(p.n_groups >= 1 && p.n_groups <= D,
              head_name(h) + " has n_groups " + std::to_string(p.n_groups) + " (must be 1..head_dim)");
    for (int r = 0; r < D; ++r)
      hw::check(p.groups[r] >= 1 && p.groups[r] <= p.n_groups,
                head_name(h) + ": groups[" + std::to_string(r) + "] = " + std::to_string(p.groups[r]) +
                    " outside 1.." + std::to_string(p.n_groups));
    hw::check(params.linear_eps > 0 && std::isfinite(params.linear_eps),
              "attention: linear_eps must be positive and finite");
  }
  template <class F>
  int64_t forward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadFwd<F>& a) const {
    return linear_forward(params.linears[static_cast<size_t>(h)], params.linear_eps, a);
  }
  template <class F>
  void backward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadBwd<F>& a, F* partial) const {
    linear_backward(params.linears[static_cast<size_t>(h)], params.linear_eps, a, partial);
  }
  // A summed over b into the first slice, then kappa = eps + s^T L L^T s gives dL = 2 A L on
  // the lower triangle (the upper is not a parameter).
  template <class F>
  void reduce_as(const LayerHeadParams<F>& params, int h, F* first, int64_t stride, int64_t B, int64_t, int) const {
    const auto& p = params.linears[static_cast<size_t>(h)];
    if (!p.dL || B <= 0) return;
    const int G1 = p.n_groups + 1;
    F* A = first;
    for (int64_t b = 1; b < B; ++b)
      for (int e = 0; e < G1 * G1; ++e) A[e] += first[b * stride + e];
    for (int r = 0; r < G1; ++r)
      for (int c = 0; c <= r; ++c) {
        F s = F(0);
        for (int e = c; e < G1; ++e) s += A[r * G1 + e] * p.L[e * G1 + c];
        p.dL[r * G1 + c] += F(2) * s;
      }
  }
  double flops(const HeadSpec&, int64_t T, double D) const override { return quad_flops(T, D); }
  std::vector<BenchCase> bench_rows(int64_t) const override { return {{"linear", {HeadKind::Linear, 0, 0}, 3}}; }
  std::vector<BenchCase> curve_rows() const override {
    return {{"linear G=1", {HeadKind::Linear, 0, 0}, 1}, {"linear G=4", {HeadKind::Linear, 0, 0}, 4}};
  }
  // G groups round-robin over the dimensions, L = identity + small noise
  void bench_params(const BenchCase& c, int D, int64_t, Rng& rng, BenchHead& out) const override {
    const int G = std::min(c.groups, D), G1 = G + 1;
    out.ints.assign(1, std::vector<int32_t>(static_cast<size_t>(D)));
    auto& groups = out.ints[0];
    for (int r = 0; r < D; ++r) groups[size_t(r)] = 1 + r % G;
    out.floats.assign(2, std::vector<float>(static_cast<size_t>(G1 * G1), 0.f));
    auto& L = out.floats[0];
    for (int r = 0; r < G1; ++r)
      for (int c2 = 0; c2 <= r; ++c2) L[size_t(r * G1 + c2)] = (r == c2 ? 1.0f : 0.0f) + float(0.1 * rng.normal());
    out.params.linears.push_back({L.data(), out.floats[1].data(), groups.data(), G});
  }
};

}  // namespace

const CpuKind& linear_cpu_kind() {
  static const LinearKind k{};
  return k;
}

}  // namespace hw::attn::detail
