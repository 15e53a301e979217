// headwise eval --checkpoint CKPT --data GLOB [--batches N] [--micro-batch B] [--seq-len T]
//               [--device cpu|cuda] [--tf32 true|false]
// headwise eval --checkpoint CKPT --text FILE [--text FILE]... [--context N] [--stride S] [--micro-batch B]
//   perplexity of text files (each one document) with the checkpoint's tokenizer, as
//   lm-evaluation-harness's wikitext task (src/eval/text_perplexity.cpp).
// --dump FILE (with --data): the first batch's logits and every parameter's gradient of its mean
//   loss, for cross-checks of another implementation (the PyTorch model of mixed plans).
#include <cstdio>
#include <cstring>

#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/eval/text_perplexity.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/hf_family.hpp"
#include "headwise/train/trainer.hpp"
#include "headwise/train/training_backend.hpp"

namespace hw::cli {

namespace {
struct EvalArgs {
  std::string checkpoint, data, device = "cpu", dump, dump_precision = "fp32";
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

// Logits of the first batch and every parameter's gradient of its mean loss, in the Hugging Face
// tensors (hf_family.hpp), into one safetensors file in F's dtype: "logits" [B, T, vocab], "loss"
// [1] (float64), "grad.<tensor name>". Without dropout.
template <class F>
void dump_batch(Model<F>& model, const int32_t* x, const int32_t* y, int64_t B, int64_t T, const std::string& path) {
  constexpr DType dt = dtype_of<F>();
  const int64_t V = model.config().vocab_size;
  model.forward(x, nullptr, B, T);
  std::vector<F> logits;
  model.read_logits(logits);
  model.zero_grads();
  const double loss = model.forward_backward(x, y, B, T, 1.0);
  io::SafetensorsWriter w;
  w.set_metadata("producer", "headwise eval --dump");
  w.add("logits", dt, {B, T, V}, logits.data());
  w.add("loss", DType::F64, {1}, &loss);
  std::vector<F> stored;
  std::vector<float> index, at;
  for (const auto& s : model.specs()) {
    if (s.role != ParamRole::Param) continue;
    const Tensor& g = model.grads().get(s.name);
    stored.assign(size_t(stored_numel(s)), F(0));
    stored_from_compact(s, s.layer >= 0 ? &model.layouts()[size_t(s.layer)] : nullptr, g.as<F>(), stored.data());
    // hf_split works on floats: split the indices of the stored tensor, then gather (exact in double).
    index.resize(stored.size());
    for (size_t i = 0; i < index.size(); ++i) index[i] = float(i);
    for (const auto& t : hf_tensors(model.config(), s)) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      at.resize(size_t(n));
      hf_split(s, t, index.data(), at.data());
      std::vector<F> piece(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) piece[size_t(i)] = stored[size_t(at[size_t(i)])];
      w.add("grad." + t.name, dt, t.shape, piece.data());
    }
  }
  w.write(path);
}

// --dump: the checkpoint's fp32 model, or (--dump-precision fp64) the same values in a double model.
void dump_first_batch(const EvalArgs& a, int64_t T) {
  check(a.dump_precision == "fp32" || a.dump_precision == "fp64",
        "--dump-precision must be fp32 or fp64, got '" + a.dump_precision + "'");
  ModelConfig cfg = read_checkpoint_config(a.checkpoint);
  cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = 0.0;
  cfg.lora.dropout = 0.0;
  auto model = load_model(a.checkpoint, cfg, cpu_backend<float>(), /*trainable=*/true);
  const int64_t B = a.micro_batch;
  data::TokenLoader loader(a.data, B, T, false, 0);
  std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
  loader.fetch(0, x.data(), y.data());
  if (a.dump_precision == "fp32") return dump_batch(*model, x.data(), y.data(), B, T, a.dump);
  Model<double> dm(model->config(), cpu_backend<double>(), model->head_extras(), /*trainable=*/true);
  for (Arena* from : {&model->params(), &model->buffers()}) {
    Arena& to = from == &model->params() ? dm.params() : dm.buffers();
    for (const auto& t : from->tensors()) {
      Tensor& d = to.get(t->name);
      if (t->dtype == DType::I32) {
        std::memcpy(d.data, t->data, t->nbytes());
        continue;
      }
      for (int64_t i = 0; i < t->numel(); ++i) d.as<double>()[i] = double(t->f32()[i]);
    }
  }
  dm.refresh_static_normalisers();
  dump_batch(dm, x.data(), y.data(), B, T, a.dump);
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
  cmd->add_option("--dump", a->dump,
                  "--data: also write the first batch's logits and each parameter's gradient of its mean loss "
                  "(Hugging Face names, safetensors: logits, loss, grad.<name>) to this file, for cross-checks");
  cmd->add_option("--dump-precision", a->dump_precision,
                  "--dump: fp32 (the model as it runs) or fp64 (the same values in a double-precision model)");
  cmd->callback([a] {
    set_threads(a->threads);
    check(!a->data.empty() || !a->text.empty(), "eval needs --data GLOB or --text FILE");
    check(a->dump.empty() || a->text.empty(), "--dump goes with --data (the first batch of the shards)");
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
    if (!a->dump.empty()) {
      check(a->device == "cpu", "eval --dump runs on the CPU backend (--device cpu)");
      dump_first_batch(*a, T);
    }
  });
}

}  // namespace hw::cli
