#pragma once
// OAL's contribution statistic (paper Eq. (2)): for one prompt p of T tokens and one query head,
//   chi_{p,r} = 1/|Omega| * sum_{j <= i} |q_ir k_jr| / sqrt(d),   |Omega| = T (T + 1) / 2,
// on post-RoPE q and k; chi_r is its mean over prompts (each prompt weighs the same, whatever its
// length). Evaluated in O(T d): sum_i |q_ir| * (prefix sum over j <= i of |k_jr|).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace hw::oal {

// chi[r] of one prompt; q and k rows t start at q + t * q_stride (k + t * k_stride).
void prompt_contribution(const float* q, int64_t q_stride, const float* k, int64_t k_stride, int T, int d,
                         double* chi);
// out[r] += mean over the T rows of |x_tr| (Fig. 1's mean |q| / mean |k| of one prompt).
void add_mean_abs(const float* x, int64_t stride, int T, int d, double* out);

// One query head's statistics over the prompts.
struct HeadContribution {
  int layer = 0, head = 0, kv_head = 0;
  std::vector<std::vector<double>> per_prompt;  // [P][d]: chi_{p,r}
  std::vector<double> mean_abs_q, mean_abs_k;   // [d]: mean over prompts of each prompt's mean |q_r| (|k_r|)
  std::vector<double> chi() const;              // [d]: chi_r, the mean over prompts
};

// {"layer", "head", "kv_head", "prompts", "chi", "mean_abs_q", "mean_abs_k"}: the paper's Fig. 1 data.
nlohmann::json to_json(const HeadContribution& c);

}  // namespace hw::oal
