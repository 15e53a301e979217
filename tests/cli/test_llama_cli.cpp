// The Llama family end to end through the headwise binary: configs/llama_cpu.json trains,
// `train --init-from` a transformers directory takes its shape from config.json (a conflicting
// shape key is one error naming both values), eval / generate / inspect read such directories
// (one of them bf16 shards; inspect's shape and parameter count against config.json and the weight
// files), a 70,000-token vocabulary's eval loss is a forward of the 32-bit shard's ids read here
// byte by byte, and bad directories are one error line.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "cli/cli_util.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "model/model_test_util.hpp"
#include "support/temp_dir.hpp"

using namespace hw;

namespace {

using test::expect_one_error;

std::string fixture(const std::string& name) {
  return std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/hf_tiny_" + name;
}

// A shard of n tokens below `vocab`.
std::string tokens(const std::string& dir, int n, int vocab) {
  std::vector<uint16_t> t(static_cast<size_t>(n));
  for (size_t i = 0; i < t.size(); ++i) t[i] = uint16_t((i * 7 + i / 5) % size_t(vocab));
  data::write_shard(dir + "/d.bin", t);
  return dir + "/d.bin";
}

}  // namespace

TEST_CASE("configs/llama_cpu.json trains a Llama model from scratch and eval reads its checkpoint",
          "[cli][llama]") {
  const std::string dir = test::cli_temp_dir("llama_scratch");
  const std::string d = tokens(dir, 4000, 256);
  const std::string sets = " --set train.steps=3 --set train.eval_every=0 --set train.micro_batch=2"
                           " --set train.seq_len=32 --set train.total_batch_tokens=64 --set train.log_every=1"
                           " --set data.train=" + d + " --set data.val=" + d + " --set data.calib=" + d;
  const std::string cfg = std::string(HEADWISE_SOURCE_DIR) + "/configs/llama_cpu.json";
  auto r = test::run_headwise("train --config " + cfg + " --out " + dir + "/run" + sets);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto lines = test::read_jsonl(dir + "/run/metrics.jsonl");
  REQUIRE(lines.size() >= 3);
  CHECK(lines.front()["loss"].get<double>() == Approx(std::log(256.0)).epsilon(0.05));  // about uniform at init
  const nlohmann::json hf = test::read_json(dir + "/run/checkpoints/step_3/config.json");
  CHECK(hf["model_type"] == "llama");
  CHECK(hf["architectures"][0] == "LlamaForCausalLM");
  auto e = test::run_headwise("eval --checkpoint " + dir + "/run/checkpoints/step_3 --data " + d +
                              " --batches 1 --micro-batch 2 --seq-len 32");
  INFO(e.out);
  CHECK(e.code == 0);
  // No CUDA Llama ops (and no GPU here): one error line either way.
  auto c = test::run_headwise("train --config " + cfg + " --out " + dir + "/cuda" + sets + " --set train.device=cuda");
  CHECK(c.code == 1);
  CHECK(test::error_lines(c.out) == 1);
}

