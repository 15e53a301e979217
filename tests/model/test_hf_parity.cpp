// The model computes the same function as Hugging Face's GPT2LMHeadModel: a tiny model saved
// by transformers (tests/reference/make_hf_fixture.py) with its loss, logits and gradients
// computed by PyTorch (float32 and float64 autograd).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "model/model_test_util.hpp"
#include "support/temp_dir.hpp"

using namespace hw;

namespace {
struct Fixture {
  nlohmann::json expected = test::read_json(test::fixture_dir("hf_tiny_gpt2") + "/expected.json");
  std::unique_ptr<Model<float>> model = load_model(test::fixture_dir("hf_tiny_gpt2"), cpu_backend<float>());
  std::vector<int32_t> inputs, targets;
  int64_t B = 0, T = 0;
  Fixture() {
    B = expected["batch"].get<int64_t>();
    T = expected["seq_len"].get<int64_t>();
    for (const auto& row : expected["input_ids"])
      for (const auto& v : row) inputs.push_back(v.get<int32_t>());
    for (const auto& row : expected["targets"])
      for (const auto& v : row) targets.push_back(v.get<int32_t>());
  }
};
}  // namespace

TEST_CASE("HF GPT-2 checkpoint loads with the right config", "[model][hf]") {
  Fixture f;
  const auto& c = f.model->config();
  CHECK(c.n_layer == 2);
  CHECK(c.n_head == 4);
  CHECK(c.n_embd == 32);
  CHECK(c.vocab_size == 64);
  CHECK(c.block_size == 32);
  CHECK(c.head_plan.all_softmax());
}

TEST_CASE("config.json names no end-of-text token a small vocabulary lacks", "[model][hf]") {
  hw::ModelConfig c;
  c.vocab_size = 256;  // the byte tokenizer: transformers' default 50256 is out of range
  const nlohmann::json small = c.to_hf_config();
  CHECK(small.contains("bos_token_id"));
  CHECK(small["bos_token_id"].is_null());
  CHECK(small["eos_token_id"].is_null());
  c.vocab_size = 50257;  // GPT-2's own vocabulary: transformers' default is right
  const nlohmann::json gpt2 = c.to_hf_config();
  CHECK_FALSE(gpt2.contains("bos_token_id"));
  CHECK_FALSE(gpt2.contains("eos_token_id"));
}

TEST_CASE("float32 loss and logits match GPT2LMHeadModel", "[model][hf]") {
  Fixture f;
  const double loss = f.model->forward(f.inputs.data(), f.targets.data(), f.B, f.T);
  CHECK(std::abs(loss - f.expected["loss_f32"].get<double>()) < 1e-4);
  CHECK(std::abs(loss - f.expected["loss_f64"].get<double>()) < 1e-4);
  f.model->forward(f.inputs.data(), nullptr, f.B, f.T);
  const auto& ref = f.expected["logits_f32"];
  const int64_t V = f.model->config().vocab_size;
  double max_err = 0.0;  // a NaN logit is an infinite error (hw::test::worse / abs_err)
  for (size_t t = 0; t < ref.size(); ++t)
    for (int64_t v = 0; v < V; ++v) {
      const double got = f.model->logits()[int64_t(t) * V + v];
      max_err = hw::test::worse(max_err, hw::test::abs_err(got, ref[t][size_t(v)].get<double>()));
    }
  CHECK(max_err < 1e-4);
}

TEST_CASE("float64 loss, logits and gradients match PyTorch autograd", "[model][hf]") {
  Fixture f;
  Model<double> m(f.model->config(), cpu_backend<double>());
  test::copy_to_double(*f.model, m);
  m.zero_grads();
  const double loss = m.forward_backward(f.inputs.data(), f.targets.data(), f.B, f.T, 1.0);
  CHECK(std::abs(loss - f.expected["loss_f64"].get<double>()) < 1e-10);
  // Gradients: norm and first entries of every parameter (HF names carry "transformer.").
  int checked = 0;
  for (auto it = f.expected["expected_grads"].begin(); it != f.expected["expected_grads"].end(); ++it) {
    std::string name = it.key();
    if (name.rfind("transformer.", 0) == 0) name = name.substr(12);
    Tensor* g = m.grads().find(name);
    REQUIRE(g != nullptr);
    double sq = 0.0;
    for (int64_t i = 0; i < g->numel(); ++i) sq += g->as<double>()[i] * g->as<double>()[i];
    INFO(name);
    CHECK(std::sqrt(sq) == Approx(it.value()["norm"].get<double>()).epsilon(1e-8));
    const auto& first = it.value()["first"];
    for (size_t i = 0; i < first.size(); ++i)
      CHECK(g->as<double>()[i] == Approx(first[i].get<double>()).epsilon(1e-7).margin(1e-12));
    ++checked;
  }
  CHECK(checked >= 20);
}

TEST_CASE("loading accepts transformers' extra buffers and a tied lm_head", "[model][hf]") {
  // Rewrite the fixture with the variants transformers may save: attn.bias / attn.masked_bias
  // mask buffers and an explicit lm_head.weight equal to wte.
  const std::string src = test::fixture_dir("hf_tiny_gpt2");
  const std::filesystem::path dir = test::scratch_dir("hf_variants");
  std::filesystem::copy_file(src + "/config.json", dir / "config.json");
  io::SafetensorsReader st(src + "/model.safetensors");
  auto write_variant = [&](bool corrupt_lm_head) {
    io::SafetensorsWriter w;
    std::vector<float> wte;
    for (const auto& name : st.names()) {
      const auto& info = st.info(name);
      std::vector<float> data(size_t(info.numel()));
      st.read(name, DType::F32, info.shape, data.data());
      if (name == "transformer.wte.weight") wte = data;
      w.add(name, DType::F32, info.shape, data.data());
    }
    std::vector<float> mask(32 * 32, 1.0f);
    w.add("transformer.h.0.attn.bias", DType::F32, {1, 1, 32, 32}, mask.data());
    w.add("transformer.h.1.attn.masked_bias", DType::F32, {1}, mask.data());
    if (corrupt_lm_head) wte[5] += 1.0f;
    w.add("lm_head.weight", DType::F32, {64, 32}, wte.data());
    w.write((dir / "model.safetensors").string());
  };
  write_variant(false);
  Fixture f;
  auto m = load_model(dir.string(), cpu_backend<float>());
  CHECK(m->forward(f.inputs.data(), f.targets.data(), f.B, f.T) ==
        f.model->forward(f.inputs.data(), f.targets.data(), f.B, f.T));
  write_variant(true);
  CHECK_THROWS_WITH(load_model(dir.string(), cpu_backend<float>()), Catch::Contains("lm_head.weight"));
}
