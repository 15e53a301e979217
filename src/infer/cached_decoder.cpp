// Cached decoding of one sequence (cached_decoder.hpp): its KV cache and the shared forward
// (cached_forward.hpp); the decoder's weight precisions and layouts.
#include "headwise/infer/cached_decoder.hpp"

#include <algorithm>
#include <string>

#include "headwise/core/error.hpp"
#include "infer/cached_forward.hpp"

namespace hw::infer {

WeightPrecision parse_weight_precision(const std::string& s) {
  if (s == "fp32") return WeightPrecision::FP32;
  if (s == "bf16") return WeightPrecision::BF16;
  if (s == "fp16") return WeightPrecision::FP16;
  fail("--weights: '" + s + "' is not a weight precision (fp32, bf16 or fp16)");
}

const char* weight_precision_name(WeightPrecision p) {
  return p == WeightPrecision::FP32 ? "fp32" : p == WeightPrecision::BF16 ? "bf16" : "fp16";
}

attn::KvPrecision kv_precision_for(WeightPrecision w, const std::string& given) {
  if (!given.empty()) return attn::parse_kv_precision(given);
  return w == WeightPrecision::FP32 ? attn::KvPrecision::FP32 : attn::KvPrecision::FP16;
}

namespace {

// The layer and which of its four matrices (layer_matrix_of) a parameter name is, and its fan-in
// and fan-out; false for any other name.
bool layer_matrix(const Model<float>& model, const std::string& name, int* layer, int* which, int64_t* in,
                  int64_t* out) {
  const ModelConfig& cfg = model.config();
  if (!layer_matrix_of(name, cfg.n_layer, layer, which)) return false;
  const auto& lay = model.layouts()[size_t(*layer)];
  const int64_t C = cfg.n_embd;
  const int64_t ins[4] = {C, lay.out_width(), C, cfg.intermediate()};
  const int64_t outs[4] = {lay.qkv_width(), C, cfg.fc_width(), C};
  *in = ins[*which];
  *out = outs[*which];
  return true;
}

}  // namespace

bool decoder_layer_matrix(const Model<float>& model, const std::string& name, int64_t* in, int64_t* out) {
  int l = 0, k = 0;
  return layer_matrix(model, name, &l, &k, in, out);
}

bool relay_out_in(const Model<float>& model, const std::string& name, float* values) {
  int64_t I = 0, O = 0;
  if (!decoder_layer_matrix(model, name, &I, &O)) return false;
  const std::vector<float> src(values, values + I * O);
  // Blocks of 32 x 32: both sides' lines are used whole while they sit in L1.
  constexpr int64_t B = 32;
#pragma omp parallel for schedule(static)
  for (int64_t o0 = 0; o0 < O; o0 += B)
    for (int64_t i0 = 0; i0 < I; i0 += B)
      for (int64_t o = o0; o < std::min(O, o0 + B); ++o)
        for (int64_t i = i0; i < std::min(I, i0 + B); ++i) values[o * I + i] = src[size_t(i * O + o)];
  return true;
}

bool HalfWeights::take(const Model<float>& model, WeightPrecision p, const std::string& name, const float* values) {
  check(p != WeightPrecision::FP32, "internal: HalfWeights::take with fp32");
  const ModelConfig& cfg = model.config();
  const cpu::HalfType t = p == WeightPrecision::BF16 ? cpu::HalfType::BF16 : cpu::HalfType::F16;
  const int64_t C = cfg.n_embd;
  if (!pool) {  // the head, then per layer QKV, output, MLP in, MLP out
    auto place = [this, at = int64_t(0)](int64_t n) mutable {
      offsets.push_back(at);
      at += (n + 31) / 32 * 32;
      return at;
    };
    int64_t total = place(C * cfg.vocab_size);
    for (int l = 0; l < cfg.n_layer; ++l) {
      const auto& lay = model.layouts()[size_t(l)];
      place(C * lay.qkv_width());
      place(lay.out_width() * C);
      place(C * cfg.fc_width());
      total = place(cfg.intermediate() * C);
    }
    pool = cpu::make_half_storage(total);
  }
  auto into = [&](int slot, const float* v, int64_t I, int64_t O, bool w_out_in) {
    return cpu::HalfMatrix::from_f32(v, I, O, w_out_in, t, pool, pool.get() + offsets[size_t(slot)]);
  };
  if (name == (cfg.tie_word_embeddings ? "wte.weight" : "lm_head.weight")) {
    head = into(0, values, C, cfg.vocab_size, /*w_out_in=*/true);
    return true;
  }
  int l = 0, k = 0;
  int64_t I = 0, O = 0;
  if (!layer_matrix(model, name, &l, &k, &I, &O)) return false;
  layers.resize(size_t(cfg.n_layer));
  HalfLayer& H = layers[size_t(l)];
  cpu::HalfMatrix* slot[4] = {&H.attn, &H.proj, &H.fc, &H.fcp};
  *slot[k] = into(1 + 4 * l + k, values, I, O, false);
  return true;
}


void check_decodable(const Model<float>& model, int64_t max_context, int64_t chunk, int64_t split_cols,
                      WeightPrecision weights, Fp32Layout layout) {
  const ModelConfig& cfg = model.config();
  check(model.ops().device() == Device::CPU,
        std::string("decoder: cached decoding runs on the CPU backend only; the model is on backend '") +
            model.ops().name() + "', which has no cached-attention (decode) kernels yet: load the checkpoint on the CPU");
  check(max_context >= 1 && max_context <= cfg.block_size,
        "decoder: max_context " + std::to_string(max_context) + " must be in 1..block_size (" +
            std::to_string(cfg.block_size) + ")");
  check(chunk >= 1, "decoder: chunk must be >= 1");
  check(split_cols >= 1, "decoder: split_cols must be >= 1");
  model.ensure_static_normalisers(max_context);  // the static heads' rows this decoder can reach
  // Adapters change the training forward's products (LoRA after QKV and the output); the
  // decoder's products are the plain matrices: refuse instead of decoding a different model.
  check(!cfg.lora.enabled(), "decoder: the model has LoRA adapters (model.lora), which cached decoding does not "
                             "apply: merge them into the weights first (Model::merge_adapters, headwise merge)");
  // The linearization baselines have no cached (recurrent) decode path yet: refuse them by name
  // instead of decoding without those heads.
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head; ++h) {
      const attn::HeadSpec& s = cfg.head_plan.layers[size_t(l)][size_t(h)];
      check(!s.baseline_linear(), "decoder: layer " + std::to_string(l) + " head " + std::to_string(h) + " is '" +
                                      s.str() + "', a head kind cached decoding does not run (softmax, window, "
                                      "sink_window, static, linear and pruned heads only)");
    }
  check(layout == Fp32Layout::InOut || weights == WeightPrecision::FP32,
        "decoder: re-laid fp32 matrices (Fp32Layout::OutIn) with 16-bit weights");
}

