// End-to-end with a tokenizer.json: `tokenize` prints the ids of the `tokenizers` package
// (expected_ids.json), `prepare --tokenizer` writes identical shards for 1 and 2 threads and one
// error line with no files for bad input, `train` carries the tokenizer into checkpoints and
// checks the vocabulary, `generate` streams the text that decoding its ids gives.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/cli_util.hpp"

using namespace hw;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const nlohmann::json& expected() {
  static const nlohmann::json j = nlohmann::json::parse(slurp(kFixtures + "expected_ids.json"));
  return j;
}

std::string ids_line(const nlohmann::json& ids) {
  std::string s;
  for (const auto& i : ids) s += (s.empty() ? "" : " ") + std::to_string(i.get<int>());
  return s;
}

using test::expect_one_error;

std::string text_part(const std::string& out) { return out.substr(0, out.rfind("\n{")); }

}  // namespace

TEST_CASE("tokenize prints the tokenizers package's ids and decodes them back", "[cli][tokenizer]") {
  const std::string dir = test::cli_temp_dir("tokenize");
  for (const char* style : {"gpt2", "llama3"}) {
    const std::string tok = kFixtures + expected()[style]["file"].get<std::string>();
    for (const std::string text : {"Hello, world!", "they'RE here", "a<|endoftext|>b <|endoftext|><|endoftext|>"}) {
      const nlohmann::json* c = nullptr;
      for (const auto& e : expected()[style]["cases"])
        if (e["text"] == text) c = &e;
      REQUIRE(c != nullptr);
      test::write_text(dir + "/in.txt", text);
      auto r = test::run_headwise("tokenize --tokenizer " + tok + " --file " + dir + "/in.txt");
      INFO(r.out);
      CHECK(r.code == 0);
      CHECK(r.out == ids_line((*c)["ids"]) + "\n");
      auto d = test::run_headwise("tokenize --tokenizer " + tok + " --decode --text '" + ids_line((*c)["ids"]) + "'");
      CHECK(d.out == text);
    }
  }
  expect_one_error(test::run_headwise("tokenize --tokenizer " + kFixtures + "gpt2_style.json --decode --text 'x 1'"),
                   "not a token id");
  expect_one_error(test::run_headwise("tokenize --tokenizer " + kFixtures + "gpt2_style.json --decode --text '1 999999'"),
                   "token 999999 is outside the vocabulary");
  expect_one_error(test::run_headwise("tokenize --tokenizer " + dir + "/none.json --text a"), "none.json");
}

TEST_CASE("prepare --tokenizer: threads 1 and 2 give identical shards, bad input leaves nothing",
          "[cli][tokenizer][prepare]") {
  const std::string dir = test::cli_temp_dir("prepare_bpe");
  const std::string tok = kFixtures + "gpt2_style.json";
  test::write_text(dir + "/c.txt", expected()["gpt2"]["cases"].back()["text"].get<std::string>());
  for (int t : {1, 2}) {
    auto r = test::run_headwise("prepare --input " + dir + "/c.txt --output " + dir + "/t" + std::to_string(t) +
                                " --tokenizer " + tok + " --threads " + std::to_string(t) +
                                " --shard-tokens 3000 --val-fraction 0.1");
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("MB/s") != std::string::npos);  // the progress line
  }
  for (const char* f : {"train_000000.bin", "train_000001.bin", "train_000002.bin", "val_000000.bin", "tokenizer.json"}) {
    INFO(f);
    REQUIRE(fs::exists(dir + "/t1/" + f));
    CHECK(slurp(dir + "/t1/" + f) == slurp(dir + "/t2/" + f));
  }
  CHECK(slurp(dir + "/t1/tokenizer.json") == slurp(tok));

  // Bad input: one error line, exit 1, no output directory.
  auto j = nlohmann::json::parse(slurp(tok));
  j["model"]["type"] = "WordPiece";
  test::write_text(dir + "/wp.json", j.dump());
  j = nlohmann::json::parse(slurp(tok));
  j["model"].erase("merges");
  test::write_text(dir + "/nomerges.json", j.dump());
  j = nlohmann::json::parse(slurp(tok));
  // A real vocabulary past 65536 (ids must lie below the number of entries).
  for (int id = int(j["model"]["vocab"].size()); id < 70000; ++id) j["model"]["vocab"]["<pad" + std::to_string(id) + ">"] = id;
  j["added_tokens"].push_back({{"id", 70000}, {"content", "<|x|>"}, {"special", true}});
  test::write_text(dir + "/big.json", j.dump());
  const std::string in = " --input " + dir + "/c.txt --output " + dir + "/bad";
  expect_one_error(test::run_headwise("prepare" + in + " --tokenizer " + dir + "/wp.json"), "WordPiece");
  expect_one_error(test::run_headwise("prepare" + in + " --tokenizer " + dir + "/nomerges.json"), "model.merges");
  // A vocabulary above 65,536 is no error: 32-bit shards (test_llama_cli.cpp takes them further).
  const auto wide = test::run_headwise("prepare --input " + dir + "/c.txt --output " + dir + "/wide --tokenizer " + dir +
                                       "/big.json --val-fraction 0");
  CHECK(wide.code == 0);
  CHECK(wide.out.find("32-bit tokens") != std::string::npos);
  expect_one_error(test::run_headwise("prepare --input " + dir + "/nope.txt --output " + dir + "/bad --tokenizer " + tok),
                   "nope.txt");
  CHECK_FALSE(fs::exists(dir + "/bad"));
}

