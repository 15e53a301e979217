// PEFT's adapter_config.json read and honoured (peft_config.hpp): hand-made adapter files with
// per-module ranks (rank_pattern), scalings (alpha_pattern), rsLoRA and GPT-2's fused c_attn give the
// logits of the base model with each module's s (B A) added to its weight in double (the merged
// reference, written as a plain checkpoint); what headwise cannot apply is one error naming it.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "headwise/core/rng.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "support/temp_dir.hpp"

using namespace hw;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

struct Module {
  std::string name;  // e.g. model.layers.0.self_attn.q_proj
  int64_t out, in, rank;
  double scaling;
  bool conv1d = false;  // GPT-2: the weight is [in, out]
};

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string fixture(const char* name) { return (fs::path(HEADWISE_SOURCE_DIR) / "tests" / "fixtures" / name).string(); }

// DIR/adapted: the base's files plus random adapters for `mods`; DIR/merged: the base's weights with
// each s (B A) added in double, as a plain checkpoint.
void make_dirs(const std::string& base, const std::string& dir, const std::vector<Module>& mods,
               const std::string& adapter_config) {
  fs::create_directories(dir + "/adapted");
  fs::create_directories(dir + "/merged");
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(base + "/" + f, dir + "/adapted/" + f);
  fs::copy_file(base + "/config.json", dir + "/merged/config.json");
  io::SafetensorsReader st(base + "/model.safetensors");
  io::SafetensorsWriter merged, adapters;
  std::map<std::string, std::vector<float>> weights;
  for (const auto& n : st.names()) {
    std::vector<float> v(size_t(st.info(n).numel()));
    st.read_f32(n, st.info(n).shape, v.data());
    weights[n] = v;
  }
  Rng rng(7);
  for (const Module& m : mods) {
    std::vector<float> A(size_t(m.rank * m.in)), B(size_t(m.out * m.rank));
    for (auto& x : A) x = float(0.3 * rng.normal());
    for (auto& x : B) x = float(0.3 * rng.normal());
    adapters.add("base_model.model." + m.name + ".lora_A.weight", DType::F32, {m.rank, m.in}, A.data());
    adapters.add("base_model.model." + m.name + ".lora_B.weight", DType::F32, {m.out, m.rank}, B.data());
    const std::string wn = m.conv1d ? m.name.substr(std::string("transformer.").size()) + ".weight" : m.name + ".weight";
    std::vector<float>& W = weights.at(st.has(wn) ? wn : "transformer." + wn);
    for (int64_t o = 0; o < m.out; ++o)
      for (int64_t i = 0; i < m.in; ++i) {
        double d = 0;
        for (int64_t k = 0; k < m.rank; ++k) d += double(B[size_t(o * m.rank + k)]) * double(A[size_t(k * m.in + i)]);
        float& w = m.conv1d ? W[size_t(i * m.out + o)] : W[size_t(o * m.in + i)];
        w = float(double(w) + m.scaling * d);
      }
  }
  for (const auto& [n, v] : weights) merged.add(n, DType::F32, st.info(n).shape, v.data());
  merged.write(dir + "/merged/model.safetensors");
  adapters.write(dir + "/adapted/adapter_model.safetensors");
  write_text(dir + "/adapted/adapter_config.json", adapter_config);
}

std::vector<float> logits(const std::string& dir) {
  auto m = load_model(dir, cpu_backend<float>(), false);
  std::vector<int32_t> x(20);
  for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t((i * 13 + 5) % 64);
  m->forward(x.data(), nullptr, 2, 10);
  std::vector<float> out;
  m->read_logits(out);
  return out;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(double(a[i]) - double(b[i])));
    s = std::max(s, std::abs(double(b[i])));
  }
  return d / s;
}

}  // namespace

TEST_CASE("PEFT adapters with rank and alpha patterns and rsLoRA compute PEFT's function", "[model][lora][peft]") {
  const std::string dir = test::scratch_dir("peft_patterns");
  // Qwen2 fixture: C 32, 4 heads of 8 over 1 KV head. r 2, alpha 6, rsLoRA: s = alpha / sqrt(r);
  // v_proj at rank 3, layer 1's q_proj at alpha 20; no k_proj, no o_proj.
  const double s2 = 6.0 / std::sqrt(2.0), s3 = 6.0 / std::sqrt(3.0), sq1 = 20.0 / std::sqrt(2.0);
  make_dirs(fixture("hf_tiny_qwen2"), dir,
            {{"model.layers.0.self_attn.q_proj", 32, 32, 2, s2},
             {"model.layers.0.self_attn.v_proj", 8, 32, 3, s3},
             {"model.layers.1.self_attn.q_proj", 32, 32, 2, sq1},
             {"model.layers.1.self_attn.v_proj", 8, 32, 3, s3}},
            R"({"peft_type": "LORA", "r": 2, "lora_alpha": 6, "use_rslora": true, "target_modules": ["q_proj", "v_proj"],
                "rank_pattern": {"v_proj": 3}, "alpha_pattern": {"model.layers.1.self_attn.q_proj": 20},
                "fan_in_fan_out": false, "bias": "none", "use_dora": false, "lora_dropout": 0.0})");
  const ModelConfig c = read_checkpoint_config(dir + "/adapted");
  CHECK(c.lora.rank == 3);  // the largest
  CHECK(c.lora.targets == std::array<bool, kLoraTargets>{true, false, true, false});
  CHECK(std::abs(c.lora.scaling() - s2) < 1e-12);  // the first module's
  const double rel = max_rel(logits(dir + "/adapted"), logits(dir + "/merged"));
  INFO(rel);
  CHECK(rel < 1e-5);
}

