// LoRA adapters (model.lora): gradients against central finite differences in double (with and
// without frozen base weights and dropout), a fresh adapter changing nothing, merging against the
// unmerged model's logits, PEFT-form checkpoint files, and the config errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/adapter_files.hpp"
#include "headwise/model/checkpoint.hpp"
#include "model/model_test_util.hpp"
#include "support/central_difference.hpp"
#include "support/temp_dir.hpp"

using namespace hw;

namespace {

LoraConfig lora(int rank, std::vector<int> layers = {}, std::array<bool, 4> targets = {true, true, true, true},
                bool freeze = false, double dropout = 0.0) {
  LoraConfig l;
  l.rank = rank;
  l.alpha = 6.0;
  l.layers = std::move(layers);
  l.targets = targets;
  l.freeze_base = freeze;
  l.dropout = dropout;
  return l;
}

// Every adapter gets non-zero values (B starts at zero), every weight a larger spread.
template <class F>
void perturb(Model<F>& m, Rng& rng, double spread) {
  for (Arena* a : {&m.params(), &m.buffers()})
    for (const auto& t : a->tensors()) {
      if (t->dtype == DType::I32 || t->name.find("static.") != std::string::npos) continue;
      for (int64_t i = 0; i < t->numel(); ++i) t->template as<F>()[i] += F(spread * rng.normal());
    }
}

void check_gradients(ModelConfig cfg) {
  Rng rng(17);
  Model<double> m(cfg, cpu_backend<double>());
  m.init_weights(5);
  perturb(m, rng, 0.2);
  const int64_t B = 2, T = 7;
  std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
  for (auto& v : x) v = int32_t(rng.below(11));
  for (auto& v : y) v = int32_t(rng.below(11));
  m.set_dropout_seed(99);
  m.zero_grads();
  const double loss = m.forward_backward(x.data(), y.data(), B, T, 1.0);
  if (cfg.lora.dropout > 0)  // dropout is on in training forwards only
    CHECK(std::abs(loss - m.forward(x.data(), y.data(), B, T)) > 1e-6);
  std::map<std::string, std::vector<double>> grads;
  for (const auto& t : m.grads().tensors())
    grads[t->name].assign(t->as<double>(), t->as<double>() + t->numel());
  // The loss the gradient is of: forward_backward's (same dropout masks); its own gradient
  // accumulation is not read again.
  auto loss_at = [&] { return m.forward_backward(x.data(), y.data(), B, T, 1.0); };
  int adapters = 0;
  for (const auto& t : m.params().tensors()) {
    const bool adapter = t->name.find("lora_") != std::string::npos;
    for (int k = 0; k < (adapter ? 6 : 2); ++k) {
      const int64_t i = int64_t(rng.below(uint64_t(t->numel())));
      test::check_entry_against_fd(t->name, i, grads[t->name][size_t(i)], t->as<double>()[i], loss_at);
      adapters += adapter;
    }
  }
  CHECK(adapters >= 6 * 2);
}

std::vector<float> logits_of(Model<float>& m, const std::vector<int32_t>& x, int64_t B, int64_t T) {
  m.forward(x.data(), nullptr, B, T);
  std::vector<float> out;
  m.read_logits(out);
  return out;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("LoRA gradients match finite differences on every target", "[model][lora][grad]") {
  ModelConfig c = test::gradcheck_config(false);
  c.lora = lora(3);
  check_gradients(c);
}

TEST_CASE("LoRA gradients match finite differences: mixed plan, GQA, RoPE, frozen base, some targets",
          "[model][lora][grad]") {
  ModelConfig c = test::gradcheck_config(true);
  c.lora = lora(2, {1, 0}, {true, false, true, true}, /*freeze=*/true);
  check_gradients(c);
}

TEST_CASE("LoRA gradients match finite differences through dropout", "[model][lora][grad]") {
  ModelConfig c = test::gradcheck_config(true);
  c.lora = lora(2, {0}, {true, true, true, true}, false, /*dropout=*/0.3);
  check_gradients(c);
}

TEST_CASE("frozen base weights are buffers (no gradient, nothing to optimize), adapters and L train",
          "[model][lora]") {
  ModelConfig c = test::gradcheck_config(true);
  c.lora = lora(2, {1}, {true, true, true, true}, /*freeze=*/true);
  Model<float> m(c, cpu_backend<float>());
  m.init_weights(1);
  // Trained: layer 1's adapters and the linear head's L (layer 1, head 0); nothing else.
  std::vector<std::string> trained;
  for (const auto& t : m.params().tensors()) trained.push_back(t->name);
  CHECK(trained == std::vector<std::string>{"h.1.attn.linear.0.L", "h.1.attn.q.lora_A", "h.1.attn.q.lora_B",
                                            "h.1.attn.k.lora_A",   "h.1.attn.k.lora_B", "h.1.attn.v.lora_A",
                                            "h.1.attn.v.lora_B",   "h.1.attn.o.lora_A", "h.1.attn.o.lora_B"});
  CHECK(m.grads().find("wte.weight") == nullptr);
  m.zero_grads();
  std::vector<int32_t> x(14, 3), y(14, 4);
  m.forward_backward(x.data(), y.data(), 2, 7, 1.0);
  double adapter_grad = 0;
  for (const auto& t : m.grads().tensors())
    for (int64_t i = 0; i < t->numel(); ++i) adapter_grad += std::abs(double(t->f32()[i]));
  CHECK(adapter_grad > 0);
  // The layers' gradient ranges still tile the block: layer 0 has none.
  CHECK(m.grad_ready_ranges(0).front().size() == 0);
  CHECK(m.grad_ready_ranges(1).front().size() == m.grads().bytes());
}

TEST_CASE("a fresh adapter leaves the logits and every base weight as without adapters", "[model][lora]") {
  ModelConfig base = test::gradcheck_config(true), adapted = base;
  adapted.lora = lora(4, {}, {true, true, true, true}, /*freeze=*/true);
  Model<float> a(base, cpu_backend<float>()), b(adapted, cpu_backend<float>());
  a.init_weights(8);
  b.init_weights(8);
  const std::vector<int32_t> x = {1, 5, 2, 9, 3, 3, 0, 7, 4, 10};
  CHECK(logits_of(a, x, 1, 10) == logits_of(b, x, 1, 10));  // B = 0: exactly the same
  // A is Kaiming-uniform: inside +-1/sqrt(in) and not all zero.
  const Tensor& A = b.params().get("h.0.attn.o.lora_A");
  const double bound = 1.0 / std::sqrt(16.0);  // in = n_head * head_dim = 16
  double biggest = 0;
  for (int64_t i = 0; i < A.numel(); ++i) biggest = std::max(biggest, double(std::abs(A.f32()[i])));
  CHECK(biggest <= bound);
  CHECK(biggest > 0.5 * bound);
}

TEST_CASE("merged adapters give the unmerged model's logits and add_adapters changes nothing", "[model][lora]") {
  for (bool mixed : {false, true}) {
    ModelConfig c = test::gradcheck_config(mixed);
    c.lora = lora(3, {}, {true, true, true, true}, /*freeze=*/mixed);
    Model<float> m(c, cpu_backend<float>());
    m.init_weights(2);
    Rng rng(4);
    perturb(m, rng, 0.05);
    const std::vector<int32_t> x = {1, 5, 2, 9, 3, 3, 0, 7, 4, 10, 6, 8};
    const auto before = logits_of(m, x, 2, 6);
    m.merge_adapters();
    CHECK_FALSE(m.config().lora.enabled());
    CHECK(m.params().find("h.0.attn.q.lora_A") == nullptr);
    CHECK(m.params().find("wte.weight") != nullptr);  // trained again
    INFO("mixed " << mixed);
    CHECK(max_rel_diff(logits_of(m, x, 2, 6), before) < 1e-5);
    // And back: fresh adapters on the merged model change nothing.
    const auto merged = logits_of(m, x, 2, 6);
    m.add_adapters(lora(2), 3);
    CHECK(logits_of(m, x, 2, 6) == merged);
  }
}

TEST_CASE("adapters are saved in PEFT form and read back, a merged checkpoint is a plain HF GPT-2",
          "[model][lora][checkpoint]") {
  namespace fs = std::filesystem;
  const std::string dir = test::scratch_dir("lora_ckpt");
  // The transformers-made fixture as the base model.
  auto m = load_model(test::fixture_dir("hf_tiny_gpt2"), cpu_backend<float>());
  LoraConfig l = lora(2, {1}, {true, false, true, true});
  m->add_adapters(l, 6);
  Rng rng(3);
  for (const auto& t : m->params().tensors())
    if (t->name.find("lora_") != std::string::npos)
      for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] += float(0.05 * rng.normal());
  std::vector<int32_t> x(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t((7 * i + 3) % 64);
  const auto before = logits_of(*m, x, 2, 8);
  save_model_files(*m, dir);
  {
    io::SafetensorsReader st(dir + "/" + kAdapterWeightsFile);
    // q and v packed into one c_attn adapter of rank 2 x 2; c_proj's of rank 2. C = 32, 3C = 96.
    CHECK(st.names().size() == 4);
    CHECK(st.info("base_model.model.transformer.h.1.attn.c_attn.lora_A.weight").shape == std::vector<int64_t>{4, 32});
    CHECK(st.info("base_model.model.transformer.h.1.attn.c_attn.lora_B.weight").shape == std::vector<int64_t>{96, 4});
    CHECK(st.info("base_model.model.transformer.h.1.attn.c_proj.lora_A.weight").shape == std::vector<int64_t>{2, 32});
    CHECK(st.info("base_model.model.transformer.h.1.attn.c_proj.lora_B.weight").shape == std::vector<int64_t>{32, 2});
    std::vector<float> B(96 * 4);
    st.read("base_model.model.transformer.h.1.attn.c_attn.lora_B.weight", DType::F32, {96, 4}, B.data());
    std::vector<float> vb(32 * 2);  // v's B is rows 64..95 x columns 2..3
    for (int row = 0; row < 96; ++row)
      for (int col = 0; col < 4; ++col) {
        const bool q_block = row < 32 && col < 2, v_block = row >= 64 && col >= 2;
        if (!q_block && !v_block) CHECK(B[size_t(row * 4 + col)] == 0.f);
        if (v_block) vb[size_t((row - 64) * 2 + col - 2)] = B[size_t(row * 4 + col)];
      }
    const Tensor& v_lora_b = m->params().get("h.1.attn.v.lora_B");
    CHECK(std::equal(vb.begin(), vb.end(), v_lora_b.f32()));
    const auto cfg = nlohmann::json::parse(io::read_file(dir + "/" + kAdapterConfigFile));
    CHECK(cfg["peft_type"] == "LORA");
    CHECK(cfg["r"] == 2);
    CHECK(cfg["rank_pattern"]["c_attn"] == 4);
    CHECK(cfg["alpha_pattern"]["c_attn"] == 12.0);
    CHECK(cfg["layers_to_transform"] == nlohmann::json::array({1}));
    CHECK(cfg["fan_in_fan_out"] == true);
    io::SafetensorsReader base(dir + "/model.safetensors");
    for (const auto& n : base.names()) CHECK(n.find("lora") == std::string::npos);
  }
  auto reread = load_model(dir, cpu_backend<float>());
  CHECK(reread->config().lora == l);
  CHECK(logits_of(*reread, x, 2, 8) == before);  // bit for bit

  reread->merge_adapters();
  save_model_files(*reread, dir);
  CHECK_FALSE(fs::exists(dir + "/" + kAdapterWeightsFile));
  CHECK_FALSE(nlohmann::json::parse(io::read_file(dir + "/config.json")).contains("headwise_lora"));
  // Same tensor names and shapes as the transformers-made fixture: a plain GPT-2 checkpoint.
  io::SafetensorsReader fixture(test::fixture_dir("hf_tiny_gpt2") + "/model.safetensors"),
      merged(dir + "/model.safetensors");
  for (const auto& n : merged.names()) {
    const std::string hf = fixture.has(n) ? n : "transformer." + n;
    REQUIRE(fixture.has(hf));
    CHECK(fixture.info(hf).shape == merged.info(n).shape);
  }
  auto plain = load_model(dir, cpu_backend<float>());
  CHECK(max_rel_diff(logits_of(*plain, x, 2, 8), before) < 1e-5);
  fs::remove_all(dir);
}

TEST_CASE("LoRA config errors name the key", "[model][lora][config]") {
  auto error_of = [](const std::string& lora_json) {
    nlohmann::json j = {{"n_layer", 2}, {"n_head", 4}, {"n_embd", 16}, {"vocab_size", 11}, {"block_size", 12}};
    j["lora"] = nlohmann::json::parse(lora_json);
    try {
      ModelConfig::from_json(j);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of(R"({"rank": 17})"), Contains("model.lora.rank 17 exceeds the q projection's smaller dimension 16"));
  CHECK_THAT(error_of(R"({"rank": 4, "targets": ["q", "x"]})"), Contains("model.lora.targets: unknown target \"x\""));
  CHECK_THAT(error_of(R"({"rank": 4, "layers": [2]})"), Contains("model.lora.layers: layer 2 is outside"));
  CHECK_THAT(error_of(R"({"rank": 4, "dropout": 1.0})"), Contains("model.lora.dropout must be in [0, 1)"));
  CHECK_THAT(error_of(R"({"freeze_base": true})"), Contains("model.lora.freeze_base needs adapters"));
  CHECK_THAT(error_of(R"({"rank": 4, "rnak": 2})"), Contains("rnak"));
  CHECK(error_of(R"({"rank": 16, "targets": ["o"]})") == "no error");
  ModelConfig c = test::gradcheck_config(false);
  c.lora = lora(2);
  Model<float> m(c, cpu_backend<float>());
  CHECK_THROWS_WITH(m.set_precision(Precision::Bf16), Contains("model.lora: adapters need train.precision = fp32"));
}