TEST_CASE("train copies the tokenizer into checkpoints, generate decodes with it", "[cli][tokenizer][infer]") {
  const std::string dir = test::cli_temp_dir("train_bpe");
  const std::string tok = kFixtures + "gpt2_style.json";
  test::write_text(dir + "/c.txt", expected()["gpt2"]["cases"].back()["text"].get<std::string>());
  REQUIRE(test::run_headwise("prepare --input " + dir + "/c.txt --output " + dir + "/data --tokenizer " + tok).code == 0);
  auto config = [&](int vocab) {
    const std::string path = dir + "/cfg" + std::to_string(vocab) + ".json";
    test::write_text(path, R"({
      "model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 32, "vocab_size": )" +
                               std::to_string(vocab) + R"(},
      "train": {"micro_batch": 2, "seq_len": 32, "steps": 2, "lr": 1e-2, "warmup_steps": 1, "checkpoint_every": 2,
                "seed": 3},
      "data": {"train": ")" + dir + R"(/data/train_*.bin", "shuffle": false}
    })");
    return path;
  };
  const int vocab = expected()["gpt2"]["vocab_size"].get<int>();  // 3257
  expect_one_error(test::run_headwise("train --config " + config(vocab - 1) + " --out " + dir + "/small"),
                   "smaller than the vocabulary");
  auto padded = test::run_headwise("train --config " + config(vocab + 7) + " --out " + dir + "/padded");
  INFO(padded.out);
  CHECK(padded.code == 0);
  auto r = test::run_headwise("train --config " + config(vocab) + " --out " + dir + "/run");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const std::string ckpt = dir + "/run/checkpoints/step_2";
  REQUIRE(fs::exists(ckpt + "/tokenizer.json"));
  CHECK(slurp(ckpt + "/tokenizer.json") == slurp(tok));

  // Text streamed by generate == the decoded ids of the same run without the tokenizer.
  const std::string gen = " --prompt-tokens " + dir + "/prompt.txt --max-new 24 --temperature 0";
  test::write_text(dir + "/prompt.txt", ids_line(expected()["gpt2"]["cases"][15]["ids"]));  // "Hello, world!"
  auto text = test::run_headwise("generate --checkpoint " + ckpt + gen);
  INFO(text.out);
  REQUIRE(text.code == 0);
  auto by_prompt = test::run_headwise("generate --checkpoint " + ckpt + " --prompt 'Hello, world!' --max-new 24 --temperature 0");
  CHECK(text_part(by_prompt.out) == text_part(text.out));
  fs::create_directories(dir + "/bare");
  for (const char* f : {"model.safetensors", "config.json"}) fs::copy_file(ckpt + "/" + f, dir + "/bare/" + f);
  auto ids = test::run_headwise("generate --checkpoint " + dir + "/bare" + gen);
  REQUIRE(ids.code == 0);
  auto dec = test::run_headwise("tokenize --tokenizer " + tok + " --decode --text '" + text_part(ids.out) + "'");
  CHECK(text_part(text.out) == dec.out);
}
