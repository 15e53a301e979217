#include "headwise/model/param_layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "headwise/core/error.hpp"
#include "headwise/model/device_copy.hpp"
#include "model/kinds/valued_kind.hpp"

namespace hw {

std::vector<attn::LayerLayout> build_layouts(const ModelConfig& cfg) {
  std::vector<attn::LayerLayout> layouts;
  for (int l = 0; l < cfg.n_layer; ++l)
    layouts.push_back(attn::LayerLayout::build(cfg.head_plan.layers[static_cast<size_t>(l)], cfg.n_head,
                                               cfg.kv_heads(), cfg.head_dim()));
  return layouts;
}

std::vector<ParamSpec> param_specs(const ModelConfig& cfg, const HeadExtras& extras) {
  const int64_t C = cfg.n_embd, hd = cfg.head_dim();
  const int64_t full_qkv = int64_t(cfg.n_head + 2 * cfg.kv_heads()) * hd;
  const float std = static_cast<float>(cfg.init_std);
  // GPT-2 scales the residual output projections by 1/sqrt(2 * n_layer) (init_residual_scale).
  const float proj_std =
      static_cast<float>(cfg.init_residual_scale ? cfg.init_std / std::sqrt(2.0 * cfg.n_layer) : cfg.init_std);
  const auto layouts = build_layouts(cfg);
  std::vector<ParamSpec> specs;
  auto add = [&](std::string name, std::vector<int64_t> shape, float init_std, float init_value = 0.f,
                 int layer = -1, StorageMap map = StorageMap::Same, std::vector<int64_t> stored = {}) {
    ParamSpec s;
    s.name = std::move(name);
    s.decay = shape.size() >= 2;
    s.stored_shape = stored.empty() ? shape : stored;
    s.shape = std::move(shape);
    s.init_std = init_std;
    s.init_value = init_value;
    s.layer = layer;
    s.map = map;
    specs.push_back(std::move(s));
  };
  add("wte.weight", {cfg.vocab_size, C}, std);
  if (!cfg.rope()) add("wpe.weight", {cfg.block_size, C}, std);
  for (int l = 0; l < cfg.n_layer; ++l) {
    const auto& lay = layouts[static_cast<size_t>(l)];
    const std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {C}, 0.f, 1.f, l);
    if (!cfg.rmsnorm()) add(p + "ln_1.bias", {C}, 0.f, 0.f, l);
    add(layer_matrix_name(l, 0), {C, lay.qkv_width()}, std, 0.f, l, StorageMap::QkvColumns, {C, full_qkv});
    if (cfg.has_qkv_bias())
      add(p + "attn.c_attn.bias", {lay.qkv_width()}, 0.f, 0.f, l, StorageMap::QkvColumns, {full_qkv});
    add(layer_matrix_name(l, 1), {lay.out_width(), C}, proj_std, 0.f, l, StorageMap::OutRows,
        {int64_t(cfg.n_head) * hd, C});
    if (cfg.has_out_bias()) add(p + "attn.c_proj.bias", {C}, 0.f, 0.f, l);
    if (cfg.qk_norm) {  // one weight per head dimension, shared by the heads (Qwen3)
      add(p + "attn.q_norm.weight", {hd}, 0.f, 1.f, l);
      add(p + "attn.k_norm.weight", {hd}, 0.f, 1.f, l);
    }
    add(p + "ln_2.weight", {C}, 0.f, 1.f, l);
    if (!cfg.rmsnorm()) add(p + "ln_2.bias", {C}, 0.f, 0.f, l);
    // SwiGLU's gate and up projections are one [C, 2I] matrix (gate | up columns), like c_attn's q|k|v.
    const int64_t I = cfg.intermediate(), fc = cfg.fc_width();
    add(layer_matrix_name(l, 2), {C, fc}, std, 0.f, l);
    if (cfg.has_mlp_bias()) add(p + "mlp.c_fc.bias", {fc}, 0.f, 0.f, l);
    add(layer_matrix_name(l, 3), {I, C}, proj_std, 0.f, l);
    if (cfg.has_mlp_bias()) add(p + "mlp.c_proj.bias", {C}, 0.f, 0.f, l);
    // Freezing turns every model weight declared so far in this layer into a buffer.
    if (cfg.lora.freeze_base)
      for (auto& sp : specs)
        if (sp.layer == l) {
          sp.role = ParamRole::Buffer;
          sp.frozen = true;
        }
    const auto& plan = cfg.head_plan.layers[static_cast<size_t>(l)];
    const size_t first_head_value = specs.size();
    for (int h = 0; h < cfg.n_head; ++h) {
      const std::string hp = p + "attn.";
      if (plan[static_cast<size_t>(h)].kind == attn::HeadKind::Linear) {
        auto it = extras.linears.find({l, h});
        const int G = it != extras.linears.end() ? it->second.n_groups : 1;
        add(hp + "linear." + std::to_string(h) + ".L", {G + 1, G + 1}, 0.f, 0.f, l);
        add(hp + "linear." + std::to_string(h) + ".groups", {hd}, 0.f, 0.f, l);
        specs.back().role = ParamRole::Buffer;
        specs.back().is_int = true;
      } else if (plan[static_cast<size_t>(h)].kind == attn::HeadKind::Static) {
        for (const char* v : {"alpha", "rho"}) {
          add(hp + "static." + std::to_string(h) + "." + v, {cfg.block_size}, 0.f, 0.f, l);
          specs.back().role = ParamRole::Buffer;
        }
      } else if (const ValuedKind* k = valued_kind(plan[static_cast<size_t>(h)].kind)) {
        // the kind's own tensors (kinds/*.cpp); trained ones without weight decay
        for (const KindTensor& t : k->tensors(cfg, plan[static_cast<size_t>(h)])) {
          add(kind_tensor_name(*k, l, h, t), t.shape, 0.f, t.init_value, l);
          if (!t.trained) specs.back().role = ParamRole::Buffer;
          specs.back().decay = false;
        }
      }
    }
    for (size_t i = first_head_value; i < specs.size(); ++i) specs[i].head_value = true;
    if (cfg.lora.on_layer(l)) {  // after the layer's other tensors: a layer's tensors stay contiguous
      const int64_t r = cfg.lora.rank;
      const int64_t in[kLoraTargets] = {C, C, C, int64_t(cfg.n_head) * hd};  // stored input widths
      const int64_t out_c[kLoraTargets] = {int64_t(lay.n_q) * hd, int64_t(lay.n_k) * hd, int64_t(lay.n_v) * hd, C};
      const int64_t out_s[kLoraTargets] = {int64_t(cfg.n_head) * hd, int64_t(cfg.kv_heads()) * hd,
                                           int64_t(cfg.kv_heads()) * hd, C};
      for (int t = 0; t < kLoraTargets; ++t) {
        const auto target = LoraTarget(t);
        if (!cfg.lora.has(target)) continue;
        if (target == LoraTarget::O)
          add(lora_a_name(l, target), {r, lay.out_width()}, 0.f, 0.f, l, StorageMap::OutColumns, {r, in[t]});
        else
          add(lora_a_name(l, target), {r, C}, 0.f, 0.f, l);
        specs.back().adapter = true;
        specs.back().init_uniform = float(1.0 / std::sqrt(double(in[t])));
        if (target == LoraTarget::O) {
          add(lora_b_name(l, target), {C, r}, 0.f, 0.f, l);
        } else {
          add(lora_b_name(l, target), {out_c[t], r}, 0.f, 0.f, l, StorageMap::QkvRows, {out_s[t], r});
          specs.back().part = QkvPart(t + 1);  // Q, K, V
        }
        specs.back().adapter = true;
      }
    }
  }
  add("ln_f.weight", {C}, 0.f, 1.f);
  if (!cfg.rmsnorm()) add("ln_f.bias", {C}, 0.f, 0.f);
  if (!cfg.tie_word_embeddings) add("lm_head.weight", {cfg.vocab_size, C}, std);
  if (cfg.lora.freeze_base)  // wte, wpe, ln_f, lm_head
    for (auto& sp : specs)
      if (sp.layer < 0) {
        sp.role = ParamRole::Buffer;
        sp.frozen = true;
      }
  return specs;
}

