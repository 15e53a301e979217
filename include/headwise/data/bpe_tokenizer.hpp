#pragma once
// Byte-level BPE from a Hugging Face tokenizer.json (GPT-2, Llama 3, Qwen 2 style), giving the
// ids `tokenizers` gives for Tokenizer.encode(text, add_special_tokens=False): added/special
// tokens split out of the text first, then the file's pre-tokenizer (GPT-2's ByteLevel regex or
// a Split regex of Llama 3 / Qwen 2), GPT-2's byte-to-unicode map, merges by rank. The
// post-processor's special tokens (Llama 3's <|begin_of_text|>) only through encode_for_model,
// as transformers' tokenizer(text) adds them (`prepare --append-eos` adds EOS itself).
// Anything else in the file (another model type, a normalizer, byte_fallback, an unknown regex)
// is refused when the file is loaded. The byte tokenizer (tokenizer.hpp) is the "no tokenizer"
// case.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hw::data {

// Per-thread memo of pieces already merged (merging is the slow part; corpora repeat words).
class BpeCache {
 public:
  BpeCache();
  ~BpeCache();
  BpeCache(const BpeCache&) = delete;
  BpeCache& operator=(const BpeCache&) = delete;
  struct Impl;
  std::unique_ptr<Impl> impl;
};

class BpeTokenizer {
 public:
  // Throws hw::Error naming the file and the key on anything it cannot honour.
  static BpeTokenizer load(const std::string& path);
  static BpeTokenizer from_json_text(const std::string& json_text, const std::string& name);

  // Appends the ids of text (any bytes: a stray non-UTF-8 byte is its own symbol) to out.
  void encode(std::string_view text, std::vector<uint32_t>& out, BpeCache* cache = nullptr) const;
  std::vector<uint32_t> encode(std::string_view text) const;
  // encode(text) with the post_processor's special tokens around it (generate --prompt);
  // throws naming a post_processor type it does not know.
  std::vector<uint32_t> encode_for_model(std::string_view text) const;
  // The ids the post_processor puts before and after the text (what encode_for_model adds);
  // throw like it for a post_processor type it does not know.
  const std::vector<uint32_t>& special_prefix() const;
  const std::vector<uint32_t>& special_suffix() const;
  // The bytes of the tokens (added tokens as their content); throws on an id outside the
  // vocabulary. decode(encode(x)) == x for every byte string x.
  std::string decode(const std::vector<uint32_t>& ids) const;
  void append_token_bytes(uint32_t id, std::string& out) const;
  bool has_token(uint32_t id) const;  // an assigned id (the id space may have holes)

  int vocab_size() const;  // largest id + 1 (added tokens included)
  std::optional<uint32_t> added_token_id(const std::string& content) const;
  // The id appended by --append-eos: an added special token named like an end of text
  // (<|endoftext|>, <|end_of_text|>, </s>, <|im_end|>, <eos>), the first found in that order.
  std::optional<uint32_t> eos_id() const;
  // True when no added token holds a '\n': then a line start followed by a non-space byte
  // is a piece boundary of every supported pre-tokenizer, so text may be cut there and the
  // parts encoded independently (prepare's parallel chunks).
  bool cuttable_at_lines() const;
  std::string describe() const;  // "byte-level BPE, GPT-2 pre-tokenizer, vocabulary 4352"

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

// For streaming decoded text: takes token bytes and gives back what can be printed without
// splitting a UTF-8 character (an incomplete sequence at the end is held for the next call).
class Utf8Holdback {
 public:
  std::string push(std::string_view bytes);
  std::string flush();  // whatever is held, complete or not

 private:
  std::string held_;
};

}  // namespace hw::data
