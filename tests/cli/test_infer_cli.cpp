// End-to-end: `headwise generate` (cached decoding from a checkpoint) against the same greedy
// generation in process, and `headwise bench-infer` (its KV bytes against the hand formula); bad
// input is one error line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <sstream>

#include "cli/cli_util.hpp"
#include "headwise/data/tokenizer.hpp"
#include "headwise/infer/generate.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

using namespace hw;

namespace {

std::string make_checkpoint(const std::string& dir, const std::string& name, int vocab, const std::string& plan) {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_kv_head = 2;
  mc.n_embd = 32;
  mc.block_size = 48;
  mc.vocab_size = vocab;
  mc.pos = "rope";
  mc.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(plan));
  mc.validate();
  Model<float> m(mc, cpu_backend<float>());
  m.init_weights(9);
  const std::string path = dir + "/" + name;
  save_model_files(m, path);
  return path;
}

const char* kMixed = R"([["softmax","window:3","sink_window:2:6","static"],["linear","pruned","softmax","softmax"]])";
const char* kSoftmax = R"([["softmax","softmax","softmax","softmax"],["softmax","softmax","softmax","softmax"]])";

// The streamed text: everything before the JSON summary line.
std::string text_part(const std::string& out) { return out.substr(0, out.rfind("\n{")); }

using test::expect_one_error;

}  // namespace

TEST_CASE("generate: greedy tokens equal the in-process decoder's, seeds reproduce, bytes stream", "[cli][infer]") {
  const std::string dir = test::cli_temp_dir("generate");
  const std::string ids = make_checkpoint(dir, "ids", 32, kMixed);
  test::write_text(dir + "/prompt.txt", "3 1 4 1 5 9 2 6\n");  // one line: one prompt
  const auto r = test::run_headwise("generate --checkpoint " + ids + " --prompt-tokens " + dir +
                                    "/prompt.txt --max-new 20 --temperature 0");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto model = load_model(ids, cpu_backend<float>());
  infer::CachedDecoder dec(*model, 48);
  infer::SamplingOptions o;
  o.temperature = 0;
  infer::Sampler s(o, 32);
  const auto want = infer::generate(dec, s, {3, 1, 4, 1, 5, 9, 2, 6}, 20);
  std::ostringstream line;
  for (size_t i = 0; i < want.size(); ++i) line << (i ? " " : "") << want[i];
  CHECK(r.out.rfind(line.str() + "\n", 0) == 0);  // the first line: the tokens, as drawn
  const auto summary = test::last_json_line(r.out);
  CHECK(summary["new_tokens"] == 20);
  CHECK(summary["prompt_tokens"] == 8);

  const std::string bytes = make_checkpoint(dir, "bytes", 256, kMixed);
  const std::string gen = "generate --checkpoint " + bytes + " --prompt 'In the' --max-new 16 --top-k 20 --top-p 0.9";
  const auto a = test::run_headwise(gen + " --seed 5");
  const auto b = test::run_headwise(gen + " --seed 5");
  const auto c = test::run_headwise(gen + " --seed 6");
  REQUIRE(a.code == 0);
  CHECK(text_part(a.out) == text_part(b.out));  // same seed: same text (the summaries' timings differ)
  CHECK(test::last_json_line(a.out)["new_tokens"] == 16);
  CHECK(text_part(a.out) != text_part(c.out));
}

