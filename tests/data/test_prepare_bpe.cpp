// `prepare` with a tokenizer.json: the shards hold the ids `tokenizers` gives for the whole
// file (expected_ids.json, scripts/gen_tokenizer_fixtures.py) however the file is chunked and
// however many threads encode it; bad input leaves nothing behind.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "headwise/core/error.hpp"
#include "headwise/data/prepare.hpp"
#include "headwise/data/shards.hpp"
#include "support/temp_dir.hpp"

using namespace hw::data;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const json& expected() {
  static const json j = json::parse(slurp(kFixtures + "expected_ids.json"));
  return j;
}

const json& find_case(const char* style, const std::string& text) {
  for (const json& c : expected()[style]["cases"])
    if (c["text"] == text) return c;
  FAIL("no case " << text);
  return expected();
}

std::vector<uint16_t> all_tokens(const std::string& dir) {
  std::vector<uint16_t> out;
  for (const char* split : {"/train_*.bin", "/val_*.bin"}) {
    if (std::string(split) == "/val_*.bin" && !fs::exists(dir + "/val_000000.bin")) continue;  // val 0
    for (const std::string& f : expand_glob(dir + split)) {
      const auto t = read_shard(f);
      out.insert(out.end(), t.begin(), t.end());
    }
  }
  return out;
}

std::vector<uint16_t> as16(const json& ids) {
  std::vector<uint16_t> out;
  for (const json& i : ids) out.push_back(i.get<uint16_t>());
  return out;
}

}  // namespace

TEST_CASE("prepare with a tokenizer writes the tokenizers package's ids for any chunking and thread count",
          "[tokenizer][prepare]") {
  hw::test::TempDir dir;
  for (const char* style : {"gpt2", "llama3", "qwen2"}) {  // qwen2: NFC on each chunk
    const json& sample = expected()[style]["cases"].back();  // the corpus sample
    const std::string input = dir.file(std::string(style) + ".txt");
    hw::test::write_text(input, sample["text"].get<std::string>());
    PrepareOptions o;
    o.inputs = {input};
    o.tokenizer = kFixtures + expected()[style]["file"].get<std::string>();
    o.val_fraction = 0.1;
    o.shard_tokens = 1000;
    o.chunk_bytes = 300;  // ~100 chunks
    std::string shards1;
    for (int threads : {1, 2}) {
      o.threads = threads;
      o.out_dir = dir.file(std::string(style) + "_t" + std::to_string(threads));
      const std::string summary = prepare_shards(o);
      INFO(summary);
      const std::vector<uint16_t> want = as16(sample["ids"]);
      CHECK(all_tokens(o.out_dir) == want);
      const auto val = expand_glob(o.out_dir + "/val_*.bin");
      int64_t n_val = 0;
      for (const auto& f : val) n_val += shard_token_count(f);
      CHECK(n_val == int64_t(double(want.size()) * 0.1));
      CHECK(slurp(o.out_dir + "/tokenizer.json") == slurp(o.tokenizer));
      std::string bytes;
      for (const char* split : {"/train_*.bin", "/val_*.bin"})
        for (const std::string& f : expand_glob(o.out_dir + split)) bytes += slurp(f);
      if (threads == 1) shards1 = bytes;
      else CHECK(bytes == shards1);  // byte-identical shards
      for (const auto& e : fs::directory_iterator(o.out_dir))  // no temp files left
        CHECK_FALSE(e.path().filename().string().starts_with("."));
    }
  }
}

TEST_CASE("prepare joins documents with a newline or ends each with EOS", "[tokenizer][prepare]") {
  hw::test::TempDir dir;
  const std::string a = "Hello, world!", b = "don't  stop";
  hw::test::write_text(dir.file("a.txt"), a);
  hw::test::write_text(dir.file("b.txt"), b);
  PrepareOptions o;
  o.inputs = {dir.file("a.txt"), dir.file("b.txt")};
  o.tokenizer = kFixtures + "gpt2_style.json";
  o.val_fraction = 0.0;
  o.out_dir = dir.file("eos");
  o.append_eos = true;
  prepare_shards(o);
  std::vector<uint16_t> want = as16(find_case("gpt2", a)["ids"]);
  want.push_back(0);  // <|endoftext|>
  for (uint16_t t : as16(find_case("gpt2", b)["ids"])) want.push_back(t);
  want.push_back(0);
  CHECK(all_tokens(o.out_dir) == want);

  o.append_eos = false;
  o.out_dir = dir.file("nl");
  prepare_shards(o);
  want = as16(find_case("gpt2", a)["ids"]);
  for (uint16_t t : as16(find_case("gpt2", "\n")["ids"])) want.push_back(t);
  for (uint16_t t : as16(find_case("gpt2", b)["ids"])) want.push_back(t);
  CHECK(all_tokens(o.out_dir) == want);
}

