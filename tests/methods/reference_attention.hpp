#pragma once
// Naive per-head attention matrices and Eq. (1) variances, computed in the test from the
// model's QKV activations: the reference the SAF calibration is checked against.
//
// The reference forwards the calibration sequences in the same batches as the capture (sequence
// i in row i % batch of batch i / batch, padding rows repeating the batch's first sequence):
// an fp32 GEMM may round a row differently by its place in the batch and the batch's height
// (OpenBLAS's Haswell/Zen kernels do, in the last bits of q and k), so a reference forwarded
// one sequence at a time would see other q, k than a batched capture, and agree with it only to
// ~1e-6. With the same batches both see the same fp32 q and k, and everything after that is
// double arithmetic: the statistics must agree to double rounding (1e-10 here).
#include <cmath>
#include <vector>

#include "headwise/methods/saf/calibration.hpp"

namespace hw::test {

// Causal softmax attention of one head of one batch row, in double: logits q.k / sqrt(d) and
// probabilities, both T x T with zeros above the diagonal.
struct DenseHead {
  std::vector<double> logits, probs;
};

// Every head (flat l * H + h) of every calibration sequence 0..n-1: [sequence][head].
inline std::vector<std::vector<DenseHead>> reference_heads(Model<float>& m, const saf::CalibSource& src, int n,
                                                           int T, int batch = 1) {
  const auto& c = m.config();
  std::vector<std::vector<DenseHead>> out(static_cast<size_t>(n));
  std::vector<int32_t> x(size_t(batch) * size_t(T)), y(x.size());
  for (int b0 = 0; b0 < n; b0 += batch) {
    for (int r = 0; r < batch; ++r) {
      const int i = b0 + r < n ? b0 + r : b0;  // padding repeats the batch's first sequence
      src(i, x.data() + size_t(r) * size_t(T), y.data() + size_t(r) * size_t(T));
    }
    m.forward(x.data(), nullptr, batch, T);
    for (int r = 0; r < batch && b0 + r < n; ++r)
      for (int l = 0; l < c.n_layer; ++l) {
        const auto& lay = m.layouts()[size_t(l)];
        const int64_t W = lay.qkv_width();
        const float* qkv = m.layer_qkv(l) + int64_t(r) * T * W;
        for (int h = 0; h < c.n_head; ++h) {
          DenseHead d{std::vector<double>(size_t(T) * size_t(T), 0.0), std::vector<double>(size_t(T) * size_t(T), 0.0)};
          for (int i = 0; i < T; ++i) {
            double z = 0.0;
            for (int j = 0; j <= i; ++j) {
              double dot = 0.0;
              for (int e = 0; e < c.head_dim(); ++e)
                dot += double(qkv[i * W + lay.q_col(h) + e]) * double(qkv[j * W + lay.k_col(lay.kv_head_of(h)) + e]);
              d.logits[size_t(i * T + j)] = dot / std::sqrt(double(c.head_dim()));
              z += d.probs[size_t(i * T + j)] = std::exp(d.logits[size_t(i * T + j)]);
            }
            for (int j = 0; j <= i; ++j) d.probs[size_t(i * T + j)] /= z;
          }
          out[size_t(b0 + r)].push_back(std::move(d));
        }
      }
  }
  return out;
}

// Dense T x T attention of every head (flat l * H + h) for calibration sequence i, from a
// forward of that sequence alone; causal softmax of q.k / sqrt(d) in double.
inline std::vector<std::vector<double>> reference_attention(Model<float>& m, const saf::CalibSource& src, int64_t i,
                                                            int T) {
  const saf::CalibSource only_i = [&](int64_t, int32_t* x, int32_t* y) { src(i, x, y); };
  auto heads = reference_heads(m, only_i, 1, T);
  std::vector<std::vector<double>> out;
  for (auto& h : heads[0]) out.push_back(std::move(h.probs));
  return out;
}

// Eq. (1) per head over sequences 0..n-1 forwarded in batches of `batch`:
// sum_n ||A_n - mean||_F^2 / ((n - 1) T^2).
inline std::vector<double> reference_variances(Model<float>& m, const saf::CalibSource& src, int n, int T,
                                               int batch = 1) {
  const auto A = reference_heads(m, src, n, T, batch);
  const size_t heads = A[0].size(), cells = size_t(T) * size_t(T);
  std::vector<double> var(heads, 0.0);
  for (size_t h = 0; h < heads; ++h) {
    std::vector<double> mean(cells, 0.0);
    for (int i = 0; i < n; ++i)
      for (size_t c = 0; c < cells; ++c) mean[c] += A[size_t(i)][h].probs[c] / n;
    double sq = 0.0;
    for (int i = 0; i < n; ++i)
      for (size_t c = 0; c < cells; ++c) {
        const double d = A[size_t(i)][h].probs[c] - mean[c];
        sq += d * d;
      }
    var[h] = sq / (double(n - 1) * double(cells));
  }
  return var;
}

}  // namespace hw::test