TEST_CASE("generate: bad input is one error line", "[cli][infer]") {
  const std::string dir = test::cli_temp_dir("generate_bad");
  const std::string bytes = make_checkpoint(dir, "bytes", 256, kMixed);
  const std::string base = "generate --checkpoint " + bytes;
  expect_one_error(test::run_headwise(base + " --prompt '" + std::string(49, 'a') + "' --max-new 1"),
                   "longer than the checkpoint's context of 48");
  expect_one_error(test::run_headwise(base + " --prompt abc --max-new 47"), "more than the checkpoint's context");
  expect_one_error(test::run_headwise(base + " --prompt-tokens " + dir + "/missing.txt --max-new 2"),
                   "cannot open");
  test::write_text(dir + "/bad.txt", "1 2 x");
  expect_one_error(test::run_headwise(base + " --prompt-tokens " + dir + "/bad.txt --max-new 2"), "not a token id");
  test::write_text(dir + "/big.txt", "1 256");
  expect_one_error(test::run_headwise(base + " --prompt-tokens " + dir + "/big.txt --max-new 2"),
                   "outside the vocabulary");
  expect_one_error(test::run_headwise(base + " --prompt a --max-new 2 --top-p 0"), "--top-p");
  expect_one_error(test::run_headwise(base + " --prompt a --max-new 2 --temperature -1"), "--temperature");
  expect_one_error(test::run_headwise(base + " --prompt a --max-new 2 --top-k -3"), "--top-k");
  expect_one_error(test::run_headwise(base + " --prompt a --max-new 0"), "--max-new");
  const std::string wide = make_checkpoint(
      dir, "wide", 256, R"([["sink_window:30:20","softmax","softmax","softmax"],["softmax","softmax","softmax","softmax"]])");
  expect_one_error(test::run_headwise("generate --checkpoint " + wide + " --prompt a --max-new 2"),
                   "sink + window exceeds the context of 48");
  const std::string ids = make_checkpoint(dir, "ids", 32, kSoftmax);
  expect_one_error(test::run_headwise("generate --checkpoint " + ids + " --prompt a --max-new 2"), "--prompt-tokens");
}

TEST_CASE("bench-infer: an AoH plan against all-softmax, KV bytes by the formula", "[cli][infer]") {
  const std::string dir = test::cli_temp_dir("bench_infer");
  const std::string ckpt = make_checkpoint(dir, "soft", 32, kSoftmax);
  const std::string quick = " --prefill-warmup 1 --prefill-runs 2 --decode-warmup 2 --decode-runs 3";
  const auto r = test::run_headwise("bench-infer --checkpoint " + ckpt + " --context 40 --method aoh --set method.sparsity=0.5 --set method.sink=2 --set method.window=8" + quick);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = test::last_json_line(r.out);
  // 2 layers x 2 KV heads, half of them streaming: 2 d_head 4 (2 T + 2 (S + W)) vs 2 d_head 4 (4 T)
  const int64_t D = 8, T = 40;
  CHECK(j["plan"]["kv_cache_bytes"] == 2 * D * 4 * (2 * T + 2 * (2 + 8)));
  CHECK(j["all_softmax"]["kv_cache_bytes"] == 2 * D * 4 * (4 * T));
  CHECK(j["kv_bytes_ratio"].get<double>() == Approx(100.0 / 160.0));
  CHECK(j["plan"]["kv_heads"]["sink_ring"] == 2);
  CHECK(j["decode_ratio"].get<double>() > 0);
  CHECK(r.out.find("decode ms/token") != std::string::npos);

  const std::string mixed = make_checkpoint(dir, "mixed", 32, kMixed);
  const auto p = test::run_headwise("bench-infer --checkpoint " + ckpt + " --context 40 --plan-from " + mixed + quick);
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK(test::last_json_line(p.out)["plan_source"] == "plan-from");

  expect_one_error(test::run_headwise("bench-infer --checkpoint " + ckpt +
                                      " --context 40 --method aoh --set method.sparsity=1.5" + quick),
                   "method.sparsity must be in [0, 1]");
  expect_one_error(test::run_headwise("bench-infer --checkpoint " + ckpt +
                                      " --context 40 --method aoh --set method.sink=30 --set method.window=15" + quick),
                   "exceeds --context");
  expect_one_error(test::run_headwise("bench-infer --checkpoint " + ckpt + " --context 49" + quick), "--context");
}

// "=== line N ===" blocks of a several-prompt run: line N -> its text (the line after the header).
std::map<int, std::string> line_blocks(const std::string& out) {
  std::map<int, std::string> blocks;
  size_t at = 0;
  while ((at = out.find("=== line ", at)) != std::string::npos) {
    const size_t end_hdr = out.find(" ===\n", at);
    const int n = std::stoi(out.substr(at + 9, end_hdr - at - 9));
    const size_t body = end_hdr + 5, next = out.find("\n=== line ", body);
    const size_t stop = next == std::string::npos ? out.rfind("\n{") : next;
    blocks[n] = out.substr(body, stop - body);
    at = body;
  }
  return blocks;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::ostringstream line;
  for (size_t i = 0; i < ids.size(); ++i) line << (i ? " " : "") << ids[i];
  return line.str();
}

