// `headwise prepare`: text files -> train/val token shards (bytes, or the ids of a Hugging Face
// byte-level BPE tokenizer.json, which is copied next to the shards).
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "headwise/data/prepare.hpp"

namespace hw::cli {

void add_prepare_command(CLI::App& app) {
  // The options are bound to storage that must outlive parsing; the callback owns a share.
  auto o = std::make_shared<data::PrepareOptions>();
  CLI::App* cmd = app.add_subcommand("prepare", "Tokenize text files into train/val token shards (llm.c .bin)");
  cmd->add_option("--input", o->inputs, "Text file(s), one document each, in the given order")
      ->required()
      ->expected(1, -1);
  cmd->add_option("--output", o->out_dir, "Directory for train_NNNNNN.bin, val_NNNNNN.bin (and tokenizer.json)")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "Hugging Face tokenizer.json (byte-level BPE); default: bytes");
  cmd->add_option("--val-fraction", o->val_fraction, "Fraction of tokens (the tail) kept for validation")
      ->capture_default_str();
  cmd->add_option("--shard-tokens", o->shard_tokens, "At most this many tokens per shard")->capture_default_str();
  cmd->add_option("--threads", o->threads, "Encoding threads (the shards do not depend on it)")
      ->capture_default_str();
  cmd->add_flag("--append-eos", o->append_eos,
                "End each input file with the tokenizer's end-of-text token (instead of joining files with a newline)");
  cmd->callback([o] {
    o->progress = true;
    spdlog::info("{}", data::prepare_shards(*o));
  });
}

}  // namespace hw::cli
