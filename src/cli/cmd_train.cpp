// headwise train --config FILE --out DIR [--set k=v]... [--init-from CKPT] [--resume CKPT|auto] [--overwrite]
// One process, or one rank of `mpirun -np N headwise train ...` / `srun --mpi=pmix headwise
// train ...` (train.comm = auto finds out which; docs/distributed.md). One writer per run folder
// and never over an earlier run in place (train_start.hpp); SIGTERM / SIGUSR1 stop it with a
// checkpoint (stop_signals.hpp).
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "cli/train_start.hpp"
#include "headwise/core/error.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/train/stop_signals.hpp"
#include "headwise/train/trainer.hpp"

namespace hw::cli {

namespace {
struct TrainArgs {
  std::string config, out, init_from, resume;
  std::vector<std::string> sets;
  bool overwrite = false;
};
}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a JSON config");
  cmd->add_option("--config", args->config, "JSON config (sections model, train, data, method)")->required();
  cmd->add_option("--out", args->out, "Run directory (metrics.jsonl, checkpoints/, summary.json)")->required();
  cmd->add_option("--set", args->sets, "Override a config key: section.key=value (repeatable)");
  cmd->add_option("--init-from", args->init_from, "Start from a checkpoint's weights with a fresh optimizer");
  cmd->add_option("--resume", args->resume,
                  "Resume a checkpoint (weights, optimizer, data position, plan); 'auto': the newest in --out, "
                  "or start fresh when it has none");
  cmd->add_flag("--overwrite", args->overwrite, "Move an earlier run in --out aside to DIR.old-<time> and start again");
  cmd->callback([args] {
    const bool resume_auto = args->resume == "auto";
    check(args->init_from.empty() || args->resume.empty() || resume_auto,
          "--init-from and --resume CKPT are exclusive (--resume auto with --init-from: the checkpoint seeds the first "
          "start only)");
    check(!args->overwrite || args->resume.empty(), "--overwrite and --resume are exclusive");
    // --init-from: the model's shape is the checkpoint's (its config.json).
    ModelConfig init_model;
    if (!args->init_from.empty()) init_model = read_checkpoint_config(args->init_from);
    RunConfig cfg = RunConfig::load(args->config, args->sets, args->init_from.empty() ? nullptr : &init_model,
                                    args->init_from);
    set_threads(cfg.train.threads);
    auto comm = dist::make_comm(dist::resolve_comm_kind(cfg.train.comm, cfg.train.device == "cuda"));
    if (comm->rank() != 0) spdlog::set_level(spdlog::level::warn);  // rank 0 logs for all
    if (comm->world() > 1 && comm->rank() == 0) {
      spdlog::info("data parallel: {} ranks over {}{}", comm->world(), comm->name(),
                   cfg.train.zero1 ? ", ZeRO-1 optimizer shards" : "");
      // Ranks sharing a node would each start one OpenMP thread per core.
      if (cfg.train.threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr)
        spdlog::warn("OMP_NUM_THREADS is not set: every rank uses all cores; set it (or train.threads) to the "
                     "cores per rank");
    }
    // Preemption and time limits: every rank, before anything is decided (stop_signals.hpp).
    install_stop_signals();
    io::FolderLock lock;  // rank 0's, for the whole run
    const TrainStart start = decide_train_start(args->out, args->resume, args->overwrite, cfg.train.steps, *comm, lock);
    if (start.kind == TrainStart::Complete) {
      if (comm->rank() == 0)
        spdlog::info("{} is complete: {} reached train.steps = {}; nothing to do (--overwrite starts it again)", args->out,
                     start.checkpoint, cfg.train.steps);
      return;
    }
    try {
      Trainer trainer(cfg, args->out, *comm, make_planners(cfg));
      if (start.kind == TrainStart::Resume) {
        if (comm->rank() == 0 && resume_auto) spdlog::info("--resume auto: continuing {} from {}", args->out, start.checkpoint);
        trainer.resume(start.checkpoint);
      } else if (!args->init_from.empty()) {
        trainer.init_from(args->init_from, &cfg.model.head_plan);
      }
      nlohmann::json summary = trainer.run();
      if (summary.contains("interrupted")) {
        if (comm->rank() == 0)
          spdlog::warn("stopped by {} after update {}: checkpoint {}; exit status {} (the same command with --resume "
                       "auto continues)",
                       summary["interrupted"].get<std::string>(), summary["steps"].get<int64_t>(),
                       summary["checkpoint"].get<std::string>().empty() ? std::string("none (no update made)")
                                                                        : summary["checkpoint"].get<std::string>(),
                       kInterruptedExitStatus);
        throw QuietExit{kInterruptedExitStatus};
      }
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