TEST_CASE("generate: several prompts decode together, each line as it decodes alone (ids and text, per-line "
          "sampling streams)",
          "[cli][infer][batch]") {
  const std::string dir = test::cli_temp_dir("generate_batch");
  const std::string ids = make_checkpoint(dir, "ids", 32, kMixed);
  // Three prompts of different lengths, two slots: line 3 waits for a free one.
  const std::vector<std::vector<int32_t>> prompts = {{3, 1, 4, 1, 5, 9, 2, 6}, {7}, {2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4}};
  test::write_text(dir + "/prompts.txt", ids_text(prompts[0]) + "\n" + ids_text(prompts[1]) + "\r\n" +
                                             ids_text(prompts[2]) + "\n");
  const auto r = test::run_headwise("generate --checkpoint " + ids + " --prompt-tokens " + dir +
                                    "/prompts.txt --max-new 14 --temperature 0 --max-batch 2");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto model = load_model(ids, cpu_backend<float>());
  const auto blocks = line_blocks(r.out);
  REQUIRE(blocks.size() == 3);
  for (size_t i = 0; i < prompts.size(); ++i) {
    infer::CachedDecoder dec(*model, 48);
    infer::Sampler s({0.0}, 32);
    CHECK(blocks.at(int(i) + 1) == ids_text(infer::generate(dec, s, prompts[i], 14)));
  }
  const auto summary = test::last_json_line(r.out);
  CHECK(summary["sequences"] == 3);
  CHECK(summary["max_batch"] == 2);
  CHECK(summary["new_tokens"] == nlohmann::json({14, 14, 14}));
  CHECK(summary["prompt_tokens"] == nlohmann::json({8, 1, 11}));

  // Text through --prompts, sampled: line N draws from stream N - 1 of the seed, so line 1 is what
  // --prompt alone draws with that seed.
  const std::string bytes = make_checkpoint(dir, "bytes", 256, kMixed);
  const std::vector<std::string> texts = {"In the", "A", "Once upon a"};
  test::write_text(dir + "/texts.txt", texts[0] + "\n" + texts[1] + "\n" + texts[2] + "\n");
  const std::string opts = " --max-new 10 --top-k 20 --top-p 0.9 --seed 5";
  const auto b = test::run_headwise("generate --checkpoint " + bytes + " --prompts " + dir + "/texts.txt" + opts);
  INFO(b.out);
  REQUIRE(b.code == 0);
  const auto text_blocks = line_blocks(b.out);
  REQUIRE(text_blocks.size() == 3);
  const auto alone = test::run_headwise("generate --checkpoint " + bytes + " --prompt '" + texts[0] + "'" + opts);
  REQUIRE(alone.code == 0);
  CHECK(text_blocks.at(1) == text_part(alone.out));
  auto bytes_model = load_model(bytes, cpu_backend<float>());
  infer::SamplingOptions so;
  so.top_k = 20;
  so.top_p = 0.9;
  so.seed = 5;
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(i);
    infer::CachedDecoder dec(*bytes_model, 48);
    infer::Sampler s(so, 256, i);
    std::vector<int32_t> prompt;
    for (uint16_t t : data::encode_bytes(texts[i])) prompt.push_back(int32_t(t));
    std::string want;
    for (int32_t t : infer::generate(dec, s, prompt, 10)) want.push_back(char(t));
    CHECK(text_blocks.at(int(i) + 1) == want);
  }
  CHECK(text_blocks.at(2) != text_blocks.at(1));
}

