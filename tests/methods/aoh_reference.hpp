#pragma once
// Independent references for the AoH tests: the singular values of M = W_K^T W_Q computed the
// long way (the full d_model x d_model product, then the eigenvalues of M^T M by classical
// largest-pivot Jacobi, written here and not shared with the code under test), weights read from
// a checkpoint's model.safetensors in the Hugging Face layout (c_attn columns q | k | v, head h's
// Q at h * d, KV head g's K at (n_head + g) * d), and the KV-granularity split done by hand.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "headwise/io/safetensors.hpp"
#include "headwise/model/model_config.hpp"

namespace hw::test::aoh_ref {

// Eigenvalues (descending) of a symmetric n x n matrix: classical Jacobi, largest pivot first.
inline std::vector<double> eigenvalues_classical_jacobi(std::vector<double> a, int n) {
  auto A = [&](int i, int j) -> double& { return a[size_t(i) * size_t(n) + size_t(j)]; };
  for (int iter = 0; iter < 200 * n * n; ++iter) {
    int p = 0, q = 1;
    double big = 0.0, norm = 0.0;
    for (int i = 0; i < n; ++i) {
      norm += A(i, i) * A(i, i);
      for (int j = i + 1; j < n; ++j) {
        norm += 2 * A(i, j) * A(i, j);
        if (std::abs(A(i, j)) > big) big = std::abs(A(i, j)), p = i, q = j;
      }
    }
    if (n < 2 || big <= 1e-15 * std::sqrt(norm)) break;
    const double theta = 0.5 * std::atan2(2 * A(p, q), A(q, q) - A(p, p));
    const double c = std::cos(theta), s = std::sin(theta);
    // A <- J^T A J with J the rotation in the (p, q) plane that zeroes A(p, q).
    for (int k = 0; k < n; ++k) {
      const double kp = A(k, p), kq = A(k, q);
      A(k, p) = c * kp - s * kq;
      A(k, q) = s * kp + c * kq;
    }
    for (int k = 0; k < n; ++k) {
      const double pk = A(p, k), qk = A(q, k);
      A(p, k) = c * pk - s * qk;
      A(q, k) = s * pk + c * qk;
    }
  }
  std::vector<double> ev(size_t(n), 0.0);
  for (int i = 0; i < n; ++i) ev[size_t(i)] = A(i, i);
  std::sort(ev.begin(), ev.end(), std::greater<>());
  return ev;
}

// The d_head largest singular values of M = W_K^T W_Q (d_model x d_model, formed in full) from
// the PyTorch-layout projections wq, wk (d_head x d_model, row-major).
inline std::vector<double> full_qk_singular_values(const std::vector<double>& wq, const std::vector<double>& wk,
                                                   int d_model, int d_head) {
  const size_t D = size_t(d_model);
  std::vector<double> m(D * D, 0.0), mtm(D * D, 0.0);
  for (size_t a = 0; a < D; ++a)
    for (size_t b = 0; b < D; ++b)
      for (size_t c = 0; c < size_t(d_head); ++c) m[a * D + b] += wk[c * D + a] * wq[c * D + b];
  for (size_t i = 0; i < D; ++i)
    for (size_t j = 0; j < D; ++j)
      for (size_t k = 0; k < D; ++k) mtm[i * D + j] += m[k * D + i] * m[k * D + j];
  std::vector<double> ev = eigenvalues_classical_jacobi(mtm, d_model);
  std::vector<double> sv;
  for (int i = 0; i < d_head; ++i) sv.push_back(std::sqrt(std::max(0.0, ev[size_t(i)])));
  return sv;
}

inline double entropy_rank(const std::vector<double>& sigma) {
  const double sum = std::accumulate(sigma.begin(), sigma.end(), 0.0);
  double h = 0.0;
  for (double s : sigma)
    if (s > 0) h -= (s / sum) * std::log(s / sum);
  return std::exp(h);
}

// Head h's Q projection and KV head g's K projection of layer l, PyTorch layout (d x C), from
// the stored c_attn weight of a checkpoint.
struct StoredQk {
  std::vector<float> w;  // [C, (H + 2 KV) d]
  int C = 0, H = 0, KV = 0, d = 0;
  std::vector<double> q(int h) const { return cols(h * d); }
  std::vector<double> k(int g) const { return cols((H + g) * d); }
  std::vector<double> cols(int start) const {
    const int width = (H + 2 * KV) * d;
    std::vector<double> out(size_t(d) * size_t(C));
    for (int c = 0; c < d; ++c)
      for (int i = 0; i < C; ++i) out[size_t(c) * size_t(C) + size_t(i)] = w[size_t(i) * size_t(width) + size_t(start + c)];
    return out;
  }
};

inline StoredQk read_stored_qk(const std::string& ckpt, const ModelConfig& mc, int layer) {
  io::SafetensorsReader st(ckpt + "/model.safetensors");
  StoredQk s;
  s.C = mc.n_embd;
  s.H = mc.n_head;
  s.KV = mc.kv_heads();
  s.d = mc.head_dim();
  const std::vector<int64_t> shape = {s.C, int64_t(s.H + 2 * s.KV) * s.d};
  s.w.resize(size_t(shape[0] * shape[1]));
  st.read("h." + std::to_string(layer) + ".attn.c_attn.weight", DType::F32, shape, s.w.data());
  return s;
}

// Reference scores of a checkpoint: per layer, per KV head, the min entropy rank over its
// softmax-family query heads (NaN when none is).
inline std::vector<std::vector<double>> kv_reference_scores(const std::string& ckpt, const ModelConfig& mc) {
  std::vector<std::vector<double>> out;
  const int group = mc.n_head / mc.kv_heads();
  for (int l = 0; l < mc.n_layer; ++l) {
    const StoredQk s = read_stored_qk(ckpt, mc, l);
    std::vector<double> row(size_t(mc.kv_heads()), std::nan(""));
    for (int h = 0; h < mc.n_head; ++h) {
      if (!mc.head_plan.layers[size_t(l)][size_t(h)].softmax_family()) continue;
      const int g = h / group;
      const double r = entropy_rank(full_qk_singular_values(s.q(h), s.k(g), s.C, s.d));
      row[size_t(g)] = std::isnan(row[size_t(g)]) ? r : std::min(row[size_t(g)], r);
    }
    out.push_back(row);
  }
  return out;
}

// The streaming (layer, kv head) pairs: the top `count` scores among `candidates` (no ties in
// the random-weight cases these tests use).
inline std::set<std::pair<int, int>> top_kv(const std::vector<std::vector<double>>& scores,
                                            std::vector<std::pair<int, int>> candidates, size_t count) {
  std::sort(candidates.begin(), candidates.end(), [&](auto a, auto b) {
    return scores[size_t(a.first)][size_t(a.second)] > scores[size_t(b.first)][size_t(b.second)];
  });
  candidates.resize(std::min(count, candidates.size()));
  return {candidates.begin(), candidates.end()};
}

// Streaming KV heads of the reference scores at `sparsity`, globally or per layer.
inline std::set<std::pair<int, int>> reference_streaming(const std::vector<std::vector<double>>& scores, double sparsity,
                                                         bool per_layer) {
  std::set<std::pair<int, int>> out;
  std::vector<std::pair<int, int>> all;
  for (int l = 0; l < int(scores.size()); ++l) {
    std::vector<std::pair<int, int>> layer;
    for (int g = 0; g < int(scores[size_t(l)].size()); ++g)
      if (!std::isnan(scores[size_t(l)][size_t(g)])) layer.push_back({l, g}), all.push_back({l, g});
    if (per_layer) {
      auto t = top_kv(scores, layer, size_t(std::llround(sparsity * double(layer.size()))));
      out.insert(t.begin(), t.end());
    }
  }
  if (!per_layer) out = top_kv(scores, all, size_t(std::llround(sparsity * double(all.size()))));
  return out;
}

}  // namespace hw::test::aoh_ref
