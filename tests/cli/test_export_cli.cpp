// `headwise export` and `eval --dump` (issue 56): a mixed plan is written with the repository's
// PyTorch model files and an auto_map, an all-softmax one as the family; bf16 / fp16 weights with
// head-kind values kept fp32 and read back; the dump's tensors under the Hugging Face names; bad
// input is one error line.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "cli/cli_util.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "model/model_test_util.hpp"

using namespace hw;
namespace fs = std::filesystem;

namespace {

// The Qwen2 fixture (4 heads over 1 KV head) with every kind in its two layers.
std::string mixed_qwen2(const std::string& dir) {
  auto m = load_model(test::fixture_dir("hf_tiny_qwen2"), cpu_backend<float>());
  const auto plan = attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["linear", "static", "sink_window:1:3", "softmax"], ["performer:4", "dijiang", "taylorshift", "pruned"]])"));
  m->install_plan(plan, m->head_extras());
  save_model_files(*m, dir + "/mixed");
  std::vector<uint16_t> toks(400);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t((i * 37 + 11) % 96);
  data::write_shard(dir + "/tokens.bin", toks);
  return dir + "/mixed";
}

double eval_loss(const std::string& ckpt, const std::string& dir, const std::string& extra = "") {
  const auto r = test::run_headwise("eval --checkpoint " + ckpt + " --data " + dir + "/tokens.bin --batches 1 "
                                    "--micro-batch 2 --seq-len 24" + extra);
  INFO(r.out);
  REQUIRE(r.code == 0);
  return test::last_json_line(r.out)["loss"].get<double>();
}

nlohmann::json config_of(const std::string& dir) { return nlohmann::json::parse(io::read_file(dir + "/config.json")); }

}  // namespace

TEST_CASE("export writes a mixed plan with the repository's PyTorch model files, all-softmax as the family",
          "[cli][export]") {
  const std::string dir = test::cli_temp_dir("export");
  const std::string mixed = mixed_qwen2(dir);
  auto r = test::run_headwise("export --checkpoint " + mixed + " --out " + dir + "/exp");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto cfg = config_of(dir + "/exp");
  CHECK(cfg["model_type"] == "headwise");
  CHECK(cfg["headwise_family"] == "qwen2");
  CHECK(cfg["auto_map"]["AutoModelForCausalLM"] == "modeling_headwise.HeadwiseForCausalLM");
  CHECK(cfg["headwise_linear_groups"] == nlohmann::json::parse("[[1, 0, 0, 0], [0, 0, 0, 0]]"));
  for (const char* f : {"modeling_headwise.py", "configuration_headwise.py"})
    CHECK(io::read_file(dir + "/exp/" + f) == io::read_file(std::string(HEADWISE_SOURCE_DIR) + "/python/headwise_hf/" + f));
  CHECK(eval_loss(dir + "/exp", dir) == eval_loss(mixed, dir));  // the same model, bit for bit

  // All-softmax: the family's own type, which transformers opens with its own class; no Python files.
  r = test::run_headwise("export --checkpoint " + test::fixture_dir("hf_tiny_qwen2") + " --out " + dir + "/plain");
  REQUIRE(r.code == 0);
  CHECK(config_of(dir + "/plain")["model_type"] == "qwen2");
  CHECK_FALSE(config_of(dir + "/plain").contains("auto_map"));
  CHECK_FALSE(fs::exists(dir + "/plain/modeling_headwise.py"));

  // bf16: weights rounded once, head-kind values float32; headwise reads it back.
  r = test::run_headwise("export --checkpoint " + mixed + " --out " + dir + "/bf16 --dtype bf16");
  REQUIRE(r.code == 0);
  CHECK(config_of(dir + "/bf16")["torch_dtype"] == "bfloat16");
  io::SafetensorsReader st(dir + "/bf16/model.safetensors");
  CHECK(st.info("model.layers.0.self_attn.q_proj.weight").dtype == DType::BF16);
  CHECK(st.info("h.0.attn.linear.0.L").dtype == DType::F32);
  CHECK(st.info("h.0.attn.static.1.alpha").dtype == DType::F32);
  CHECK(st.info("h.0.attn.linear.0.groups").dtype == DType::I32);
  const double l32 = eval_loss(mixed, dir), l16 = eval_loss(dir + "/bf16", dir);
  CHECK(std::abs(l16 - l32) < 2e-2 * l32);
  CHECK(l16 != l32);
}

