#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "headwise/core/error.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/data/tokenizer.hpp"

namespace hw::data {

namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail("input file '" + path + "' does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open input file '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("cannot read input file '" + path + "'");
  return text;
}

std::string shard_name(const std::string& split, int64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "_%06lld.bin", static_cast<long long>(i));
  return split + buf;
}

// Writes tokens[begin, end) as consecutive shards of at most shard_tokens; returns the count.
int64_t write_split(const fs::path& dir, const std::string& split, const std::vector<uint16_t>& tokens,
                    size_t begin, size_t end, int64_t shard_tokens) {
  int64_t n = 0;
  for (size_t lo = begin; lo < end; lo += static_cast<size_t>(shard_tokens), ++n) {
    const size_t hi = std::min(end, lo + static_cast<size_t>(shard_tokens));
    const std::vector<uint16_t> part(tokens.begin() + static_cast<std::ptrdiff_t>(lo),
                                     tokens.begin() + static_cast<std::ptrdiff_t>(hi));
    write_shard((dir / shard_name(split, n)).string(), part);
  }
  return n;
}

}  // namespace

std::string prepare_text_shards(const std::vector<std::string>& inputs, const std::string& out_dir,
                                double val_fraction, int64_t shard_tokens) {
  check(!inputs.empty(), "prepare: no input files");
  check(!out_dir.empty(), "prepare: empty output directory");
  check(val_fraction >= 0.0 && val_fraction < 1.0,
        "prepare: --val-fraction must be in [0, 1), got " + std::to_string(val_fraction));
  check(shard_tokens > 0 && shard_tokens <= std::numeric_limits<int32_t>::max(),
        "prepare: --shard-tokens must be in [1, 2^31-1], got " + std::to_string(shard_tokens));

  // Files are joined with one '\n' so the last line of one never runs into the next.
  std::string text;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) text += '\n';
    text += read_text(inputs[i]);
  }
  const std::vector<uint16_t> tokens = encode_bytes(text);
  const auto n = static_cast<int64_t>(tokens.size());
  int64_t n_val = static_cast<int64_t>(std::floor(static_cast<double>(n) * val_fraction));
  if (val_fraction > 0.0) n_val = std::max<int64_t>(n_val, 1);
  check(n - n_val > 0, "prepare: inputs hold " + std::to_string(n) + " bytes, too few for a train and a val split");

  // Refuse to mix with an earlier run's shards: a leftover train_000007.bin would silently
  // join the glob of a smaller new dataset.
  const fs::path dir(out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("prepare: cannot create output directory '" + out_dir + "' (" + ec.message() + ")");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if ((name.starts_with("train_") || name.starts_with("val_")) && name.ends_with(".bin"))
      fail("prepare: output directory '" + out_dir + "' already holds shards (" + name + "); remove them first");
  }

  const auto n_train = static_cast<size_t>(n - n_val);
  const int64_t train_shards = write_split(dir, "train", tokens, 0, n_train, shard_tokens);
  const int64_t val_shards = write_split(dir, "val", tokens, n_train, tokens.size(), shard_tokens);

  std::ostringstream os;
  os << "prepared " << n << " byte tokens from " << inputs.size() << " file(s) into '" << out_dir << "': train "
     << n_train << " tokens in " << train_shards << " shard(s), val " << n_val << " tokens in " << val_shards
     << " shard(s)";
  return os.str();
}

}  // namespace hw::data