TEST_CASE("generate: a bad prompt line is one error naming the file and line, before the weights are read",
          "[cli][infer][batch]") {
  const std::string dir = test::cli_temp_dir("generate_batch_bad");
  const std::string ids = make_checkpoint(dir, "ids", 32, kMixed);
  const std::string bytes = make_checkpoint(dir, "bytes", 256, kMixed);
  // Weights that cannot be read: the line's error must come first.
  for (const std::string& ck : {ids, bytes}) {
    std::filesystem::copy(ck, ck + "_broken", std::filesystem::copy_options::recursive);
    test::write_text(ck + "_broken/model.safetensors", "not a safetensors file");
  }
  const std::string gen_ids = "generate --max-new 4 --checkpoint " + ids + "_broken --prompt-tokens " + dir;
  test::write_text(dir + "/empty_line.txt", "1 2 3\n\n4 5\n");
  expect_one_error(test::run_headwise(gen_ids + "/empty_line.txt"),
                   dir + "/empty_line.txt line 2: the line is empty");
  test::write_text(dir + "/blank_line.txt", "1 2 3\n4\n \t\n");
  expect_one_error(test::run_headwise(gen_ids + "/blank_line.txt"), "blank_line.txt line 3: the line is empty");
  test::write_text(dir + "/outside.txt", "1 2 3\n4 5\n6 32 7\n");
  expect_one_error(test::run_headwise(gen_ids + "/outside.txt"),
                   "outside.txt line 3: token 32 is outside the vocabulary of 32");
  test::write_text(dir + "/word.txt", "1 2 3\n4 5x\n");
  expect_one_error(test::run_headwise(gen_ids + "/word.txt"), "word.txt line 2: '5x' is not a token id");
  std::string long_line;
  for (int i = 0; i < 46; ++i) long_line += "1 ";
  test::write_text(dir + "/long.txt", "1\n" + long_line + "\n");
  expect_one_error(test::run_headwise(gen_ids + "/long.txt"),
                   "long.txt line 2: the prompt (46 tokens) and --max-new 4 need 49 positions");
  const std::string gen_text = "generate --max-new 4 --checkpoint " + bytes + "_broken --prompts " + dir;
  test::write_text(dir + "/texts.txt", "In the\nA\n\nB\n");
  expect_one_error(test::run_headwise(gen_text + "/texts.txt"), "texts.txt line 3: the line is empty");
  expect_one_error(test::run_headwise(gen_text + "/missing.txt"), "--prompts " + dir + "/missing.txt: cannot open");
  expect_one_error(test::run_headwise("generate --max-new 4 --checkpoint " + bytes + " --prompts " + dir +
                                      "/texts.txt --prompt a"),
                   "--prompt");
  // The good lines run once the weights are readable.
  test::write_text(dir + "/good.txt", "1 2 3\n4 5\n");
  CHECK(test::run_headwise("generate --max-new 4 --checkpoint " + ids + " --prompt-tokens " + dir + "/good.txt").code ==
        0);
}

TEST_CASE("bench-infer --batch: KV bytes per sequence by hand, the largest batch in the budget, tokens/s",
          "[cli][infer][batch]") {
  const std::string dir = test::cli_temp_dir("bench_infer_batch");
  const std::string ckpt = make_checkpoint(dir, "soft", 32, kSoftmax);
  const std::string run = "bench-infer --checkpoint " + ckpt +
                          " --context 40 --method aoh --set method.sparsity=0.5 --set method.sink=2 --set "
                          "method.window=8 --decode-warmup 2 --decode-runs 3 --batch 3";
  const auto r = test::run_headwise(run + " --memory-budget 0.002");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = test::last_json_line(r.out);
  // 2 layers x 2 KV heads (D = 8, fp32), context 40; AoH streams one KV head per layer as S = 2 +
  // W = 8 slots: per layer K and V x 8 x 4 bytes x (40 + 10) rows; all-softmax (40 + 40) rows.
  const int64_t D = 8, T = 40, S = 2, W = 8;
  const int64_t plan_kv = 2 * (2 * D * 4 * (T + (S + W))), soft_kv = 2 * (2 * D * 4 * (T + T));
  CHECK(plan_kv == 6400);
  CHECK(j["plan"]["kv_cache_bytes_per_sequence"] == plan_kv);
  CHECK(j["all_softmax"]["kv_cache_bytes_per_sequence"] == soft_kv);
  CHECK(j["plan"]["kv_cache_bytes_batch"] == 3 * plan_kv);
  CHECK(j["kv_bytes_ratio"].get<double>() == Approx(6400.0 / 10240.0));
  CHECK(j["memory_budget_bytes"].get<double>() == 2e6);
  for (const char* side : {"plan", "all_softmax"}) {
    INFO(side);
    const auto& s = j[side];
    const int64_t fixed = s["weight_bytes"].get<int64_t>() + s["scratch_bytes"].get<int64_t>();
    REQUIRE(fixed < 2000000);
    CHECK(s["max_batch_in_budget"] == (2000000 - fixed) / s["kv_cache_bytes_per_sequence"].get<int64_t>());
    CHECK(s["decode_tokens_per_s"].get<double>() > 0);
    CHECK(s["peak_rss_bytes"].get<int64_t>() > 0);
  }
  CHECK(j["plan"]["max_batch_in_budget"].get<int64_t>() > j["all_softmax"]["max_batch_in_budget"].get<int64_t>());
  CHECK(r.out.find("KV-cache bytes per sequence") != std::string::npos);
  // --side plan: the all-softmax count is still printed (it needs no run)
  const auto p = test::run_headwise(run + " --side plan");
  REQUIRE(p.code == 0);
  CHECK(test::last_json_line(p.out)["all_softmax"]["kv_cache_bytes_per_sequence"] == soft_kv);
  CHECK(test::last_json_line(p.out)["memory_budget_source"] == "physical memory");
  expect_one_error(test::run_headwise("bench-infer --checkpoint " + ckpt + " --context 40 --memory-budget 1"),
                   "--memory-budget needs --batch");
}