TEST_CASE("prepare refuses bad tokenizers and inputs and leaves no files", "[tokenizer][prepare]") {
  hw::test::TempDir dir;
  hw::test::write_text(dir.file("a.txt"), "In the beginning\n");
  const json base = json::parse(slurp(kFixtures + "gpt2_style.json"));
  auto variant = [&](const std::string& name, auto edit) {
    json j = base;
    edit(j);
    hw::test::write_text(dir.file(name), j.dump());
    return dir.file(name);
  };
  struct Case {
    std::string tokenizer, input, message;
  };
  const std::vector<Case> cases = {
      {variant("wp.json", [](json& j) { j["model"]["type"] = "WordPiece"; }), dir.file("a.txt"), "WordPiece"},
      {variant("uni.json", [](json& j) { j["model"] = {{"type", "Unigram"}, {"vocab", json::array()}}; }),
       dir.file("a.txt"), "Unigram"},
      {variant("nomerges.json", [](json& j) { j["model"].erase("merges"); }), dir.file("a.txt"), "model.merges"},
      {kFixtures + "gpt2_style.json", dir.file("missing.txt"), "missing.txt"},
      {kFixtures + "gpt2_style.json", dir.path().string(), "is not a file"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    PrepareOptions o;
    o.inputs = {cases[i].input};
    o.tokenizer = cases[i].tokenizer;
    o.out_dir = dir.file("out" + std::to_string(i));
    INFO(cases[i].message);
    try {
      prepare_shards(o);
      FAIL("no error");
    } catch (const hw::Error& e) {
      CHECK(std::string(e.what()).find(cases[i].message) != std::string::npos);
    }
    CHECK_FALSE(fs::exists(o.out_dir));
  }
  // --append-eos without an end-of-text token
  PrepareOptions o;
  o.inputs = {dir.file("a.txt")};
  o.out_dir = dir.file("noeos");
  o.append_eos = true;
  CHECK_THROWS_AS(prepare_shards(o), hw::Error);
  CHECK_FALSE(fs::exists(o.out_dir));
}

// A vocabulary above 65,536 (an added token at id 69,999) writes llm.c's version-2 shards of
// uint32 ids; they hold the same ids as the 16-bit shards of the same text without that token,
// plus the added token's id where its text stands.
TEST_CASE("prepare writes 32-bit shards when the vocabulary needs them", "[tokenizer][prepare]") {
  hw::test::TempDir dir;
  json big = json::parse(slurp(kFixtures + "gpt2_style.json"));
  // Ids lie below the number of entries: pad the vocabulary up to the added token's id.
  for (int id = int(big["model"]["vocab"].size()) + int(big["added_tokens"].size()); id < 69999; ++id)
    big["model"]["vocab"]["<pad" + std::to_string(id) + ">"] = id;
  big["added_tokens"].push_back({{"id", 69999}, {"content", "<big>"}, {"special", true}});
  hw::test::write_text(dir.file("big.json"), big.dump());
  hw::test::write_text(dir.file("a.txt"), "In the beginning<big> God created the heaven<big>");
  hw::test::write_text(dir.file("b.txt"), "In the beginning");
  hw::test::write_text(dir.file("c.txt"), " God created the heaven");
  PrepareOptions o;
  o.tokenizer = dir.file("big.json");
  o.inputs = {dir.file("a.txt")};
  o.out_dir = dir.file("wide");
  o.val_fraction = 0.0;
  const std::string msg = prepare_shards(o);
  CHECK(msg.find("32-bit tokens (version 2)") != std::string::npos);
  std::vector<int32_t> wide;
  for (const std::string& f : expand_glob(o.out_dir + "/train_*.bin")) {
    const auto t = read_shard_tokens(f);
    wide.insert(wide.end(), t.begin(), t.end());
  }
  // The 16-bit pieces, prepared apart with the fixture tokenizer (no <big>).
  std::vector<int32_t> want;
  for (const char* piece : {"b.txt", "c.txt"}) {
    PrepareOptions p;
    p.tokenizer = kFixtures + "gpt2_style.json";
    p.inputs = {dir.file(piece)};
    p.out_dir = dir.file(std::string("narrow_") + piece);
    p.val_fraction = 0.0;
    prepare_shards(p);
    for (uint16_t t : all_tokens(p.out_dir)) want.push_back(t);
    want.push_back(69999);
  }
  CHECK(wide == want);
}
