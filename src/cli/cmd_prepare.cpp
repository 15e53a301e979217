// `headwise prepare`: text files -> byte-level token shards (train_*.bin, val_*.bin).
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "headwise/data/tokenizer.hpp"

namespace hw::cli {

namespace {
struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string output;
  double val_fraction = 0.05;
  int64_t shard_tokens = 100'000'000;
};
}  // namespace

void add_prepare_command(CLI::App& app) {
  // The options are bound to storage that must outlive parsing; the callback owns a share.
  auto args = std::make_shared<PrepareArgs>();
  CLI::App* cmd = app.add_subcommand("prepare", "Tokenize text files (bytes) into train/val token shards");
  cmd->add_option("--input", args->inputs, "Text file(s) to tokenize, concatenated in the given order")
      ->required()
      ->expected(1, -1);
  cmd->add_option("--output", args->output, "Directory for train_NNNNNN.bin and val_NNNNNN.bin")->required();
  cmd->add_option("--val-fraction", args->val_fraction, "Fraction of tokens (the tail) kept for validation")
      ->capture_default_str();
  cmd->add_option("--shard-tokens", args->shard_tokens, "At most this many tokens per shard")
      ->capture_default_str();
  cmd->callback([args] {
    spdlog::info("{}", data::prepare_text_shards(args->inputs, args->output, args->val_fraction, args->shard_tokens));
  });
}

}  // namespace hw::cli
