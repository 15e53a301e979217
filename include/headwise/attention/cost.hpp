#pragma once
// Attention work accounting: the attention coverage ratio (ACR, AAH paper) and the
// attention FLOPs a plan actually computes, relative to an all-softmax plan. `headwise
// inspect`, `headwise bench` and the tests all read these functions.
#include <cstdint>

#include "headwise/attention/head_plan.hpp"

namespace hw::attn {

struct PlanCost {
  double acr = 0.0;                  // mean over layers of sum_h clamp(W_h, 64, T) / (H T)
  double attn_flops = 0.0;           // forward attention FLOPs per sequence of length T (QK^T, softmax-free)
  double attn_flops_softmax = 0.0;   // same for the all-softmax plan
  double relative() const { return attn_flops_softmax > 0 ? attn_flops / attn_flops_softmax : 0.0; }
};

// Linear heads' cost depends on head_dim only: their prefix state holds the packed key pair
// products (1 + D + D(D+1)/2 features), whatever the number of groups G. What each kind
// counts as is documented in cost.cpp.
PlanCost plan_cost(const HeadPlan& plan, int64_t T, int head_dim);

}  // namespace hw::attn
