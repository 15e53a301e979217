// End-to-end: `headwise eval-tasks` and `headwise eval --text` on a checkpoint with the GPT-2-style
// fixture tokenizer and a mixed plan (static, window, linear heads): results written, every
// committed task format read; bad input is one error line naming the file and line, exit 1, and no
// output file.
#include <catch2/catch.hpp>

#include <filesystem>

#include "cli/cli_util.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

using namespace hw;

namespace {

const std::string kFixtures = std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures";

std::string make_checkpoint(const std::string& dir, int vocab, bool with_tokenizer) {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_embd = 32;
  mc.block_size = 32;
  mc.vocab_size = vocab;
  mc.head_plan = attn::HeadPlan::from_json(
      nlohmann::json::parse(R"([["static","window:4","linear","softmax"],["softmax","sink_window:1:4","static","linear"]])"));
  mc.validate();
  Model<float> m(mc, cpu_backend<float>());
  m.init_weights(3);
  save_model_files(m, dir);
  if (with_tokenizer)
    std::filesystem::copy_file(kFixtures + "/tokenizers/gpt2_style.json", dir + "/tokenizer.json");
  return dir;
}

using test::expect_one_error;

}  // namespace

TEST_CASE("eval-tasks on every committed format with a mixed plan, and eval --text", "[cli][eval]") {
  const std::string dir = test::cli_temp_dir("eval_tasks");
  const std::string ckpt = make_checkpoint(dir + "/ckpt", 3328, true);
  std::string args = "eval-tasks --checkpoint " + ckpt + " --batch 3 --json " + dir + "/out.json --samples " + dir +
                     "/s.jsonl --no-progress";
  const char* files[] = {"generic", "hellaswag", "piqa", "arc_easy", "boolq", "sst2", "winogrande", "mmlu"};
  for (const char* f : files) args += " --task " + kFixtures + "/eval/" + f + ".jsonl";
  const test::CmdResult r = test::run_headwise(args);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json out = nlohmann::json::parse(io::read_file(dir + "/out.json"));
  REQUIRE(out["tasks"].size() == 8);
  const char* formats[] = {"generic", "hellaswag", "piqa", "arc", "boolq", "sst2", "winogrande", "mmlu"};
  for (size_t i = 0; i < 8; ++i) {
    CHECK(out["tasks"][i]["format"] == formats[i]);
    CHECK(out["tasks"][i]["acc"].get<double>() >= 0.0);
    CHECK(out["tasks"][i]["examples"].get<int>() >= 4);
  }
  const auto samples = test::read_jsonl(dir + "/s.jsonl");
  CHECK(samples.size() == 34);
  for (const auto& s : samples) CHECK(s["lls"][0].get<double>() < 0.0);

  const test::CmdResult t = test::run_headwise("eval --checkpoint " + ckpt + " --text " + kFixtures +
                                               "/eval/text_a.txt --text " + kFixtures + "/eval/text_b.txt --stride 8");
  INFO(t.out);
  REQUIRE(t.code == 0);
  const nlohmann::json p = test::last_json_line(t.out);
  CHECK(p["documents"] == 2);
  CHECK(p["bytes"] == 1603 + 719);
  CHECK(p["stride"] == 8);
  CHECK(p["context"] == 32);
  // An untrained model over ~3300 tokens: near-uniform perplexity.
  CHECK(p["token_perplexity"].get<double>() > 1000.0);
}

TEST_CASE("eval-tasks and eval --text: bad input is one error line, no output file", "[cli][eval]") {
  const std::string dir = test::cli_temp_dir("eval_tasks_bad");
  const std::string ckpt = make_checkpoint(dir + "/ckpt", 3328, true);
  const std::string json_out = dir + "/out.json";
  auto run = [&](const std::string& text, const std::string& extra = "") {
    test::write_text(dir + "/t.jsonl", text);
    return test::run_headwise("eval-tasks --checkpoint " + ckpt + " --task " + kFixtures +
                              "/eval/piqa.jsonl --task " + dir + "/t.jsonl --json " + json_out + extra);
  };
  const std::string ok = R"({"context": "c", "choices": ["a", "b"], "label": 0})";
  expect_one_error(run(ok + "\n" + R"({"title": "x", "text": "y"})"), "t.jsonl:2: missing key");
  expect_one_error(run(R"({"title": "x", "text": "y"})"), "t.jsonl:1: unknown task format");
  expect_one_error(run(ok + "\n" + R"({"context": "c", "choices": ["a"], "label": 1})"),
                   "t.jsonl:2: label 1 is outside the 1 choices");
  expect_one_error(run(R"({"context": "c", "choices": [], "label": 0})"), "t.jsonl:1: the choice list is empty");
  expect_one_error(run("question,answer\nq,a\n"), "t.jsonl:1: not valid JSON");
  expect_one_error(run(R"({"sentence": "no blank", "option1": "a", "option2": "b", "answer": "1"})"),
                   "t.jsonl:1: 'sentence' has no blank");
  CHECK(!std::filesystem::exists(json_out));
  CHECK(!std::filesystem::exists(json_out + ".tmp"));

  const std::string bare = make_checkpoint(dir + "/bare", 3328, false);  // no tokenizer.json, not bytes
  test::write_text(dir + "/t.jsonl", ok + "\n");
  expect_one_error(test::run_headwise("eval-tasks --checkpoint " + bare + " --task " + dir + "/t.jsonl --json " + json_out),
                   "has no tokenizer.json");
  expect_one_error(test::run_headwise("eval --checkpoint " + bare + " --text " + kFixtures + "/eval/text_a.txt"),
                   "has no tokenizer.json");
  expect_one_error(test::run_headwise("eval --checkpoint " + ckpt + " --text " + kFixtures + "/eval/text_a.txt --stride 40"),
                   "--stride 40 is outside 1..--context (32)");
  expect_one_error(test::run_headwise("eval --checkpoint " + ckpt + " --text " + dir + "/missing.txt"), "missing.txt");
  CHECK(!std::filesystem::exists(json_out));
}
