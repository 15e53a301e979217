#pragma once
// AAH's seeded policy (docs/methods/aah.md): a controller MLP (29 inputs, 16 hidden,
// GELU, one logit per candidate window) and a joint sibling scorer (an MLP on a sibling pair's
// inputs and their difference, 87 -> 32 -> 2 x windows, giving both siblings' logits), both
// fixed at their seeded initialisation (PyTorch's nn.Linear default: weights and biases
// uniform in +-1/sqrt(fan_in)); nothing here is trained.
//
// A node's 29 controller inputs: its 9 pooled features, its level, the difference to its
// parent's features (0 at the top level), the difference to the mean of its level's nodes and
// its relative norm (‖f‖ over the mean ‖f‖ of its level; 1 when that mean is 0).
// Windows are chosen top-down: the top level's nodes are siblings of each other, below that the
// children of one parent are; a node's logits are its controller logits plus (joint scoring)
// the mean over its siblings of its half of the joint scorer's pair output; index = argmax
// (ties: the smaller window), then with the parent constraint min(index, parent's index).
#include <cstdint>
#include <vector>

#include "headwise/methods/aah/grouping.hpp"

namespace hw::aah {

constexpr int kFeatures = 9;
constexpr int kControllerInputs = 29;

double gelu(double x);  // exact: x Phi(x)

struct Mlp {
  int in = 0, hidden = 0, out = 0;
  std::vector<double> w1, b1, w2, b2;  // w1 [hidden x in], w2 [out x hidden], row-major
  static Mlp seeded(int in, int hidden, int out, uint64_t seed);
  Vec forward(const Vec& x) const;
};

struct Selection {
  std::vector<std::vector<int>> node_index;  // [level][node]: the chosen window index
  std::vector<int> head_index;               // per head: its level-0 group's index
};

class Policy {
 public:
  Policy(uint64_t seed, int n_windows);
  // The 29 inputs of every node of every level, [level][node].
  static std::vector<std::vector<Vec>> controller_inputs(const std::vector<Vec>& heads, const Hierarchy& h);
  Selection select(const std::vector<Vec>& heads, const Hierarchy& h, bool joint, bool parent_constraint) const;
  const Mlp& controller() const { return controller_; }
  const Mlp& joint() const { return joint_; }

 private:
  int n_windows_;
  Mlp controller_, joint_;
};

}  // namespace hw::aah
