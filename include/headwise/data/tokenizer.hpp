#pragma once
// The built-in byte-level tokenizer: token = byte value (vocabulary 256).
#include <cstdint>
#include <string>
#include <vector>

namespace hw::data {

constexpr int kByteVocab = 256;
std::vector<uint16_t> encode_bytes(const std::string& text);
std::string decode_bytes(const std::vector<uint16_t>& tokens);

// `headwise prepare`: read text files, tokenize, split the concatenation into train (first
// 1 - val_fraction) and val (the rest), write DIR/train_NNNNNN.bin and DIR/val_NNNNNN.bin
// with at most shard_tokens tokens per shard. Returns a one-line summary.
std::string prepare_text_shards(const std::vector<std::string>& inputs, const std::string& out_dir,
                                double val_fraction, int64_t shard_tokens);

}  // namespace hw::data
