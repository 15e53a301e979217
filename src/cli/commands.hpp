#pragma once
// Each `headwise` subcommand lives in its own cmd_<name>.cpp and registers itself here
// (a method's own subcommands come from its MethodEntry::add_commands).
// Callbacks throw hw::Error for bad input; main() turns that into one "error: ..." line and
// exit code 1.
#include <CLI/CLI.hpp>

namespace hw::cli {

// Ends the process with `code` and no message of its own: the other ranks of a job whose rank 0
// reported why (one error line per job, not per rank), or a run that stopped on a signal.
struct QuietExit {
  int code = 0;
};

void add_prepare_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_bench_attention_command(CLI::App& app);
void add_experiment_command(CLI::App& app);  // SAF experiment protocol (cmd_experiment.cpp)
void add_mqar_command(CLI::App& app);        // MQAR adaptation and accuracy (cmd_mqar.cpp)
void add_convert_command(CLI::App& app);     // a data-free method on a checkpoint (cmd_convert.cpp)
void add_merge_command(CLI::App& app);       // fold LoRA adapters into the weights (cmd_merge.cpp)
void add_export_command(CLI::App& app);      // a checkpoint as a folder transformers opens (cmd_export.cpp)
void add_generate_command(CLI::App& app);    // cached decoding from a checkpoint (cmd_generate.cpp)
void add_bench_infer_command(CLI::App& app); // prefill/decode latency and KV bytes vs all-softmax (cmd_bench_infer.cpp)
void add_tokenize_command(CLI::App& app);    // ids of a text with a tokenizer.json (cmd_tokenize.cpp)
void add_plot_command(CLI::App& app);        // training curves of runs as a PNG (cmd_plot.cpp)
void add_eval_tasks_command(CLI::App& app);  // zero-shot multiple-choice tasks (cmd_eval_tasks.cpp)
void add_finetune_tasks_command(CLI::App& app);  // answer-only fine-tuning on a task file (cmd_eval_tasks.cpp)
void add_launch_check_command(CLI::App& app);    // the rendezvous without MPI, stand-in id (cmd_launch_check.cpp)
void add_config_command(CLI::App& app);      // a run config with every default filled in (cmd_config.cpp)

}  // namespace hw::cli
