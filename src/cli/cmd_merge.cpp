// headwise merge --checkpoint IN --out OUT
// Folds a checkpoint's LoRA adapters into the weights they adapt (W += alpha/rank (B A)^T in
// W's layout) and writes OUT without adapters: model.safetensors and config.json as the trainer
// writes them (and the input's tokenizer files), so an all-softmax learned-position model opens in
// transformers as plain GPT-2.
// OUT appears complete or not at all; prints the largest logit change on a probe sequence.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/folder_lock.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::cli {

namespace {
namespace fs = std::filesystem;

struct MergeArgs {
  std::string checkpoint, out;
};

// Logits of one fixed probe sequence (tokens 0, 1, 2, ... mod vocab), for the before/after check.
std::vector<float> probe_logits(Model<float>& m) {
  const int64_t T = std::min<int64_t>(m.config().block_size, 64);
  std::vector<int32_t> x(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) x[size_t(t)] = int32_t((7 * t + 1) % m.config().vocab_size);
  m.forward(x.data(), nullptr, 1, T);
  std::vector<float> logits;
  m.read_logits(logits);
  return logits;
}
}  // namespace

void add_merge_command(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  CLI::App* cmd = app.add_subcommand("merge", "Fold a checkpoint's LoRA adapters into its weights");
  cmd->add_option("--checkpoint", a->checkpoint, "Input checkpoint directory (with adapter_model.safetensors)")
      ->required();
  cmd->add_option("--out", a->out, "Output checkpoint directory (written atomically)")->required();
  cmd->callback([a] {
    check(fs::exists(a->checkpoint), "--checkpoint " + a->checkpoint + ": no such directory");
    check(!fs::exists(a->out) || !fs::equivalent(a->checkpoint, a->out),
          "--out must not be the input checkpoint (" + a->checkpoint + ")");
    // One writer per output (folder_lock.hpp): OUT is replaced whole by a rename, so the lock
    // is OUT.lock beside it, held from here to the rename.
    const io::FolderLock lock = io::FolderLock::beside(a->out, "merge");
    auto model = load_model(a->checkpoint, cpu_backend<float>(), /*trainable=*/false);
    const LoraConfig lora = model->config().lora;
    check(lora.enabled(), "--checkpoint " + a->checkpoint + ": has no LoRA adapters to merge (config.json has no headwise_lora)");
    const std::vector<float> before = probe_logits(*model);
    model->merge_adapters();
    const std::vector<float> after = probe_logits(*model);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      diff = std::max(diff, std::abs(double(before[i]) - double(after[i])));
      scale = std::max(scale, std::abs(double(before[i])));
    }
    const std::string tmp = a->out + ".tmp";
    io::fresh_dir(tmp);
    save_model_files(*model, tmp);
    copy_side_files(a->checkpoint, tmp);  // the merged model keeps its tokenizer
    io::replace_dir_atomic(tmp, a->out);
    std::printf("merged LoRA rank %d (alpha %g) of %s into %s\n", lora.rank, lora.alpha, a->checkpoint.c_str(),
                a->out.c_str());
    std::printf("probe logits: max |merged - unmerged| = %.3g (%.3g of the largest logit)\n", diff,
                scale > 0 ? diff / scale : 0.0);
  });
}

}  // namespace hw::cli
