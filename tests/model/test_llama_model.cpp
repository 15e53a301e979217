// The Llama-family choices inside the one forward/backward: Llama 3's frequency scaling against
// hand-worked values; whole-model gradients against finite differences in double with every
// head kind, GQA, q/k norm, head_dim != n_embd / n_head, biases, untied heads and LoRA; the bf16
// step against a double model; config errors naming the key.
#include <catch2/catch.hpp>
#include <cmath>
#include <numbers>

#include "headwise/core/error.hpp"
#include "headwise/model/rope_freqs.hpp"
#include "model/gradcheck.hpp"

using namespace hw;
using Catch::Contains;

namespace {

// 2 layers x 4 heads, 16 wide, every head kind in the plan.
ModelConfig llama_config(const std::string& family) {
  ModelConfig c = ModelConfig::for_family(family);
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 16;
  c.vocab_size = 11;
  c.block_size = 12;
  c.intermediate_size = 24;
  c.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["softmax", "window:3", "sink_window:1:2", "static"], ["linear", "pruned", "softmax", "window:5"]])"));
  return c;
}

}  // namespace

TEST_CASE("Llama 3 rope scaling keeps, interpolates and divides the frequencies by band", "[model][llama]") {
  ModelConfig c = llama_config("llama");
  c.n_embd = 32;  // head_dim 8: frequencies 100^(-i/4) = 1, 0.3162, 0.1, 0.03162
  c.rope_theta = 100.0;
  c.rope_scaling = RopeScaling::from_json(nlohmann::json::parse(
      R"({"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32})"),
      "rope_scaling");
  const std::vector<double> f = rope_inv_freq(c);
  REQUIRE(f.size() == 4);
  // Wavelengths 2 pi / f = 6.28, 19.9, 62.8, 199 against 32 / 4 = 8 and 32 / 1 = 32:
  CHECK(f[0] == Approx(1.0).epsilon(1e-15));  // below 8: kept
  // between: (1 - s) f / 4 + s f with s = (32 / wavelength - 1) / 3
  const double f1 = std::pow(100.0, -0.25), s = (32.0 * f1 / (2 * std::numbers::pi) - 1.0) / 3.0;
  CHECK(f[1] == Approx((1 - s) * f1 / 4 + s * f1).epsilon(1e-14));
  CHECK(f[2] == Approx(0.1 / 4).epsilon(1e-14));  // above 32: divided by the factor
  CHECK(f[3] == Approx(std::pow(100.0, -0.75) / 4).epsilon(1e-14));
  // Without scaling: theta^(-2i/d).
  c.rope_scaling = {};
  CHECK(rope_inv_freq(c)[3] == Approx(std::pow(100.0, -0.75)).epsilon(1e-15));
}

TEST_CASE("Llama-family models: gradients match finite differences with every head kind", "[model][grad][llama]") {
  SECTION("llama: attention and MLP biases, untied head, scaled RoPE") {
    ModelConfig c = llama_config("llama");
    c.qkv_bias = c.out_bias = c.mlp_bias = true;
    c.tie_word_embeddings = false;
    c.rope_scaling.type = "llama3";
    c.rope_scaling.factor = 4;
    c.rope_scaling.original_max_position_embeddings = 8;
    test::check_model_gradients(c);
  }
  SECTION("qwen2: q/k/v biases, tied head, sparse targets") {
    test::check_model_gradients(llama_config("qwen2"), /*sparse=*/true);
  }
  SECTION("qwen3: q/k norm, head_dim 6 != 16 / 4, untied head") {
    ModelConfig c = llama_config("qwen3");
    c.head_size = 6;
    c.tie_word_embeddings = false;
    test::check_model_gradients(c);
  }
  SECTION("qwen3 with LoRA on q, k, v and o (the base trained too)") {
    ModelConfig c = llama_config("qwen3");
    c.lora = LoraConfig::from_json(nlohmann::json::parse(R"({"rank": 2, "alpha": 4})"));
    test::check_model_gradients(c);
  }
}

