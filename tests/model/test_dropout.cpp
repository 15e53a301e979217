// The model's dropout (model.resid_pdrop, embd_pdrop): the op's fraction of zeros and its
// 1/(1-p) scaling against the binomial law, whole-model gradients through fixed masks against
// central finite differences in double, training forwards only, GPT-2's config.json names both
// ways, and the refusals (attn_pdrop, a backend without the op, rates outside [0, 1)).
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "headwise/core/bf16.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/kernels/cpu.hpp"
#include "model/model_test_util.hpp"
#include "support/central_difference.hpp"
#include "train/guarded_backend.hpp"

using namespace hw;
using Catch::Matchers::Contains;

namespace {

// Fraction of zeros within 5 standard deviations of p (n Bernoulli(p) draws), and every kept
// element exactly in / (1 - p).
template <class Widen>
void check_mask_law(const std::vector<float>& out, double p, float kept, Widen widen) {
  const double n = double(out.size());
  int64_t zeros = 0, wrong = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const float v = widen(i);
    if (v == 0.0f)
      ++zeros;
    else if (v != kept)
      ++wrong;
  }
  const double sigma = std::sqrt(p * (1 - p) / n);
  INFO("p " << p << " zero fraction " << double(zeros) / n << " sigma " << sigma);
  CHECK(std::abs(double(zeros) / n - p) < 5 * sigma);
  CHECK(wrong == 0);
}

// Every parameter's gradient (a few entries each) against central differences of the training
// loss with the same masks (forward_backward under the same dropout seed).
void check_gradients(const ModelConfig& cfg) {
  Rng rng(23);
  Model<double> m(cfg, cpu_backend<double>());
  m.init_weights(4);
  for (const auto& t : m.params().tensors())
    for (int64_t i = 0; i < t->numel(); ++i) t->as<double>()[i] += 0.2 * rng.normal();
  const int64_t B = 2, T = 7;
  std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
  for (auto& v : x) v = int32_t(rng.below(11));
  for (auto& v : y) v = int32_t(rng.below(11));
  m.set_dropout_seed(1234);
  m.zero_grads();
  const double train_loss = m.forward_backward(x.data(), y.data(), B, T, 1.0);
  // Training forwards drop, forward() never does.
  CHECK(std::abs(train_loss - m.forward(x.data(), y.data(), B, T)) > 1e-4);
  std::map<std::string, std::vector<double>> grads;
  for (const auto& t : m.grads().tensors()) grads[t->name].assign(t->as<double>(), t->as<double>() + t->numel());
  auto loss_at = [&] { return m.forward_backward(x.data(), y.data(), B, T, 1.0); };
  int checked = 0;
  for (const auto& t : m.params().tensors())
    for (int k = 0; k < 4; ++k) {
      const int64_t i = int64_t(rng.below(uint64_t(t->numel())));
      test::check_entry_against_fd(t->name, i, grads[t->name][size_t(i)], t->as<double>()[i], loss_at);
      ++checked;
    }
  CHECK(checked >= 4 * 10);
}

ModelConfig with_dropout(ModelConfig c, double resid, double embd) {
  c.resid_pdrop = resid;
  c.embd_pdrop = embd;
  return c;
}

}  // namespace

