#pragma once
// `headwise prepare`: text files -> llm.c token shards (shards.hpp), streaming.
//
// Each input file is one document, encoded on its own; documents are joined by the tokens of
// one '\n' (the byte tokenizer's old behaviour: files concatenated with a newline), or, with
// append_eos, each is followed by the tokenizer's end-of-text token instead. A file is read in
// chunks of about chunk_bytes cut at line starts (a '\n' followed by a printable ASCII byte:
// a piece boundary of every supported pre-tokenizer, so the ids equal those of the whole file),
// and the chunks are encoded by `threads` workers and written in order, so memory does not grow
// with the corpus and the output does not depend on the thread count. Train is the first
// 1 - val_fraction of all tokens, val the rest. Everything is written under a temporary
// directory inside out_dir and moved into place at the end: a failure leaves no shard behind.
#include <cstdint>
#include <string>
#include <vector>

namespace hw::data {

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  double val_fraction = 0.05;
  int64_t shard_tokens = 100'000'000;
  std::string tokenizer;  // a tokenizer.json (copied into out_dir); empty: bytes (vocabulary 256)
  int threads = 1;
  bool append_eos = false;
  bool progress = false;  // a progress line on stderr (MB/s, tokens, ETA)
  int64_t chunk_bytes = int64_t(1) << 20;
};

// Returns a one-line summary.
std::string prepare_shards(const PrepareOptions& options);

}  // namespace hw::data
