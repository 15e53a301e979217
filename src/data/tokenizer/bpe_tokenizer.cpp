// Encoding (added tokens split out, pre-tokenize, merge each piece through a cache) and decoding.
#include "headwise/data/bpe_tokenizer.hpp"

#include <sstream>
#include <unordered_map>

#include "data/tokenizer/bpe_model.hpp"
#include "data/tokenizer/nfc.hpp"
#include "data/tokenizer/unicode_ranges.hpp"
#include "headwise/core/error.hpp"

namespace hw::data {

struct BpeCache::Impl {
  // piece bytes -> [offset, offset + count) in ids
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> pieces;
  std::vector<uint32_t> ids;
};

BpeCache::BpeCache() : impl(std::make_unique<Impl>()) {}
BpeCache::~BpeCache() = default;

namespace {

constexpr size_t kCacheMaxIds = size_t(1) << 22;  // bounded memory: start over when full

void encode_ordinary(const BpeTokenizer::Impl& m, std::string_view text, std::vector<uint32_t>& out,
                     BpeCache* cache) {
  pretokenize(m.pre, text, [&](size_t b, size_t e) {
    const std::string_view piece = text.substr(b, e - b);
    if (!cache) {
      bpe_merge(m, piece, out);
      return;
    }
    BpeCache::Impl& c = *cache->impl;
    const std::string key(piece);
    if (auto it = c.pieces.find(key); it != c.pieces.end()) {
      out.insert(out.end(), c.ids.begin() + it->second.first, c.ids.begin() + it->second.first + it->second.second);
      return;
    }
    const size_t before = out.size();
    bpe_merge(m, piece, out);
    if (c.ids.size() > kCacheMaxIds) c.pieces.clear(), c.ids.clear();
    c.pieces.emplace(key, std::make_pair(uint32_t(c.ids.size()), uint32_t(out.size() - before)));
    c.ids.insert(c.ids.end(), out.begin() + std::ptrdiff_t(before), out.end());
  });
}

// Splits text on the added tokens of [first, last) (leftmost match, the longest there), encoding
// the text between matches with the next group (or as ordinary text when none is left). As in
// `tokenizers`, the normalizer runs on what the tokens that are not normalized leave: before the
// normalized tokens are matched and the rest is pre-tokenized (`normalized` says it has run).
void encode_split(const BpeTokenizer::Impl& m, size_t first, size_t last, std::string_view text,
                  std::vector<uint32_t>& out, BpeCache* cache, bool normalized) {
  if (m.nfc && !normalized && (first == last || m.added[first].normalized)) {
    const std::string n = nfc(text);
    encode_split(m, first, last, n, out, cache, true);
    return;
  }
  if (first == last) {
    encode_ordinary(m, text, out, cache);
    return;
  }
  // The next group: tokens with the same `normalized` flag.
  size_t group_end = first;
  while (group_end < last && m.added[group_end].normalized == m.added[first].normalized) ++group_end;
  bool first_byte[256] = {};
  for (size_t k = first; k < group_end; ++k) first_byte[static_cast<unsigned char>(m.added[k].content[0])] = true;
  size_t start = 0, pos = 0;
  while (pos < text.size()) {
    if (!first_byte[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const AddedToken* best = nullptr;
    for (size_t k = first; k < group_end; ++k) {
      const AddedToken& a = m.added[k];
      if (text.compare(pos, a.content.size(), a.content) == 0 && (!best || a.content.size() > best->content.size()))
        best = &a;
    }
    if (!best) {
      ++pos;
      continue;
    }
    if (pos > start) encode_split(m, group_end, last, text.substr(start, pos - start), out, cache, normalized);
    out.push_back(best->id);
    pos += best->content.size();
    start = pos;
  }
  if (start < text.size()) encode_split(m, group_end, last, text.substr(start), out, cache, normalized);
}

}  // namespace

void BpeTokenizer::encode(std::string_view text, std::vector<uint32_t>& out, BpeCache* cache) const {
  encode_split(*impl_, 0, impl_->added.size(), text, out, cache, false);
}

std::vector<uint32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> out;
  BpeCache cache;
  encode(text, out, &cache);
  return out;
}

namespace {
const PostProcessor& supported_post_processor(const BpeTokenizer::Impl& impl) {
  if (!impl.post.unsupported.empty())
    fail("tokenizer '" + impl.name + "': post_processor type '" + impl.post.unsupported +
         "' is not supported (TemplateProcessing, ByteLevel, Bert/RobertaProcessing and Sequences of them are)");
  return impl.post;
}
}  // namespace

const std::vector<uint32_t>& BpeTokenizer::special_prefix() const { return supported_post_processor(*impl_).prefix; }
const std::vector<uint32_t>& BpeTokenizer::special_suffix() const { return supported_post_processor(*impl_).suffix; }

std::vector<uint32_t> BpeTokenizer::encode_for_model(std::string_view text) const {
  const PostProcessor& p = supported_post_processor(*impl_);
  std::vector<uint32_t> out = p.prefix;
  BpeCache cache;
  encode(text, out, &cache);
  out.insert(out.end(), p.suffix.begin(), p.suffix.end());
  return out;
}

void BpeTokenizer::append_token_bytes(uint32_t id, std::string& out) const {
  if (id >= impl_->id_known.size() || !impl_->id_known[id])
    fail("token " + std::to_string(id) + " is not in the vocabulary of tokenizer '" + impl_->name + "'");
  out += impl_->id_bytes[id];
}

std::string BpeTokenizer::decode(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (uint32_t id : ids) append_token_bytes(id, out);
  return out;
}

bool BpeTokenizer::has_token(uint32_t id) const { return id < impl_->id_known.size() && impl_->id_known[id]; }

int BpeTokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<uint32_t> BpeTokenizer::added_token_id(const std::string& content) const {
  for (const AddedToken& a : impl_->added)
    if (a.content == content) return a.id;
  return std::nullopt;
}

std::optional<uint32_t> BpeTokenizer::eos_id() const {
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>", "<eos>"})
    for (const AddedToken& a : impl_->added)
      if (a.special && a.content == name) return a.id;
  return std::nullopt;
}

bool BpeTokenizer::cuttable_at_lines() const {
  for (const AddedToken& a : impl_->added)
    if (a.content.find('\n') != std::string::npos) return false;
  return true;
}

std::string BpeTokenizer::describe() const {
  const char* pre = impl_->pre == PreTokenizer::Gpt2 ? "GPT-2" : impl_->pre == PreTokenizer::Llama3 ? "Llama 3" : "Qwen 2";
  std::ostringstream os;
  os << "byte-level BPE, " << pre << " pre-tokenizer, vocabulary " << impl_->vocab_size << " (" << impl_->n_merges
     << " merges, " << impl_->added.size() << " added tokens" << (impl_->nfc ? ", NFC normalizer" : "") << ")";
  return os.str();
}

std::string Utf8Holdback::push(std::string_view bytes) {
  held_ += bytes;
  const size_t n = unicode::complete_utf8_prefix(held_);
  std::string ready = held_.substr(0, n);
  held_.erase(0, n);
  return ready;
}

std::string Utf8Holdback::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace hw::data
