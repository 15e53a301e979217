// headwise heads --checkpoint CKPT [--sparsity S] [--per-layer] [--sink S] [--window W]
//                [--json FILE]
// AoH's data-free head scores (heads.hpp), a subcommand the method registers through its
// MethodEntry (method_registry.hpp): per query head the singular values of
// W_K^T W_Q and their effective rank, per KV head the minimum over its query heads, and the
// retrieval/streaming split (the fraction S of KV heads with the highest effective rank stream;
// one threshold over all layers, or per layer). Prints a table per layer and one JSON summary
// line; --json writes everything (scores, spectra, classification, the plan it implies).
#include <cmath>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/aoh/heads.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::aoh {

namespace {
struct HeadsArgs {
  std::string checkpoint, json;
  double sparsity = 0.5;
  bool per_layer = false;
  int64_t sink = 64, window = 256;
};
}  // namespace

void add_commands(CLI::App& app) {
  auto a = std::make_shared<HeadsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "heads", "Score every head from its query-key weights alone (AoH) and split retrieval / streaming KV heads");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint directory")->required();
  cmd->add_option("--sparsity", a->sparsity, "Fraction of KV heads that stream, in [0, 1] (default 0.5)");
  cmd->add_flag("--per-layer", a->per_layer, "Take the fraction in every layer (default: one threshold over all)");
  cmd->add_option("--sink", a->sink, "Sink keys of the implied sink_window heads (default 64)");
  cmd->add_option("--window", a->window, "Window of the implied sink_window heads (default 256)");
  cmd->add_option("--json", a->json, "Write scores, spectra, classification and the implied plan here");
  cmd->callback([a] {
    check(a->sparsity >= 0 && a->sparsity <= 1, "--sparsity must be in [0, 1], got " + nlohmann::json(a->sparsity).dump());
    check(a->sink >= 0 && a->window >= 1, "--sink must be >= 0 and --window >= 1");
    // Only the attention weights are read (the rest keeps its zeros and costs no memory).
    const ModelConfig cfg = read_checkpoint_config(a->checkpoint);
    const std::set<std::string> scored = aoh::scored_weights(cfg);
    auto model = load_model(a->checkpoint, cfg, cpu_backend<float>(), /*trainable=*/false, &scored);
    const ModelConfig& mc = model->config();
    aoh::HeadScores scores = aoh::score_model(*model);
    const int n_stream = aoh::classify(scores.kv, a->sparsity, a->per_layer);
    int n_scored = 0;
    for (const auto& k : scores.kv) n_scored += k.scored;

    std::printf("checkpoint %s: %d layers, %d heads (%d KV), head dim %d, width %d\n", a->checkpoint.c_str(),
                mc.n_layer, mc.n_head, mc.kv_heads(), mc.head_dim(), mc.n_embd);
    std::printf("%d of %d scored KV heads stream (sparsity %g, %s threshold; highest effective rank streams)\n",
                n_stream, n_scored, a->sparsity, a->per_layer ? "per-layer" : "one global");
    for (int l = 0; l < mc.n_layer; ++l) {
      std::printf("layer %d\n  %4s %3s  %-18s %9s %10s %10s %9s  %s\n", l, "head", "kv", "kind", "eff.rank",
                  "sigma_max", "sigma_min", "kv score", "class");
      for (int h = 0; h < mc.n_head; ++h) {
        const aoh::HeadScore& hs = scores.head(l, h);
        const aoh::KvScore& k = scores.kv_head(l, hs.kv_head);
        const char* cls = !k.scored ? "skipped" : k.streaming ? "streaming" : "retrieval";
        if (!hs.scored) {
          std::printf("  %4d %3d  %-18s %9s %10s %10s %9s  skipped (not softmax-family; KV head: %s)\n", h,
                      hs.kv_head, hs.spec.str().c_str(), "-", "-", "-", "-", cls);
          continue;
        }
        std::printf("  %4d %3d  %-18s %9.4f %10.4g %10.4g %9.4f  %s\n", h, hs.kv_head, hs.spec.str().c_str(),
                    hs.effective_rank, hs.sigma.front(), hs.sigma.back(), k.score, cls);
      }
    }

    nlohmann::json out = aoh::to_json(scores);
    out["checkpoint"] = a->checkpoint;
    out["sparsity"] = a->sparsity;
    out["per_layer"] = a->per_layer;
    out["sink"] = a->sink;
    out["window"] = a->window;
    out["n_kv_heads_scored"] = n_scored;
    out["n_streaming_kv_heads"] = n_stream;
    out["head_plan_before"] = mc.head_plan.to_json();
    if (a->sink + a->window <= mc.block_size) {
      out["head_plan"] = aoh::streaming_plan(mc.head_plan, scores, int(a->sink), int(a->window)).to_json();
    } else {
      // Such a plan would equal full attention at this block size: say so instead of implying it.
      out["head_plan"] = nullptr;
      out["head_plan_note"] = "--sink + --window (" + std::to_string(a->sink + a->window) + ") exceed the block size (" +
                              std::to_string(mc.block_size) + "): pass smaller --sink/--window for an implied plan";
      std::printf("no implied plan: %s\n", out["head_plan_note"].get<std::string>().c_str());
    }
    if (!a->json.empty()) io::write_file_atomic(a->json, out.dump(2) + "\n");
    nlohmann::json summary = {{"n_kv_heads_scored", n_scored},
                              {"n_streaming_kv_heads", n_stream},
                              {"sparsity", a->sparsity},
                              {"per_layer", a->per_layer},
                              {"head_plan", out["head_plan"]},
                              {"peak_rss_bytes", peak_rss_bytes()}};
    if (!a->json.empty()) summary["json"] = a->json;
    std::printf("%s\n", summary.dump().c_str());
  });
}

}  // namespace hw::aoh