TEST_CASE("dropout zeroes a p fraction and scales the rest by 1/(1-p)", "[model][dropout]") {
  const int64_t n = 400000;
  std::vector<float> ones(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
  for (double p : {0.1, 0.5}) {
    cpu::dropout(out.data(), ones.data(), n, p, 77);
    check_mask_law(out, p, float(1.0 / (1.0 - p)), [&](size_t i) { return out[i]; });
    // In place is the same mask; another seed another one.
    std::vector<float> inplace = ones;
    cpu::dropout(inplace.data(), inplace.data(), n, p, 77);
    CHECK(inplace == out);
    std::vector<float> other(static_cast<size_t>(n));
    cpu::dropout(other.data(), ones.data(), n, p, 78);
    CHECK(other != out);
  }
  // The bf16 step's op: the same mask, the kept value rounded to bf16 once.
  const ComputeOps<bf16, float>* b = cpu_backend<float>().bf16_ops();
  REQUIRE(b != nullptr);
  REQUIRE(b->has_dropout_op());
  std::vector<bf16> in16(static_cast<size_t>(n), to_bf16(1.0f)), out16(static_cast<size_t>(n));
  b->dropout(out16.data(), in16.data(), n, 0.1, 77);
  cpu::dropout(out.data(), ones.data(), n, 0.1, 77);
  check_mask_law(out, 0.1, to_float(to_bf16(float(1.0 / 0.9))), [&](size_t i) { return to_float(out16[i]); });
  int64_t same_zeros = 0;
  for (int64_t i = 0; i < n; ++i) same_zeros += (to_float(out16[size_t(i)]) == 0.0f) == (out[size_t(i)] == 0.0f);
  CHECK(same_zeros == n);
}

TEST_CASE("gradients through resid/embd dropout match finite differences with the masks fixed",
          "[model][dropout][grad]") {
  SECTION("GPT-2 softmax heads") { check_gradients(with_dropout(test::gradcheck_config(false), 0.3, 0.2)); }
  SECTION("mixed plan, RoPE, GQA") { check_gradients(with_dropout(test::gradcheck_config(true), 0.25, 0.0)); }
  SECTION("embeddings only") { check_gradients(with_dropout(test::gradcheck_config(false), 0.0, 0.4)); }
  SECTION("with a LoRA adapter on the output projection (dropped after it)") {
    ModelConfig c = with_dropout(test::gradcheck_config(false), 0.3, 0.1);
    c.lora.rank = 2;
    c.lora.alpha = 4.0;
    c.lora.targets = {false, false, false, true};
    check_gradients(c);
  }
}

TEST_CASE("dropout masks are a pure function of the seed, and eval and generate never drop", "[model][dropout]") {
  const ModelConfig plain = test::gradcheck_config(false), dropped = with_dropout(plain, 0.3, 0.3);
  Model<float> a(dropped, cpu_backend<float>()), b(dropped, cpu_backend<float>()), c(plain, cpu_backend<float>());
  for (auto* m : {&a, &b, &c}) m->init_weights(9);
  std::vector<int32_t> x(14), y(14);
  for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t(i % 11), y[i] = int32_t((3 * i + 1) % 11);
  a.set_dropout_seed(5);
  b.set_dropout_seed(5);
  const double la = a.forward_backward(x.data(), y.data(), 2, 7, 1.0);
  CHECK(la == b.forward_backward(x.data(), y.data(), 2, 7, 1.0));
  b.set_dropout_seed(6);
  CHECK(la != b.forward_backward(x.data(), y.data(), 2, 7, 1.0));
  // forward() is the model without dropout, bit for bit.
  CHECK(a.forward(x.data(), y.data(), 2, 7) == c.forward(x.data(), y.data(), 2, 7));
  // The same under bf16 mixed precision.
  a.set_precision(Precision::Bf16);
  b.set_precision(Precision::Bf16);
  b.set_dropout_seed(5);
  a.zero_grads();
  b.zero_grads();
  CHECK(a.forward_backward(x.data(), y.data(), 2, 7, 1.0) == b.forward_backward(x.data(), y.data(), 2, 7, 1.0));
}

TEST_CASE("dropout rates travel as GPT-2 config.json names, and bad rates and backends are refused",
          "[model][dropout]") {
  ModelConfig c = with_dropout(test::gradcheck_config(false), 0.1, 0.05);
  c.attn_pdrop = 0.2;
  const nlohmann::json hf = c.to_hf_config();
  CHECK(hf["resid_pdrop"] == 0.1);
  CHECK(hf["embd_pdrop"] == 0.05);
  CHECK(hf["attn_pdrop"] == 0.2);
  const ModelConfig back = ModelConfig::from_hf_config(hf, "config.json");
  CHECK(back.resid_pdrop == 0.1);
  CHECK(back.embd_pdrop == 0.05);
  CHECK(back.attn_pdrop == 0.2);
  const ModelConfig again = ModelConfig::from_json(c.to_json());
  CHECK((again.resid_pdrop == 0.1 && again.embd_pdrop == 0.05 && again.attn_pdrop == 0.2));
  // A run without dropout keeps the config it had.
  CHECK_FALSE(test::gradcheck_config(false).to_json().contains("resid_pdrop"));
  nlohmann::json bad = test::gradcheck_config(false).to_json();
  bad["resid_pdrop"] = 1.0;
  CHECK_THROWS_WITH(ModelConfig::from_json(bad), Contains("model.resid_pdrop must be in [0, 1), got 1"));
  // attn_pdrop: an inference model takes it (a pretrained GPT-2's config.json has 0.1), training does not.
  Model<float> inference(c, cpu_backend<float>(), {}, /*trainable=*/false);
  CHECK_THROWS_WITH(Model<float>(c, cpu_backend<float>()), Contains("model.attn_pdrop 0.2"));
  // A backend without the op (the CUDA backend's case) stops before any step, naming itself.
  c.attn_pdrop = 0.0;
  test::GuardedBackend guarded;
  REQUIRE_FALSE(guarded.has_dropout_op());
  CHECK_THROWS_WITH(Model<float>(c, guarded), Contains("backend guarded-cpu has no dropout op"));
  Model<float> fine(test::gradcheck_config(false), guarded);  // no dropout: no refusal
}
