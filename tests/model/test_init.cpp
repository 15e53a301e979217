// Weight initialisation: each tensor's sample standard deviation is the configured one (GPT-2:
// init_std, the residual projections init_std / sqrt(2 n_layer) unless init_residual_scale is
// off), and the switch survives the model section's JSON.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"

using namespace hw;

namespace {

ModelConfig init_config(bool residual_scale) {
  ModelConfig c;
  c.n_layer = 8;  // 1 / sqrt(16) = 0.25: far outside the sampling error below
  c.n_head = 2;
  c.n_embd = 64;
  c.block_size = 16;
  c.vocab_size = 64;
  c.init_std = 0.05;
  c.init_residual_scale = residual_scale;
  return c;
}

double sample_std(const Tensor& t) {
  const float* v = t.as<float>();
  double sum = 0.0, sq = 0.0;
  for (int64_t i = 0; i < t.numel(); ++i) sum += v[i], sq += double(v[i]) * v[i];
  const double n = double(t.numel()), mean = sum / n;
  return std::sqrt(sq / n - mean * mean);
}

}  // namespace

TEST_CASE("residual projections start at init_std / sqrt(2 n_layer), or at init_std when the scaling is off",
          "[model][init]") {
  for (const bool scaled : {true, false}) {
    Model<float> m(init_config(scaled), cpu_backend<float>());
    m.init_weights(9);
    const double proj = scaled ? 0.05 / std::sqrt(16.0) : 0.05;
    // At least 4,096 samples each: the sample std is within 5% of the true one (about 4.5 of its
    // standard errors of 1 / sqrt(2 n)).
    for (int l : {0, 7}) {
      const std::string p = "h." + std::to_string(l) + ".";
      INFO("scaled " << scaled << " layer " << l);
      CHECK(sample_std(m.params().get(p + "attn.c_proj.weight")) == Approx(proj).epsilon(0.05));
      CHECK(sample_std(m.params().get(p + "mlp.c_proj.weight")) == Approx(proj).epsilon(0.05));
      CHECK(sample_std(m.params().get(p + "attn.c_attn.weight")) == Approx(0.05).epsilon(0.05));
      CHECK(sample_std(m.params().get(p + "mlp.c_fc.weight")) == Approx(0.05).epsilon(0.05));
    }
    CHECK(sample_std(m.params().get("wte.weight")) == Approx(0.05).epsilon(0.05));
  }
}

TEST_CASE("init_residual_scale is read, written back and checked like every model key", "[model][init]") {
  nlohmann::json section = init_config(true).to_json();
  CHECK(section["init_residual_scale"] == true);
  section["init_residual_scale"] = false;
  const ModelConfig off = ModelConfig::from_json(section);
  CHECK_FALSE(off.init_residual_scale);
  CHECK(off.to_json()["init_residual_scale"] == false);
  section["init_residual_scale"] = "no";
  CHECK_THROWS_WITH(ModelConfig::from_json(section), Catch::Contains("init_residual_scale"));
}
