// The per-head parameters of static and linear heads, and of the valued kinds (kinds/*.cpp): setting them up when the arenas are
// built, uploading static heads' values, reading them back, refreshing their normalisers.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/model/device_copy.hpp"
#include "model/kinds/valued_kind.hpp"
#include "model/model_impl.hpp"

namespace hw {

template <class F>
void Model<F>::Impl::declare_static_normalisers(const ModelConfig& cfg, Arena& buffers) {
  constexpr DType dt = dtype_of<F>();
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head; ++h)
      if (cfg.head_plan.layers[size_t(l)][size_t(h)].kind == attn::HeadKind::Static)
        buffers.declare("h." + std::to_string(l) + ".attn.static." + std::to_string(h) + ".log_z",
                        {cfg.block_size}, dt);
}

template <class F>
void Model<F>::Impl::bind_head_params(Model& m, const HeadExtras& extras) {
  using model_detail::find_ptr;
  const ModelConfig& cfg = m.cfg_;
  head_params.assign(size_t(cfg.n_layer), {});
  for (int l = 0; l < cfg.n_layer; ++l) {
    auto& hp = head_params[size_t(l)];
    hp.linear_eps = cfg.linear_eps;
    hp.statics.assign(size_t(cfg.n_head), {});
    hp.linears.assign(size_t(cfg.n_head), {});
    for (int h = 0; h < cfg.n_head; ++h) {
      const auto kind = cfg.head_plan.layers[size_t(l)][size_t(h)].kind;
      const std::string p = "h." + std::to_string(l) + ".attn.";
      if (kind == attn::HeadKind::Static) {
        auto it = extras.statics.find({l, h});
        const StaticHeadValues v = it != extras.statics.end() ? it->second : default_static_values(cfg.block_size);
        check(int64_t(v.alpha.size()) == cfg.block_size && int64_t(v.rho.size()) == cfg.block_size,
              "static head (" + std::to_string(l) + ", " + std::to_string(h) + "): alpha and rho need length " +
                  std::to_string(cfg.block_size));
        const std::string sp = p + "static." + std::to_string(h) + ".";
        F* alpha = find_ptr<F>(m.buffers_, sp + "alpha");
        F* rho = find_ptr<F>(m.buffers_, sp + "rho");
        F* log_z = find_ptr<F>(m.buffers_, sp + "log_z");
        m.upload_static_head(v, alpha, rho, log_z);
        hp.statics[size_t(h)] = {alpha, rho, log_z, nullptr, nullptr};
      } else if (kind == attn::HeadKind::Linear) {
        auto it = extras.linears.find({l, h});
        const LinearHeadValues v = it != extras.linears.end() ? it->second : default_linear_values(cfg.head_dim());
        const int G = v.n_groups;
        const std::string who = "linear head (" + std::to_string(l) + ", " + std::to_string(h) + ")";
        check(G >= 1 && G <= cfg.head_dim() && int64_t(v.L.size()) == int64_t(G + 1) * (G + 1) &&
                  int64_t(v.groups.size()) == cfg.head_dim(),
              who + ": G must be in 1..head_dim, L (G+1)^2 and groups head_dim long");
        attn::check_linear_groups(v.groups.data(), cfg.head_dim(), G, who);
        const std::string lp = p + "linear." + std::to_string(h) + ".";
        F* L = find_ptr<F>(m.params_, lp + "L");
        write_device(m.ops_, L, std::vector<F>(v.L.begin(), v.L.end()));
        int32_t* groups = m.buffers_.get(lp + "groups").i32();
        write_device(m.ops_, groups, v.groups);
        hp.linears[size_t(h)] = {L, find_ptr<F>(m.grads_, lp + "L"), groups, G};
      } else if (const ValuedKind* k = valued_kind(kind)) {
        const attn::HeadSpec& spec = cfg.head_plan.layers[size_t(l)][size_t(h)];
        const KindHeadValues v = k->values(cfg, extras, l, h);
        const std::vector<KindTensor> ts = k->tensors(cfg, spec);
        std::vector<F*> values, grads;
        for (size_t i = 0; i < ts.size(); ++i) {
          const std::string name = kind_tensor_name(*k, l, h, ts[i]);
          values.push_back(find_ptr<F>(ts[i].trained ? m.params_ : m.buffers_, name));
          grads.push_back(ts[i].trained ? find_ptr<F>(m.grads_, name) : nullptr);
          write_device(m.ops_, values.back(), std::vector<F>(v[i].begin(), v[i].end()));
        }
        k->bind(hp, cfg.n_head, h, spec, values.data(), grads.data());
      }
    }
  }
}

