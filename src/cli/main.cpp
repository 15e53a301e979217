// headwise: command-line entry point. Subcommands are registered from cmd_*.cpp.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"
#include "headwise/methods/method_registry.hpp"

int main(int argc, char** argv) {
  CLI::App app{"headwise: pretrain decoder LMs whose attention heads change mid-training"};
  app.require_subcommand(1);
  hw::cli::add_prepare_command(app);
  hw::cli::add_train_command(app);
  hw::cli::add_eval_command(app);
  hw::cli::add_bench_command(app);
  hw::cli::add_inspect_command(app);
  hw::cli::add_bench_attention_command(app);
  hw::cli::add_experiment_command(app);
  hw::cli::add_mqar_command(app);
  for (const hw::MethodEntry& m : hw::method_table())
    if (m.add_commands) m.add_commands(app);
  hw::cli::add_convert_command(app);
  hw::cli::add_merge_command(app);
  hw::cli::add_generate_command(app);
  hw::cli::add_bench_infer_command(app);
  hw::cli::add_tokenize_command(app);
  hw::cli::add_plot_command(app);
  hw::cli::add_eval_tasks_command(app);
  hw::cli::add_finetune_tasks_command(app);
  hw::cli::add_launch_check_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const hw::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {  // (an input whose size the checks let through, beyond this machine)
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
