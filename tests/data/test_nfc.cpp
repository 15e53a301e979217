// NFC against Python's unicodedata.normalize("NFC"): the expected strings of nfc_cases.json were
// written by scripts/gen_nfc_tables.py, so no Python runs here.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
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

// Issue 35: a run of non-starters is reordered by a stable O(n log n) sort, not insertion sort
// (quadratic: 40k marks took 4.8 s). The expected output is worked by hand: in a + (U+0316 ccc
// 220, U+0301 ccc 230) x n, the canonical order puts the n U+0316 before the n U+0301 (stable
// within a class); the first U+0301 is not blocked (220 < 230) and composes with a to U+00E1, the
// others cannot compose with it.
TEST_CASE("NFC of a 200k-mark run: the stable order, in linear-ish time", "[tokenizer][nfc][hostile]") {
  const int n = 100000;
  std::string text = "a";
  for (int i = 0; i < n; ++i) text += "\xCC\x96\xCC\x81";
  std::string want = "\xC3\xA1";
  for (int i = 0; i < n; ++i) want += "\xCC\x96";
  for (int i = 1; i < n; ++i) want += "\xCC\x81";
  const auto t0 = std::chrono::steady_clock::now();
  const std::string got = nfc(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(got == want);
  CHECK(s < 2.0);  // insertion sort: ~10^10 swaps, minutes
  // Stability within a class: U+0301 (230) and U+0300 (230) keep their order behind U+0316 (220).
  CHECK(nfc("x\xCC\x81\xCC\x96\xCC\x80") == "x\xCC\x96\xCC\x81\xCC\x80");
  CHECK(nfc("x\xCC\x80\xCC\x96\xCC\x81") == "x\xCC\x96\xCC\x80\xCC\x81");
}