namespace {
constexpr const char* kLayerMatrices[4] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                                           "mlp.c_proj.weight"};
}  // namespace

std::string layer_matrix_name(int layer, int which) {
  return "h." + std::to_string(layer) + "." + kLayerMatrices[which];
}

bool layer_matrix_of(const std::string& name, int n_layer, int* layer, int* which) {
  if (name.rfind("h.", 0) != 0) return false;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos) return false;
  const std::string num = name.substr(2, dot - 2);
  if (num.empty() || num.size() > 6 || num.find_first_not_of("0123456789") != std::string::npos) return false;
  const int l = std::stoi(num);
  if (l >= n_layer || std::to_string(l) != num) return false;
  const std::string rest = name.substr(dot + 1);
  for (int k = 0; k < 4; ++k)
    if (rest == kLayerMatrices[k]) {
      *layer = l;
      *which = k;
      return true;
    }
  return false;
}

std::string lora_a_name(int layer, LoraTarget t) {
  return "h." + std::to_string(layer) + ".attn." + lora_target_name(t) + ".lora_A";
}
std::string lora_b_name(int layer, LoraTarget t) {
  return "h." + std::to_string(layer) + ".attn." + lora_target_name(t) + ".lora_B";
}

std::vector<Segment> qkv_segments(const attn::LayerLayout& lay) {
  std::vector<Segment> segs;
  const int64_t hd = lay.head_dim, H = lay.n_head, KV = lay.n_kv_head;
  for (int h = 0; h < lay.n_head; ++h)
    if (lay.q_slot[static_cast<size_t>(h)] >= 0) segs.push_back({h * hd, lay.q_col(h), hd});
  for (int g = 0; g < lay.n_kv_head; ++g)
    if (lay.k_slot[static_cast<size_t>(g)] >= 0) segs.push_back({(H + g) * hd, lay.k_col(g), hd});
  for (int g = 0; g < lay.n_kv_head; ++g)
    if (lay.v_slot[static_cast<size_t>(g)] >= 0) segs.push_back({(H + KV + g) * hd, lay.v_col(g), hd});
  return segs;
}

