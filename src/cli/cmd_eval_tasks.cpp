// headwise eval-tasks --checkpoint CKPT --task FILE [--task FILE]... [--limit N] [--batch N]
//                     [--context N] [--json OUT] [--samples OUT.jsonl] [--threads N] [--no-progress]
// Zero-shot multiple-choice scoring by log-likelihood, as lm-evaluation-harness does it
// (src/eval/, docs/evaluation.md). Every task file is read and checked before the model loads;
// output files are written only once every task is scored (no partial output on an error).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "headwise/core/error.hpp"
#include "headwise/eval/task_eval.hpp"
#include "headwise/eval/task_finetune.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/folder_lock.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::cli {

namespace {
struct EvalTasksArgs {
  std::string checkpoint, json_out, samples_out;
  std::vector<std::string> tasks;
  int64_t limit = 0, batch = 8, context = 0;
  int threads = 0;
  bool no_progress = false;
};

std::string stderr_text(const eval::MeanStderr& m) {
  char buf[32];
  if (!m.stderr_) return "n/a";
  std::snprintf(buf, sizeof buf, "%.4f", *m.stderr_);
  return buf;
}
}  // namespace

void add_eval_tasks_command(CLI::App& app) {
  auto a = std::make_shared<EvalTasksArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval-tasks", "Zero-shot multiple-choice accuracy (acc, acc_norm) of a checkpoint, as lm-evaluation-harness");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint directory (with its tokenizer.json)")->required();
  cmd->add_option("--task", a->tasks, "Task file (JSONL: hellaswag, piqa, arc, boolq, sst2, winogrande, mmlu or generic)")
      ->required();
  cmd->add_option("--limit", a->limit, "Score the first N examples of each file (default: all)");
  cmd->add_option("--batch", a->batch, "Sequences per forward (default 8)");
  cmd->add_option("--context", a->context, "Tokens of context, the harness's max_length (default: the block size)");
  cmd->add_option("--json", a->json_out, "Write the results as JSON here");
  cmd->add_option("--samples", a->samples_out, "Write every example's log-likelihoods here (JSONL)");
  cmd->add_option("--threads", a->threads, "OpenMP threads (default: all)");
  cmd->add_flag("--no-progress", a->no_progress, "No progress line on stderr");
  cmd->callback([a] {
    set_threads(a->threads);
    check(a->limit >= 0, "--limit must be >= 0");
    check(a->batch >= 1, "--batch must be >= 1");
    std::vector<eval::TaskFile> tasks;
    for (const std::string& path : a->tasks) tasks.push_back(eval::read_task_file(path, a->limit));
    auto model = load_model(a->checkpoint, cpu_backend<float>(), /*trainable=*/false);
    const eval::EvalTokenizer tok = eval::EvalTokenizer::for_checkpoint(a->checkpoint, model->config().vocab_size);
    const int64_t ctx = a->context > 0 ? a->context : model->config().block_size;
    eval::LoglikelihoodScorer scorer(*model, ctx, a->batch);
    std::vector<eval::TaskResult> results;
    for (const eval::TaskFile& t : tasks) results.push_back(eval::evaluate_task(t, tok, scorer, !a->no_progress));

    nlohmann::json out = {{"checkpoint", a->checkpoint}, {"tokenizer", tok.describe()}, {"context", ctx},
                          {"tasks", nlohmann::json::array()}};
    std::printf("%-40s %-10s %7s %7s %8s %8s %8s %10s\n", "task", "format", "n", "acc", "stderr", "acc_norm", "stderr",
                "examples/s");
    for (const eval::TaskResult& r : results) {
      out["tasks"].push_back(r.summary_json());
      std::printf("%-40s %-10s %7zu %7.4f %8s %8.4f %8s %10.2f\n", r.path.c_str(), r.format.c_str(), r.examples.size(),
                  r.acc.mean, stderr_text(r.acc).c_str(), r.acc_norm.mean, stderr_text(r.acc_norm).c_str(),
                  r.examples_per_s());
    }
    if (!a->samples_out.empty()) {
      std::string lines;
      for (const eval::TaskResult& r : results)
        for (const nlohmann::json& j : r.example_json()) lines += j.dump() + "\n";
      io::write_file_atomic(a->samples_out, lines);
    }
    if (!a->json_out.empty()) io::write_file_atomic(a->json_out, out.dump(2) + "\n");
  });
}

}  // namespace hw::cli

// headwise finetune-tasks --checkpoint CKPT --task TRAIN.jsonl --out DIR [--steps N] [--batch B] [--lr LR] ...
// Fine-tunes on a task file with the loss on the answer tokens only (src/eval/task_finetune.cpp)
// and writes DIR as a checkpoint (weights, config, the tokenizer.json copied) for eval-tasks.
namespace hw::cli {

namespace {
struct FinetuneArgs {
  std::string checkpoint, task, out;
  eval::FinetuneOptions opt;
  int64_t limit = 0;
  int threads = 0;
};
}  // namespace

void add_finetune_tasks_command(CLI::App& app) {
  auto a = std::make_shared<FinetuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "finetune-tasks", "Fine-tune on a multiple-choice task file, loss on the answer tokens only; writes a checkpoint");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint to start from (with its tokenizer.json)")->required();
  cmd->add_option("--task", a->task, "Training task file (JSONL, any eval-tasks format)")->required();
  cmd->add_option("--out", a->out, "Output checkpoint directory")->required();
  cmd->add_option("--limit", a->limit, "Use the first N examples (default: all)");
  cmd->add_option("--steps", a->opt.steps, "Updates (default 200)");
  cmd->add_option("--batch", a->opt.batch, "Examples per update (default 8)");
  cmd->add_option("--lr", a->opt.lr, "Peak learning rate (default 1e-4)");
  cmd->add_option("--min-lr", a->opt.min_lr, "Final learning rate of the cosine (default 1e-5)");
  cmd->add_option("--warmup", a->opt.warmup_steps, "Linear warm-up updates (default 10)");
  cmd->add_option("--weight-decay", a->opt.weight_decay, "AdamW weight decay (default 0)");
  cmd->add_option("--context", a->opt.context, "Tokens per sequence (default: the block size)");
  cmd->add_option("--seed", a->opt.seed, "Example order (default 1337)");
  cmd->add_option("--threads", a->threads, "OpenMP threads (default: all)");
  cmd->callback([a] {
    set_threads(a->threads);
    check(a->limit >= 0, "--limit must be >= 0");
    const eval::TaskFile task = eval::read_task_file(a->task, a->limit);
    auto model = load_model(a->checkpoint, cpu_backend<float>());
    const eval::EvalTokenizer tok = eval::EvalTokenizer::for_checkpoint(a->checkpoint, model->config().vocab_size);
    // One writer per folder (folder_lock.hpp); it creates --out.
    const io::FolderLock lock = io::FolderLock::inside(a->out, "finetune-tasks");
    const std::string metrics = a->out + "/metrics.jsonl";
    std::filesystem::remove(metrics);
    eval::finetune_on_task(*model, task, tok, a->opt, metrics);
    save_model_files(*model, a->out);
    const std::string tok_src = a->checkpoint + "/tokenizer.json";
    if (std::filesystem::is_regular_file(tok_src))
      io::write_file_atomic(a->out + "/tokenizer.json", io::read_file(tok_src));
    std::printf("%s\n", nlohmann::json{{"checkpoint", a->out}, {"examples", task.examples.size()}, {"steps", a->opt.steps}}
                            .dump()
                            .c_str());
  });
}

}  // namespace hw::cli
