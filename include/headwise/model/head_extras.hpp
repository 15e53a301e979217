#pragma once
// Values that static and linear heads carry besides the ordinary weights. Planners return
// them with a new plan; checkpoints store them; the model keeps them in its arenas.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace hw {

struct StaticHeadValues {
  std::vector<float> alpha;  // length n_positions
  std::vector<float> rho;    // length n_positions
};

struct LinearHeadValues {
  int n_groups = 1;             // G
  std::vector<float> L;         // (G+1) x (G+1), row-major, lower triangle used
  std::vector<int32_t> groups;  // length head_dim, values 1..G
};

// The linearization baselines (head kinds performer, dijiang, taylorshift). Each kind's file in
// src/model/kinds/ defines its defaults below and how the model and checkpoints hold its values.
struct PerformerHeadValues {
  int n_features = 0;    // M
  std::vector<float> W;  // M x head_dim, row-major: the fixed random projections
};

struct DiJiangHeadValues {
  std::vector<float> log_w;  // head_dim: log of the positive feature weights (trainable)
};

struct TaylorShiftHeadValues {
  float tau = 1.f;  // temperature (trainable)
};

using HeadKey = std::pair<int, int>;  // (layer, query head)

struct HeadExtras {
  std::map<HeadKey, StaticHeadValues> statics;
  std::map<HeadKey, LinearHeadValues> linears;
  std::map<HeadKey, PerformerHeadValues> performers;
  std::map<HeadKey, DiJiangHeadValues> dijiangs;
  std::map<HeadKey, TaylorShiftHeadValues> taylorshifts;
};

// Defaults for heads a plan names without values: a static head with alpha = rho = 0 (uniform
// causal average); a linear head with one group and L = [[1, 0], [1/2, 1/2]], whose kernel
// 1 + s + s^2/2 is the second-order Taylor expansion of exp(s).
StaticHeadValues default_static_values(int n_positions);
LinearHeadValues default_linear_values(int head_dim);

// FAVOR+ positive orthogonal random features: M rows in blocks of head_dim, each block the
// orthonormal rows of a Gaussian matrix (Gram-Schmidt in double), every row then rescaled to the
// norm of an independent Gaussian head_dim-vector (chi-distributed), so each row is marginally
// N(0, I). A pure function of the seed.
PerformerHeadValues draw_performer_features(int head_dim, int n_features, uint64_t seed);
// The features a head gets when its plan names it without values: drawn from seed stream
// PerformerFeatures (data/seed_mix.hpp), index layer * 65536 + head, base seed 0, so a model's
// performer heads are fixed at install time and saved in checkpoints.
PerformerHeadValues default_performer_values(int head_dim, int n_features, int layer, int head);
// log_w = 0 (all weights 1); tau = 1.
DiJiangHeadValues default_dijiang_values(int head_dim);
TaylorShiftHeadValues default_taylorshift_values();

}  // namespace hw