std::vector<Segment> out_segments(const attn::LayerLayout& lay) {
  std::vector<Segment> segs;
  for (int h = 0; h < lay.n_head; ++h)
    if (lay.o_slot[static_cast<size_t>(h)] >= 0)
      segs.push_back({int64_t(h) * lay.head_dim, lay.out_col(h), lay.head_dim});
  return segs;
}

std::vector<Segment> part_segments(const attn::LayerLayout& lay, QkvPart part) {
  check(part != QkvPart::All, "internal: part_segments needs the q, k or v block");
  const int64_t hd = lay.head_dim, H = lay.n_head, KV = lay.n_kv_head;
  // Where the block starts, stored (Hugging Face q | k | v columns) and compact.
  const int64_t stored0 = part == QkvPart::Q ? 0 : part == QkvPart::K ? H * hd : (H + KV) * hd;
  const int64_t compact0 = part == QkvPart::Q ? 0 : part == QkvPart::K ? lay.n_q * hd : int64_t(lay.n_q + lay.n_k) * hd;
  const int64_t stored_end = part == QkvPart::Q ? H * hd : part == QkvPart::K ? (H + KV) * hd : (H + 2 * KV) * hd;
  std::vector<Segment> segs;
  for (const auto& sg : qkv_segments(lay))
    if (sg.stored >= stored0 && sg.stored < stored_end) segs.push_back({sg.stored - stored0, sg.compact - compact0, sg.width});
  return segs;
}

int64_t stored_numel(const ParamSpec& spec) {
  int64_t n = 1;
  for (int64_t d : spec.stored_shape) n *= d;
  return n;
}