// A static head's alpha and rho as the model stores them (F), and the row normalisers derived
// from exactly those values, computed on the host and copied in.
template <class F>
void Model<F>::upload_static_head(const StaticHeadValues& v, F* alpha, F* rho, F* log_z) {
  const std::vector<F> a(v.alpha.begin(), v.alpha.end()), r(v.rho.begin(), v.rho.end());
  write_device(ops_, alpha, a);
  write_device(ops_, rho, r);
  if (log_z_rows_ == 0) return;  // computed when a step first needs them (ensure_static_normalisers)
  std::vector<F> lz(static_cast<size_t>(log_z_rows_));
  attn::static_log_normalisers(lz.data(), a.data(), r.data(), log_z_rows_);
  write_device(ops_, log_z, lz);
}

template <class F>
HeadExtras Model<F>::head_extras() const {
  HeadExtras ex;
  for (int l = 0; l < cfg_.n_layer; ++l)
    for (int h = 0; h < cfg_.n_head; ++h) {
      const auto kind = cfg_.head_plan.layers[size_t(l)][size_t(h)].kind;
      if (kind == attn::HeadKind::Static) {
        const auto& sp = impl_->head_params[size_t(l)].statics[size_t(h)];
        const std::vector<F> alpha = read_device(ops_, sp.alpha, cfg_.block_size);
        const std::vector<F> rho = read_device(ops_, sp.rho, cfg_.block_size);
        StaticHeadValues v;
        v.alpha.assign(alpha.begin(), alpha.end());
        v.rho.assign(rho.begin(), rho.end());
        ex.statics[{l, h}] = std::move(v);
      } else if (kind == attn::HeadKind::Linear) {
        const auto& lp = impl_->head_params[size_t(l)].linears[size_t(h)];
        const std::vector<F> L = read_device(ops_, lp.L, int64_t(lp.n_groups + 1) * (lp.n_groups + 1));
        LinearHeadValues v;
        v.n_groups = lp.n_groups;
        v.L.assign(L.begin(), L.end());
        v.groups = read_device(ops_, lp.groups, cfg_.head_dim());
        ex.linears[{l, h}] = std::move(v);
      } else if (const ValuedKind* k = valued_kind(kind)) {
        KindHeadValues v;
        for (const KindTensor& t : k->tensors(cfg_, cfg_.head_plan.layers[size_t(l)][size_t(h)])) {
          const std::string name = kind_tensor_name(*k, l, h, t);
          const Tensor* tensor = (t.trained ? params_ : buffers_).find(name);
          check(tensor != nullptr, "head_extras: no tensor " + name);
          const std::vector<F> x = read_device(ops_, tensor->template as<F>(), kind_tensor_numel(t));
          v.emplace_back(x.begin(), x.end());
        }
        k->store(cfg_, ex, l, h, std::move(v));
      }
    }
  return ex;
}

template <class F>
void Model<F>::refresh_static_normalisers() {
  const int64_t n = log_z_rows_;
  log_z_rows_ = 0;
  ensure_static_normalisers(n);
}

template <class F>
void Model<F>::ensure_static_normalisers(int64_t rows) const {
  const int64_t n = std::min<int64_t>(rows, cfg_.block_size), r0 = log_z_rows_;
  if (n <= r0) return;
  std::vector<F> alpha, rho, log_z;
  for (const auto& hp : impl_->head_params)
    for (const auto& sp : hp.statics) {
      if (!sp.alpha) continue;
      read_device(ops_, sp.alpha, n, alpha);
      read_device(ops_, sp.rho, n, rho);
      log_z.resize(size_t(n - r0));
      attn::static_log_normaliser_rows(log_z.data(), alpha.data(), rho.data(), r0, n);
      write_device(ops_, const_cast<F*>(sp.log_z) + r0, log_z);
    }
  log_z_rows_ = n;
}

// The members defined here, for both model types (the class itself is instantiated once, in
// model.cpp: a second explicit instantiation of the whole class would be ill-formed).
#define HW_HEAD_PARAMS_INSTANTIATE(F)                                                        \
  template void Model<F>::Impl::declare_static_normalisers(const ModelConfig&, Arena&);      \
  template void Model<F>::Impl::bind_head_params(Model<F>&, const HeadExtras&);              \
  template void Model<F>::upload_static_head(const StaticHeadValues&, F*, F*, F*);           \
  template HeadExtras Model<F>::head_extras() const;                                        \
  template void Model<F>::refresh_static_normalisers();                                      \
  template void Model<F>::ensure_static_normalisers(int64_t) const;
HW_HEAD_PARAMS_INSTANTIATE(float)
HW_HEAD_PARAMS_INSTANTIATE(double)
#undef HW_HEAD_PARAMS_INSTANTIATE

}  // namespace hw
