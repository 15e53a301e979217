#include "headwise/methods/oal/capture.hpp"

#include <algorithm>
#include <string>

#include "headwise/calibration/window_stream.hpp"
#include "headwise/core/error.hpp"
#include "headwise/model/device_copy.hpp"

namespace hw::oal {

int CapturedQkv::slot_of(int layer) const {
  for (size_t s = 0; s < layers.size(); ++s)
    if (layers[s] == layer) return int(s);
  return -1;
}

CapturedQkv capture_qkv(Model<float>& model, const SequenceSource& source, const std::vector<int64_t>& indices, int T,
                        int batch, const std::vector<int>& layers) {
  const ModelConfig& mc = model.config();
  check(T >= 1 && T <= mc.block_size, "OAL capture: sequence length " + std::to_string(T) +
                                          " is outside [1, model.block_size = " + std::to_string(mc.block_size) + "]");
  check(batch >= 1 && !indices.empty(), "OAL capture: no sequences");
  for (int l : layers)
    check(l >= 0 && l < mc.n_layer, "OAL capture: layer " + std::to_string(l) + " is outside the model");
  CapturedQkv c;
  c.T = T;
  c.layers = layers;
  c.qkv.assign(layers.size(), std::vector<std::vector<float>>(indices.size()));
  const int64_t B = std::min<int64_t>(batch, int64_t(indices.size()));
  std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T));
  std::vector<float> all;
  for (size_t start = 0; start < indices.size(); start += size_t(B)) {
    const int64_t real = std::min<int64_t>(B, int64_t(indices.size() - start));
    for (int64_t r = 0; r < B; ++r)  // a short last batch repeats its first row (not kept)
      source(indices[start + size_t(r < real ? r : 0)], in.data() + r * T, tg.data() + r * T);
    model.forward(in.data(), nullptr, B, T);
    for (size_t s = 0; s < layers.size(); ++s) {
      const int64_t W = model.layouts()[size_t(layers[s])].qkv_width();
      model.read_layer_qkv(layers[s], all);
      for (int64_t r = 0; r < real; ++r)
        c.qkv[s][start + size_t(r)].assign(all.begin() + r * T * W, all.begin() + (r + 1) * T * W);
    }
  }
  return c;
}

void stream_qkv(Model<float>& model, const SequenceSource& source, const std::vector<int64_t>& indices, int T,
                int batch, const std::vector<int>& layers, const std::function<void(const CapturedQkv&)>& each) {
  const ModelConfig& mc = model.config();
  check(T >= 1 && T <= mc.block_size, "OAL capture: sequence length " + std::to_string(T) +
                                          " is outside [1, model.block_size = " + std::to_string(mc.block_size) + "]");
  check(batch >= 1 && !indices.empty(), "OAL capture: no sequences");
  for (size_t s = 0; s < layers.size(); ++s)
    check(layers[s] >= 0 && layers[s] < mc.n_layer && (s == 0 || layers[s] > layers[s - 1]),
          "OAL capture: layer " + std::to_string(layers[s]) + " is outside the model or out of order");
  const int64_t B = std::min<int64_t>(batch, int64_t(indices.size()));
  std::vector<std::vector<int32_t>> batches;
  std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T));
  for (size_t start = 0; start < indices.size(); start += size_t(B)) {
    const int64_t real = std::min<int64_t>(B, int64_t(indices.size() - start));
    for (int64_t r = 0; r < B; ++r)  // a short last batch repeats its first row (not kept)
      source(indices[start + size_t(r < real ? r : 0)], in.data() + r * T, tg.data() + r * T);
    batches.push_back(in);
  }
  WindowStream stream(model, B, T, std::move(batches));
  for (int l : layers) {
    CapturedQkv c;
    c.T = T;
    c.layers = {l};
    c.qkv.assign(1, std::vector<std::vector<float>>(indices.size()));
    stream.advance(l, {});
    const auto keep = [&](int, size_t b, const std::vector<float>& qkv) {
      const int64_t W = model.layouts()[size_t(l)].qkv_width();
      const size_t start = b * size_t(B);
      const int64_t real = std::min<int64_t>(B, int64_t(indices.size() - start));
      for (int64_t r = 0; r < real; ++r)
        c.qkv[0][start + size_t(r)].assign(qkv.begin() + r * T * W, qkv.begin() + (r + 1) * T * W);
    };
    if (l == layers.back())
      stream.visit_qkv(keep);  // nothing reads beyond this layer's QKV
    else
      stream.advance(l + 1, keep);
    each(c);
  }
}

HeadRows head_rows(const Model<float>& model, const CapturedQkv& c, int slot, int seq, int h) {
  const auto& lay = model.layouts()[size_t(c.layers[size_t(slot)])];
  const int64_t W = lay.qkv_width();
  const float* rows = c.qkv[size_t(slot)][size_t(seq)].data();
  const int g = lay.kv_head_of(h);
  HeadRows r;
  r.q = rows + lay.q_col(h);
  r.k = rows + lay.k_col(g);
  r.v = rows + lay.v_col(g);
  r.q_stride = r.k_stride = r.v_stride = W;
  r.T = c.T;
  r.d = lay.head_dim;
  return r;
}

std::vector<double> out_projection(const Model<float>& model, int l) {
  const std::string name = "h." + std::to_string(l) + ".attn.c_proj.weight";
  const Tensor* t = model.params().find(name);
  if (!t) t = model.buffers().find(name);
  check(t != nullptr, "OAL: the model has no tensor " + name);
  const std::vector<float> w = read_device(model.ops(), t->f32(), t->numel());
  return std::vector<double>(w.begin(), w.end());
}

std::vector<HeadContribution> contributions(const Model<float>& model, const CapturedQkv& c) {
  const ModelConfig& mc = model.config();
  std::vector<HeadContribution> out;
  for (size_t s = 0; s < c.layers.size(); ++s)
    for (int h = 0; h < mc.n_head; ++h) {
      if (mc.head_plan.layers[size_t(c.layers[s])][size_t(h)].kind != attn::HeadKind::Softmax) continue;
      HeadContribution hc;
      hc.layer = c.layers[s];
      hc.head = h;
      hc.kv_head = model.layouts()[size_t(hc.layer)].kv_head_of(h);
      const int d = mc.head_dim();
      hc.mean_abs_q.assign(size_t(d), 0.0);
      hc.mean_abs_k.assign(size_t(d), 0.0);
      const size_t P = c.qkv[s].size();
      for (size_t p = 0; p < P; ++p) {
        const HeadRows r = head_rows(model, c, int(s), int(p), h);
        std::vector<double> chi(static_cast<size_t>(d));
        prompt_contribution(r.q, r.q_stride, r.k, r.k_stride, r.T, d, chi.data());
        hc.per_prompt.push_back(std::move(chi));
        add_mean_abs(r.q, r.q_stride, r.T, d, hc.mean_abs_q.data());
        add_mean_abs(r.k, r.k_stride, r.T, d, hc.mean_abs_k.data());
      }
      for (int r = 0; r < d; ++r) {
        hc.mean_abs_q[size_t(r)] /= double(P);
        hc.mean_abs_k[size_t(r)] /= double(P);
      }
      out.push_back(std::move(hc));
    }
  return out;
}

}  // namespace hw::oal
