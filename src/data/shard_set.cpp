#include "data/shard_set.hpp"

#include <algorithm>

#include "headwise/data/loader.hpp"
#include "headwise/data/shards.hpp"

namespace hw::data {

ShardSet ShardSet::load(const std::string& glob) {
  ShardSet s;
  s.glob = glob;
  s.files = expand_glob(glob);
  s.tokens.reserve(s.files.size());
  for (const auto& f : s.files) {
    s.tokens.push_back(read_shard_tokens(f));
    s.total_tokens += static_cast<int64_t>(s.tokens.back().size());
  }
  return s;
}

std::string part_name(Part part) {
  switch (part) {
    case Part::All: return "";
    case Part::FirstHalf: return " (first half)";
    case Part::SecondHalf: return " (second half)";
  }
  return "";
}

void keep_part(ShardSet& s, Part part) {
  if (part == Part::All) return;
  const int64_t half = s.total_tokens / 2;
  int64_t offset = 0, total = 0;  // offset: first token of the current shard in the stream
  for (auto& tok : s.tokens) {
    const auto n = static_cast<int64_t>(tok.size());
    const int64_t lo = part == Part::FirstHalf ? 0 : half, hi = part == Part::FirstHalf ? half : s.total_tokens;
    const int64_t b = std::clamp(lo - offset, int64_t(0), n), e = std::clamp(hi - offset, int64_t(0), n);
    offset += n;
    std::vector<int32_t> kept(tok.begin() + b, tok.begin() + std::max(b, e));
    tok = std::move(kept);
    total += static_cast<int64_t>(tok.size());
  }
  s.total_tokens = total;
}

}  // namespace hw::data
