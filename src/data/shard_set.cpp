#include "data/shard_set.hpp"

#include "headwise/data/shards.hpp"

namespace hw::data {

ShardSet ShardSet::load(const std::string& glob) {
  ShardSet s;
  s.glob = glob;
  s.files = expand_glob(glob);
  s.tokens.reserve(s.files.size());
  for (const auto& f : s.files) {
    s.tokens.push_back(read_shard(f));
    s.total_tokens += static_cast<int64_t>(s.tokens.back().size());
  }
  return s;
}

}  // namespace hw::data