TEST_CASE("a Llama-family bf16 step matches a double model within bf16 rounding", "[model][bf16][llama]") {
  for (const char* family : {"llama", "qwen3"}) {
    INFO(family);
    ModelConfig c = llama_config(family);
    c.n_embd = 32;
    c.vocab_size = 37;
    c.block_size = 16;
    c.tie_word_embeddings = false;
    c.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
        R"([["softmax", "window:5", "static", "sink_window:1:4"], ["softmax", "pruned", "softmax", "window:3"]])"));
    Model<float> full(c, cpu_backend<float>()), half(c, cpu_backend<float>());
    Model<double> ref(c, cpu_backend<double>());
    full.init_weights(11);
    half.init_weights(11);
    half.set_precision(Precision::Bf16);
    test::copy_to_double(full, ref);
    Rng rng(3);
    std::vector<int32_t> x(32), y(32);
    for (auto& v : x) v = int32_t(rng.below(37));
    for (auto& v : y) v = int32_t(rng.below(37));
    double worst[2] = {0, 0}, loss_err[2] = {0, 0};
    ref.zero_grads();
    const double ld = ref.forward_backward(x.data(), y.data(), 2, 16, 1.0);
    for (int k = 0; k < 2; ++k) {
      Model<float>& m = k == 0 ? full : half;
      m.zero_grads();
      loss_err[k] = std::abs(m.forward_backward(x.data(), y.data(), 2, 16, 1.0) - ld) / ld;
      for (const auto& t : m.grads().tensors())
        worst[k] = test::worse(worst[k], test::max_rel_err(t->f32(), ref.grads().get(t->name).as<double>(), t->numel()));
    }
    INFO("fp32 loss " << loss_err[0] << " grad " << worst[0] << "; bf16 loss " << loss_err[1] << " grad " << worst[1]);
    // Measured (llama / qwen3, the larger of AVX-512 and OPENBLAS_CORETYPE=Haswell): fp32 loss
    // 1.1e-9 / 1.5e-9, grad 4.7e-7 / 5.5e-7; bf16 loss 8.4e-6 / 2.7e-5, grad 8.8e-3 / 1.2e-2.
    CHECK(loss_err[0] < 2e-8);   // (new)
    CHECK(worst[0] < 6e-6);      // (was 1e-5)
    CHECK(loss_err[1] < 3e-4);   // (was 1e-3)
    CHECK(worst[1] < 2e-2);      // (unchanged: 1.7x the measured 1.2e-2, bf16 rounding)
    CHECK(worst[1] > 10 * worst[0]);  // the bf16 step rounded
    CHECK(half.activations().get("h.0.qkv").dtype == DType::BF16);
  }
}

TEST_CASE("Llama-family config errors name the key", "[model][llama]") {
  auto error_of = [](const std::string& json) {
    try {
      ModelConfig::from_json(nlohmann::json::parse(json));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of(R"({"family": "mixtral"})"), Contains("model.family") && Contains("mixtral"));
  CHECK_THAT(error_of(R"({"family": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4}})"),
             Contains("rope_type \"yarn\" is not supported"));
  CHECK_THAT(error_of(R"({"norm": "rmsnorm"})"), Contains("family gpt2") && Contains("RMSNorm"));
  CHECK_THAT(error_of(R"({"family": "qwen2", "qk_norm": true})"), Contains("qwen2") && Contains("model.qk_norm"));
  CHECK_THAT(error_of(R"({"family": "llama", "pos": "learned"})"), Contains("model.pos = \"rope\""));
  CHECK_THAT(error_of(R"({"family": "llama", "n_embd": 30, "n_head": 4})"), Contains("model.head_dim"));
  // head_dim given: n_embd need not divide.
  CHECK(ModelConfig::from_json(nlohmann::json::parse(R"({"family": "qwen3", "n_embd": 30, "n_head": 4, "head_dim": 8})"))
            .head_dim() == 8);
  // A Llama config survives its own JSON.
  ModelConfig c = llama_config("llama");
  c.tie_word_embeddings = false;
  c.rope_scaling.type = "llama3";
  c.validate();
  const ModelConfig back = ModelConfig::from_json(c.to_json());
  CHECK(back.to_json() == c.to_json());
  CHECK(back.rope_scaling == c.rope_scaling);
}
