#pragma once
// Forward+backward time of one layer's attention under several head-plan compositions, through
// a Backend (so the same code times the CPU reference and the CUDA kernels). `headwise
// bench-attention --layer` prints it; the GPU check script compares it with PyTorch SDPA.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/attention/head_plan.hpp"
#include "headwise/kernels/backend.hpp"

namespace hw::cli {

struct LayerBenchOptions {
  std::vector<int64_t> Ts{1024, 4096};
  int n_head = 12, head_dim = 64;
  int64_t batch = 4;
  int repeats = 5;
  bool bf16 = false;  // activations (qkv, out and their gradients) in bf16: the mixed-precision kernels
};

// The compositions timed at each T: all softmax; 25% and 50% static heads (the rest softmax);
// all window:T/8 and all window:T/4; all sink_window:4:T/8; all linear; and a mix (25% static,
// 25% window:T/8, the rest softmax). Rows {plan, T, ms_fwd_bwd, relative_to_softmax, acr}:
// median over `repeats` passes after one warm-up, the backend synchronised around each pass.
nlohmann::json bench_layer_attention(const Backend<float>& ops, const LayerBenchOptions& opt);

// Forward+backward ms of one layer plan (o.n_head heads, MHA, o.head_dim wide, o.batch
// sequences of T): the median of o.repeats passes after one warm-up, random q, k, v from `seed`.
double time_layer_plan(const Backend<float>& ops, const attn::LayerPlan& plan, int64_t T, const LayerBenchOptions& o,
                       uint64_t seed = 4321);

std::string layer_bench_markdown(const nlohmann::json& rows);

}  // namespace hw::cli
