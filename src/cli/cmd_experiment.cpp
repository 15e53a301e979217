// headwise experiment --config FILE [--out DIR] [--set k=v]...
// The experiment protocol (SAF's tables): one trunk through every branch's intervention step
// (checkpointed at each), every branch continued from the checkpoint at its own step, a table.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/job_lock.hpp"
#include "cli/run_setup.hpp"
#include "headwise/core/error.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/experiment/experiment.hpp"

namespace hw::cli {

namespace {
struct ExperimentArgs {
  std::string config, out;
  std::vector<std::string> sets;
};
}  // namespace

void add_experiment_command(CLI::App& app) {
  auto args = std::make_shared<ExperimentArgs>();
  CLI::App* cmd = app.add_subcommand(
      "experiment",
      "Experiment: one trunk through every branch's intervention point, each branch's method from its own point, table");
  cmd->add_option("--config", args->config,
                  "JSON run config with an optional top-level \"experiment\" object (seeds, budget, ratios, "
                  "controls, at_fractions, branches, speed_rounds, speed_sets)")
      ->required();
  cmd->add_option("--out", args->out, "Output directory (default: runs/<config name>)");
  cmd->add_option("--set", args->sets, "Override a key: section.key=value, also experiment.key=value (repeatable)");
  cmd->callback([args] {
    ExperimentSetup setup = load_experiment(args->config, args->sets);
    // The A-B-B-A speed phase runs this binary's `bench` in fresh processes.
    setup.bench_exe = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::string out =
        args->out.empty() ? "runs/" + std::filesystem::path(args->config).stem().string() : args->out;
    set_threads(setup.base.train.threads);
    auto comm = dist::make_comm(dist::resolve_comm_kind(setup.base.train.comm, setup.base.train.device == "cuda"));
    if (comm->rank() != 0) spdlog::set_level(spdlog::level::warn);
    // One writer per folder (folder_lock.hpp): rank 0 holds OUT/.lock for the job.
    const io::FolderLock lock = lock_folder_for_job(out, "experiment", *comm);
    try {
      const nlohmann::json results = run_experiment(setup, out, *comm);
      if (comm->rank() == 0) {
        std::printf("%s", experiment_table_markdown(results).c_str());
        std::printf("\nwritten: %s/table.md, %s/results.json\n", out.c_str(), out.c_str());
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
