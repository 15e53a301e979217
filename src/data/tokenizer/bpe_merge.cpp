// The BPE merge loop, as `tokenizers` runs it: repeatedly merge the adjacent pair of lowest
// rank (leftmost among equals) until no adjacent pair has a merge.
#include <queue>
#include <vector>

#include "data/tokenizer/bpe_model.hpp"
#include "data/tokenizer/byte_map.hpp"

namespace hw::data {

namespace {

// Short pieces (nearly all of them): rescan the pairs after each merge.
void merge_short(const MergeTable& merges, std::vector<uint32_t>& ids) {
  while (ids.size() > 1) {
    const MergeTable::Value* best = nullptr;
    size_t at = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const MergeTable::Value* v = merges.find(ids[i], ids[i + 1]);
      if (v && (!best || v->rank < best->rank)) best = v, at = i;
    }
    if (!best) return;
    ids[at] = best->id;
    ids.erase(ids.begin() + std::ptrdiff_t(at) + 1);
  }
}

// Long pieces (runs of spaces or symbols): a heap of candidate pairs over a linked list, stale
// entries skipped when their pair no longer has the popped rank.
void merge_long(const MergeTable& merges, std::vector<uint32_t>& ids) {
  const int n = int(ids.size());
  std::vector<int> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) prev[size_t(i)] = i - 1, next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  std::vector<uint8_t> alive(static_cast<size_t>(n), 1);
  using Entry = std::pair<uint32_t, int>;  // (rank, left position): smallest first
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push = [&](int i) {
    const int j = next[size_t(i)];
    if (j < 0) return;
    if (const MergeTable::Value* v = merges.find(ids[size_t(i)], ids[size_t(j)])) heap.push({v->rank, i});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const auto [rank, i] = heap.top();
    heap.pop();
    if (!alive[size_t(i)]) continue;
    const int j = next[size_t(i)];
    if (j < 0) continue;
    const MergeTable::Value* v = merges.find(ids[size_t(i)], ids[size_t(j)]);
    if (!v || v->rank != rank) continue;
    ids[size_t(i)] = v->id;
    alive[size_t(j)] = 0;
    next[size_t(i)] = next[size_t(j)];
    if (next[size_t(i)] >= 0) prev[size_t(next[size_t(i)])] = i;
    if (prev[size_t(i)] >= 0) push(prev[size_t(i)]);
    push(i);
  }
  size_t w = 0;
  for (int i = 0; i >= 0 && i < n; i = next[size_t(i)]) ids[w++] = ids[size_t(i)];
  ids.resize(w);
}

}  // namespace

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  count_ = 0;
}

bool MergeTable::insert(uint32_t left, uint32_t right, Value v) {
  if (2 * (count_ + 1) > slots_.size()) {  // grow
    std::vector<Slot> old = std::move(slots_);
    reserve(old.size());
    for (const Slot& s : old)
      if (s.key != kEmpty) insert(uint32_t(s.key >> 32), uint32_t(s.key), s.value);
  }
  const uint64_t key = (uint64_t(left) << 32) | right;
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) return false;
    if (s.key == kEmpty) {
      s.key = key;
      s.value = v;
      ++count_;
      return true;
    }
  }
}

void bpe_merge(const BpeTokenizer::Impl& m, std::string_view piece, std::vector<uint32_t>& out) {
  if (m.ignore_merges) {  // a piece that is itself a token is taken whole (Llama 3)
    const ByteMap& bm = byte_map();
    std::string key;
    for (char c : piece) key += bm.to_utf8[static_cast<unsigned char>(c)];
    if (auto it = m.vocab.find(key); it != m.vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<uint32_t> ids(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) ids[i] = m.byte_id[static_cast<unsigned char>(piece[i])];
  if (ids.size() <= 24) merge_short(m.merges, ids);
  else merge_long(m.merges, ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace hw::data