TEST_CASE("eval --dump writes the first batch's logits and every gradient under the Hugging Face names",
          "[cli][export]") {
  const std::string dir = test::cli_temp_dir("dump");
  const std::string mixed = mixed_qwen2(dir);
  const double loss = eval_loss(mixed, dir, " --dump " + dir + "/d32.safetensors");
  eval_loss(mixed, dir, " --dump " + dir + "/d64.safetensors --dump-precision fp64");
  io::SafetensorsReader d32(dir + "/d32.safetensors"), d64(dir + "/d64.safetensors");
  CHECK(d32.info("logits").shape == std::vector<int64_t>{2, 24, 96});
  CHECK(d32.info("logits").dtype == DType::F32);
  CHECK(d64.info("logits").dtype == DType::F64);
  double l32 = 0, l64 = 0;
  d32.read("loss", DType::F64, {1}, &l32);
  d64.read("loss", DType::F64, {1}, &l64);
  CHECK(l32 == loss);
  CHECK(std::abs(l64 - l32) < 1e-5 * l32);
  for (const char* n : {"grad.model.embed_tokens.weight", "grad.model.layers.0.self_attn.q_proj.weight",
                        "grad.model.layers.0.self_attn.q_proj.bias", "grad.h.0.attn.linear.0.L",
                        "grad.h.1.attn.dijiang.1.log_w", "grad.h.1.attn.taylorshift.2.tau"})
    CHECK(d32.has(n));
  CHECK_FALSE(d32.has("grad.h.0.attn.static.1.alpha"));  // buffers have no gradient
  CHECK(d32.info("grad.model.layers.0.self_attn.k_proj.weight").shape == std::vector<int64_t>{8, 32});
}

TEST_CASE("export and eval --dump: bad input is one error line", "[cli][export]") {
  const std::string dir = test::cli_temp_dir("export_bad");
  const std::string mixed = mixed_qwen2(dir);
  test::expect_one_error(test::run_headwise("export --checkpoint " + mixed + " --out " + dir + "/x --dtype fp8"),
                         "--dtype must be fp32, bf16 or fp16");
  test::expect_one_error(test::run_headwise("export --checkpoint " + mixed + " --out " + mixed),
                         "--out must not be the input checkpoint");
  test::expect_one_error(test::run_headwise("export --checkpoint " + dir + "/nothing --out " + dir + "/x"),
                         "no such directory");
  // A weight beyond float16's range: one error naming the tensor, nothing written.
  auto m = load_model(mixed, cpu_backend<float>());
  m->params().get("wte.weight").f32()[5] = 1e6f;
  save_model_files(*m, dir + "/big");
  test::expect_one_error(test::run_headwise("export --checkpoint " + dir + "/big --out " + dir + "/y --dtype fp16"),
                         "tensor 'model.embed_tokens.weight' has a value (1000000.000000) beyond float16's range");
  CHECK_FALSE(fs::exists(dir + "/y"));
  test::expect_one_error(test::run_headwise("eval --checkpoint " + mixed + " --text " + dir + "/tokens.bin --dump " +
                                            dir + "/d.safetensors"),
                         "--dump goes with --data");
  test::expect_one_error(test::run_headwise("eval --checkpoint " + mixed + " --data " + dir + "/tokens.bin --batches 1 "
                                            "--micro-batch 2 --seq-len 24 --dump " + dir + "/d.st --dump-precision fp16"),
                         "--dump-precision must be fp32 or fp64");
}
