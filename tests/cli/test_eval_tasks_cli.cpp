// End-to-end: `headwise eval-tasks` and `headwise eval --text` against lm-evaluation-harness's own
// numbers for a committed checkpoint (tests/fixtures/eval/harness_golden.json, written by
// tests/reference/make_eval_golden.py: every example's log-likelihoods and greedy flags, acc and
// acc_norm of every task format, the text perplexities), with and without a BOS template; on a
// mixed plan (static, window, linear heads) every format scores and acc is what the samples say;
// bad input is one error line naming the file and line, exit 1, and no output file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "cli/cli_util.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "model/model_test_util.hpp"

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

// |got - want| / max(1, |want|): log-likelihoods in nats (a 1-nat floor, as the harness comparison
// of tests/scripts/eval_harness_compare.py) and perplexities.
double rel_err(double got, double want) { return std::abs(got - want) / std::max(1.0, std::abs(want)); }

}  // namespace

// Bounds (1e-6 relative, 1-nat floor for log-likelihoods) against the largest errors of both
// tokenizers measured on an AVX-512 machine / with OPENBLAS_CORETYPE=Haswell (AVX2 kernels), 1 and
// 2 threads alike: log-likelihoods 1.37e-7 / 1.36e-7, text metrics 1.53e-7 / 1.56e-7. (The live
// comparison, scripts:eval_harness, used 1e-4.)
TEST_CASE("eval-tasks and eval --text equal lm-evaluation-harness's numbers on a committed checkpoint",
          "[cli][eval][golden]") {
  const nlohmann::json golden = test::read_json(kFixtures + "/eval/harness_golden.json");
  for (const char* variant : {"plain", "bos"}) {
    INFO("tokenizer: " << variant);
    const nlohmann::json& want = golden[variant];
    const std::string dir = test::cli_temp_dir(std::string("eval_golden_") + variant);
    const std::string ckpt = dir + "/ckpt";
    std::filesystem::copy(kFixtures + "/eval_gpt2", ckpt);
    nlohmann::json tok = test::read_json(kFixtures + "/tokenizers/gpt2_style.json");
    if (std::string(variant) == "bos") tok["post_processor"] = golden["bos_post_processor"];
    test::write_text(ckpt + "/tokenizer.json", tok.dump());

    std::string args = "eval-tasks --checkpoint " + ckpt + " --json " + dir + "/out.json --samples " + dir +
                       "/s.jsonl --no-progress";
    for (const auto& t : want["tasks"]) args += " --task " + std::string(HEADWISE_SOURCE_DIR) + "/" + t["file"].get<std::string>();
    const test::CmdResult r = test::run_headwise(args);
    INFO(r.out);
    REQUIRE(r.code == 0);
    const nlohmann::json out = nlohmann::json::parse(io::read_file(dir + "/out.json"));
    const auto samples = test::read_jsonl(dir + "/s.jsonl");
    REQUIRE(out["tasks"].size() == want["tasks"].size());
    double worst_ll = 0.0;
    size_t row = 0, compared = 0;
    for (size_t i = 0; i < want["tasks"].size(); ++i) {
      const nlohmann::json &w = want["tasks"][i], &got = out["tasks"][i];
      INFO(w["format"].get<std::string>());
      CHECK(got["format"] == w["format"]);
      CHECK(got["acc"].get<double>() == w["acc"].get<double>());  // counts over examples: exact
      CHECK(got["acc_norm"].get<double>() == w["acc_norm"].get<double>());
      REQUIRE(got["examples"].get<size_t>() == w["lls"].size());
      for (size_t e = 0; e < w["lls"].size(); ++e, ++row) {
        REQUIRE(row < samples.size());
        const nlohmann::json& s = samples[row];
        REQUIRE(s["lls"].size() == w["lls"][e].size());
        for (size_t c = 0; c < s["lls"].size(); ++c, ++compared)
          worst_ll = std::max(worst_ll, rel_err(s["lls"][c].get<double>(), w["lls"][e][c].get<double>()));
        CHECK(s["greedy"] == w["greedy"][e]);
      }
    }
    CHECK(row == samples.size());
    CHECK(compared == 96);  // every choice of every example
    INFO("largest log-likelihood error " << worst_ll << " over " << compared << " choices");
    CHECK(worst_ll < 1e-6);

    std::string text = "eval --checkpoint " + ckpt;
    for (const auto& f : golden["texts"]) text += " --text " + std::string(HEADWISE_SOURCE_DIR) + "/" + f.get<std::string>();
    const test::CmdResult t = test::run_headwise(text);
    INFO(t.out);
    REQUIRE(t.code == 0);
    const nlohmann::json p = test::last_json_line(t.out);
    CHECK(p["tokens"] == want["text"]["tokens"]);
    CHECK(p["bytes"] == want["text"]["bytes"]);
    double worst_text = 0.0;
    for (const char* m : {"token_perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte"})
      worst_text = std::max(worst_text, std::abs(p[m].get<double>() - want["text"][m].get<double>()) /
                                            std::abs(want["text"][m].get<double>()));
    INFO("largest text metric error (relative) " << worst_text);
    CHECK(worst_text < 1e-6);
  }
}

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
  const auto samples = test::read_jsonl(dir + "/s.jsonl");
  CHECK(samples.size() == 34);
  size_t row = 0;
  for (size_t i = 0; i < 8; ++i) {
    INFO(formats[i]);
    CHECK(out["tasks"][i]["format"] == formats[i]);
    // acc: the share of examples whose label's log-likelihood is the largest (first on ties),
    // counted here from the per-example samples.
    const int n = out["tasks"][i]["examples"].get<int>();
    CHECK(n >= 4);
    int right = 0;
    for (int e = 0; e < n && row < samples.size(); ++e, ++row) {
      const auto& lls = samples[row]["lls"];
      size_t best = 0;
      for (size_t c = 0; c < lls.size(); ++c) {
        CHECK(lls[c].get<double>() < 0.0);
        if (lls[c].get<double>() > lls[best].get<double>()) best = c;
      }
      right += best == samples[row]["label"].get<size_t>();
    }
    CHECK(out["tasks"][i]["acc"].get<double>() == Approx(double(right) / n).epsilon(1e-12));
  }

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