TEST_CASE("a PEFT c_attn adapter on GPT-2 adapts q, k and v with its rows of B", "[model][lora][peft]") {
  const std::string dir = test::scratch_dir("peft_c_attn");
  make_dirs(fixture("hf_tiny_gpt2"), dir,
            {{"transformer.h.0.attn.c_attn", 96, 32, 3, 8.0 / 3, true}, {"transformer.h.1.attn.c_attn", 96, 32, 3, 8.0 / 3, true},
             {"transformer.h.1.attn.c_proj", 32, 32, 2, 4.0, true}},
            R"({"peft_type": "LORA", "r": 3, "lora_alpha": 8, "target_modules": ["c_attn", "attn.c_proj"],
                "rank_pattern": {"c_proj": 2}, "fan_in_fan_out": true, "layers_to_transform": null})");
  const ModelConfig c = read_checkpoint_config(dir + "/adapted");
  CHECK(c.lora.rank == 3);
  CHECK(c.lora.targets == std::array<bool, kLoraTargets>{true, true, true, true});
  const double rel = max_rel(logits(dir + "/adapted"), logits(dir + "/merged"));
  INFO(rel);
  CHECK(rel < 1e-5);
}

TEST_CASE("what headwise cannot apply from an adapter_config.json is one error naming it", "[model][lora][peft]") {
  const std::string dir = test::scratch_dir("peft_bad");
  const std::string base = fixture("hf_tiny_qwen2");
  make_dirs(base, dir, {{"model.layers.0.mlp.gate_proj", 64, 32, 2, 1.0}, {"model.layers.0.self_attn.q_proj", 32, 32, 2, 1.0}},
            R"({"peft_type": "LORA", "r": 2, "lora_alpha": 2, "target_modules": ["q_proj", "gate_proj"]})");
  const std::string cfg = dir + "/adapted/adapter_config.json";
  auto error_of = [&](const std::string& json) {
    write_text(cfg, json);
    try {
      read_checkpoint_config(dir + "/adapted");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK_THAT(error_of(R"({"peft_type": "LORA", "r": 2, "lora_alpha": 2, "target_modules": ["q_proj", "gate_proj"]})"),
             Contains("target_modules adapts model.layers.0.mlp.gate_proj: headwise adapts the attention projections only"));
  CHECK_THAT(error_of(R"({"r": 2, "target_modules": ["q_proj"], "use_dora": true})"), Contains("use_dora = true"));
  CHECK_THAT(error_of(R"({"r": 2, "target_modules": ["q_proj"], "bias": "all"})"), Contains("bias = string \"all\""));
  CHECK_THAT(error_of(R"({"r": 2, "target_modules": ["q_proj"], "modules_to_save": ["lm_head"]})"),
             Contains("modules_to_save"));
  CHECK_THAT(error_of(R"({"peft_type": "IA3", "r": 2, "target_modules": ["q_proj"]})"), Contains("peft_type \"IA3\""));
  CHECK_THAT(error_of(R"({"r": 2, "target_modules": "q_proj(("})"), Contains("is not a regular expression"));
  CHECK_THAT(error_of(R"({"r": 2, "target_modules": ["q_proj"], "rank_pattern": {"q_proj": "four"}})"),
             Contains("rank_pattern.q_proj"));
  CHECK_THAT(error_of(R"({"r": 0, "target_modules": ["q_proj"]})"), Contains("adapter_config.json: r"));
  CHECK_THAT(error_of(R"({"r": 2, "target_modules": ["nothing"]})"), Contains("matches no attention projection"));
  CHECK_THAT(error_of(R"({"r": 64, "target_modules": ["q_proj"]})"), Contains("model.lora.rank 64 exceeds"));
  CHECK_THAT(error_of(R"([1, 2])"), Contains("not a JSON object"));
  // A matched MLP module without tensors changes nothing (PEFT's fresh B is zero): no error.
  write_text(cfg, R"({"r": 2, "lora_alpha": 2, "target_modules": ["q_proj", "up_proj"]})");
  CHECK(read_checkpoint_config(dir + "/adapted").lora.rank == 2);
}
