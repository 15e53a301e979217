// Fuzz target: tokenizer.json. Inputs starting with byte 0 are text instead, encoded with the
// committed Qwen 2 style fixture (NFC, its regex pre-tokenizer, BPE merges) and decoded back:
// both halves of what a hostile tokenizer file or corpus reaches.
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "headwise/data/bpe_tokenizer.hpp"

namespace {
const hw::data::BpeTokenizer& fixture() {
  static const hw::data::BpeTokenizer t =
      hw::data::BpeTokenizer::load(std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/qwen2_style.json");
  return t;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] == 0) {
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    hw::fuzz::expect_only_errors([&] {
      const std::vector<uint32_t> ids = fixture().encode(text);
      (void)fixture().decode(ids);
    });
    return 0;
  }
  const std::string text(reinterpret_cast<const char*>(data), size);
  hw::fuzz::expect_only_errors([&] {
    const hw::data::BpeTokenizer t = hw::data::BpeTokenizer::from_json_text(text, "fuzz");
    const std::vector<uint32_t> ids = t.encode("Hello, world! \xC3\xA9\xEA\xB0\x80 12345  \n\tx");
    (void)t.decode(ids);
  });
  return 0;
}
