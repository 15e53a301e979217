#include "headwise/model/head_extras.hpp"

#include <cstddef>

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

}  // namespace hw
