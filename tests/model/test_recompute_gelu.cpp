// GELU recomputation (Model::set_recompute_gelu): the same loss and gradients bit for bit as
// keeping every layer's GELU output (the kept path is checked against finite differences and
// PyTorch elsewhere), with n_layer - 1 fewer B x T x 4C buffers.
#include <catch2/catch.hpp>
#include <cstring>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"

using namespace hw;

TEST_CASE("GELU recomputation gives bit-identical gradients with fewer activation bytes", "[model][recompute]") {
  ModelConfig cfg;
  cfg.n_layer = 3;
  cfg.n_head = 4;
  cfg.n_embd = 32;
  cfg.vocab_size = 41;
  cfg.block_size = 16;
  cfg.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["softmax", "window:3", "static", "linear"], ["pruned", "softmax", "sink_window:1:2", "softmax"],
          ["softmax", "softmax", "softmax", "static"]])"));
  const int64_t B = 2, T = 16, N = B * T;
  Model<float> kept(cfg, cpu_backend<float>()), recomputed(cfg, cpu_backend<float>());
  kept.init_weights(3);
  recomputed.init_weights(3);
  recomputed.set_recompute_gelu(true);
  Rng rng(9);
  std::vector<int32_t> x(static_cast<size_t>(N)), y(static_cast<size_t>(N));
  for (auto& v : x) v = int32_t(rng.below(41));
  for (auto& v : y) v = int32_t(rng.below(41));
  kept.zero_grads();
  recomputed.zero_grads();
  for (double scale : {1.0, 0.5}) {  // two micro-steps: the shared buffer is reused across calls
    const double a = kept.forward_backward(x.data(), y.data(), B, T, scale);
    const double b = recomputed.forward_backward(x.data(), y.data(), B, T, scale);
    CHECK(a == b);
  }
  for (const auto& t : kept.grads().tensors()) {
    INFO(t->name);
    CHECK(std::memcmp(t->data, recomputed.grads().get(t->name).data, t->nbytes()) == 0);
  }
  const size_t saved = size_t(cfg.n_layer - 1) * size_t(N * 4 * cfg.n_embd) * sizeof(float);
  CHECK(kept.activation_bytes() - recomputed.activation_bytes() >= saved);
  CHECK(recomputed.activations().find("h.0.fch_gelu") == nullptr);
}
