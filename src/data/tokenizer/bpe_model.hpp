#pragma once
// The loaded form of a tokenizer.json (filled by tokenizer_json.cpp, used by bpe_merge.cpp and
// bpe_tokenizer.cpp).
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizer/pretokenizer.hpp"
#include "data/tokenizer/post_processor.hpp"
#include "headwise/data/bpe_tokenizer.hpp"

namespace hw::data {

// (left id, right id) -> (rank, merged id), open addressing: the merge loop's only lookup.
class MergeTable {
 public:
  struct Value {
    uint32_t rank, id;
  };
  void reserve(size_t n);
  bool insert(uint32_t left, uint32_t right, Value v);  // false when the pair is already there
  const Value* find(uint32_t left, uint32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = (uint64_t(left) << 32) | right;
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  struct Slot {
    uint64_t key = kEmpty;
    Value value{};
  };
  static size_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return size_t(k);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false;
  bool normalized = false;
};

struct BpeTokenizer::Impl {
  std::string name;  // the file, for messages
  PreTokenizer pre = PreTokenizer::Gpt2;
  bool ignore_merges = false;
  bool nfc = false;  // "normalizer": NFC (alone or the only member of a Sequence)
  std::unordered_map<std::string, uint32_t> vocab;  // byte-level token string -> id
  std::array<uint32_t, 256> byte_id{};              // the token of each single byte
  MergeTable merges;
  size_t n_merges = 0;
  std::vector<AddedToken> added;       // matched before normalized ones, as `tokenizers` does
  std::vector<std::string> id_bytes;   // id -> the bytes it decodes to
  std::vector<uint8_t> id_known;       // id -> 1 when the id is assigned
  int vocab_size = 0;
  PostProcessor post;  // the special tokens tokenizer(text) adds (encode_for_model)
};

// Merges one piece's bytes into ids (appended to out), lowest rank first, leftmost on ties.
void bpe_merge(const BpeTokenizer::Impl& m, std::string_view piece, std::vector<uint32_t>& out);

}  // namespace hw::data
