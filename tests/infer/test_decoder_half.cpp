// Decoding with 16-bit weights (Decoder's WeightPrecision bf16 / fp16) against a double-precision
// full forward of the same model with the same rounded weights (so the check isolates the
// decoder's arithmetic), and against the fp32 model (so the rounding's own effect is stated).
//
// Tolerances, relative to the largest |logit| of the sequence (measured on these models in
// brackets):
//   plain widening path (fp32 x, fp32 sums): 1e-5 of the double reference [1.7e-7 .. 3.3e-7],
//     the bound fp32 decoding keeps against its own double forward;
//   AVX512_BF16 path: x is rounded to bf16 before every product (relative error 2^-9 per
//     input), 1.5e-2 of the double reference [3.6e-3 .. 4.6e-3];
//   the rounding of the weights themselves, against the fp32 model's double forward: bf16 2e-2
//     [4.8e-3 .. 6.8e-3 with either kernel], fp16 2e-3 [4.2e-4 .. 6.6e-4].
// Greedy tokens: wherever the double reference's top two logits differ by more than twice the
// tolerance, the decoder's argmax is the reference's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "headwise/infer/decoder.hpp"
#include "headwise/infer/load_for_decoding.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/infer/sampler.hpp"
#include "headwise/kernels/gemv.hpp"
#include "infer/infer_fixture.hpp"
#include "model/model_test_util.hpp"
#include "support/temp_dir.hpp"

using namespace hw;
using namespace hw::test;

namespace {

bool is_matrix(const std::string& name) {
  for (const char* s : {"c_attn.weight", "c_proj.weight", "c_fc.weight", "wte.weight", "lm_head.weight"})
    if (name.find(s) != std::string::npos) return true;
  return false;
}

// Logits [T, V] of the double full forward of `m` with its matrices rounded to `t`.
std::vector<double> double_reference(Model<float>& m, const std::vector<int32_t>& tokens, cpu::HalfType* t) {
  Model<double> ref(m.config(), cpu_backend<double>());
  copy_to_double(m, ref);
  if (t)
    for (const auto& p : ref.params().tensors()) {
      if (!is_matrix(p->name)) continue;
      double* d = p->as<double>();
      for (int64_t i = 0; i < p->numel(); ++i) {
        const float f = float(d[i]);
        d[i] = *t == cpu::HalfType::BF16 ? cpu::bf16_to_float(cpu::float_to_bf16(f))
                                        : cpu::f16_to_float(cpu::float_to_f16(f));
      }
    }
  ref.forward(tokens.data(), nullptr, 1, int64_t(tokens.size()));
  std::vector<double> out;
  ref.read_logits(out);
  return out;
}

std::vector<float> decode_logits(const Model<float>& m, const std::vector<int32_t>& tokens, int64_t P,
                                 infer::WeightPrecision w) {
  const int64_t T = int64_t(tokens.size()), V = m.config().vocab_size;
  infer::Decoder dec(m, T, 5, 512, w);
  std::vector<float> got(size_t(T * V));
  dec.prefill(tokens.data(), P, got.data());
  for (int64_t t = P; t < T; ++t) {
    const float* lg = dec.step(tokens[size_t(t)]);
    std::copy(lg, lg + V, got.data() + t * V);
  }
  return got;
}

struct Compare {
  double rel = 0;       // max |got - ref| / max |ref|
  int argmax_bad = 0;   // rows with a clear reference winner that the decoder's argmax misses
  int clear_rows = 0;
};

Compare compare(const std::vector<float>& got, const std::vector<double>& ref, int64_t V, double tol) {
  Compare c;
  double mx = 0, err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    mx = std::max(mx, std::fabs(ref[i]));
    err = std::max(err, std::fabs(double(got[i]) - ref[i]));
  }
  c.rel = err / mx;
  for (size_t r = 0; r * size_t(V) < ref.size(); ++r) {
    const double* row = ref.data() + r * size_t(V);
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = v;
    double second = -1e300;
    for (int64_t v = 0; v < V; ++v)
      if (v != best) second = std::max(second, row[v]);
    if (row[best] - second <= 2 * tol * mx) continue;
    ++c.clear_rows;
    c.argmax_bad += infer::argmax(got.data() + r * size_t(V), int(V)) != int32_t(best);
  }
  return c;
}

}  // namespace