CachedDecoder::CachedDecoder(const Model<float>& model, int64_t max_context, int64_t chunk, int64_t split_cols,
                             WeightPrecision weights, HalfWeights half, attn::KvPrecision kv, Fp32Layout layout)
    : cache_(model.config().head_plan, model.config().n_head, model.config().kv_heads(), model.config().head_dim(),
             std::max<int64_t>(max_context, 1), kv) {
  check_decodable(model, max_context, chunk, split_cols, weights, layout);
  chunk_ = std::min(chunk, max_context);
  forward_ = std::make_unique<CachedForward>(model, cache_, chunk_, 1, split_cols, weights, std::move(half), layout);
  last_.resize(size_t(forward_->vocab_size()));
}

CachedDecoder::~CachedDecoder() = default;

int CachedDecoder::vocab_size() const { return forward_->vocab_size(); }
size_t CachedDecoder::scratch_bytes() const { return forward_->scratch_bytes() + last_.size() * sizeof(float); }
size_t CachedDecoder::half_weight_bytes() const { return forward_->half_weight_bytes(); }
size_t CachedDecoder::weight_bytes_per_token() const { return forward_->weight_bytes_per_token(); }

const float* CachedDecoder::prefill(const int32_t* tokens, int64_t n, float* all_logits) {
  const int V = forward_->vocab_size();
  // (Messages are built only on failure: a decode step allocates nothing.)
  if (n < 1) fail("decoder: nothing to feed (0 tokens)");
  if (cache_.length() + n > cache_.max_context())
    fail("decoder: " + std::to_string(cache_.length()) + " + " + std::to_string(n) +
         " tokens exceed the cache's context of " + std::to_string(cache_.max_context()));
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      fail("decoder: token " + std::to_string(tokens[i]) + " at position " + std::to_string(cache_.length() + i) +
           " is outside the vocabulary of " + std::to_string(V));
  float* last = last_.data();
  for (int64_t r0 = 0; r0 < n; r0 += chunk_) {
    const attn::CachedRows rows{&cache_, 0, std::min(chunk_, n - r0)};
    forward_->run(tokens + r0, &rows, 1, all_logits ? all_logits + r0 * V : nullptr, &last);
  }
  return last_.data();
}

}  // namespace hw::infer
