#include "headwise/methods/aoh/planner.hpp"

#include <spdlog/spdlog.h>

#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/methods/aoh/heads.hpp"

namespace hw {

AohPlanner::AohPlanner(const aoh::AohConfig& cfg, const RunConfig& run) : cfg_(cfg), fire_step_(cfg.fire_step(run)) {
  cfg_.check_run(run);
}

std::optional<std::set<std::string>> AohPlanner::weights_read(const ModelConfig& model) const {
  return aoh::scored_weights(model);
}

std::optional<PlanChange> AohPlanner::act(PlannerContext& ctx) {
  const Stopwatch timer;
  const ModelConfig& mc = ctx.model.config();
  check(cfg_.sink + cfg_.window <= mc.block_size,
        cfg_.where + ".sink + " + cfg_.where + ".window (" + std::to_string(cfg_.sink + cfg_.window) +
            ") exceed the model's block size (" + std::to_string(mc.block_size) + ")");
  aoh::HeadScores scores = aoh::score_model(ctx.model);
  const int n_stream = aoh::classify(scores.kv, cfg_.sparsity, cfg_.per_layer,
                                     cfg_.selection == "random" ? std::optional<uint64_t>(uint64_t(cfg_.seed))
                                                                : std::nullopt);
  PlanChange change;
  change.plan = aoh::streaming_plan(mc.head_plan, scores, int(cfg_.sink), int(cfg_.window));
  const double seconds = timer.seconds();

  nlohmann::json kv_pairs = nlohmann::json::array(), head_pairs = nlohmann::json::array();
  int n_scored = 0;
  for (const auto& k : scores.kv) {
    n_scored += k.scored;
    if (!k.streaming) continue;
    kv_pairs.push_back({k.layer, k.kv_head});
    for (int h : k.query_heads)
      if (scores.head(k.layer, h).scored) head_pairs.push_back({k.layer, h});
  }
  change.report = {{"method", "aoh"},
                   {"sparsity", cfg_.sparsity},
                   {"per_layer", cfg_.per_layer},
                   {"selection", cfg_.selection},
                   {"sink", cfg_.sink},
                   {"window", cfg_.window},
                   {"n_kv_heads_scored", n_scored},
                   {"n_streaming_kv_heads", n_stream},
                   {"streaming_kv_heads", std::move(kv_pairs)},
                   {"streaming_heads", std::move(head_pairs)},
                   {"scores", aoh::to_json(scores)},
                   {"score_seconds", seconds}};
  spdlog::info("AoH: {} of {} KV heads stream ({} choice, sink_window:{}:{}), scored in {:.3f} s", n_stream, n_scored,
               cfg_.selection, cfg_.sink,
               cfg_.window, seconds);
  return change;
}

}  // namespace hw
