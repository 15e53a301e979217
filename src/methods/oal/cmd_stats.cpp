// headwise oal-stats --checkpoint CKPT --data GLOB [--prompts 40] [--seq-len T] [--layers SPEC]
//                    [--grouping bootstrap|fixed:G|random] [--seed S] [--head L:H] [--json FILE]
// OAL's contribution statistics and groupings of a finished checkpoint (no conversion): per
// query head chi_r, mean |q_r|, mean |k_r| (the paper's Fig. 1 data) and the grouping, as JSON;
// stdout gets one line per head (group sizes, the top dimensions) and, with --head, that
// head's Fig. 1 columns as CSV.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/oal/pipeline.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::oal {

void add_tables_command(CLI::App& app);  // cmd_tables.cpp

namespace {

struct StatsArgs {
  std::string checkpoint, data, layers, grouping = "bootstrap", head, json;
  int64_t prompts = 40, seq_len = 0, seed = 1;
};

void run_stats(const StatsArgs& a) {
  check(!a.data.empty(), "--data: a token shard glob is required");
  auto model = load_model(a.checkpoint, cpu_backend<float>(), /*trainable=*/false);
  const ModelConfig& mc = model->config();
  const int64_t T = a.seq_len > 0 ? a.seq_len : mc.block_size;
  check(T <= mc.block_size, "--seq-len " + std::to_string(T) + " exceeds model.block_size " + std::to_string(mc.block_size));
  check(a.prompts >= 1, "--prompts must be >= 1");
  const GroupingOptions gopt;  // the paper's bootstrap settings
  const std::vector<int> layers = parse_layers(nlohmann::json(a.layers), mc.n_layer, "--layers");
  const GroupingSpec spec = parse_grouping(a.grouping, mc.head_dim(), "--grouping");
  data::CalibSampler sampler(a.data, T, data::derive_seed(uint64_t(a.seed), data::Stream::OalCalibration, 0));
  std::vector<int64_t> idx(size_t(a.prompts));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
  const CapturedQkv cap = capture_qkv(*model, [&](int64_t i, int32_t* x, int32_t* y) { sampler.fetch(i, x, y); }, idx,
                                      int(T), 8, layers);
  const std::vector<HeadContribution> cs = contributions(*model, cap);
  int want_l = -1, want_h = -1;
  if (!a.head.empty())
    check(std::sscanf(a.head.c_str(), "%d:%d", &want_l, &want_h) == 2, "--head takes LAYER:HEAD, got '" + a.head + "'");
  bool found = a.head.empty();
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& c : cs) {
    const Grouping g = group_head(c, spec, gopt, uint64_t(a.seed), mc.n_head);
    const std::vector<double> chi = c.chi();
    const double total = std::max(1e-300, [&] { double s = 0; for (double x : chi) s += x; return s; }());
    std::string top;
    for (int i = 0; i < std::min<int>(5, int(g.order.size())); ++i) {
      const int r = g.order[g.order.size() - 1 - size_t(i)];
      top += (i ? ", " : "") + std::to_string(r) + " (" + std::to_string(int(100.0 * chi[size_t(r)] / total + 0.5)) + "%)";
    }
    std::string sizes;
    for (int s : g.sizes()) sizes += (sizes.empty() ? "" : "/") + std::to_string(s);
    std::printf("layer %d head %d: %d groups (%s); top dims %s\n", c.layer, c.head, g.n_groups, sizes.c_str(),
                top.c_str());
    nlohmann::json j = to_json(c);
    j["grouping"] = g.to_json();
    heads.push_back(std::move(j));
    if (c.layer == want_l && c.head == want_h) {
      found = true;
      std::printf("dim,mean_abs_q,mean_abs_k,chi,group\n");
      for (size_t r = 0; r < chi.size(); ++r)
        std::printf("%zu,%.6g,%.6g,%.6g,%d\n", r, c.mean_abs_q[r], c.mean_abs_k[r], chi[r], g.groups[r]);
    }
  }
  check(found, "--head " + a.head + " is not a head of the chosen layers");
  const nlohmann::json doc = {{"checkpoint", a.checkpoint}, {"data", a.data},     {"prompts", a.prompts},
                              {"seq_len", T},               {"grouping", a.grouping}, {"seed", a.seed},
                              {"heads", heads}};
  if (!a.json.empty()) io::write_file_atomic(a.json, doc.dump(1) + "\n");
}

}  // namespace

void add_commands(CLI::App& app) {
  auto a = std::make_shared<StatsArgs>();
  CLI::App* cmd = app.add_subcommand("oal-stats", "OAL: contribution statistics (Fig. 1 data) and groupings of a checkpoint");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint directory")->required();
  cmd->add_option("--data", a->data, "Token shard glob the prompts are drawn from")->required();
  cmd->add_option("--prompts", a->prompts, "Number of prompts (default 40)");
  cmd->add_option("--seq-len", a->seq_len, "Prompt length (default model.block_size)");
  cmd->add_option("--layers", a->layers, "Layers (\"3-20\", \"1,4\"; default all)");
  cmd->add_option("--grouping", a->grouping, "bootstrap | fixed:G | random (default bootstrap)");
  cmd->add_option("--seed", a->seed, "Seed of the prompts and the bootstrap (default 1)");
  cmd->add_option("--head", a->head, "LAYER:HEAD whose Fig. 1 columns are printed as CSV");
  cmd->add_option("--json", a->json, "Write every head's statistics and grouping here");
  cmd->callback([a] { run_stats(*a); });
  add_tables_command(app);
}

}  // namespace hw::oal
