// headwise experiment: placeholder until the command lands.
#include "cli/commands.hpp"
#include "headwise/core/error.hpp"

namespace hw::cli {

void add_experiment_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("experiment", "(not available in this build yet)");
  cmd->callback([] { fail("headwise experiment is not available in this build yet"); });
}

}  // namespace hw::cli
