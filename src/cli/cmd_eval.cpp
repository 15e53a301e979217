// headwise eval --checkpoint CKPT --data GLOB [--batches N] [--micro-batch B] [--seq-len T]
//               [--device cpu|cuda] [--tf32 true|false]
// headwise eval --checkpoint CKPT --text FILE [--text FILE]... [--context N] [--stride S] [--micro-batch B]
//   perplexity of text files (each one document) with the checkpoint's tokenizer, as
//   lm-evaluation-harness's wikitext task (src/eval/text_perplexity.cpp).
#include <cstdio>

#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/eval/text_perplexity.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/train/trainer.hpp"
#include "headwise/train/training_backend.hpp"

namespace hw::cli {

namespace {
struct EvalArgs {
  std::string checkpoint, data, device = "cpu";
  std::vector<std::string> text;
  int64_t batches = 8, micro_batch = 4, seq_len = 0, context = 0, stride = 0;
  int threads = 0;
  bool tf32 = true;
};
void eval_text(const EvalArgs& a) {
  check(a.device == "cpu", "eval --text runs on the CPU backend (--device cpu)");
  check(a.micro_batch > 0, "--micro-batch must be positive");
  std::vector<std::string> docs;
  for (const std::string& path : a.text) {
    docs.push_back(io::read_file(path));
    check(!docs.back().empty(), path + ": empty text file");
  }
  auto model = load_model(a.checkpoint, cpu_backend<float>(), /*trainable=*/false);
  const eval::EvalTokenizer tok = eval::EvalTokenizer::for_checkpoint(a.checkpoint, model->config().vocab_size);
  const int64_t N = a.context > 0 ? a.context : model->config().block_size;
  check(N <= model->config().block_size, "--context " + std::to_string(N) + " exceeds the model's block size " +
                                             std::to_string(model->config().block_size));
  const int64_t S = a.stride > 0 ? a.stride : N;
  eval::LoglikelihoodScorer scorer(*model, N, a.micro_batch);
  nlohmann::json out = eval::text_perplexity(docs, tok, scorer, N, S, /*show_progress=*/true).to_json();
  out["context"] = N;
  out["stride"] = S;
  out["checkpoint"] = a.checkpoint;
  std::printf("%s\n", out.dump().c_str());
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint on the first N batches of shards, in order");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint directory")->required();
  auto* data = cmd->add_option("--data", a->data, "Glob of token shards");
  auto* text = cmd->add_option("--text", a->text, "Text file(s) to score, each one document (instead of --data)");
  data->excludes(text);
  cmd->add_option("--context", a->context, "--text: tokens per window (default: the block size)");
  cmd->add_option("--stride", a->stride, "--text: new tokens scored per window (default: --context)");
  cmd->add_option("--batches", a->batches, "Number of batches (default 8)");
  cmd->add_option("--micro-batch", a->micro_batch, "Sequences per batch (default 4)");
  cmd->add_option("--seq-len", a->seq_len, "Sequence length (default: the model's block size)");
  cmd->add_option("--threads", a->threads, "OpenMP threads (default: all)");
  cmd->add_option("--device", a->device, "cpu or cuda, as train.device (default cpu)");
  cmd->add_option("--tf32", a->tf32, "CUDA GEMMs on TF32 tensor cores, as train.tf32 (default true)");
  cmd->callback([a] {
    set_threads(a->threads);
    check(!a->data.empty() || !a->text.empty(), "eval needs --data GLOB or --text FILE");
    if (!a->text.empty()) return eval_text(*a);
    check(a->batches > 0 && a->micro_batch > 0 && a->seq_len >= 0, "--batches and --micro-batch must be positive");
    const TrainingBackend backend(a->device, a->tf32, /*local_rank=*/0, "--device");
    auto model = load_model(a->checkpoint, backend.ops(), /*trainable=*/false);
    const int64_t T = a->seq_len > 0 ? a->seq_len : model->config().block_size;
    check(T <= model->config().block_size, "--seq-len exceeds the model's block size");
    data::TokenLoader loader(a->data, a->micro_batch, T, false, 0);
    check(a->batches <= loader.batches_per_epoch(), "--batches " + std::to_string(a->batches) + " exceeds the " +
                                                        std::to_string(loader.batches_per_epoch()) +
                                                        " batches in " + a->data);
    dist::LocalComm comm;
    const EvalResult r = evaluate(*model, loader, a->batches, a->micro_batch, T, comm);
    nlohmann::json out = {{"loss", r.loss},
                          {"ppl", r.ppl},
                          {"tokens", r.tokens},
                          {"checkpoint", a->checkpoint},
                          {"device", a->device}};
    std::printf("%s\n", out.dump().c_str());
  });
}

}  // namespace hw::cli
