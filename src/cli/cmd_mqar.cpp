// headwise mqar: placeholder until the command lands.
#include "cli/commands.hpp"
#include "headwise/core/error.hpp"

namespace hw::cli {

void add_mqar_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("mqar", "(not available in this build yet)");
  cmd->callback([] { fail("headwise mqar is not available in this build yet"); });
}

}  // namespace hw::cli
