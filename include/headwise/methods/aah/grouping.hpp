#pragma once
// AAH's hierarchical grouping of one layer's heads (docs/methods/aah.md), pure
// functions of the heads' feature vectors:
//  - level 0: greedy leader clustering in head order by cosine similarity to each group's
//    running centroid (join the most similar group when similarity >= `similarity`, else open a
//    new one; ties: the first group); if all heads fall in one group, split it around the least
//    similar pair (a, b) (every other head goes to the one of a, b it is more similar to, ties to
//    a); then, while more than 2 groups remain, the smallest group of fewer than 3 heads (the
//    first of the smallest) merges into the group with the most similar centroid;
//  - upper levels: the same leader clustering over the level below's nodes, with the
//    norm-penalised similarity cos(a, b) - 16 |‖a‖ - ‖b‖| / max(‖a‖, ‖b‖) and threshold
//    `upper_similarity`, until a level collapses to one node, a level merges nothing, or the
//    hierarchy holds max_depth levels.
// A node's features are the mean of the features of the heads under it (pooled). Groups are
// listed by their lowest head, members ascending.
#include <cstdint>
#include <vector>

namespace hw::aah {

using Vec = std::vector<double>;
using Groups = std::vector<std::vector<int>>;  // node indices of the level below (heads at level 0)

struct Hierarchy {
  std::vector<Groups> levels;  // levels[0]: groups of heads; levels[l]: groups of levels[l-1]'s groups
  // The heads under node g of level l, ascending.
  std::vector<int> heads_of(int level, int g) const;
  int depth() const { return int(levels.size()); }
  bool operator==(const Hierarchy&) const = default;
};

double cosine(const Vec& a, const Vec& b);  // 0 when either vector is zero
double norm_penalised(const Vec& a, const Vec& b);
Vec mean_of(const std::vector<Vec>& x, const std::vector<int>& members);

Groups head_groups(const std::vector<Vec>& heads, double similarity);
// One upper level over `nodes` (the level below's pooled features).
Groups upper_groups(const std::vector<Vec>& nodes, double upper_similarity);
// Level 0 given, upper levels built on it.
Hierarchy build_upper(const std::vector<Vec>& heads, const Groups& level0, double upper_similarity, int max_depth);
// A seeded balanced random split of n heads into min(2, n) groups (sizes differ by at most 1).
Groups balanced_random_groups(int n, uint64_t seed);
// Every head alone (grouping off).
Groups singleton_groups(int n);

}  // namespace hw::aah
