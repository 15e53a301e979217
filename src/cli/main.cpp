// headwise: command-line entry point. Subcommands are registered from cmd_*.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"
#include "headwise/methods/method_registry.hpp"

namespace {

// Edit distance, for "did you mean" on a mistyped subcommand.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The subcommand argv[1] names, or one error line naming it and the closest one. CLI11 alone
// would print "A subcommand is required" (exit 106) for `headwise eval-task`.
bool known_subcommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "error: no subcommand given (run 'headwise --help' for the list)\n");
    return false;
  }
  const std::string word = argv[1];
  if (!word.empty() && word[0] == '-') return true;  // --help, or an option CLI11 reports
  std::string best;
  size_t best_d = ~size_t(0);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return true;
    const size_t d = edit_distance(word, sub->get_name());
    if (d < best_d) best_d = d, best = sub->get_name();
  }
  std::fprintf(stderr, "error: unknown subcommand '%s'; the closest is '%s' (run 'headwise --help' for the list)\n",
               word.c_str(), best.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"headwise: pretrain decoder LMs whose attention heads change mid-training"};
  app.require_subcommand(1);
  // Wide enough that every option's name and type fit before its description: one line per
  // option in `--help` and in docs/command-line.md, which is generated from it.
  app.get_formatter()->column_width(48);
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
  hw::cli::add_export_command(app);
  hw::cli::add_generate_command(app);
  hw::cli::add_bench_infer_command(app);
  hw::cli::add_tokenize_command(app);
  hw::cli::add_plot_command(app);
  hw::cli::add_eval_tasks_command(app);
  hw::cli::add_finetune_tasks_command(app);
  hw::cli::add_launch_check_command(app);
  hw::cli::add_config_command(app);
  if (!known_subcommand(app, argc, argv)) return 1;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // A bad option or a missing one: one error line naming the subcommand, exit 1.
    const auto parsed = app.get_subcommands();
    const std::string cmd = parsed.empty() ? std::string("headwise") : "headwise " + parsed.front()->get_name();
    std::fprintf(stderr, "error: %s: %s (run '%s --help')\n", cmd.c_str(), e.what(), cmd.c_str());
    return 1;
  } catch (const hw::cli::QuietExit& q) {
    return q.code;
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
