#include "headwise/model/head_extras.hpp"

#include <cmath>
#include <cstddef>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"

namespace hw {

StaticHeadValues default_static_values(int n_positions) {
  StaticHeadValues v;
  v.alpha.assign(static_cast<size_t>(n_positions), 0.f);
  v.rho.assign(static_cast<size_t>(n_positions), 0.f);
  return v;
}

LinearHeadValues default_linear_values(int head_dim) {
  LinearHeadValues v;
  v.n_groups = 1;
  v.L = {1.f, 0.f, 0.5f, 0.5f};
  v.groups.assign(static_cast<size_t>(head_dim), 1);
  return v;
}

PerformerHeadValues draw_performer_features(int head_dim, int n_features, uint64_t seed) {
  check(head_dim >= 1 && n_features >= 1, "performer features: head_dim and the feature count must be >= 1");
  const auto D = size_t(head_dim);
  Rng rng(seed);
  PerformerHeadValues v;
  v.n_features = n_features;
  v.W.reserve(size_t(n_features) * D);
  std::vector<std::vector<double>> block;
  for (int m = 0; m < n_features; ++m) {
    if (block.size() == D) block.clear();  // a new orthogonal block every head_dim rows
    std::vector<double> row(D);
    for (;;) {  // Gaussian row, orthogonalised against the block's earlier rows
      for (auto& x : row) x = rng.normal();
      for (int pass = 0; pass < 2; ++pass)  // twice: classical Gram-Schmidt loses orthogonality once
        for (const auto& b : block) {
          double dot = 0;
          for (size_t d = 0; d < D; ++d) dot += row[d] * b[d];
          for (size_t d = 0; d < D; ++d) row[d] -= dot * b[d];
        }
      double nr = 0;
      for (double x : row) nr += x * x;
      if (nr > 1e-20) {
        for (auto& x : row) x /= std::sqrt(nr);
        break;
      }
    }
    block.push_back(row);
    double chi = 0;  // the norm of an independent N(0, I) vector
    for (size_t d = 0; d < D; ++d) {
      const double g = rng.normal();
      chi += g * g;
    }
    chi = std::sqrt(chi);
    for (double x : row) v.W.push_back(float(x * chi));
  }
  return v;
}

PerformerHeadValues default_performer_values(int head_dim, int n_features, int layer, int head) {
  const uint64_t index = uint64_t(layer) * 65536u + uint64_t(head);
  return draw_performer_features(head_dim, n_features, data::derive_seed(0, data::Stream::PerformerFeatures, index));
}

DiJiangHeadValues default_dijiang_values(int head_dim) {
  DiJiangHeadValues v;
  v.log_w.assign(size_t(head_dim), 0.f);
  return v;
}

TaylorShiftHeadValues default_taylorshift_values() { return {}; }

}  // namespace hw
