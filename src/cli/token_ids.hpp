#pragma once
// Whitespace-separated token ids, as `generate --prompt-tokens` and `tokenize --decode` read them.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"

namespace hw::cli {

// Every word must be a whole non-negative integer below `vocab`; otherwise one error naming
// `where` and the word.
inline std::vector<int32_t> parse_token_ids(std::istream& in, const std::string& where, int64_t vocab) {
  std::vector<int32_t> ids;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == word.size(), where + ": '" + text_brief(word) + "' is not a token id");
    check(v >= 0 && v < vocab,
          where + ": token " + text_brief(word) + " is outside the vocabulary of " + std::to_string(vocab));
    ids.push_back(int32_t(v));
  }
  check(!in.bad(), where + ": read error");
  return ids;
}

}  // namespace hw::cli
