// The per-head parameters of static and linear heads: setting them up when the arenas are
// built, uploading static heads' values, reading them back, refreshing their normalisers.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/model/device_copy.hpp"
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
    hp.performers.assign(size_t(cfg.n_head), {});
    hp.dijiangs.assign(size_t(cfg.n_head), {});
    hp.taylorshifts.assign(size_t(cfg.n_head), {});
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
      } else if (kind == attn::HeadKind::Performer) {
        const int M = cfg.head_plan.layers[size_t(l)][size_t(h)].features;
        auto it = extras.performers.find({l, h});
        const PerformerHeadValues v =
            it != extras.performers.end() ? it->second : default_performer_values(cfg.head_dim(), M, l, h);
        check(v.n_features == M && int64_t(v.W.size()) == int64_t(M) * cfg.head_dim(),
              "performer head (" + std::to_string(l) + ", " + std::to_string(h) + "): its features must be " +
                  std::to_string(M) + " x head_dim " + std::to_string(cfg.head_dim()));
        F* W = find_ptr<F>(m.buffers_, p + "performer." + std::to_string(h) + ".W");
        write_device(m.ops_, W, std::vector<F>(v.W.begin(), v.W.end()));
        hp.performers[size_t(h)] = {W, M};
      } else if (kind == attn::HeadKind::DiJiang) {
        auto it = extras.dijiangs.find({l, h});
        const DiJiangHeadValues v = it != extras.dijiangs.end() ? it->second : default_dijiang_values(cfg.head_dim());
        check(int64_t(v.log_w.size()) == cfg.head_dim(), "dijiang head (" + std::to_string(l) + ", " +
                                                               std::to_string(h) + "): log_w must be head_dim long");
        const std::string name = p + "dijiang." + std::to_string(h) + ".log_w";
        F* log_w = find_ptr<F>(m.params_, name);
        write_device(m.ops_, log_w, std::vector<F>(v.log_w.begin(), v.log_w.end()));
        hp.dijiangs[size_t(h)] = {log_w, find_ptr<F>(m.grads_, name)};
      } else if (kind == attn::HeadKind::TaylorShift) {
        auto it = extras.taylorshifts.find({l, h});
        const TaylorShiftHeadValues v = it != extras.taylorshifts.end() ? it->second : default_taylorshift_values();
        check(std::isfinite(v.tau), "taylorshift head (" + std::to_string(l) + ", " + std::to_string(h) +
                                        "): tau must be finite");
        const std::string name = p + "taylorshift." + std::to_string(h) + ".tau";
        F* tau = find_ptr<F>(m.params_, name);
        write_device(m.ops_, tau, std::vector<F>{F(v.tau)});
        hp.taylorshifts[size_t(h)] = {tau, find_ptr<F>(m.grads_, name)};
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
      } else if (kind == attn::HeadKind::Performer) {
        const auto& pp = impl_->head_params[size_t(l)].performers[size_t(h)];
        const std::vector<F> W = read_device(ops_, pp.W, int64_t(pp.n_features) * cfg_.head_dim());
        PerformerHeadValues v;
        v.n_features = pp.n_features;
        v.W.assign(W.begin(), W.end());
        ex.performers[{l, h}] = std::move(v);
      } else if (kind == attn::HeadKind::DiJiang) {
        const std::vector<F> w = read_device(ops_, impl_->head_params[size_t(l)].dijiangs[size_t(h)].log_w, cfg_.head_dim());
        ex.dijiangs[{l, h}].log_w.assign(w.begin(), w.end());
      } else if (kind == attn::HeadKind::TaylorShift) {
        const std::vector<F> t = read_device(ops_, impl_->head_params[size_t(l)].taylorshifts[size_t(h)].tau, 1);
        ex.taylorshifts[{l, h}].tau = float(t[0]);
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
