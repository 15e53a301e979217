#include "headwise/methods/oal/contribution.hpp"

#include <cmath>

#include "headwise/core/error.hpp"

namespace hw::oal {

void prompt_contribution(const float* q, int64_t q_stride, const float* k, int64_t k_stride, int T, int d,
                         double* chi) {
  check(T >= 1 && d >= 1, "OAL contribution: empty prompt or head");
  std::vector<double> prefix(size_t(d), 0.0);  // sum_{j <= i} |k_jr|
  for (int r = 0; r < d; ++r) chi[r] = 0.0;
  for (int i = 0; i < T; ++i) {
    const float* ki = k + int64_t(i) * k_stride;
    const float* qi = q + int64_t(i) * q_stride;
    for (int r = 0; r < d; ++r) {
      prefix[size_t(r)] += std::fabs(double(ki[r]));
      chi[r] += std::fabs(double(qi[r])) * prefix[size_t(r)];
    }
  }
  const double scale = 1.0 / (std::sqrt(double(d)) * (double(T) * double(T + 1) / 2.0));
  for (int r = 0; r < d; ++r) chi[r] *= scale;
}

void add_mean_abs(const float* x, int64_t stride, int T, int d, double* out) {
  std::vector<double> s(size_t(d), 0.0);
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < d; ++r) s[size_t(r)] += std::fabs(double(x[int64_t(t) * stride + r]));
  for (int r = 0; r < d; ++r) out[r] += s[size_t(r)] / double(T);
}

std::vector<double> HeadContribution::chi() const {
  check(!per_prompt.empty(), "OAL contribution: no prompts");
  std::vector<double> m(per_prompt.front().size(), 0.0);
  for (const auto& p : per_prompt)
    for (size_t r = 0; r < m.size(); ++r) m[r] += p[r];
  for (double& x : m) x /= double(per_prompt.size());
  return m;
}

nlohmann::json to_json(const HeadContribution& c) {
  return {{"layer", c.layer},           {"head", c.head},
          {"kv_head", c.kv_head},       {"prompts", c.per_prompt.size()},
          {"chi", c.chi()},             {"mean_abs_q", c.mean_abs_q},
          {"mean_abs_k", c.mean_abs_k}};
}

}  // namespace hw::oal
