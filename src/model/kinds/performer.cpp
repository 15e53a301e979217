// Performer heads on the model side (valued_kind.hpp): the fixed random features W, a buffer,
// h.{l}.attn.performer.{h}.W [M, head_dim], drawn at install time (or given by a planner). The
// math is src/attention/performer_head.cpp.
#include <cmath>
#include <cstddef>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "model/kinds/valued_kind.hpp"

namespace hw {

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

namespace {

class PerformerKind final : public ValuedKindOf<PerformerKind, PerformerHeadValues, &HeadExtras::performers> {
 public:
  attn::HeadKind kind() const override { return attn::HeadKind::Performer; }
  const char* name() const override { return "performer"; }
  std::vector<KindTensor> tensors(const ModelConfig& c, const attn::HeadSpec& spec) const override {
    return {{"W", {spec.features, c.head_dim()}, false, 0.f}};
  }
  KindHeadValues values(const ModelConfig& c, const HeadExtras& extras, int l, int h) const override {
    const int M = c.head_plan.layers[size_t(l)][size_t(h)].features;
    const PerformerHeadValues* e = entry(extras, l, h);
    const PerformerHeadValues v = e ? *e : default_performer_values(c.head_dim(), M, l, h);
    check(v.n_features == M && int64_t(v.W.size()) == int64_t(M) * c.head_dim(),
          "performer head (" + std::to_string(l) + ", " + std::to_string(h) + "): its features must be " +
              std::to_string(M) + " x head_dim " + std::to_string(c.head_dim()));
    return {v.W};
  }
  void store(const ModelConfig& c, HeadExtras& extras, int l, int h, KindHeadValues v) const override {
    PerformerHeadValues& e = slot(extras, l, h);
    e.n_features = c.head_plan.layers[size_t(l)][size_t(h)].features;
    e.W = std::move(v[0]);
  }
  template <class F>
  static void bind_as(attn::LayerHeadParams<F>& p, int n_head, int h, const attn::HeadSpec& spec, F* const* values,
                      F* const*) {
    p.performers.resize(size_t(n_head));
    p.performers[size_t(h)] = {values[0], spec.features};
  }

 protected:
  // a performer head whose feature count changes draws new features
  bool fits(const attn::HeadSpec& spec, const PerformerHeadValues& v) const override {
    return spec.features == v.n_features;
  }
};

}  // namespace

const ValuedKind& performer_kind() {
  static const PerformerKind k{};
  return k;
}

}  // namespace hw
