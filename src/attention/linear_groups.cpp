#include <string>

#include "headwise/attention/attention.hpp"
#include "headwise/core/error.hpp"

namespace hw::attn {

void check_linear_groups(const int32_t* groups, int head_dim, int n_groups, const std::string& who) {
  check(head_dim >= 1, who + ": head_dim must be positive");
  check(n_groups >= 1 && n_groups <= head_dim, who + ": the number of groups G = " + std::to_string(n_groups) +
                                                   " must be in 1..head_dim (" + std::to_string(head_dim) + ")");
  for (int d = 0; d < head_dim; ++d)
    check(groups[d] >= 1 && groups[d] <= n_groups, who + ": groups[" + std::to_string(d) + "] = " +
                                                       std::to_string(groups[d]) + " is outside 1.." +
                                                       std::to_string(n_groups));
}

}  // namespace hw::attn
