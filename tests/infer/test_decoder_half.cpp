// Decoding with 16-bit weights (CachedDecoder's WeightPrecision bf16 / fp16) against a double-precision
// full forward of the same model with the same rounded weights (so the check isolates the
// decoder's arithmetic), and against the fp32 model (so the rounding's own effect is stated).
//
// Tolerances, relative to the largest |logit| of the sequence (measured on these models in
// brackets):
//   plain and AVX-512 widening kernels (fp32 x, fp32 sums): 1e-5 of the double reference
//     [1.7e-7 .. 3.3e-7], the bound fp32 decoding keeps against its own double forward;
//   AVX512_BF16 dot products (bf16 with a fan-in past kMaxWidenIn): x is rounded to bf16 before
//     every product (relative error 2^-9 per input), 1.5e-2 of the double reference [3.6e-3 .. 4.6e-3];
//   the rounding of the weights themselves, against the fp32 model's double forward: bf16 2e-2
//     [4.8e-3 .. 6.8e-3 with either kernel], fp16 2e-3 [4.2e-4 .. 6.6e-4];
//   a 16-bit KV cache with fp32 weights, against the full forward: bf16 1e-2, fp16 1.5e-3 (worst
//     over every plan, chunking and kernel path: 2.3e-3 and 3.2e-4).
// Greedy tokens: wherever the double reference's top two logits differ by more than twice the
// tolerance, the decoder's argmax is the reference's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <tuple>

#include "headwise/infer/cached_decoder.hpp"
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
                                 infer::WeightPrecision w, attn::KvPrecision kv = attn::KvPrecision::FP32,
                                 int64_t chunk = 5, int64_t split = 512,
                                 infer::Fp32Layout layout = infer::Fp32Layout::InOut) {
  const int64_t T = int64_t(tokens.size()), V = m.config().vocab_size;
  infer::CachedDecoder dec(m, T, chunk, split, w, {}, kv, layout);
  std::vector<float> got(size_t(T * V));
  dec.prefill(tokens.data(), P, got.data());
  for (int64_t t = P; t < T; ++t) {
    const float* lg = dec.step(tokens[size_t(t)]);
    std::copy(lg, lg + V, got.data() + t * V);
  }
  return got;
}

