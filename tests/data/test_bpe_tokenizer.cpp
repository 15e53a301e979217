// Byte-level BPE against the `tokenizers` package: the ids of the committed expected_ids.json
// were produced by scripts/gen_tokenizer_fixtures.py with `tokenizers` from the three committed
// tokenizer.json fixtures (GPT-2, Llama 3 and Qwen 2 styles, the last with the NFC normalizer),
// so no Python runs here.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <random>
#include <sstream>

#include "data/tokenizer/byte_map.hpp"
#include "data/tokenizer/unicode_ranges.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/bpe_tokenizer.hpp"

using namespace hw::data;
using nlohmann::json;

namespace {

const std::string kFixtures = std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const json& expected() {
  static const json j = json::parse(read_file(kFixtures + "expected_ids.json"));
  return j;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += char(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

std::string error_of(const std::string& json_text) {
  try {
    BpeTokenizer::from_json_text(json_text, "t.json");
  } catch (const hw::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("GPT-2 byte-to-unicode map matches the published table", "[tokenizer]") {
  const ByteMap& m = byte_map();
  CHECK(m.to_cp['A'] == 'A');
  CHECK(m.to_cp['!'] == '!');
  CHECK(m.to_cp[0] == 0x100);
  CHECK(m.to_cp[' '] == 0x120);  // 'Ġ'
  CHECK(m.to_utf8[' '] == "\xC4\xA0");
  CHECK(m.to_cp['\n'] == 0x10A);  // 'Ċ'
  CHECK(m.to_cp[0x7F] == 0x121);
  CHECK(m.to_cp[0xA0] == 0x142);
  CHECK(m.to_cp[0xAD] == 0x143);
  CHECK(m.to_cp[0xFF] == 0xFF);
  for (int b = 0; b < 256; ++b) CHECK(m.from_cp[m.to_cp[size_t(b)]] == b);
}

TEST_CASE("character classes follow Unicode L, N and White_Space", "[tokenizer]") {
  using unicode::CharClass;
  using unicode::classify;
  CHECK(classify('a') == CharClass::Letter);
  CHECK(classify(0x65E5) == CharClass::Letter);   // 日
  CHECK(classify(0x0663) == CharClass::Number);   // Arabic-Indic three
  CHECK(classify(0x00BD) == CharClass::Number);   // ½ (No)
  CHECK(classify(0x216B) == CharClass::Number);   // Roman numeral twelve (Nl)
  CHECK(classify(0x3000) == CharClass::Space);
  CHECK(classify(0x0085) == CharClass::Space);
  CHECK(classify(0x001C) == CharClass::Other);    // Python's isspace() says yes, White_Space no
  CHECK(classify(0x200B) == CharClass::Other);    // zero width space is not White_Space
  CHECK(classify(0x0301) == CharClass::Other);    // combining mark (Mn)
  CHECK(classify(0x1F642) == CharClass::Other);   // emoji
  CHECK(classify(0x1D400) == CharClass::Letter);  // mathematical bold A
  CHECK(classify(0x1D7CE) == CharClass::Number);  // mathematical bold zero
}

TEST_CASE("UTF-8 decoding: invalid bytes are single symbols", "[tokenizer]") {
  using unicode::decode_char;
  CHECK(decode_char("\xC3\xA9", 0).cp == 0xE9);
  CHECK(decode_char("\xC3\xA9", 0).len == 2);
  CHECK(decode_char("\xF0\x9F\x99\x82", 0).cp == 0x1F642);
  CHECK(decode_char("\xC0\x80", 0).len == 1);          // overlong
  CHECK(decode_char("\xED\xA0\x80", 0).len == 1);      // surrogate
  CHECK(decode_char("\xF4\x90\x80\x80", 0).len == 1);  // above U+10FFFF
  CHECK(decode_char("\xE2\x82", 0).len == 1);          // truncated
  CHECK(decode_char("\x80", 0).cls == unicode::CharClass::Other);
}

TEST_CASE("encode gives the ids of the tokenizers package for the three pre-tokenizer styles", "[tokenizer]") {
  for (const char* style : {"gpt2", "llama3", "qwen2"}) {
    const json& e = expected()[style];
    const BpeTokenizer tok = BpeTokenizer::load(kFixtures + e["file"].get<std::string>());
    INFO(style << ": " << tok.describe());
    CHECK(tok.vocab_size() == e["vocab_size"].get<int>());
    BpeCache cache;
    for (const json& c : e["cases"]) {
      const std::string text = c["text"].get<std::string>();
      const auto want = c["ids"].get<std::vector<uint32_t>>();
      INFO("text: " << json(text).dump());
      std::vector<uint32_t> got;
      tok.encode(text, got, &cache);
      CHECK(got == want);
      CHECK(tok.encode(text) == want);  // without a cache (and the cache reused above)
      // Qwen 2's NFC changes the text: decode gives what `tokenizers` decodes the ids to.
      CHECK(tok.decode(want) == (c.contains("decoded") ? c["decoded"].get<std::string>() : text));
    }
    for (const json& c : e["invalid_utf8"]) {
      const std::string bytes = unhex(c["hex"].get<std::string>());
      INFO("hex: " << c["hex"].get<std::string>());
      CHECK(tok.encode(bytes) == c["ids"].get<std::vector<uint32_t>>());
      CHECK(tok.decode(tok.encode(bytes)) == bytes);
    }
  }
}

TEST_CASE("decode(encode(x)) == x for random byte strings", "[tokenizer]") {
  std::mt19937 rng(7);
  const std::string alphabet = std::string("aA1 \n\t'!.\r") + "\xC3\xA9\xE6\x97\xA5\xF0\x9F\x99\x82\xFF\x80<|endoftext|>";
  for (const char* file : {"gpt2_style.json", "llama3_style.json"}) {
    const BpeTokenizer tok = BpeTokenizer::load(kFixtures + file);
    for (int trial = 0; trial < 300; ++trial) {
      std::string s;
      const int n = int(rng() % 60);
      for (int i = 0; i < n; ++i) {
        if (rng() % 2) s += alphabet[rng() % alphabet.size()];
        else s += char(rng() % 256);
      }
      CHECK(tok.decode(tok.encode(s)) == s);
    }
  }
}

TEST_CASE("the eos id and added tokens are found by name", "[tokenizer]") {
  const BpeTokenizer g = BpeTokenizer::load(kFixtures + "gpt2_style.json");
  REQUIRE(g.eos_id().has_value());
  CHECK(*g.eos_id() == 0);  // trained with <|endoftext|> as the first special token
  CHECK(g.decode({*g.eos_id()}) == "<|endoftext|>");
  const BpeTokenizer l = BpeTokenizer::load(kFixtures + "llama3_style.json");
  CHECK(l.eos_id() == l.added_token_id("<|end_of_text|>"));
  CHECK(l.cuttable_at_lines());
  CHECK_THROWS_AS(g.decode({uint32_t(g.vocab_size())}), hw::Error);
}

TEST_CASE("the merges table in either form gives the same ids", "[tokenizer]") {
  // The GPT-2 fixture holds "a b" strings; rewritten as ["a", "b"] lists it must encode alike.
  json j = json::parse(read_file(kFixtures + "gpt2_style.json"));
  for (json& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    m = json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  const BpeTokenizer lists = BpeTokenizer::from_json_text(j.dump(), "lists");
  const BpeTokenizer strings = BpeTokenizer::load(kFixtures + "gpt2_style.json");
  const std::string text = expected()["gpt2"]["cases"].back()["text"].get<std::string>();
  CHECK(lists.encode(text) == strings.encode(text));
}

TEST_CASE("tokenizer.json files the encoder cannot honour are refused by name", "[tokenizer]") {
  const json base = json::parse(read_file(kFixtures + "gpt2_style.json"));
  auto with = [&](auto edit) {
    json j = base;
    edit(j);
    return error_of(j.dump());
  };
  CHECK(with([](json& j) { j["model"]["type"] = "WordPiece"; }).find("model.type is 'WordPiece'") != std::string::npos);
  CHECK(with([](json& j) { j["model"] = {{"type", "Unigram"}, {"vocab", json::array()}}; }).find("Unigram") !=
        std::string::npos);
  CHECK(with([](json& j) { j["model"].erase("merges"); }).find("model.merges is missing") != std::string::npos);
  CHECK(with([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }).find("normalizer 'NFKC'") != std::string::npos);
  CHECK(with([](json& j) {
          j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
        }).find("normalizer.normalizers[1] 'Lowercase'") != std::string::npos);
  CHECK(with([](json& j) { j["normalizer"] = {{"type", "NFC"}}; }).empty());  // Qwen 2's: supported
  CHECK(with([](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}}; }).empty());
  CHECK(with([](json& j) { j["model"]["byte_fallback"] = true; }).find("byte_fallback") != std::string::npos);
  CHECK(with([](json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }).find("add_prefix_space") !=
        std::string::npos);
  CHECK(with([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }).find("Whitespace") != std::string::npos);
  CHECK(with([](json& j) { j["model"]["merges"][3] = "zzzq qqqz"; }).find("model.merges[3]") != std::string::npos);
  CHECK(with([](json& j) { j["model"]["vocab"].erase("A"); }).find("byte 65") != std::string::npos);
  CHECK(with([](json& j) { j["added_tokens"][0]["lstrip"] = true; }).find("added_tokens[0].lstrip") !=
        std::string::npos);
  CHECK(error_of("{not json").find("not valid JSON") != std::string::npos);
  json llama = json::parse(read_file(kFixtures + "llama3_style.json"));
  llama["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  CHECK(error_of(llama.dump()).find("not one of the known ones") != std::string::npos);
  CHECK_THROWS_AS(BpeTokenizer::load(kFixtures + "no_such.json"), hw::Error);
}

TEST_CASE("streamed UTF-8 is held back until a character is complete", "[tokenizer]") {
  Utf8Holdback h;
  CHECK(h.push("a\xC3") == "a");
  CHECK(h.push("\xA9") == "\xC3\xA9");
  CHECK(h.push("\xF0\x9F") == "");
  CHECK(h.push("\x99") == "");
  CHECK(h.push("\x82!") == "\xF0\x9F\x99\x82!");
  CHECK(h.push("\xFF") == "\xFF");      // never completes: out at once
  CHECK(h.push("\xE0\x80") == "\xE0\x80");  // overlong start: cannot complete
  CHECK(h.push("x\xE6") == "x");
  CHECK(h.flush() == "\xE6");
}