namespace {
int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Copy along the mapped dimension. `to_stored` chooses the direction.
template <class F, class S>
void copy_mapped(const ParamSpec& spec, const attn::LayerLayout* layout, S* stored, F* compact, bool to_stored) {
  auto move = [&](int64_t s, int64_t c) {
    if (to_stored)
      stored[s] = static_cast<S>(compact[c]);
    else
      compact[c] = static_cast<F>(stored[s]);
  };
  if (spec.map == StorageMap::Same) {
    const int64_t n = numel_of(spec.shape);
    for (int64_t i = 0; i < n; ++i) move(i, i);
    return;
  }
  check(layout != nullptr, "internal: tensor '" + spec.name + "' needs its layer layout");
  if (spec.map == StorageMap::QkvColumns) {
    const auto segs = qkv_segments(*layout);
    const int64_t rows = spec.shape.size() == 2 ? spec.shape[0] : 1;
    const int64_t sw = spec.stored_shape.back(), cw = spec.shape.back();
    for (int64_t r = 0; r < rows; ++r)
      for (const auto& sg : segs)
        for (int64_t i = 0; i < sg.width; ++i) move(r * sw + sg.stored + i, r * cw + sg.compact + i);
  } else if (spec.map == StorageMap::OutRows) {
    const int64_t cols = spec.shape[1];
    for (const auto& sg : out_segments(*layout))
      for (int64_t r = 0; r < sg.width; ++r)
        for (int64_t c = 0; c < cols; ++c) move((sg.stored + r) * cols + c, (sg.compact + r) * cols + c);
  } else if (spec.map == StorageMap::QkvRows) {
    const int64_t cols = spec.shape[1];
    for (const auto& sg : part_segments(*layout, spec.part))
      for (int64_t r = 0; r < sg.width; ++r)
        for (int64_t c = 0; c < cols; ++c) move((sg.stored + r) * cols + c, (sg.compact + r) * cols + c);
  } else {  // OutColumns
    const int64_t rows = spec.shape[0], sw = spec.stored_shape[1], cw = spec.shape[1];
    for (int64_t r = 0; r < rows; ++r)
      for (const auto& sg : out_segments(*layout))
        for (int64_t i = 0; i < sg.width; ++i) move(r * sw + sg.stored + i, r * cw + sg.compact + i);
  }
}
}  // namespace

template <class F, class S>
void compact_from_stored(const ParamSpec& spec, const attn::LayerLayout* layout, const S* stored, F* compact) {
  copy_mapped(spec, layout, const_cast<S*>(stored), compact, /*to_stored=*/false);
}

template <class F, class S>
void stored_from_compact(const ParamSpec& spec, const attn::LayerLayout* layout, const F* compact, S* stored) {
  std::memset(stored, 0, sizeof(S) * static_cast<size_t>(stored_numel(spec)));
  copy_mapped(spec, layout, stored, const_cast<F*>(compact), /*to_stored=*/true);
}

template <class F>
void remap_arena(const Backend<F>& ops, const Arena& from, const std::vector<ParamSpec>& from_specs,
                 const std::vector<attn::LayerLayout>& from_layouts, Arena& to, const std::vector<ParamSpec>& to_specs,
                 const std::vector<attn::LayerLayout>& to_layouts) {
  auto layout_of = [](const std::vector<attn::LayerLayout>& ls, int l) {
    return l >= 0 ? &ls[static_cast<size_t>(l)] : nullptr;
  };
  std::vector<F> src_host, dst_host;
  for (const auto& ts : to_specs) {
    Tensor* dst = to.find(ts.name);
    const Tensor* src = from.find(ts.name);
    if (!dst || !src) continue;
    const ParamSpec* fs = nullptr;
    for (const auto& s : from_specs)
      if (s.name == ts.name) fs = &s;
    if (!fs || fs->stored_shape != ts.stored_shape) continue;  // e.g. a linear head's L with another G
    if (ts.is_int) {
      std::vector<int32_t> ints = read_device(ops, src->i32(), src->numel());
      write_device(ops, dst->i32(), ints);
      continue;
    }
    read_device(ops, src->as<F>(), src->numel(), src_host);
    dst_host.resize(static_cast<size_t>(dst->numel()));
    std::vector<double> stored(static_cast<size_t>(stored_numel(ts)));
    stored_from_compact(*fs, layout_of(from_layouts, fs->layer), src_host.data(), stored.data());
    compact_from_stored(ts, layout_of(to_layouts, ts.layer), stored.data(), dst_host.data());
    write_device(ops, dst->as<F>(), dst_host);
  }
}

