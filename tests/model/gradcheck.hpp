#pragma once
// Whole-model gradients against central finite differences in double precision (every
// parameter tensor, a few random entries each), shared by the gradient tests.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"
#include "model/model_test_util.hpp"
#include "support/central_difference.hpp"

namespace hw::test {

// sparse: all but 3 of the 14 targets ignored (the first row, one inside, the last), and
// classifier chunks of 2 rows, so the packed rows span two chunks.
inline void check_model_gradients(const ModelConfig& cfg, bool sparse = false) {
  HeadExtras extras;
  // Non-trivial static pattern and linear kernel values.
  Rng rng(7);
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head; ++h) {
      const auto kind = cfg.head_plan.layers.empty() ? attn::HeadKind::Softmax
                                                     : cfg.head_plan.layers[size_t(l)][size_t(h)].kind;
      if (kind == attn::HeadKind::Static) {
        StaticHeadValues v = default_static_values(cfg.block_size);
        for (auto& a : v.alpha) a = float(0.5 * rng.normal());
        for (auto& r : v.rho) r = float(0.5 * rng.normal());
        extras.statics[{l, h}] = v;
      }
    }
  Model<double> m(cfg, cpu_backend<double>(), extras);
  m.init_weights(3);
  // Larger weights than GPT-2's init so every path carries signal.
  for (const auto& t : m.params().tensors())
    for (int64_t i = 0; i < t->numel(); ++i) t->as<double>()[i] += 0.2 * rng.normal();
  const int64_t B = 2, T = 7;
  std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
  for (auto& v : x) v = int32_t(rng.below(11));
  for (auto& v : y) v = int32_t(rng.below(11));
  if (sparse) {
    for (size_t i = 0; i < y.size(); ++i)
      if (i != 0 && i != 9 && i != y.size() - 1) y[i] = -1;
    m.set_classifier_chunk_rows(2);
    // The loss against cross-entropy computed here from the full logits (forward without
    // targets), so the finite differences below differentiate the right function.
    m.forward(x.data(), nullptr, B, T);
    std::vector<double> logits;
    m.read_logits(logits);
    const int64_t V = cfg.vocab_size;
    double sum = 0.0;
    int counted = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      if (y[i] < 0) continue;
      const double* row = logits.data() + int64_t(i) * V;
      double mx = row[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, row[v]);
      double z = 0.0;
      for (int64_t v = 0; v < V; ++v) z += std::exp(row[v] - mx);
      sum += mx + std::log(z) - row[y[i]];
      ++counted;
    }
    REQUIRE(counted == 3);
    CHECK(m.forward(x.data(), y.data(), B, T) == Approx(sum / counted).epsilon(1e-12));
  }
  m.zero_grads();
  m.forward_backward(x.data(), y.data(), B, T, 1.0);
  int checked = 0;
  for (const auto& t : m.params().tensors()) {
    const Tensor& g = m.grads().get(t->name);
    for (int k = 0; k < 4; ++k) {
      const int64_t i = int64_t(rng.below(uint64_t(t->numel())));
      check_entry_against_fd(t->name, i, g.as<double>()[i], t->as<double>()[i],
                             [&] { return m.forward(x.data(), y.data(), B, T); });
      ++checked;
    }
  }
  CHECK(checked > 40);
}


}  // namespace hw::test