TEST_CASE("generate --weights bf16 / fp16: the in-process 16-bit decoder's greedy tokens, and a bad value is one error",
          "[cli][infer][half]") {
  const std::string dir = test::cli_temp_dir("generate_half");
  const std::string ids = make_checkpoint(dir, "ids", 32, kMixed);
  test::write_text(dir + "/prompt.txt", "3 1 4 1 5 9 2 6");
  auto model = load_model(ids, cpu_backend<float>());
  // (the cache: fp16 by default with 16-bit weights, or as --kv-cache says)
  for (auto [w, kv_flag] : {std::pair<infer::WeightPrecision, std::string>{infer::WeightPrecision::BF16, ""},
                            {infer::WeightPrecision::FP16, ""},
                            {infer::WeightPrecision::BF16, "bf16"},
                            {infer::WeightPrecision::FP16, "fp32"}}) {
    const std::string name = infer::weight_precision_name(w);
    const attn::KvPrecision kv = infer::kv_precision_for(w, kv_flag);
    const auto r = test::run_headwise("generate --checkpoint " + ids + " --prompt-tokens " + dir +
                                      "/prompt.txt --max-new 12 --temperature 0 --weights " + name +
                                      (kv_flag.empty() ? "" : " --kv-cache " + kv_flag));
    INFO(r.out);
    REQUIRE(r.code == 0);
    infer::CachedDecoder dec(*model, 19, 512, 512, w, {}, kv);
    infer::SamplingOptions o;
    o.temperature = 0;
    infer::Sampler s(o, 32);
    const auto want = infer::generate(dec, s, {3, 1, 4, 1, 5, 9, 2, 6}, 12);
    std::ostringstream line;
    for (size_t i = 0; i < want.size(); ++i) line << (i ? " " : "") << want[i];
    CHECK(r.out.rfind(line.str() + "\n", 0) == 0);
    const auto summary = test::last_json_line(r.out);
    CHECK(summary["weights"] == name);
    CHECK(summary["kv_cache"] == (kv_flag.empty() ? "fp16" : kv_flag));
    CHECK(summary["kv_cache_bytes"].get<int64_t>() == int64_t(dec.kv_bytes()));
    CHECK(summary["weight_bytes_per_token"].get<int64_t>() == int64_t(dec.half_weight_bytes()));
  }
  expect_one_error(test::run_headwise("generate --checkpoint " + ids + " --prompt-tokens " + dir +
                                      "/prompt.txt --max-new 2 --weights int8"),
                   "'int8' is not a weight precision");
  expect_one_error(test::run_headwise("generate --checkpoint " + ids + " --prompt-tokens " + dir +
                                      "/prompt.txt --max-new 2 --kv-cache fp8"),
                   "--kv-cache: 'fp8' is not a KV cache precision");
}