TEST_CASE("decode with bf16 / fp16 weights: logits within the stated tolerance of a double reference, "
          "both bf16 kernels, and greedy tokens equal",
          "[infer][half]") {
  const char* plan = R"([["softmax","window:3","sink_window:2:5","softmax"],["window:6","softmax","sink_window:1:3","softmax"]])";
  for (const char* pos : {"learned", "rope"}) {
    const InferCase c{"half", 2, pos, plan};
    const ModelConfig cfg = infer_config(c);
    auto model = infer_model(cfg);
    const auto tokens = random_tokens(40, cfg.vocab_size, 3);
    const int64_t V = cfg.vocab_size;
    const std::vector<double> ref32 = double_reference(*model, tokens, nullptr);
    for (cpu::HalfType t : {cpu::HalfType::BF16, cpu::HalfType::F16})
      for (bool plain : {true, false}) {
        cpu::force_plain_half_kernel(plain);
        const bool dot = t == cpu::HalfType::BF16 && cpu::half_kernel_name() == "avx512bf16";
        const double tol = dot ? 1.5e-2 : 1e-5;
        const double tol32 = t == cpu::HalfType::BF16 ? 2e-2 : 2e-3;
        const std::vector<double> ref = double_reference(*model, tokens, &t);
        const auto w = t == cpu::HalfType::BF16 ? infer::WeightPrecision::BF16 : infer::WeightPrecision::FP16;
        const std::vector<float> got = decode_logits(*model, tokens, 13, w);
        const Compare e = compare(got, ref, V, tol);
        const Compare e32 = compare(got, ref32, V, tol32);
        INFO(pos << (t == cpu::HalfType::BF16 ? " bf16 " : " fp16 ") << cpu::half_kernel_name() << ": vs double "
                 << e.rel << " (tol " << tol << "), vs fp32 weights " << e32.rel << "; argmax misses " << e.argmax_bad
                 << " of " << e.clear_rows << " clear rows");
        CHECK(e.rel <= tol);
        CHECK(e32.rel <= tol32);
        CHECK(e.clear_rows >= 20);
        CHECK(e.argmax_bad == 0);
      }
    cpu::force_plain_half_kernel(false);
    // fp32 decoding (the model's own weights) keeps its bound against the same double forward.
    const Compare e = compare(decode_logits(*model, tokens, 13, infer::WeightPrecision::FP32), ref32, V, 1e-5);
    INFO(pos << " fp32: " << e.rel);
    CHECK(e.rel <= 1e-5);
    CHECK(e.argmax_bad == 0);
  }
}

TEST_CASE("decode: --weights takes fp32, bf16 or fp16 and names anything else", "[infer][half]") {
  CHECK(infer::parse_weight_precision("bf16") == infer::WeightPrecision::BF16);
  CHECK(infer::parse_weight_precision("fp16") == infer::WeightPrecision::FP16);
  CHECK(infer::parse_weight_precision("fp32") == infer::WeightPrecision::FP32);
  CHECK_THROWS_WITH(infer::parse_weight_precision("int8"), Catch::Contains("'int8'"));
}

TEST_CASE("load_for_decoding: matrices rounded while loading decode bit for bit as rounding the loaded model, "
          "and their fp32 copies are gone",
          "[infer][half]") {
  const char* plan = R"([["softmax","window:3","sink_window:2:5","softmax"],["window:6","softmax","sink_window:1:3","softmax"]])";
  for (const char* pos : {"learned", "rope"}) {
    const InferCase c{"half_load", 2, pos, plan};
    ModelConfig cfg = infer_config(c);
    if (std::string(pos) == "rope") {  // Qwen2 (RMSNorm, SwiGLU, q/k/v biases), untied LM head
      const ModelConfig shape = cfg;
      cfg = ModelConfig::for_family("qwen2");
      cfg.n_layer = shape.n_layer;
      cfg.n_head = shape.n_head;
      cfg.n_kv_head = shape.n_kv_head;
      cfg.n_embd = shape.n_embd;
      cfg.vocab_size = shape.vocab_size;
      cfg.block_size = shape.block_size;
      cfg.head_plan = shape.head_plan;
      cfg.tie_word_embeddings = false;
      cfg.validate();
    }
    auto model = infer_model(cfg);
    TempDir dir;
    save_model_files(*model, dir.path().string());
    const auto tokens = random_tokens(30, cfg.vocab_size, 7);
    for (auto w : {infer::WeightPrecision::BF16, infer::WeightPrecision::FP16}) {
      INFO(pos << " " << infer::weight_precision_name(w));
      auto full = load_model(dir.path().string(), cpu_backend<float>(), false);
      const std::vector<float> want = decode_logits(*full, tokens, 11, w);  // rounds the loaded fp32 model
      infer::DecodingModel d = infer::load_for_decoding(dir.path().string(), w);
      REQUIRE(!d.half.empty());
      // The decoder's matrices read as zeros in the model now; everything else is the checkpoint's.
      int discarded = 0;
      for (const auto& t : d.model->params().tensors()) {
        const Tensor& f = full->params().get(t->name);
        const bool zero = std::all_of(t->f32(), t->f32() + t->numel(), [](float v) { return v == 0.f; });
        const bool same = std::equal(t->f32(), t->f32() + t->numel(), f.f32());
        const bool matrix = t->name.find(".c_attn.weight") != std::string::npos ||
                            t->name.find(".c_proj.weight") != std::string::npos ||
                            t->name.find(".c_fc.weight") != std::string::npos ||
                            t->name == (cfg.tie_word_embeddings ? "wte.weight" : "lm_head.weight");
        INFO(t->name);
        CHECK((matrix ? zero : same));
        discarded += matrix;
      }
      CHECK(discarded == 4 * cfg.n_layer + 1);
      const int64_t T = int64_t(tokens.size()), V = cfg.vocab_size;
      infer::Decoder dec(*d.model, T, 5, 512, w, std::move(d.half));
      std::vector<float> got(size_t(T * V));
      dec.prefill(tokens.data(), 11, got.data());
      for (int64_t t = 11; t < T; ++t) {
        const float* lg = dec.step(tokens[size_t(t)]);
        std::copy(lg, lg + V, got.data() + t * V);
      }
      CHECK(got == want);
    }
  }
}
