// NFC against Python's unicodedata.normalize("NFC"): the expected strings of nfc_cases.json were
// written by scripts/gen_nfc_tables.py, so no Python runs here.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "data/tokenizer/nfc.hpp"

using hw::data::nfc;
using nlohmann::json;

namespace {

json nfc_cases() {
  std::ifstream in(std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/nfc_cases.json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

}  // namespace

TEST_CASE("NFC matches Python's unicodedata on the hard strings", "[tokenizer][nfc]") {
  const json j = nfc_cases();
  REQUIRE(j["cases"].size() >= 18);
  for (const json& c : j["cases"]) {
    const std::string text = c["text"].get<std::string>(), want = c["nfc"].get<std::string>();
    INFO("text: " << json(text).dump() << " want: " << json(want).dump());
    CHECK(nfc(text) == want);
    CHECK(nfc(want) == want);  // NFC text is its own NFC
  }
}

TEST_CASE("NFC by hand: composition, ordering, exclusions, Hangul", "[tokenizer][nfc]") {
  CHECK(nfc("e\xCC\x81") == "\xC3\xA9");                        // e + U+0301 -> U+00E9
  CHECK(nfc("\xE2\x84\xAB") == "\xC3\x85");                     // U+212B ANGSTROM SIGN -> U+00C5
  CHECK(nfc("a\xCC\x82\xCC\xA3") == "\xE1\xBA\xAD");            // a + U+0302 + U+0323 -> U+1EAD
  CHECK(nfc("\xE0\xA5\x98") == "\xE0\xA4\x95\xE0\xA4\xBC");     // U+0958 is excluded: stays U+0915 U+093C
  CHECK(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8") == "\xEA\xB0\x81");  // L V T -> U+AC01
  CHECK(nfc("\xEA\xB0\x80\xE1\x86\xA8") == "\xEA\xB0\x81");     // LV + T -> LVT
  CHECK(nfc("plain ascii\n") == "plain ascii\n");
}

TEST_CASE("NFC passes invalid UTF-8 bytes through unchanged", "[tokenizer][nfc]") {
  CHECK(nfc("\xFF") == "\xFF");
  CHECK(nfc("e\xFF\xCC\x81") == "e\xFF\xCC\x81");        // the stray byte is a starter: e and U+0301 stay apart
  CHECK(nfc("\xFE" "e\xCC\x81\x80") == "\xFE\xC3\xA9\x80");  // around it, NFC as usual
  CHECK(nfc("\xE2\x84") == "\xE2\x84");                  // a truncated sequence, byte by byte
  CHECK(nfc("\xED\xA0\x80\xCC\x81") == "\xED\xA0\x80\xCC\x81");  // a surrogate's bytes
}