TEST_CASE("train --init-from a transformers Qwen3 directory takes its shape from config.json", "[cli][llama][hf]") {
  const std::string dir = test::cli_temp_dir("llama_init");
  const std::string d = tokens(dir, 600, 96);
  // No model section at all, and one with a non-shape key only (the head plan).
  const std::string rest = R"(
    "train": {"micro_batch": 2, "seq_len": 16, "total_batch_tokens": 32, "steps": 1, "lr": 1e-9, "min_lr": 0,
              "warmup_steps": 0, "eval_every": 0},
    "data": {"train": ")" + d + R"(", "val": ")" + d + R"(", "shuffle": false}
  })";
  test::write_text(dir + "/c.json", "{" + rest);
  test::write_text(dir + "/plan.json", R"({"model": {"head_plan": [["softmax", "softmax", "sink_window:2:4",
    "sink_window:2:4"], ["softmax", "softmax", "softmax", "softmax"]]},)" + rest);
  auto r = test::run_headwise("train --config " + dir + "/c.json --out " + dir + "/run --init-from " + fixture("qwen3"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto lines = test::read_jsonl(dir + "/run/metrics.jsonl");
  auto e = test::run_headwise("eval --checkpoint " + fixture("qwen3") + " --data " + d +
                              " --batches 1 --micro-batch 2 --seq-len 16");
  INFO(e.out);
  REQUIRE(e.code == 0);
  // The first training loss is the checkpoint's own loss on the first batch.
  CHECK(lines.front()["loss"].get<double>() == Approx(test::last_json_line(e.out)["loss"].get<double>()).epsilon(1e-6));
  const nlohmann::json written = test::read_json(dir + "/run/checkpoints/step_1/config.json");
  CHECK(written["model_type"] == "qwen3");
  CHECK(written["head_dim"] == 16);
  // With the head plan: a streaming plan on the pretrained shape.
  auto p = test::run_headwise("train --config " + dir + "/plan.json --out " + dir + "/plan --init-from " + fixture("qwen3"));
  INFO(p.out);
  CHECK(p.code == 0);
  CHECK(test::read_json(dir + "/plan/checkpoints/step_1/config.json")["head_plan"][0][2] == "sink_window:2:4");
  // A shape key that contradicts config.json: one error naming both values.
  expect_one_error(test::run_headwise("train --config " + dir + "/c.json --out " + dir + "/r2 --init-from " +
                                      fixture("qwen3") + " --set model.n_layer=3"),
                   "model.n_layer: the config's 3 does not match 2");
}

TEST_CASE("generate, eval and inspect read transformers' Llama-family directories", "[cli][llama][hf]") {
  const std::string dir = test::cli_temp_dir("llama_read");
  for (const char* name : {"llama", "qwen2", "qwen3"}) {
    INFO(name);
    const nlohmann::json expected = test::read_json(fixture(name) + "/expected.json");
    std::string prompt;
    for (const auto& t : expected["greedy_prompt"]) prompt += std::to_string(t.get<int>()) + " ";
    test::write_text(dir + "/prompt.txt", prompt);
    auto g = test::run_headwise("generate --checkpoint " + fixture(name) + " --prompt-tokens " + dir +
                                "/prompt.txt --max-new 32 --temperature 0");
    INFO(g.out);
    REQUIRE(g.code == 0);
    std::string want;
    const auto& toks = expected["greedy_tokens"];
    for (size_t i = expected["greedy_prompt"].size(); i < toks.size(); ++i)
      want += (want.empty() ? "" : " ") + std::to_string(toks[i].get<int>());
    CHECK(g.out.find(want) != std::string::npos);
    // inspect: the shape of config.json and the parameters the weight files hold (tied heads are
    // one tensor in both), all heads softmax.
    auto in = test::run_headwise("inspect --checkpoint " + fixture(name));
    INFO(in.out);
    REQUIRE(in.code == 0);
    const nlohmann::json hf = test::read_json(fixture(name) + "/config.json");
    int64_t stored = 0;
    for (const auto& e : std::filesystem::directory_iterator(fixture(name))) {
      const std::string f = e.path().filename().string();
      if (f.rfind("model", 0) != 0 || e.path().extension() != ".safetensors") continue;
      io::SafetensorsReader st(e.path().string());
      for (const auto& t : st.names()) stored += st.info(t).numel();
    }
    const nlohmann::json j = test::last_json_line(in.out);
    CHECK(j["parameters"].get<int64_t>() == stored);
    CHECK(j["acr"].get<double>() == 1.0);
    const std::string shape = std::to_string(hf["num_hidden_layers"].get<int>()) + " layers, " +
                              std::to_string(hf["num_attention_heads"].get<int>()) + " heads (" +
                              std::to_string(hf["num_key_value_heads"].get<int>()) + " KV), width " +
                              std::to_string(hf["hidden_size"].get<int>());
    CHECK(in.out.find(shape) != std::string::npos);
    CHECK(in.out.find("vocab " + std::to_string(hf["vocab_size"].get<int>())) != std::string::npos);
  }
  // A directory with a missing shard: one error line naming it.
  std::filesystem::copy(fixture("qwen3"), dir + "/broken");
  std::filesystem::remove(dir + "/broken/model-00003-of-00004.safetensors");
  expect_one_error(test::run_headwise("eval --checkpoint " + dir + "/broken --data " + tokens(dir, 200, 96) +
                                      " --batches 1 --micro-batch 1 --seq-len 8"),
                   "model-00003-of-00004.safetensors");
}

TEST_CASE("a vocabulary of 70,000: 32-bit shards through prepare, train, eval and generate", "[cli][llama][vocab32]") {
  const std::string dir = test::cli_temp_dir("vocab32");
  nlohmann::json tok = test::read_json(std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/gpt2_style.json");
  // Ids lie below the number of entries: pad the vocabulary up to the added token's id.
  for (int id = int(tok["model"]["vocab"].size()) + int(tok["added_tokens"].size()); id < 69999; ++id)
    tok["model"]["vocab"]["<pad" + std::to_string(id) + ">"] = id;
  tok["added_tokens"].push_back({{"id", 69999}, {"content", "<big>"}, {"special", true}});
  test::write_text(dir + "/tok.json", tok.dump());
  std::string text;
  for (int i = 0; i < 60; ++i) text += "In the beginning God created the heaven and the earth.<big> And the earth was.\n";
  test::write_text(dir + "/corpus.txt", text);
  auto p = test::run_headwise("prepare --input " + dir + "/corpus.txt --output " + dir + "/data --tokenizer " + dir +
                              "/tok.json --val-fraction 0.3");
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK(p.out.find("32-bit tokens (version 2)") != std::string::npos);
  // 4 x 64 rows of a 70,000 vocabulary: the classifier runs in chunks of 2^24 / 70,000 = 239 rows.
  test::write_text(dir + "/c.json", R"({
    "model": {"family": "llama", "n_layer": 1, "n_head": 2, "n_embd": 32, "intermediate_size": 64,
              "block_size": 64, "vocab_size": 70000, "tie_word_embeddings": true},
    "train": {"micro_batch": 4, "seq_len": 64, "total_batch_tokens": 256, "steps": 2, "lr": 1e-3, "warmup_steps": 0,
              "eval_every": 0, "eval_batches": 1, "log_every": 1},
    "data": {"train": ")" + dir + R"(/data/train_*.bin", "val": ")" + dir + R"(/data/val_*.bin"}
  })");
  auto r = test::run_headwise("train --config " + dir + "/c.json --out " + dir + "/run");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto lines = test::read_jsonl(dir + "/run/metrics.jsonl");
  CHECK(lines.front()["loss"].get<double>() == Approx(std::log(70000.0)).epsilon(0.05));  // about uniform at init
  const std::string ck = dir + "/run/checkpoints/step_2";
  auto e = test::run_headwise("eval --checkpoint " + ck + " --data '" + dir + "/data/val_*.bin' --batches 1 --micro-batch 1 --seq-len 64");
  INFO(e.out);
  REQUIRE(e.code == 0);
  // eval's loss is the loss of the first 65 tokens of the 32-bit shard, read here byte by byte
  // (the llm.c header, then little-endian uint32 ids), in a forward of the checkpoint's model.
  {
    std::ifstream in(dir + "/data/val_000000.bin", std::ios::binary);
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() >= 1024 + 65 * 4);
    auto word = [&](size_t at) {
      return uint32_t(bytes[at]) | uint32_t(bytes[at + 1]) << 8 | uint32_t(bytes[at + 2]) << 16 | uint32_t(bytes[at + 3]) << 24;
    };
    REQUIRE(word(0) == 20240520);
    REQUIRE(word(4) == 2);  // version 2: 32-bit ids
    std::vector<int32_t> x(64), y(64);
    for (size_t i = 0; i < 64; ++i) x[i] = int32_t(word(1024 + 4 * i)), y[i] = int32_t(word(1024 + 4 * (i + 1)));
    auto model = load_model(ck, cpu_backend<float>());
    const double want = model->forward(x.data(), y.data(), 1, 64);
    // Measured: equal (AVX-512), 1.1e-13 relative (OPENBLAS_CORETYPE=Haswell: another GEMM split).
    CHECK(test::last_json_line(e.out)["loss"].get<double>() == Approx(want).epsilon(1e-12));
    CHECK(want == Approx(std::log(70000.0)).epsilon(0.05));  // about uniform after 2 small updates
  }
  test::write_text(dir + "/prompt.txt", "69999 100 7");
  auto g = test::run_headwise("generate --checkpoint " + ck + " --prompt-tokens " + dir +
                              "/prompt.txt --max-new 4 --temperature 0");
  INFO(g.out);
  CHECK(g.code == 0);
  // A token outside the vocabulary in a 32-bit shard: one error naming it.
  std::vector<uint32_t> bad(300, 5);
  bad[77] = 70000;
  data::write_shard32(dir + "/bad.bin", bad);
  expect_one_error(test::run_headwise("eval --checkpoint " + ck + " --data " + dir +
                                      "/bad.bin --batches 1 --micro-batch 2 --seq-len 64"),
                   "70000");
}

