// headwise oal-tables --checkpoint CKPT --data GLOB --out DIR [--eval-data GLOB] [--set method.key=value]...
//                     [--eval-seqs 4] [--positions 32] [--random-draws 100] [--performer-features 250]
//                     [--performer-seeds 5] [--fixed-groups 4] [--max-groups 5] [--seed 1]
// The OAL paper's Table 1, Table 2 and Fig. 2 (tables.hpp) for a finished all-softmax checkpoint:
// calibration (stats prompts, fit/validation sequences) from --data, held-out sequences from
// --eval-data (default --data, other windows). Writes DIR/{table1,table2,fig2}.csv, tables.md and
// tables.json (atomically) and prints the markdown. --set takes the planner's method.* keys
// (layers, grouping options, stats_prompts, fit_seqs, val_seqs, calib_seq_len, the fit of L).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/oal/tables.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::oal {

namespace {

struct TablesArgs {
  std::string checkpoint, data, eval_data, out;
  std::vector<std::string> sets;
  TablesOptions opt;
  int64_t seed = 1;
};

void run(TablesArgs& a) {
  auto model = load_model(a.checkpoint, cpu_backend<float>(), /*trainable=*/false);
  const ModelConfig& mc = model->config();
  nlohmann::json doc = {{"method", {{"name", "oal"}}}};
  for (const auto& s : a.sets) {
    check(s.rfind("method.", 0) == 0, "--set takes method.<key>=value, got '" + s + "'");
    apply_override(doc, s);
  }
  check(doc["method"]["name"] == "oal", "--set method.name is not a key of oal-tables");
  a.opt.cfg = OalConfig::from_json(doc["method"], "method");
  RunConfig rc;  // the lengths default to the model's context
  rc.model = mc;
  rc.train.seq_len = mc.block_size;
  rc.train.steps = 1;
  a.opt.cfg.check_run(rc);
  a.opt.seed = uint64_t(a.seed);
  Sources src;
  src.stats_T = a.opt.cfg.stats_length(rc);
  src.calib_T = a.opt.cfg.calib_length(rc);
  const std::string eval_glob = a.eval_data.empty() ? a.data : a.eval_data;
  const uint64_t s = a.opt.seed;
  auto stats = std::make_shared<data::CalibSampler>(a.data, src.stats_T, data::derive_seed(s, data::Stream::OalCalibration, 0));
  auto calib = std::make_shared<data::CalibSampler>(a.data, src.calib_T, data::derive_seed(s, data::Stream::OalCalibration, 1));
  auto eval = std::make_shared<data::CalibSampler>(eval_glob, src.calib_T, data::derive_seed(s, data::Stream::OalCalibration, 2));
  src.stats = [stats](int64_t i, int32_t* x, int32_t* y) { stats->fetch(i, x, y); };
  src.calib = [calib](int64_t i, int32_t* x, int32_t* y) { calib->fetch(i, x, y); };
  const SequenceSource ev = [eval](int64_t i, int32_t* x, int32_t* y) { eval->fetch(i, x, y); };
  nlohmann::json result = run_tables(*model, src, ev, int(src.calib_T), a.opt);
  result["checkpoint"] = a.checkpoint;
  result["data"] = a.data;
  result["eval_data"] = eval_glob;
  result["method"] = a.opt.cfg.to_json();
  write_tables(result, a.out);
  std::printf("%s", tables_markdown(result).c_str());
}

}  // namespace

void add_tables_command(CLI::App& app) {
  auto a = std::make_shared<TablesArgs>();
  CLI::App* cmd = app.add_subcommand("oal-tables", "OAL: the paper's Table 1, Table 2 and Fig. 2 for a checkpoint");
  cmd->add_option("--checkpoint", a->checkpoint, "An all-softmax checkpoint")->required();
  cmd->add_option("--data", a->data, "Token shard glob of the calibration sequences")->required();
  cmd->add_option("--out", a->out, "Output directory (written atomically)")->required();
  cmd->add_option("--eval-data", a->eval_data, "Token shard glob of the held-out sequences (default --data)");
  cmd->add_option("--set", a->sets, "A planner key: method.key=value (repeatable)");
  cmd->add_option("--eval-seqs", a->opt.eval_seqs, "Held-out sequences (default 4)");
  cmd->add_option("--positions", a->opt.positions, "Table 1: causal query positions per layer and sequence (default 32)");
  cmd->add_option("--random-draws", a->opt.random_draws, "Table 1: random-dimension control draws (default 100)");
  cmd->add_option("--performer-features", a->opt.performer_features, "Table 1: performer features per head (default 250)");
  cmd->add_option("--performer-seeds", a->opt.performer_seeds, "Table 1: seeds a randomized approximation averages (default 5)");
  cmd->add_option("--fixed-groups", a->opt.fixed_G, "Table 2: G of the fixed:G row (default 4)");
  cmd->add_option("--max-groups", a->opt.max_G, "Fig. 2: G = 1..this (default 5)");
  cmd->add_option("--seed", a->seed, "Seed of every draw (default 1)");
  cmd->callback([a] { run(*a); });
}

}  // namespace hw::oal
