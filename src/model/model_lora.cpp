// LoRA adapters in the step: their contributions to a layer's q|k|v columns (added before RoPE,
// like the projection they adapt) and to its attention output projection, and the backward of
// both. u = scaling * dropout(x) A^T is kept per adapter for B's gradient; the dropped-out input
// is recomputed in backward from the same seed instead of being stored. Full precision only
// (Model refuses adapters under bf16), so these run on the backend itself (ComputeOps<F, F>).
#include <string>

#include "data/seed_mix.hpp"
#include "model/model_impl.hpp"

namespace hw {

namespace {

struct QkvBlock {
  int64_t col0 = 0, width = 0;  // in the layer's compact q|k|v columns
};

QkvBlock qkv_block(const attn::LayerLayout& lay, LoraTarget t) {
  const int64_t hd = lay.head_dim;
  switch (t) {
    case LoraTarget::Q: return {0, lay.n_q * hd};
    case LoraTarget::K: return {lay.n_q * hd, lay.n_k * hd};
    default: return {int64_t(lay.n_q + lay.n_k) * hd, lay.n_v * hd};
  }
}

}  // namespace

template <class F>
uint64_t Model<F>::lora_dropout_seed(int l, int site) const {
  return data::derive_seed(dropout_seed_, data::Stream::LoraDropout, uint64_t(2 * l + site));
}

// The model's own dropout sites: the embeddings (l = -1, site 0), and layer l's attention (1) and
// MLP (2) output projections.
template <class F>
uint64_t Model<F>::dropout_site_seed(int l, int site) const {
  return data::derive_seed(dropout_seed_, data::Stream::ModelDropout, uint64_t(3 * (int64_t(l) + 1) + site));
}

template <class F>
double Model<F>::dropping(double rate) const {
  return dropout_on_ ? rate : 0.0;
}

// The adapter's input: x itself, or its dropped-out copy in the scratch buffer (training only).
template <class F>
const F* Model<F>::lora_input(const F* x, int64_t n, int l, int site) {
  const double p = cfg_.lora.dropout;
  if (!dropout_on_ || p == 0.0) return x;
  F* dropped = impl_->full.lora_x;
  ops_.dropout(dropped, x, n, p, lora_dropout_seed(l, site));
  return dropped;
}

template <class F>
void Model<F>::lora_qkv_forward(int l) {
  auto& S = impl_->full;
  const auto& W = impl_->w.layers[size_t(l)];
  const auto& Ac = S.layers[size_t(l)];
  const auto& lay = layouts_[size_t(l)];
  const int64_t N = B_ * T_, C = cfg_.n_embd, r = cfg_.lora.rank;
  const F* x = lora_input(Ac.ln1, N * C, l, 0);
  for (int t = 0; t < 3; ++t) {
    if (!W.lora_a[size_t(t)]) continue;
    F* u = Ac.lora_u[size_t(t)];
    ops_.matmul_forward(u, x, W.lora_a[size_t(t)], nullptr, N, C, r, /*w_out_in=*/true);
    ops_.scale(u, F(cfg_.lora.scaling()), N * r);
    const QkvBlock b = qkv_block(lay, LoraTarget(t));
    ops_.matmul_forward(S.lora_out, u, W.lora_b[size_t(t)], nullptr, N, r, b.width, /*w_out_in=*/true);
    ops_.add_columns(Ac.qkv, lay.qkv_width(), b.col0, S.lora_out, N, b.width);
  }
}

template <class F>
void Model<F>::lora_out_forward(int l) {
  auto& S = impl_->full;
  const auto& W = impl_->w.layers[size_t(l)];
  const auto& Ac = S.layers[size_t(l)];
  const int64_t N = B_ * T_, C = cfg_.n_embd, r = cfg_.lora.rank, ow = layouts_[size_t(l)].out_width();
  const size_t o = size_t(LoraTarget::O);
  const F* x = lora_input(Ac.atty, N * ow, l, 1);
  F* u = Ac.lora_u[o];
  ops_.matmul_forward(u, x, W.lora_a[o], nullptr, N, ow, r, /*w_out_in=*/true);
  ops_.scale(u, F(cfg_.lora.scaling()), N * r);
  ops_.matmul_forward(S.lora_out, u, W.lora_b[o], nullptr, N, r, C, /*w_out_in=*/true);
  ops_.accumulate(Ac.resid2, S.lora_out, N * C);
}

// dx = (scaling * dout B) A through the dropout mask, accumulated into dx_target; dA and dB into
// the gradients. `dout` is the adapter output's gradient [N, width].
template <class F>
void Model<F>::lora_adapter_backward(int l, int t, const F* dout, int64_t width, const F* x, int64_t in,
                                     F* dx) {
  auto& S = impl_->full;
  const auto& W = impl_->w.layers[size_t(l)];
  const auto& G = impl_->g.layers[size_t(l)];
  const int64_t N = B_ * T_, r = cfg_.lora.rank;
  ops_.fill_zero(S.lora_du, N * r);
  ops_.matmul_backward(S.lora_du, G.lora_b[size_t(t)], nullptr, dout, S.layers[size_t(l)].lora_u[size_t(t)],
                       W.lora_b[size_t(t)], N, r, width, /*w_out_in=*/true);
  ops_.scale(S.lora_du, F(cfg_.lora.scaling()), N * r);
  ops_.matmul_backward(dx, G.lora_a[size_t(t)], nullptr, S.lora_du, x, W.lora_a[size_t(t)], N, in, r,
                       /*w_out_in=*/true);
}

// Without dropout the adapters' input gradient goes straight into dinp; with it, through the
// scratch buffer and the mask (the dropout op is its own backward).
template <class F>
void Model<F>::lora_input_backward(F* dinp, int64_t n, int l, int site) {
  auto& S = impl_->full;
  ops_.dropout(S.lora_out, S.lora_dx, n, cfg_.lora.dropout, lora_dropout_seed(l, site));
  ops_.accumulate(dinp, S.lora_out, n);
}

template <class F>
void Model<F>::lora_out_backward(int l, const F* dout) {
  auto& S = impl_->full;
  const auto& Ac = S.layers[size_t(l)];
  const int64_t N = B_ * T_, C = cfg_.n_embd, ow = layouts_[size_t(l)].out_width();
  const bool dropped = dropout_on_ && cfg_.lora.dropout > 0.0;
  const F* x = lora_input(Ac.atty, N * ow, l, 1);
  if (dropped) ops_.fill_zero(S.lora_dx, N * ow);
  lora_adapter_backward(l, int(LoraTarget::O), dout, C, x, ow, dropped ? S.lora_dx : S.datty);
  if (dropped) lora_input_backward(S.datty, N * ow, l, 1);
}

template <class F>
void Model<F>::lora_qkv_backward(int l) {
  auto& S = impl_->full;
  const auto& W = impl_->w.layers[size_t(l)];
  const auto& Ac = S.layers[size_t(l)];
  const auto& lay = layouts_[size_t(l)];
  const int64_t N = B_ * T_, C = cfg_.n_embd;
  const bool dropped = dropout_on_ && cfg_.lora.dropout > 0.0;
  const F* x = lora_input(Ac.ln1, N * C, l, 0);
  if (dropped) ops_.fill_zero(S.lora_dx, N * C);
  for (int t = 0; t < 3; ++t) {
    if (!W.lora_a[size_t(t)]) continue;
    const QkvBlock b = qkv_block(lay, LoraTarget(t));
    ops_.copy_columns(S.lora_out, S.dqkv, lay.qkv_width(), b.col0, N, b.width);
    lora_adapter_backward(l, t, S.lora_out, b.width, x, C, dropped ? S.lora_dx : S.dln);
  }
  if (dropped) lora_input_backward(S.dln, N * C, l, 0);
}

#define HW_INSTANTIATE(F)                                                                              \
  template uint64_t Model<F>::lora_dropout_seed(int, int) const;                                       \
  template uint64_t Model<F>::dropout_site_seed(int, int) const;                                       \
  template double Model<F>::dropping(double) const;                                                    \
  template const F* Model<F>::lora_input(const F*, int64_t, int, int);                                 \
  template void Model<F>::lora_qkv_forward(int);                                                       \
  template void Model<F>::lora_out_forward(int);                                                       \
  template void Model<F>::lora_adapter_backward(int, int, const F*, int64_t, const F*, int64_t, F*); \
  template void Model<F>::lora_input_backward(F*, int64_t, int, int);                                  \
  template void Model<F>::lora_out_backward(int, const F*);                                             \
  template void Model<F>::lora_qkv_backward(int);
HW_INSTANTIATE(float)
HW_INSTANTIATE(double)
#undef HW_INSTANTIATE

}  // namespace hw