namespace {

// Whether a tensor has the same compact form under both layouts (then its memory is copied as is).
bool same_compact(const ParamSpec& a, const attn::LayerLayout* la, const ParamSpec& b, const attn::LayerLayout* lb) {
  if (a.shape != b.shape || a.map != b.map || a.part != b.part) return false;
  switch (a.map) {
    case StorageMap::Same: return true;
    case StorageMap::QkvColumns: return la && lb && qkv_segments(*la) == qkv_segments(*lb);
    case StorageMap::OutRows:
    case StorageMap::OutColumns: return la && lb && out_segments(*la) == out_segments(*lb);
    case StorageMap::QkvRows: return la && lb && part_segments(*la, a.part) == part_segments(*lb, b.part);
  }
  return false;
}

}  // namespace

template <class F>
void move_arena_values(const Backend<F>& ops, Arena& from, const std::vector<ParamSpec>& from_specs,
                       const std::vector<attn::LayerLayout>& from_layouts, Arena& to,
                       const std::vector<ParamSpec>& to_specs, const std::vector<attn::LayerLayout>& to_layouts) {
  if (ops.device() != Device::CPU || from.device() != Device::CPU || to.device() != Device::CPU)
    return remap_arena(ops, from, from_specs, from_layouts, to, to_specs, to_layouts);
  auto layout_of = [](const std::vector<attn::LayerLayout>& ls, int l) {
    return l >= 0 ? &ls[static_cast<size_t>(l)] : nullptr;
  };
  std::vector<double> stored;
  for (const auto& ts : to_specs) {
    Tensor* dst = to.find(ts.name);
    Tensor* src = from.find(ts.name);
    if (!dst || !src || src->nbytes() == 0) continue;
    const ParamSpec* fs = nullptr;
    for (const auto& s : from_specs)
      if (s.name == ts.name) fs = &s;
    if (!fs || fs->stored_shape != ts.stored_shape) continue;  // e.g. a linear head's L with another G
    const attn::LayerLayout *lf = layout_of(from_layouts, fs->layer), *lt = layout_of(to_layouts, ts.layer);
    if (ts.is_int || same_compact(*fs, lf, ts, lt)) {
      // Piece by piece, each piece's source pages given back once it is across.
      constexpr size_t kPiece = size_t(64) << 20;
      char* s = static_cast<char*>(src->data);
      char* d = static_cast<char*>(dst->data);
      for (size_t o = 0; o < src->nbytes(); o += kPiece) {
        const size_t k = std::min(kPiece, src->nbytes() - o);
        std::memcpy(d + o, s + o, k);
        from.discard_bytes(s + o, k);
      }
      continue;
    }
    // Another compact form (an attention tensor whose heads changed kind): through its stored form.
    stored.assign(static_cast<size_t>(stored_numel(ts)), 0.0);
    stored_from_compact(*fs, lf, src->as<F>(), stored.data());
    compact_from_stored(ts, lt, stored.data(), dst->as<F>());
    from.discard(*src);
  }
}

#define HW_INSTANTIATE(F, S)                                                                                  \
  template void compact_from_stored<F, S>(const ParamSpec&, const attn::LayerLayout*, const S*, F*);        \
  template void stored_from_compact<F, S>(const ParamSpec&, const attn::LayerLayout*, const F*, S*);
HW_INSTANTIATE(float, float)
HW_INSTANTIATE(float, double)
HW_INSTANTIATE(double, float)
HW_INSTANTIATE(double, double)
#undef HW_INSTANTIATE
#define HW_INSTANTIATE_REMAP(F)                                                                            \
  template void remap_arena<F>(const Backend<F>&, const Arena&, const std::vector<ParamSpec>&,              \
                               const std::vector<attn::LayerLayout>&, Arena&, const std::vector<ParamSpec>&, \
                               const std::vector<attn::LayerLayout>&);
HW_INSTANTIATE_REMAP(float)
HW_INSTANTIATE_REMAP(double)
template void move_arena_values<float>(const Backend<float>&, Arena&, const std::vector<ParamSpec>&,
                                       const std::vector<attn::LayerLayout>&, Arena&, const std::vector<ParamSpec>&,
                                       const std::vector<attn::LayerLayout>&);
template void move_arena_values<double>(const Backend<double>&, Arena&, const std::vector<ParamSpec>&,
                                        const std::vector<attn::LayerLayout>&, Arena&, const std::vector<ParamSpec>&,
                                        const std::vector<attn::LayerLayout>&);
#undef HW_INSTANTIATE_REMAP

}  // namespace hw
