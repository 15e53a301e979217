// The harness's tokenization of scoring requests (eval_tokenizer.hpp).
#include "headwise/eval/eval_tokenizer.hpp"

#include <filesystem>

#include "headwise/core/error.hpp"
#include "headwise/data/tokenizer.hpp"
#include "headwise/eval/py_text.hpp"
#include "headwise/io/files.hpp"

namespace hw::eval {

EvalTokenizer EvalTokenizer::for_checkpoint(const std::string& dir, int64_t model_vocab) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer.json").string();
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    data::BpeTokenizer tok = data::BpeTokenizer::load(path);  // checks the file (it parses as JSON)
    check(tok.vocab_size() <= model_vocab, path + " has " + std::to_string(tok.vocab_size()) +
                                               " tokens, more than the model's vocab_size " +
                                               std::to_string(model_vocab));
    std::vector<int32_t> bos = template_prefix_ids(tok, path);
    for (int32_t id : bos)
      check(id < model_vocab, path + ": post_processor token " + std::to_string(id) + " is outside the vocabulary");
    return bpe(std::move(tok), std::move(bos));
  }
  check(model_vocab == data::kByteVocab,
        "checkpoint " + dir + " has no tokenizer.json and is not byte-level (vocab " + std::to_string(model_vocab) +
            "): scoring text needs a tokenizer (copy the tokenizer.json the model was trained with into it)");
  return bytes();
}

EvalTokenizer EvalTokenizer::bytes() { return EvalTokenizer(); }

EvalTokenizer EvalTokenizer::bpe(data::BpeTokenizer tok, std::vector<int32_t> bos) {
  EvalTokenizer t;
  t.bpe_ = std::move(tok);
  t.bos_ = std::move(bos);
  if (!t.bos_.empty()) t.bos_text_ = t.bpe_->decode({uint32_t(t.bos_.front())});
  return t;
}

std::vector<int32_t> template_prefix_ids(const data::BpeTokenizer& tok, const std::string& where) {
  // The tokens the post_processor puts around the text, as transformers' encode adds them.
  check(tok.special_suffix().empty(),
        where + ": the post_processor template appends tokens after the text; scoring does not support it");
  return std::vector<int32_t>(tok.special_prefix().begin(), tok.special_prefix().end());
}

std::vector<int32_t> EvalTokenizer::encode(std::string_view text, bool special) const {
  std::vector<int32_t> ids;
  // huggingface.py tok_encode: no template tokens for a text that already starts with the BOS.
  if (special && !bos_.empty() && text.substr(0, bos_text_.size()) != bos_text_) ids = bos_;
  if (bpe_) {
    for (uint32_t id : bpe_->encode(text)) ids.push_back(int32_t(id));
  } else {
    for (char c : text) ids.push_back(int32_t(static_cast<unsigned char>(c)));
  }
  return ids;
}

int32_t EvalTokenizer::prefix_token() const {
  if (!bpe_) return '\n';
  if (!bos_.empty()) return bos_.front();
  const std::optional<uint32_t> eos = bpe_->eos_id();
  check(eos.has_value(), "the tokenizer (" + bpe_->describe() +
                             ") has no end-of-text token to condition an empty context or the first window on");
  return int32_t(*eos);
}

std::string EvalTokenizer::describe() const { return bpe_ ? bpe_->describe() : "bytes (vocabulary 256)"; }

LlRequest encode_pair(const EvalTokenizer& tok, const std::string& context, const std::string& continuation) {
  LlRequest r;
  if (context.empty()) {
    r.continuation = tok.encode(continuation, /*special=*/false);
    check(!r.continuation.empty(), "a choice encodes to no tokens");
    const int32_t prefix = tok.prefix_token();
    if (r.continuation.front() != prefix) {
      r.context = {prefix};
    } else {
      r.context = {prefix};
      r.continuation.erase(r.continuation.begin());
    }
    return r;
  }
  const std::string ctx = py_rstrip(context);
  const std::string cont = context.substr(ctx.size()) + continuation;
  const std::vector<int32_t> whole = tok.encode(ctx + cont);
  r.context = tok.encode(ctx);
  check(r.context.size() <= whole.size(), "context longer than context + choice");
  r.continuation.assign(whole.begin() + std::ptrdiff_t(r.context.size()), whole.end());
  return r;
}

}  // namespace hw::eval
