// The post-processor's special tokens (encode_for_model) against the `tokenizers` package with
// add_special_tokens=True (tests/reference/make_post_processor_fixture.py): Llama 3's template,
// a template with a token after the text, BertProcessing. encode() stays without them.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "headwise/core/error.hpp"
#include "headwise/data/bpe_tokenizer.hpp"

using hw::data::BpeTokenizer;
using nlohmann::json;

namespace {
const std::string kFixtures = std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/";
json read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}
}  // namespace

TEST_CASE("encode_for_model adds the post_processor's special tokens as tokenizers does", "[tokenizer]") {
  const json base = read(kFixtures + "llama3_style.json");
  const json expected = read(kFixtures + "expected_post.json");
  for (const auto& [name, variant] : expected.items()) {
    INFO(name);
    json j = base;
    j["post_processor"] = variant["post_processor"];
    const BpeTokenizer tok = BpeTokenizer::from_json_text(j.dump(), name);
    for (const json& c : variant["cases"]) {
      INFO(c["text"]);
      const auto want = c["ids"].get<std::vector<uint32_t>>();
      CHECK(tok.encode_for_model(c["text"].get<std::string>()) == want);
      // Plain encode adds nothing.
      const auto plain = tok.encode(c["text"].get<std::string>());
      CHECK(plain.size() < want.size());
    }
  }
}

TEST_CASE("unknown or malformed post_processors are named", "[tokenizer]") {
  json j = read(kFixtures + "llama3_style.json");
  j["post_processor"] = {{"type", "Mystery"}};
  const BpeTokenizer tok = BpeTokenizer::from_json_text(j.dump(), "m.json");
  CHECK(tok.encode(std::string("ab")).size() > 0);  // loading and plain encoding still work
  CHECK_THROWS_WITH(tok.encode_for_model("ab"), Catch::Contains("m.json") && Catch::Contains("'Mystery'"));
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<x>"}, {"type_id", 0}}}}}},
                         {"special_tokens", json::object()}};
  CHECK_THROWS_WITH(BpeTokenizer::from_json_text(j.dump(), "t.json"),
                    Catch::Contains("t.json") && Catch::Contains("no ids for '<x>'"));
}
