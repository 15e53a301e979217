// headwise inspect --checkpoint CKPT [--seq-len T]: the plan per layer, parameter count and
// attention work relative to an all-softmax plan.
#include <cstdio>

#include "cli/commands.hpp"
#include "headwise/attention/cost.hpp"
#include "headwise/core/error.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::cli {

void add_inspect_command(CLI::App& app) {
  auto ckpt = std::make_shared<std::string>();
  auto seq_len = std::make_shared<int64_t>(0);
  CLI::App* cmd = app.add_subcommand("inspect", "Print a checkpoint's head plan, size and attention work");
  cmd->add_option("--checkpoint", *ckpt, "Checkpoint directory")->required();
  cmd->add_option("--seq-len", *seq_len, "Sequence length for the work figures (default: block size)");
  cmd->callback([ckpt, seq_len] {
    auto model = load_model(*ckpt, cpu_backend<float>(), /*trainable=*/false);
    const auto& cfg = model->config();
    const int64_t T = *seq_len > 0 ? *seq_len : cfg.block_size;
    std::printf("checkpoint %s\n", ckpt->c_str());
    std::printf("model: %d layers, %d heads (%d KV), width %d, head dim %d, %s positions, vocab %d, block %d\n",
                cfg.n_layer, cfg.n_head, cfg.kv_heads(), cfg.n_embd, cfg.head_dim(), cfg.pos.c_str(), cfg.vocab_size,
                cfg.block_size);
    std::printf("parameters: %lld\n", static_cast<long long>(model->num_parameters()));
    std::printf("head plan:\n");
    for (int l = 0; l < cfg.n_layer; ++l) {
      std::string row;
      for (const auto& h : cfg.head_plan.layers[size_t(l)]) {
        if (!row.empty()) row += ' ';
        row += h.str();
      }
      std::printf("  layer %2d: %s\n", l, row.c_str());
    }
    const auto cost = attn::plan_cost(cfg.head_plan, T, cfg.head_dim());
    std::printf("attention at T=%lld: ACR %.4f, FLOPs %.4g per sequence (%.4f of all-softmax)\n",
                static_cast<long long>(T), cost.acr, cost.attn_flops, cost.relative());
    nlohmann::json out = {{"parameters", model->num_parameters()},
                          {"head_plan", cfg.head_plan.to_json()},
                          {"seq_len", T},
                          {"acr", cost.acr},
                          {"attn_flops", cost.attn_flops},
                          {"attn_flops_relative", cost.relative()}};
    std::printf("%s\n", out.dump().c_str());
  });
}

}  // namespace hw::cli