TEST_CASE("generate stops at generation_config.json's eos_token_id unless --ignore-eos", "[cli][llama][eos]") {
  const std::string dir = test::cli_temp_dir("llama_eos");
  std::filesystem::copy(fixture("llama"), dir + "/ck");
  const nlohmann::json expected = test::read_json(fixture("llama") + "/expected.json");
  const auto& all = expected["greedy_tokens"];
  const size_t n_prompt = expected["greedy_prompt"].size();
  std::string prompt, first5;
  for (size_t i = 0; i < n_prompt; ++i) prompt += std::to_string(all[i].get<int>()) + " ";
  test::write_text(dir + "/prompt.txt", prompt);
  // The 5th greedy token is an end of sequence (a list, as Llama 3 writes it, with an id not drawn).
  const int eos = all[n_prompt + 4].get<int>();
  size_t first = n_prompt;
  while (all[first].get<int>() != eos) ++first;  // it may come earlier
  for (size_t i = n_prompt; i <= first; ++i) first5 += (first5.empty() ? "" : " ") + std::to_string(all[i].get<int>());
  test::write_text(dir + "/ck/generation_config.json", R"({"eos_token_id": [95, )" + std::to_string(eos) + "]}");
  const std::string gen = "generate --checkpoint " + dir + "/ck --prompt-tokens " + dir + "/prompt.txt --max-new 32 --temperature 0";
  auto g = test::run_headwise(gen);
  INFO(g.out);
  REQUIRE(g.code == 0);
  CHECK(g.out.find(first5 + "\n") != std::string::npos);
  CHECK(test::last_json_line(g.out)["new_tokens"] == first - n_prompt + 1);
  CHECK(test::last_json_line(g.out)["stopped_at_eos"] == true);
  auto all_new = test::run_headwise(gen + " --ignore-eos");
  CHECK(test::last_json_line(all_new.out)["new_tokens"] == 32);
  test::write_text(dir + "/ck/generation_config.json", R"({"eos_token_id": 96})");
  expect_one_error(test::run_headwise(gen), "eos_token_id 96");
}

