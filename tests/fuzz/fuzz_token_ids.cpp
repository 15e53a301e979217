// Fuzz target: token-id files (generate --prompt-tokens, tokenize --decode): whitespace-separated
// ids checked against a vocabulary.
#include <sstream>
#include <string>

#include "cli/token_ids.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  hw::fuzz::expect_only_errors([&] { (void)hw::cli::parse_token_ids(in, "fuzz", 50304); });
  return 0;
}
