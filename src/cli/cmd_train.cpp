// headwise train --config FILE --out DIR [--set k=v]... [--init-from CKPT] [--resume CKPT]
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "headwise/core/error.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/methods/planners.hpp"
#include "headwise/train/trainer.hpp"

namespace hw::cli {

namespace {
struct TrainArgs {
  std::string config, out, init_from, resume;
  std::vector<std::string> sets;
};
}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a JSON config");
  cmd->add_option("--config", args->config, "JSON config (sections model, train, data, method)")->required();
  cmd->add_option("--out", args->out, "Run directory (metrics.jsonl, checkpoints/, summary.json)")->required();
  cmd->add_option("--set", args->sets, "Override a config key: section.key=value (repeatable)");
  cmd->add_option("--init-from", args->init_from, "Start from a checkpoint's weights with a fresh optimizer");
  cmd->add_option("--resume", args->resume, "Resume a checkpoint: weights, optimizer, data position, plan");
  cmd->callback([args] {
    check(args->init_from.empty() || args->resume.empty(), "--init-from and --resume are exclusive");
    RunConfig cfg = RunConfig::load(args->config, args->sets);
    set_threads(cfg.train.threads);
    auto comm = dist::make_comm(cfg.train.comm);
    if (comm->rank() != 0) spdlog::set_level(spdlog::level::warn);
    try {
      Trainer trainer(cfg, args->out, *comm, make_planner(cfg));
      if (!args->init_from.empty()) trainer.init_from(args->init_from);
      if (!args->resume.empty()) trainer.resume(args->resume);
      nlohmann::json summary = trainer.run();
      if (comm->rank() == 0) {
        if (summary.contains("val_loss"))
          spdlog::info("done: val loss {:.4f}, val ppl {:.3f}, {} steps, {:.1f} s", summary["val_loss"].get<double>(),
                       summary["val_ppl"].get<double>(), summary["steps"].get<int64_t>(),
                       summary["wall_s"].get<double>());
        else
          spdlog::info("done: {} steps, {:.1f} s", summary["steps"].get<int64_t>(), summary["wall_s"].get<double>());
      }
    } catch (const Error& e) {
      if (comm->world() > 1) {  // the other ranks may be waiting in a collective
        std::fprintf(stderr, "error: %s\n", e.what());
        comm->abort(1);
      }
      throw;
    }
  });
}

}  // namespace hw::cli
