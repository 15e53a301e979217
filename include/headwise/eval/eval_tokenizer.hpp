#pragma once
// The checkpoint's own tokenizer as lm-evaluation-harness's HF model uses it for scoring
// (lm_eval/models/huggingface.py tok_encode, lm_eval/api/model.py _encode_pair / loglikelihood):
// the checkpoint's tokenizer.json (byte-level BPE) giving the ids of transformers'
// tokenizer.encode(text), i.e. with the special tokens its post-processor's template puts before
// the text (Llama 3's <|begin_of_text|>; GPT-2 and Qwen 2 have none), or bytes for a byte-level
// checkpoint (vocab 256) without one. The prefix token (what an empty context or the first
// rolling window conditions on: the harness's prefix_token_id, BOS else EOS) is that template's
// first token, else the tokenizer's end-of-text token, and '\n' (10) for bytes (a byte model has
// no special token; '\n' is what `prepare` joins files by).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/data/bpe_tokenizer.hpp"

namespace hw::eval {

class EvalTokenizer {
 public:
  // DIR/tokenizer.json, or bytes when the model's vocabulary is 256 and there is none; anything
  // else throws one hw::Error naming the checkpoint ("needs a tokenizer").
  static EvalTokenizer for_checkpoint(const std::string& dir, int64_t model_vocab);
  static EvalTokenizer bytes();
  // bos: the template's leading special tokens (empty: none).
  static EvalTokenizer bpe(data::BpeTokenizer tok, std::vector<int32_t> bos = {});

  // special: with the template's leading tokens (transformers' add_special_tokens=True, the
  // default of tok_encode); the empty-context rule encodes without them.
  std::vector<int32_t> encode(std::string_view text, bool special = true) const;
  // The harness's prefix_token_id; throws naming the tokenizer when it has no end-of-text token.
  int32_t prefix_token() const;
  std::string describe() const;

 private:
  std::optional<data::BpeTokenizer> bpe_;
  std::vector<int32_t> bos_;
  std::string bos_text_;  // the first template token's text
};

// The ids tok's post_processor puts before a text (Llama 3's BOS; none for GPT-2 and Qwen2).
// Throws naming `where` for a template that appends tokens after the text (the harness's
// continuation split would then be wrong) and for a post_processor type the tokenizer refuses.
std::vector<int32_t> template_prefix_ids(const data::BpeTokenizer& tok, const std::string& where);

// A request's tokens: score log P(continuation | context).
struct LlRequest {
  std::vector<int32_t> context, continuation;
};

// lm_eval/api/model.py: for a non-empty context, _encode_pair: trailing whitespace of the context
// moves to the front of the continuation (n_spaces = len(context) - len(context.rstrip())), then
// whole = encode(context + continuation), context_enc = encode(context), continuation_enc =
// whole[len(context_enc):] (so a choice is tokenized as it reads after its context). For an empty
// context (loglikelihood): continuation_enc = encode(continuation) without template tokens and the context is the prefix
// token, or, when the continuation starts with that token, its first token.
LlRequest encode_pair(const EvalTokenizer& tok, const std::string& context, const std::string& continuation);

}  // namespace hw::eval
