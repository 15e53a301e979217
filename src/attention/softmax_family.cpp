// Softmax, window and sink+window heads: FlashAttention-2 style tiling on the CPU. Query
// tiles walk only the key tiles that intersect their key set (so window heads cost
// O(T W) and sink heads O(T (S + W))), with an online softmax; the forward saves each row's
// log-sum-exp and the backward rebuilds the probabilities from it instead of storing P.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/head_kernels.hpp"
#include "attention/kind_table.hpp"
#include "attention/tile_ops.hpp"
#include "headwise/kernels/tiles/attention_schedule.hpp"

namespace hw::attn::detail {

KeySet key_set(const HeadSpec& spec, int64_t T) {
  return tiles::key_rule_of({kind_byte(spec.kind), spec.sink, spec.window}, T);
}

int64_t softmax_scratch(int D) { return 2 * int64_t(kTile) * kTile + int64_t(D) * kTile + 3 * kTile; }

template <class F>
void softmax_family_forward(const KeySet& ks, const HeadFwd<F>& a) {
  const F scale = F(1) / std::sqrt(F(a.D));
  const F neg_inf = -std::numeric_limits<F>::infinity();
  F* S = a.ws;
  F* bt = S + kTile * kTile;
  F* mrow = bt + int64_t(a.D) * kTile;
  F* lrow = mrow + kTile;
  for (int64_t i0 = 0; i0 < a.T; i0 += kTile) {
    const int m = static_cast<int>(std::min<int64_t>(kTile, a.T - i0));
    F* out0 = a.out + i0 * a.ldo;
    for (int r = 0; r < m; ++r) {
      mrow[r] = neg_inf;
      lrow[r] = F(0);
      std::fill(out0 + r * a.ldo, out0 + r * a.ldo + a.D, F(0));
    }
    int64_t iv[2][2];
    const int n_iv = tiles::key_intervals(ks, i0, i0 + m, iv);
    for (int t = 0; t < n_iv; ++t) {
      for (int64_t j0 = iv[t][0]; j0 < iv[t][1]; j0 += kTile) {
        const int n = static_cast<int>(std::min<int64_t>(kTile, iv[t][1] - j0));
        tile_abt(S, a.q + i0 * a.ldx, a.ldx, a.k + j0 * a.ldx, a.ldx, m, n, a.D, scale, bt);
        for (int r = 0; r < m; ++r) {
          const int64_t i = i0 + r;
          F* row = S + int64_t(r) * kTile;
          F mx = neg_inf;
          for (int c = 0; c < n; ++c) {
            if (tiles::key_visible(ks, i, j0 + c)) mx = std::max(mx, row[c]);
            else row[c] = neg_inf;
          }
          if (mx == neg_inf) {  // no visible key of this row in this tile
            std::fill(row, row + n, F(0));
            continue;
          }
          const F m_new = std::max(mrow[r], mx);
          const F corr = exp_or_zero(mrow[r] - m_new);
#pragma omp simd
          for (int c = 0; c < n; ++c) row[c] = exp_or_zero(row[c] - m_new);  // masked: -inf -> 0
          F sum = F(0);
          for (int c = 0; c < n; ++c) sum += row[c];  // in order: the same bits for any vector width
          if (corr != F(1)) {
            F* o = out0 + r * a.ldo;
            for (int d = 0; d < a.D; ++d) o[d] *= corr;
          }
          lrow[r] = lrow[r] * corr + sum;
          mrow[r] = m_new;
        }
        tile_ab_acc(out0, a.ldo, S, a.v + j0 * a.ldx, a.ldx, m, n, a.D);
      }
    }
    for (int r = 0; r < m; ++r) {
      F* o = out0 + r * a.ldo;
      const F inv = F(1) / lrow[r];
      for (int d = 0; d < a.D; ++d) o[d] *= inv;
      a.stats[i0 + r] = mrow[r] + std::log(lrow[r]);
    }
  }
}

template <class F>
void softmax_family_backward(const KeySet& ks, const HeadBwd<F>& a) {
  const F scale = F(1) / std::sqrt(F(a.D));
  F* P = a.ws;
  F* dS = P + kTile * kTile;
  F* bt = dS + kTile * kTile;
  F* delta = bt + int64_t(a.D) * kTile;
  for (int64_t i0 = 0; i0 < a.T; i0 += kTile) {
    const int m = static_cast<int>(std::min<int64_t>(kTile, a.T - i0));
    // delta_i = sum_j P_ij dP_ij = dO_i . O_i (FlashAttention-2's D term)
    for (int r = 0; r < m; ++r) {
      const F* o = a.out + (i0 + r) * a.ldo;
      const F* g = a.dout + (i0 + r) * a.ldo;
      F s = F(0);
      for (int d = 0; d < a.D; ++d) s += o[d] * g[d];
      delta[r] = s;
    }
    int64_t iv[2][2];
    const int n_iv = tiles::key_intervals(ks, i0, i0 + m, iv);
    for (int t = 0; t < n_iv; ++t) {
      for (int64_t j0 = iv[t][0]; j0 < iv[t][1]; j0 += kTile) {
        const int n = static_cast<int>(std::min<int64_t>(kTile, iv[t][1] - j0));
        tile_abt(P, a.q + i0 * a.ldx, a.ldx, a.k + j0 * a.ldx, a.ldx, m, n, a.D, scale, bt);
        tile_abt(dS, a.dout + i0 * a.ldo, a.ldo, a.v + j0 * a.ldx, a.ldx, m, n, a.D, F(1), bt);
        for (int r = 0; r < m; ++r) {
          const int64_t i = i0 + r;
          const F lse = a.stats[i];
          F* prow = P + int64_t(r) * kTile;
          F* drow = dS + int64_t(r) * kTile;
#pragma omp simd
          for (int c = 0; c < n; ++c) {
            const F p = tiles::key_visible(ks, i, j0 + c) ? exp_or_zero(prow[c] - lse) : F(0);
            prow[c] = p;
            drow[c] = p * (drow[c] - delta[r]) * scale;  // dS, already scaled for dQ/dK
          }
        }
        tile_ab_acc(a.dq + i0 * a.ldx, a.ldx, dS, a.k + j0 * a.ldx, a.ldx, m, n, a.D);
        tile_atb_acc(a.dk + j0 * a.ldx, a.ldx, dS, a.q + i0 * a.ldx, a.ldx, m, n, a.D);
        tile_atb_acc(a.dv + j0 * a.ldx, a.ldx, P, a.dout + i0 * a.ldo, a.ldo, m, n, a.D);
      }
    }
  }
}

template void softmax_family_forward<float>(const KeySet&, const HeadFwd<float>&);
template void softmax_family_forward<double>(const KeySet&, const HeadFwd<double>&);
template void softmax_family_backward<float>(const KeySet&, const HeadBwd<float>&);
template void softmax_family_backward<double>(const KeySet&, const HeadBwd<double>&);

// ---- the CPU table's entries (kind_table.hpp): softmax, window and sink_window ----
namespace {

// Visible (i, j) pairs of a head over T rows: row i sees min(i+1, W) window keys plus the
// sink keys j < S left of its window, max(0, min(S, i+1-W)).
double visible_pairs(int64_t T, int64_t S, int64_t W) {
  const double n = double(std::min(T, W));
  double pairs = n * (n + 1) / 2 + double(T - std::min(T, W)) * double(W);
  const int64_t nu = std::max<int64_t>(0, T - W);  // rows with keys left of the window
  if (S > 0 && nu > 0) {
    if (S >= nu) pairs += double(nu) * double(nu + 1) / 2;
    else pairs += double(S) * double(S + 1) / 2 + double(nu - S) * double(S);
  }
  return pairs;
}

// bench-attention's window: W = min(256, max(1, T/4)) (sinks 4)
int32_t bench_window(int64_t T) { return static_cast<int32_t>(std::min<int64_t>(256, std::max<int64_t>(1, T / 4))); }

class SoftmaxFamilyKind final : public CpuKindOf<SoftmaxFamilyKind> {
 public:
  explicit SoftmaxFamilyKind(HeadKind k) : kind_(k) {}
  HeadKind kind() const override { return kind_; }
  int64_t scratch(const HeadSpec&, int D) const override { return softmax_scratch(D); }
  template <class F>
  int64_t forward_as(const LayerHeadParams<F>&, int, const HeadSpec& spec, const HeadFwd<F>& a) const {
    softmax_family_forward(key_set(spec, a.T), a);
    return -1;
  }
  template <class F>
  void backward_as(const LayerHeadParams<F>&, int, const HeadSpec& spec, const HeadBwd<F>& a, F*) const {
    softmax_family_backward(key_set(spec, a.T), a);
  }
  // QK^T and PV over the key set only: 4 D per visible (i, j) pair.
  double flops(const HeadSpec& s, int64_t T, double D) const override {
    switch (kind_) {
      case HeadKind::Window: return 4 * D * visible_pairs(T, 0, s.window);
      case HeadKind::SinkWindow: return 4 * D * visible_pairs(T, s.sink, s.window);
      default: return 4 * D * (double(T) * double(T + 1) / 2);
    }
  }
  // W_h = T for softmax, W for window, min(S + W, T) for sink_window.
  int64_t score_keys(const HeadSpec& s, int64_t T) const override {
    switch (kind_) {
      case HeadKind::Window: return s.window;
      case HeadKind::SinkWindow: return std::min<int64_t>(int64_t(s.sink) + s.window, T);
      default: return T;
    }
  }
  std::vector<BenchCase> bench_rows(int64_t T) const override {
    HeadSpec spec{kind_, bench_window(T), kind_ == HeadKind::SinkWindow ? 4 : 0};
    if (kind_ == HeadKind::Softmax) spec = HeadSpec{};
    return {{spec.str(), spec}};
  }
  std::vector<BenchCase> curve_rows() const override {
    if (kind_ != HeadKind::Softmax) return {};
    return {{"softmax", HeadSpec{}}};
  }

 private:
  HeadKind kind_;
};

}  // namespace

const CpuKind& softmax_cpu_kind() {
  static const SoftmaxFamilyKind k{HeadKind::Softmax};
  return k;
}
const CpuKind& window_cpu_kind() {
  static const SoftmaxFamilyKind k{HeadKind::Window};
  return k;
}
const CpuKind& sink_window_cpu_kind() {
  static const SoftmaxFamilyKind k{HeadKind::SinkWindow};
  return k;
}

}  // namespace hw::attn::detail