TEST_CASE("generate --prompt adds the special tokens of the checkpoint's tokenizer.json post-processor",
          "[cli][llama][tokenizer]") {
  const std::string dir = test::cli_temp_dir("llama_bos");
  const std::string d = tokens(dir, 600, 3258);
  test::write_text(dir + "/c.json", R"({
    "model": {"family": "llama", "n_layer": 1, "n_head": 2, "n_embd": 16, "intermediate_size": 32,
              "block_size": 64, "vocab_size": 3258},
    "train": {"micro_batch": 1, "seq_len": 32, "total_batch_tokens": 32, "steps": 1, "eval_every": 0},
    "data": {"train": ")" + d + R"(", "val": ")" + d + R"("}
  })");
  REQUIRE(test::run_headwise("train --config " + dir + "/c.json --out " + dir + "/run").code == 0);
  const std::string ck = dir + "/run/checkpoints/step_1";
  // Llama 3's post-processor on the fixture tokenizer; `tokenizers` gives 13 ids for the text.
  nlohmann::json tok = test::read_json(std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/llama3_style.json");
  const nlohmann::json post = test::read_json(std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/expected_post.json");
  tok["post_processor"] = post["llama3"]["post_processor"];
  test::write_text(ck + "/tokenizer.json", tok.dump());
  const nlohmann::json& c = post["llama3"]["cases"][0];
  auto g = test::run_headwise("generate --checkpoint " + ck + " --prompt '" + c["text"].get<std::string>() +
                              "' --max-new 2 --temperature 0");
  INFO(g.out);
  REQUIRE(g.code == 0);
  CHECK(test::last_json_line(g.out)["prompt_tokens"] == c["ids"].size());
}

TEST_CASE("a headwise-type config.json reads as its family's, a bad one is one error line", "[cli][llama][hf]") {
  // model_type "headwise" (a mixed plan, which transformers must not open as its family's class)
  // keeps the family in headwise_family; headwise reads it as that family with the plan.
  const std::string dir = test::cli_temp_dir("headwise_type");
  const std::string eval = " --data " + tokens(dir, 200, 96) + " --batches 1 --micro-batch 1 --seq-len 8";
  auto make = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const std::string ck = dir + "/" + name;
    std::filesystem::remove_all(ck);
    std::filesystem::copy(fixture("qwen2"), ck);
    nlohmann::json j = test::read_json(ck + "/config.json");
    j["model_type"] = "headwise";
    j["architectures"] = {"HeadwiseForCausalLM"};
    j["headwise_family"] = "qwen2";
    j["head_plan"] = {{"softmax", "sink_window:1:2", "window:3", "softmax"}, {"softmax", "softmax", "softmax", "softmax"}};
    edit(j);
    test::write_text(ck + "/config.json", j.dump());
    return "eval --checkpoint " + ck + eval;
  };
  auto ok = test::run_headwise(make("ok", [](nlohmann::json&) {}));
  INFO(ok.out);
  CHECK(ok.code == 0);
  expect_one_error(test::run_headwise(make("unknown", [](nlohmann::json& j) { j["headwise_family"] = "mistral"; })),
                   "needs headwise_family gpt2, llama, qwen2 or qwen3, got 'mistral'");
  expect_one_error(test::run_headwise(make("missing", [](nlohmann::json& j) { j.erase("headwise_family"); })),
                   "needs headwise_family");
  expect_one_error(test::run_headwise(make("layers", [](nlohmann::json& j) { j["head_plan"].push_back(j["head_plan"][0]); })),
                   "head plan: 3 layers, model has 2");
  expect_one_error(test::run_headwise(make("heads", [](nlohmann::json& j) { j["head_plan"][1].erase(0); })),
                   "head plan: layer 1 has 3 heads, model has 4");
  // A static head whose values the weight files lack.
  expect_one_error(test::run_headwise(make("values", [](nlohmann::json& j) { j["head_plan"][0][0] = "static"; })),
                   "h.0.attn.static.0.alpha");
}