// The issue-41 memory goal: generate's peak RSS (the kernel's count, printed in its summary) at
// most 1.2x the bytes it must hold: the weights in the chosen precision (matrices at 2 or 4
// bytes, everything else fp32), the KV cache and the logits, computed here from the config. A
// 470 MB (fp32) model, so that the process's own ~30 MB (code, OpenBLAS's buffers, the loader's
// staging) fit within the 20%.
TEST_CASE("generate: peak memory within 1.2x of weights + KV cache, fp32 and 16-bit", "[cli][infer][memory]") {
  const std::string dir = test::cli_temp_dir("generate_memory");
  ModelConfig mc;
  mc.n_layer = 8;
  mc.n_head = 16;
  mc.n_embd = 1024;
  mc.block_size = 256;
  mc.vocab_size = 16384;
  mc.validate();
  const std::string ckpt = dir + "/m";
  {
    Model<float> m(mc, cpu_backend<float>());
    m.init_weights(3);
    save_model_files(m, ckpt);
  }
  const int64_t L = mc.n_layer, C = mc.n_embd, V = mc.vocab_size, P = mc.block_size;
  const int64_t matrices = L * (C * 3 * C + C * C + C * 4 * C + 4 * C * C) + V * C;  // wte is the LM head
  const int64_t others = P * C + L * (4 * C + 3 * C + C + 4 * C + C) + 2 * C;        // wpe, norms, biases
  test::write_text(dir + "/prompt.txt", "5 17 300 4000 16383 2 9 77");
  const int64_t ctx = 8 + 12 - 1;
  const int64_t kv_values = L * 2 * ctx * C, logits = V * 4;  // the cache: fp32, or fp16 with 16-bit weights
  for (const char* w : {"fp32", "bf16", "fp16"}) {
    const auto r = test::run_headwise("generate --checkpoint " + ckpt + " --prompt-tokens " + dir +
                                      "/prompt.txt --max-new 12 --temperature 0 --ignore-eos --weights " + w);
    INFO(r.out);
    REQUIRE(r.code == 0);
    const auto summary = nlohmann::json::parse(r.out.substr(r.out.rfind("\n{") + 1));
    const int64_t bpv = std::string(w) == "fp32" ? 4 : 2;
    const int64_t bytes = matrices * bpv + others * 4 + kv_values * bpv + logits;
    const double peak = summary.at("peak_rss_bytes").get<double>();
    INFO(w << ": peak RSS " << peak / 1e6 << " MB, weights + KV " << double(bytes) / 1e6 << " MB, ratio "
           << peak / double(bytes));
    CHECK(peak <= 1.2 * double(bytes));
  }
}

TEST_CASE("a checkpoint with GPT-2's training dropout (0.1) runs in the inference commands and converts without it",
          "[cli][infer]") {
  // Hugging Face GPT-2 configs carry attn_pdrop = resid_pdrop = embd_pdrop = 0.1; attention
  // dropout does not train here, but nothing that only reads the model may refuse it.
  const std::string dir = test::cli_temp_dir("dropout_ckpt");
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_embd = 32;
  mc.block_size = 48;
  mc.vocab_size = 256;  // byte-level: --prompt needs no tokenizer.json
  mc.attn_pdrop = mc.resid_pdrop = mc.embd_pdrop = 0.1;
  mc.validate();
  Model<float> m(mc, cpu_backend<float>(), {}, /*trainable=*/false);
  m.init_weights(5);
  const std::string ckpt = dir + "/gpt2like";
  save_model_files(m, ckpt);
  REQUIRE(read_checkpoint_config(ckpt).attn_pdrop == Approx(0.1));

  for (const std::string& args :
       {"inspect --checkpoint " + ckpt, "generate --checkpoint " + ckpt + " --prompt ab --max-new 3 --temperature 0",
        "heads --checkpoint " + ckpt + " --sink 2 --window 8",
        "bench-infer --checkpoint " + ckpt +
            " --context 40 --prefill-warmup 0 --prefill-runs 1 --decode-warmup 1 --decode-runs 2"}) {
    const auto r = test::run_headwise(args);
    INFO(args << "\n" << r.out);
    CHECK(r.code == 0);
  }
  const auto c = test::run_headwise("convert --checkpoint " + ckpt + " --out " + dir + "/aoh --method aoh" +
                                    " --set method.sink=2 --set method.window=8");
  INFO(c.out);
  REQUIRE(c.code == 0);
  CHECK(c.out.find("dropout off (the checkpoint's attn_pdrop 0.1, resid_pdrop 0.1, embd_pdrop 0.1") != std::string::npos);
  const ModelConfig out = read_checkpoint_config(dir + "/aoh");
  CHECK(out.attn_pdrop == 0.0);
  CHECK(out.resid_pdrop == 0.0);
  CHECK(out.embd_pdrop == 0.0);
}
