// LoRA adapters outside the step: drawing them, adding them to a model, folding them into its
// weights (model_lora.cpp has their part of the step).
#include <string>
#include <vector>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/model/device_copy.hpp"
#include "model/model_impl.hpp"

namespace hw {

template <class F>
void Model<F>::init_adapters(uint64_t seed) {
  Rng rng(data::derive_seed(seed, data::Stream::LoraInit, 0));
  for (const auto& s : specs_) {
    if (!s.adapter) continue;
    // Drawn in the stored shape, like the weights, so the values do not depend on the plan.
    std::vector<double> stored(size_t(stored_numel(s)));
    for (auto& x : stored) x = s.init_uniform * (2.0 * rng.uniform() - 1.0);  // B: bound 0
    Tensor& t = params_.get(s.name);
    std::vector<F> compact(size_t(t.numel()));
    compact_from_stored(s, &layouts_[size_t(s.layer)], stored.data(), compact.data());
    write_device(ops_, t.as<F>(), compact);
  }
}

template <class F>
void Model<F>::add_adapters(const LoraConfig& lora, uint64_t seed) {
  check(!cfg_.lora.enabled(), "the model already has LoRA adapters (merge them first: headwise merge)");
  check(lora.enabled(), "add_adapters: model.lora.rank must be positive");
  ModelConfig next = cfg_;
  next.lora = lora;
  rebuild_keeping_values(next, head_extras());
  init_adapters(seed);
}

template <class F>
void Model<F>::merge_adapters() {
  check(cfg_.lora.enabled(), "the model has no LoRA adapters to merge");
  const int64_t C = cfg_.n_embd, r = cfg_.lora.rank;
  const double scaling = cfg_.lora.scaling();
  auto values = [&](const std::string& name) {
    const Tensor* t = params_.find(name);
    if (!t) t = &buffers_.get(name);  // a frozen weight
    return read_device(ops_, t->template as<F>(), t->numel());
  };
  auto store = [&](const std::string& name, const std::vector<F>& v) {
    Tensor* t = params_.find(name);
    if (!t) t = &buffers_.get(name);
    write_device(ops_, t->template as<F>(), v);
  };
  for (int l = 0; l < cfg_.n_layer; ++l) {
    if (!cfg_.lora.on_layer(l)) continue;
    const auto& lay = layouts_[size_t(l)];
    const std::string p = "h." + std::to_string(l) + ".attn.";
    const int64_t hd = lay.head_dim, qkv = lay.qkv_width(), ow = lay.out_width();
    if (cfg_.lora.targets_any_qkv()) {
      std::vector<F> W = values(p + "c_attn.weight");  // [C, qkv] (Conv1D: in x out)
      const int64_t col0[3] = {0, lay.n_q * hd, int64_t(lay.n_q + lay.n_k) * hd};
      const int64_t width[3] = {lay.n_q * hd, lay.n_k * hd, lay.n_v * hd};
      for (int t = 0; t < 3; ++t) {
        if (!cfg_.lora.has(LoraTarget(t))) continue;
        const std::vector<F> A = values(lora_a_name(l, LoraTarget(t)));  // [r, C]
        const std::vector<F> B = values(lora_b_name(l, LoraTarget(t)));  // [width, r]
        for (int64_t c = 0; c < C; ++c)
          for (int64_t j = 0; j < width[t]; ++j) {
            double d = 0.0;
            for (int64_t k = 0; k < r; ++k) d += double(B[size_t(j * r + k)]) * double(A[size_t(k * C + c)]);
            W[size_t(c * qkv + col0[t] + j)] += F(scaling * d);
          }
      }
      store(p + "c_attn.weight", W);
    }
    if (cfg_.lora.has(LoraTarget::O)) {
      std::vector<F> W = values(p + "c_proj.weight");                   // [ow, C]
      const std::vector<F> A = values(lora_a_name(l, LoraTarget::O));  // [r, ow]
      const std::vector<F> B = values(lora_b_name(l, LoraTarget::O));  // [C, r]
      for (int64_t i = 0; i < ow; ++i)
        for (int64_t c = 0; c < C; ++c) {
          double d = 0.0;
          for (int64_t k = 0; k < r; ++k) d += double(A[size_t(k * ow + i)]) * double(B[size_t(c * r + k)]);
          W[size_t(i * C + c)] += F(scaling * d);
        }
      store(p + "c_proj.weight", W);
    }
  }
  ModelConfig next = cfg_;
  next.lora = LoraConfig{};
  rebuild_keeping_values(next, head_extras());
}

template void Model<float>::init_adapters(uint64_t);
template void Model<float>::add_adapters(const LoraConfig&, uint64_t);
template void Model<float>::merge_adapters();
template void Model<double>::init_adapters(uint64_t);
template void Model<double>::add_adapters(const LoraConfig&, uint64_t);
template void Model<double>::merge_adapters();

}  // namespace hw
