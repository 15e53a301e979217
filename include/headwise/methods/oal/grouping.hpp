#pragma once
// OAL's dimension grouping per query head (paper Sec. 4.2, App. B). Dimensions are sorted by
// contribution chi ascending (stable: ties keep the lower index first) into pi_1..pi_d; a cut
// at k (1 <= k < d) puts pi_1..pi_k below and pi_{k+1}..pi_d above it. Groups are numbered
// from the bottom: group 1 is the bulk of low-contribution dimensions, the last group holds
// the highest-contribution tail.
//
// bootstrap: candidate cuts only in the top tail, k = max(1, d - ceil(tail_fraction d)) .. d-1;
// adjacent ratio rho_k = chi_{pi_{k+1}} / max(chi_{pi_k}, eps); bootstrap support S_k = share
// of prompt resamples (with replacement, the original order kept) in which
// min_{upper} chi^(b) / max(max_{lower} chi^(b), eps) >= ratio_threshold. Natural cuts have
// rho_k >= ratio_threshold and S_k >= support. Priority of a cut: S_k descending, then rho_k
// descending, then k ascending. All natural cuts are kept (the best max_groups - 1 by priority
// when there are more); below min_groups groups, cuts are added by priority.
// fixed:G: the G - 1 largest adjacent ratios among the same tail candidates (all cuts
// 1..d-1 when the tail has fewer than G - 1), ties to the lower k.
// random: the group sizes of another grouping with the dimensions dealt by a seeded shuffle.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hw::oal {

struct GroupingOptions {
  double tail_fraction = 0.25;
  double ratio_threshold = 1.5;  // tau
  double support = 0.9;          // gamma
  int bootstrap = 1000;          // B resamples
  int min_groups = 2;
  int max_groups = 5;
  double eps = 1e-12;  // guard of the ratios' denominators
};

struct Grouping {
  int n_groups = 1;
  std::vector<int32_t> groups;  // [d]: group of each dimension, 1..n_groups
  std::vector<int> order;       // dimensions by contribution ascending
  std::vector<int> cuts;        // chosen cut positions k, ascending
  nlohmann::json candidates = nlohmann::json::array();  // bootstrap: {k, ratio, support, natural}
  std::vector<int> sizes() const;  // [n_groups]
  nlohmann::json to_json() const;
};

enum class GroupingKind { Bootstrap, Fixed, Random };
struct GroupingSpec {
  GroupingKind kind = GroupingKind::Bootstrap;
  int n_groups = 0;  // fixed:G
  std::string str() const;
};
// "bootstrap" | "fixed:G" | "random"; G must be in 1..head_dim. Errors name `key`.
GroupingSpec parse_grouping(const std::string& text, int head_dim, const std::string& key);

// The stable ascending order of chi.
std::vector<int> contribution_order(const std::vector<double>& chi);
// Groups from the order and ascending cuts.
Grouping groups_from_cuts(const std::vector<int>& order, std::vector<int> cuts);
// The candidate cuts of the top tail: k = max(1, d - ceil(tail_fraction d)) .. d-1.
std::vector<int> tail_candidates(int d, double tail_fraction);

// per_prompt[p][r] = chi_{p,r}. The resamples draw from `seed` alone.
Grouping bootstrap_grouping(const std::vector<std::vector<double>>& per_prompt, const GroupingOptions& opt,
                            uint64_t seed);
Grouping fixed_grouping(const std::vector<double>& chi, int n_groups, double tail_fraction, double eps = 1e-12);
Grouping random_grouping(const Grouping& like, uint64_t seed);

}  // namespace hw::oal
