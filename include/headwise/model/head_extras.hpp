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

using HeadKey = std::pair<int, int>;  // (layer, query head)

struct HeadExtras {
  std::map<HeadKey, StaticHeadValues> statics;
  std::map<HeadKey, LinearHeadValues> linears;
};

// Defaults for heads a plan names without values: a static head with alpha = rho = 0 (uniform
// causal average); a linear head with one group and L = [[1, 0], [1/2, 1/2]], whose kernel
// 1 + s + s^2/2 is the second-order Taylor expansion of exp(s).
StaticHeadValues default_static_values(int n_positions);
LinearHeadValues default_linear_values(int head_dim);

}  // namespace hw