// The load tests' models: GPT-2 style (learned positions, tied head) or Qwen2 (RoPE, RMSNorm,
// SwiGLU, q/k/v biases, untied head), GQA, mixed head kinds.
ModelConfig load_case_config(const std::string& pos) {
  const char* plan = R"([["softmax","window:3","sink_window:2:5","softmax"],["window:6","softmax","sink_window:1:3","softmax"]])";
  const InferCase c{"half_load", 2, pos.c_str(), plan};
  ModelConfig cfg = infer_config(c);
  if (pos != "rope") return cfg;
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
  return cfg;
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
          "every kernel, and greedy tokens equal",
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
      for (cpu::HalfKernel k : {cpu::HalfKernel::Plain, cpu::HalfKernel::Widen, cpu::HalfKernel::Bf16Dot}) {
        cpu::force_half_kernel(k);  // (every matrix of these small models would widen under Auto)
        const std::string kernel = cpu::half_kernel_name(t, cfg.n_embd);
        const bool dot = kernel == "avx512bf16";
        const double tol = dot ? 1.5e-2 : 1e-5;
        const double tol32 = t == cpu::HalfType::BF16 ? 2e-2 : 2e-3;
        const std::vector<double> ref = double_reference(*model, tokens, &t);
        const auto w = t == cpu::HalfType::BF16 ? infer::WeightPrecision::BF16 : infer::WeightPrecision::FP16;
        const std::vector<float> got = decode_logits(*model, tokens, 13, w);
        const Compare e = compare(got, ref, V, tol);
        const Compare e32 = compare(got, ref32, V, tol32);
        INFO(pos << (t == cpu::HalfType::BF16 ? " bf16 " : " fp16 ") << kernel << ": vs double "
                 << e.rel << " (tol " << tol << "), vs fp32 weights " << e32.rel << "; argmax misses " << e.argmax_bad
                 << " of " << e.clear_rows << " clear rows");
        CHECK(e.rel <= tol);
        CHECK(e32.rel <= tol32);
        CHECK(e.clear_rows >= 20);
        CHECK(e.argmax_bad == 0);
      }
    cpu::force_half_kernel(cpu::HalfKernel::Auto);
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
  for (const char* pos : {"learned", "rope"}) {
    const ModelConfig cfg = load_case_config(pos);
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
      infer::CachedDecoder dec(*d.model, T, 5, 512, w, std::move(d.half));
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

TEST_CASE("load_for_decoding fp32: the layer matrices are re-laid [out, in] in place, and decoding them keeps "
          "fp32's bound against the double forward",
          "[infer][half]") {
  for (const char* pos : {"learned", "rope"}) {
    const ModelConfig cfg = load_case_config(pos);
    auto model = infer_model(cfg);
    TempDir dir;
    save_model_files(*model, dir.path().string());
    const auto tokens = random_tokens(30, cfg.vocab_size, 7);
    auto full = load_model(dir.path().string(), cpu_backend<float>(), false);
    const std::vector<double> ref = double_reference(*full, tokens, nullptr);
    infer::DecodingModel d = infer::load_for_decoding(dir.path().string(), infer::WeightPrecision::FP32);
    REQUIRE(d.fp32_layout == infer::Fp32Layout::OutIn);
    REQUIRE(d.half.empty());
    INFO(pos);
    // Each layer matrix holds the transpose of the checkpoint's [in, out]; every other tensor
    // (the LM head included) is the checkpoint's.
    int relaid = 0;
    for (const auto& t : d.model->params().tensors()) {
      const Tensor& f = full->params().get(t->name);
      int64_t I = 0, O = 0;
      INFO(t->name);
      if (infer::decoder_layer_matrix(*d.model, t->name, &I, &O)) {
        REQUIRE(I * O == t->numel());
        bool transposed = true;
        for (int64_t o = 0; o < O; ++o)
          for (int64_t i = 0; i < I; ++i) transposed = transposed && t->f32()[o * I + i] == f.f32()[i * O + o];
        CHECK(transposed);
        ++relaid;
      } else {
        CHECK(std::equal(t->f32(), t->f32() + t->numel(), f.f32()));
      }
    }
    CHECK(relaid == 4 * cfg.n_layer);
    for (int64_t chunk : {5, 64}) {
      const std::vector<float> got = decode_logits(*d.model, tokens, 11, infer::WeightPrecision::FP32,
                                                   attn::KvPrecision::FP32, chunk, 512, d.fp32_layout);
      const Compare e = compare(got, ref, cfg.vocab_size, 1e-5);
      INFO("chunk " << chunk << ": " << e.rel);
      CHECK(e.rel <= 1e-5);
      CHECK(e.argmax_bad == 0);
      CHECK(e.clear_rows > 0);
    }
  }
  // The flag is for fp32 matrices only.
  const ModelConfig cfg = load_case_config("learned");
  auto model = infer_model(cfg);
  CHECK_THROWS_WITH(infer::CachedDecoder(*model, 8, 4, 512, infer::WeightPrecision::BF16, {}, attn::KvPrecision::FP16,
                                   infer::Fp32Layout::OutIn),
                    Catch::Contains("Fp32Layout::OutIn"));
}

TEST_CASE("decode with a 16-bit KV cache: logits within the stated tolerance of the full forward for every kind, "
          "chunks and parts, both kernel paths",
          "[infer][half]") {
  // fp32 weights, so the cache's rounding is the only difference from the double forward. Plans
  // cover every store (All, a wrapping ring, K-less static rows, fp32 linear states next to 16-bit
  // rows), MHA and GQA; prefill in chunks that straddle the ring, and decode steps in parts of 3 keys.
  const char* plans[] = {
      R"([["softmax","softmax","softmax","softmax"],["softmax","softmax","softmax","softmax"]])",
      R"([["softmax","window:3","sink_window:2:5","static"],["linear","pruned","window:6","sink_window:1:3"]])",
      R"([["window:7","sink_window:3:2","static","linear"],["sink_window:2:4","softmax","pruned","window:5"]])"};
  double worst[2] = {0, 0};
  for (const char* plan : plans)
    for (int kvh : {4, 2})
      for (const char* pos : {"learned", "rope"}) {
        const InferCase c{"kv16", kvh, pos, plan};
        const ModelConfig cfg = infer_config(c);
        auto model = infer_model(cfg);
        const auto tokens = random_tokens(40, cfg.vocab_size, 3);
        const int64_t V = cfg.vocab_size;
        // (The fp32 training forward: its own error, ~1e-6, is far below the cache's rounding;
        // the double model copy has no static or linear head values.)
        const std::vector<float> ref32 = full_forward_logits(*model, tokens);
        const std::vector<double> ref(ref32.begin(), ref32.end());
        for (auto kv : {attn::KvPrecision::BF16, attn::KvPrecision::FP16})
          for (bool plain : {false, true})
            for (auto [P, chunk, split] : {std::tuple<int64_t, int64_t, int64_t>{13, 5, 512}, {1, 64, 3}, {40, 16, 512}}) {
              cpu::force_plain_half_kernel(plain);
              const bool bf = kv == attn::KvPrecision::BF16;
              const double tol = bf ? 1e-2 : 1.5e-3;
              const Compare e = compare(decode_logits(*model, tokens, P, infer::WeightPrecision::FP32, kv, chunk, split),
                                        ref, V, tol);
              worst[bf ? 0 : 1] = std::max(worst[bf ? 0 : 1], e.rel);
              INFO(plan << " kv heads " << kvh << " " << pos << " cache " << attn::kv_precision_name(kv)
                        << (plain ? " plain" : " avx512") << " prefill " << P << " chunk " << chunk << " parts of "
                        << split << ": " << e.rel << " (tol " << tol << "); argmax misses " << e.argmax_bad << " of "
                        << e.clear_rows);
              CHECK(e.rel <= tol);
              CHECK(e.argmax_bad == 0);
              // The cache is rounded: some error remains (a decoder that kept fp32 rows would pass
              // the bound too, and this says it does not).
              if (P < 40) CHECK(e.rel > (bf ? 1e-5 : 1e-6));
            }
        cpu::force_plain_half_kernel(false);
      }
  INFO("16-bit KV cache, worst relative logit error: bf16 " << worst[0] << ", fp16 " << worst[1]);
  CHECK(worst[0] > worst[1]);  // bf16 keeps 3 fewer mantissa bits than fp16
}

TEST_CASE("decode with a 16-bit KV cache: half the row bytes, fp32 linear states, and fp16's range is one error",
          "[infer][half]") {
  const InferCase c{"kv16", 2, "rope",
                    R"([["softmax","window:3","sink_window:2:5","static"],["linear","pruned","window:6","sink_window:1:3"]])"};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  const infer::CachedDecoder d32(*model, 40), d16(*model, 40, 64, 512, infer::WeightPrecision::FP32, {}, attn::KvPrecision::FP16);
  const int64_t D = cfg.head_dim(), lin = attn::linear_features(int(D)) * (D + 1);
  // Rows: layer 0 two All stores with K and V (40 slots each); layer 1 state only (KV head 0)
  // and a ring S=1, W=6 with K and V (KV head 1).
  const int64_t rows = 2 * 2 * 40 * D + 2 * 7 * D;
  CHECK(d32.kv_bytes() == size_t(4 * rows + 4 * lin));
  CHECK(d16.kv_bytes() == size_t(2 * rows + 4 * lin));
  CHECK(d16.cache().precision() == attn::KvPrecision::FP16);
  CHECK(infer::kv_precision_for(infer::WeightPrecision::FP32, "") == attn::KvPrecision::FP32);
  CHECK(infer::kv_precision_for(infer::WeightPrecision::BF16, "") == attn::KvPrecision::FP16);
  CHECK(infer::kv_precision_for(infer::WeightPrecision::FP16, "bf16") == attn::KvPrecision::BF16);
  CHECK_THROWS_WITH(attn::parse_kv_precision("int8"), Catch::Contains("--kv-cache: 'int8'"));

  // A V value beyond 65504 (the value bias of layer 0, KV head 1): fp16 stops with the remedy,
  // bf16 (fp32's range) decodes.
  const auto& lay = model->layouts()[0];
  model->params().get("h.0.attn.c_attn.bias").f32()[lay.v_col(1)] = 1e5f;
  const auto tokens = random_tokens(8, cfg.vocab_size, 4);
  infer::CachedDecoder f16(*model, 40, 64, 512, infer::WeightPrecision::FP32, {}, attn::KvPrecision::FP16);
  CHECK_THROWS_WITH(f16.prefill(tokens.data(), 8),
                    Catch::Contains("layer 0 KV head 1 at position 0") && Catch::Contains("beyond fp16's range") &&
                        Catch::Contains("--kv-cache bf16 or fp32"));
  infer::CachedDecoder b16(*model, 40, 64, 512, infer::WeightPrecision::FP32, {}, attn::KvPrecision::BF16);
  CHECK_NOTHROW(b16.prefill(tokens.data(), 8));
}
