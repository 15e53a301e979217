#pragma once
// Naive per-head attention matrices and Eq. (1) variances, computed in the test from the
// model's QKV activations: the reference the SAF calibration is checked against.
#include <cmath>
#include <vector>

#include "headwise/methods/saf_calibration.hpp"

namespace hw::test {

// Dense T x T attention of every head (flat l * H + h) for calibration sequence i, from a
// forward of that sequence alone; causal softmax of q.k / sqrt(d) in double.
inline std::vector<std::vector<double>> reference_attention(Model<float>& m, const saf::CalibSource& src, int64_t i,
                                                            int T) {
  std::vector<int32_t> x(static_cast<size_t>(T)), y(static_cast<size_t>(T));
  src(i, x.data(), y.data());
  m.forward(x.data(), nullptr, 1, T);
  const auto& c = m.config();
  std::vector<std::vector<double>> out;
  for (int l = 0; l < c.n_layer; ++l) {
    const auto& lay = m.layouts()[size_t(l)];
    const int64_t W = lay.qkv_width();
    const float* qkv = m.layer_qkv(l);
    for (int h = 0; h < c.n_head; ++h) {
      std::vector<double> A(size_t(T) * size_t(T), 0.0);
      for (int r = 0; r < T; ++r) {
        std::vector<double> s(size_t(r + 1));
        double z = 0.0;
        for (int j = 0; j <= r; ++j) {
          double d = 0.0;
          for (int e = 0; e < c.head_dim(); ++e)
            d += double(qkv[r * W + lay.q_col(h) + e]) * double(qkv[j * W + lay.k_col(lay.kv_head_of(h)) + e]);
          s[size_t(j)] = std::exp(d / std::sqrt(double(c.head_dim())));
          z += s[size_t(j)];
        }
        for (int j = 0; j <= r; ++j) A[size_t(r) * size_t(T) + size_t(j)] = s[size_t(j)] / z;
      }
      out.push_back(std::move(A));
    }
  }
  return out;
}

// Eq. (1) per head over sequences 0..n-1: sum_n ||A_n - mean||_F^2 / ((n - 1) T^2).
inline std::vector<double> reference_variances(Model<float>& m, const saf::CalibSource& src, int n, int T) {
  std::vector<std::vector<std::vector<double>>> A;
  for (int i = 0; i < n; ++i) A.push_back(reference_attention(m, src, i, T));
  const size_t heads = A[0].size(), cells = size_t(T) * size_t(T);
  std::vector<double> var(heads, 0.0);
  for (size_t h = 0; h < heads; ++h) {
    std::vector<double> mean(cells, 0.0);
    for (int i = 0; i < n; ++i)
      for (size_t c = 0; c < cells; ++c) mean[c] += A[size_t(i)][h][c] / n;
    double sq = 0.0;
    for (int i = 0; i < n; ++i)
      for (size_t c = 0; c < cells; ++c) sq += (A[size_t(i)][h][c] - mean[c]) * (A[size_t(i)][h][c] - mean[c]);
    var[h] = sq / (double(n - 1) * double(cells));
  }
  return var;
}

}  // namespace hw::test
