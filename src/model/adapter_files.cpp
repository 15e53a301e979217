#include "headwise/model/adapter_files.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/model/device_copy.hpp"
#include "headwise/model/peft_config.hpp"
#include "model/family/family.hpp"

namespace hw {

namespace {

const ModelFamily& family_of(const ModelConfig& cfg) { return family_named(cfg.family); }

// PEFT's name of matrix A or B of the adapter on layer l's module that holds target t (the
// family names the module).
std::string peft_name(const ModelConfig& cfg, int l, LoraTarget t, const char* matrix) {
  return "base_model.model." + lora_module(family_of(cfg), l, t).name + ".lora_" + matrix + ".weight";
}

const ParamSpec& spec_named(const Model<float>& model, const std::string& name) {
  for (const auto& s : model.specs())
    if (s.name == name) return s;
  fail("internal: model has no tensor '" + name + "'");
}

// A tensor's values in its stored (Hugging Face) shape, and back.
std::vector<float> stored_values(const Model<float>& model, const std::string& name) {
  const ParamSpec& s = spec_named(model, name);
  const Tensor* t = model.params().find(name);
  check(t != nullptr, "internal: model has no adapter '" + name + "'");
  std::vector<float> compact = read_device(model.ops(), t->f32(), t->numel());
  std::vector<float> stored(size_t(stored_numel(s)));
  stored_from_compact(s, &model.layouts()[size_t(s.layer)], compact.data(), stored.data());
  return stored;
}

void write_stored(Model<float>& model, const std::string& name, const std::vector<float>& stored) {
  const ParamSpec& s = spec_named(model, name);
  Tensor& t = model.params().get(name);
  std::vector<float> compact(size_t(t.numel()));
  compact_from_stored(s, &model.layouts()[size_t(s.layer)], stored.data(), compact.data());
  write_device(model.ops(), t.f32(), compact);
}

// The targeted q, k, v blocks of c_attn: stored row offset and height of each.
struct QkvTargets {
  std::vector<LoraTarget> targets;
  std::vector<int64_t> row0, rows;
};

QkvTargets qkv_targets(const ModelConfig& cfg) {
  const int64_t hd = cfg.head_dim(), H = cfg.n_head, KV = cfg.kv_heads();
  const int64_t row0[3] = {0, H * hd, (H + KV) * hd}, rows[3] = {H * hd, KV * hd, KV * hd};
  QkvTargets q;
  for (int t = 0; t < 3; ++t)
    if (cfg.lora.has(LoraTarget(t))) {
      q.targets.push_back(LoraTarget(t));
      q.row0.push_back(row0[t]);
      q.rows.push_back(rows[t]);
    }
  return q;
}

// A family whose q, k, v and o are modules apart (the Llama family: nn.Linear q_proj, k_proj,
// v_proj, o_proj): one PEFT adapter per targeted projection, under PEFT's own names, A [r, in]
// and B [out, r] as stored (no packing, fan_in_fan_out false).
bool separate_projections(const ModelConfig& cfg) { return !family_of(cfg).fused_qkv; }

// adapter_config.json as PEFT writes it for a LoRA on `modules`; the family's layers_pattern
// (the name of the model's layer list) is used when only some layers have adapters. A fused
// q|k|v family's weights are Conv1D's [in, out] (fan_in_fan_out).
nlohmann::json peft_config(const ModelConfig& cfg, const nlohmann::json& modules) {
  const LoraConfig& lora = cfg.lora;
  const ModelFamily& family = family_of(cfg);
  nlohmann::json j = {{"peft_type", "LORA"},
                      {"task_type", "CAUSAL_LM"},
                      {"base_model_name_or_path", nullptr},
                      {"r", lora.rank},
                      {"lora_alpha", lora.alpha},
                      {"lora_dropout", lora.dropout},
                      {"target_modules", modules},
                      {"fan_in_fan_out", family.fused_qkv},
                      {"bias", "none"},
                      {"use_rslora", false},
                      {"init_lora_weights", true},
                      {"modules_to_save", nullptr},
                      {"rank_pattern", nlohmann::json::object()},
                      {"alpha_pattern", nlohmann::json::object()},
                      {"layers_to_transform", nullptr},
                      {"layers_pattern", nullptr}};
  if (!lora.layers.empty()) {
    j["layers_to_transform"] = lora.layers;
    j["layers_pattern"] = family.layers_pattern;
  }
  return j;
}

void save_per_projection_adapters(const Model<float>& model, const std::string& dir) {
  const ModelConfig& cfg = model.config();
  const LoraConfig& lora = cfg.lora;
  io::SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_metadata("producer", "headwise");
  nlohmann::json modules = nlohmann::json::array();
  for (int t = 0; t < kLoraTargets; ++t)
    if (lora.has(LoraTarget(t))) modules.push_back(lora_module(family_of(cfg), 0, LoraTarget(t)).peft_key);
  for (int l = 0; l < cfg.n_layer; ++l) {
    if (!lora.on_layer(l)) continue;
    for (int t = 0; t < kLoraTargets; ++t) {
      if (!lora.has(LoraTarget(t))) continue;
      for (const char* matrix : {"A", "B"}) {
        const std::string name = matrix[0] == 'A' ? lora_a_name(l, LoraTarget(t)) : lora_b_name(l, LoraTarget(t));
        const std::vector<float> v = stored_values(model, name);
        w.add(peft_name(cfg, l, LoraTarget(t), matrix), DType::F32, spec_named(model, name).stored_shape, v.data());
      }
    }
  }
  w.write(dir + "/" + kAdapterWeightsFile);
  nlohmann::json j = peft_config(cfg, modules);
  io::write_file_atomic(dir + "/" + kAdapterConfigFile, j.dump(2) + "\n");
}

void load_per_projection_adapters(Model<float>& model, const std::string& dir) {
  const ModelConfig& cfg = model.config();
  const LoraConfig& lora = cfg.lora;
  const std::string path = dir + "/" + kAdapterWeightsFile;
  io::SafetensorsReader st(path);
  size_t expected = 0;
  for (int l = 0; l < cfg.n_layer; ++l) {
    if (!lora.on_layer(l)) continue;
    for (int t = 0; t < kLoraTargets; ++t) {
      if (!lora.has(LoraTarget(t))) continue;
      for (const char* matrix : {"A", "B"}) {
        const std::string name = matrix[0] == 'A' ? lora_a_name(l, LoraTarget(t)) : lora_b_name(l, LoraTarget(t));
        const std::vector<int64_t>& shape = spec_named(model, name).stored_shape;
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::vector<float> v(static_cast<size_t>(n));
        st.read(peft_name(cfg, l, LoraTarget(t), matrix), DType::F32, shape, v.data());
        write_stored(model, name, v);
        ++expected;
      }
    }
  }
  check(st.names().size() == expected, path + ": holds " + std::to_string(st.names().size()) +
                                           " tensors, but config.json's model.lora describes " +
                                           std::to_string(expected));
}

// An adapter directory described by PEFT's adapter_config.json (peft_config.hpp): every module it
// names, at its own rank and scaling, into the model's adapters (the largest rank, zero-padded;
// the module's scaling folded into B). Adapters the file has no module for stay zero.
void load_peft_adapters(Model<float>& model, const std::string& dir) {
  const ModelConfig& cfg = model.config();
  const LoraConfig& lora = cfg.lora;
  const PeftAdapters pa = read_peft_adapters(dir, cfg);
  const std::string path = dir + "/" + kAdapterWeightsFile;
  check(pa.lora.rank == lora.rank && pa.lora.targets == lora.targets && pa.lora.layers == lora.layers &&
            std::abs(pa.lora.alpha - lora.alpha) <= 1e-12 * std::abs(lora.alpha),
        pa.path + " describes LoRA " + pa.lora.to_json().dump() + ", but the model holds " + lora.to_json().dump());
  io::SafetensorsReader st(path);
  const int64_t C = cfg.n_embd, R = lora.rank, hd = cfg.head_dim(), H = cfg.n_head, KV = cfg.kv_heads();
  const int64_t qkv_rows[3] = {H * hd, KV * hd, KV * hd}, qkv_row0[3] = {0, H * hd, (H + KV) * hd};
  const int64_t full_qkv = (H + 2 * KV) * hd;
  // Zeros first: layers and targets the file has no module for.
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int t = 0; t < kLoraTargets; ++t)
      if (lora.on_layer(l) && lora.has(LoraTarget(t)))
        for (const bool a : {true, false}) {
          const std::string name = a ? lora_a_name(l, LoraTarget(t)) : lora_b_name(l, LoraTarget(t));
          write_stored(model, name, std::vector<float>(size_t(stored_numel(spec_named(model, name))), 0.f));
        }
  std::set<std::string> used;
  auto read = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    st.read_f32(name, shape, v.data());  // F32, BF16, F16 or F64 in the file
    used.insert(name);
    return v;
  };
  // A [r, in] and B [rows, r] of one module into target t: rows [row0, row0 + rows) of B, padded to R.
  auto put = [&](int l, LoraTarget t, const std::vector<float>& A, const std::vector<float>& B, int64_t r, int64_t in,
                 int64_t b_cols, int64_t row0, int64_t rows, int64_t col0, double factor) {
    std::vector<float> a(size_t(R * in), 0.f), b(size_t(rows * R), 0.f);
    std::copy(A.begin() + col0 * in, A.begin() + (col0 + r) * in, a.begin());
    for (int64_t o = 0; o < rows; ++o)
      for (int64_t k = 0; k < r; ++k) b[size_t(o * R + k)] = float(B[size_t((row0 + o) * b_cols + col0 + k)] * factor);
    write_stored(model, lora_a_name(l, t), a);
    write_stored(model, lora_b_name(l, t), b);
  };
  for (const PeftModule& m : pa.modules) {
    const std::string p = "base_model.model." + m.module + ".lora_";
    const double factor = m.scaling / lora.scaling();
    const int64_t r = m.rank;
    if (!separate_projections(cfg) && m.target == LoraTarget::Q) {  // GPT-2's fused c_attn
      const std::vector<float> A = read(p + "A.weight", {r, C}), B = read(p + "B.weight", {full_qkv, r});
      if (pa.packed_c_attn) {  // headwise's own: one rank-R block per targeted projection
        int i = 0;
        for (int t = 0; t < 3; ++t) {
          if (!lora.has(LoraTarget(t))) continue;
          put(m.layer, LoraTarget(t), A, B, R, C, r, qkv_row0[t], qkv_rows[t], i * R, factor);
          ++i;
        }
        std::vector<int> block_target;  // the targeted projection of each column block of B
        for (int t = 0; t < 3; ++t)
          if (lora.has(LoraTarget(t))) block_target.push_back(t);
        for (int64_t row = 0; row < full_qkv; ++row)
          for (int64_t col = 0; col < r; ++col) {
            const size_t blk = size_t(col / R);
            const int t = blk < block_target.size() ? block_target[blk] : -1;
            const bool inside = t >= 0 && row >= qkv_row0[t] && row < qkv_row0[t] + qkv_rows[t];
            check(inside || B[size_t(row * r + col)] == 0.f,
                  path + ": " + p + "B.weight is not block-diagonal over the q, k, v targets of config.json's "
                                  "headwise_lora (headwise's packed form)");
          }
      } else {  // PEFT's: one adapter over q|k|v; each projection gets its rows of B with the same A
        for (int t = 0; t < 3; ++t) put(m.layer, LoraTarget(t), A, B, r, C, r, qkv_row0[t], qkv_rows[t], 0, factor);
      }
      continue;
    }
    const int t = int(m.target);
    const int64_t in = t == int(LoraTarget::O) ? H * hd : C, out = t == int(LoraTarget::O) ? C : qkv_rows[t];
    put(m.layer, m.target, read(p + "A.weight", {r, in}), read(p + "B.weight", {out, r}), r, in, r, 0, out, 0, factor);
  }
  for (const std::string& n : st.names())
    check(used.count(n) > 0, path + ": unexpected tensor '" + text_brief(n, 96) + "' (no module of " + pa.path +
                                 " for this model)");
}

}  // namespace

void save_adapter_files(const Model<float>& model, const std::string& dir) {
  const ModelConfig& cfg = model.config();
  const LoraConfig& lora = cfg.lora;
  check(lora.enabled(), "internal: save_adapter_files on a model without adapters");
  if (separate_projections(cfg)) return save_per_projection_adapters(model, dir);
  const int64_t C = cfg.n_embd, r = lora.rank, full_qkv = int64_t(cfg.n_head + 2 * cfg.kv_heads()) * cfg.head_dim();
  const QkvTargets qkv = qkv_targets(cfg);
  const int64_t m = int64_t(qkv.targets.size());
  io::SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_metadata("producer", "headwise");
  for (int l = 0; l < cfg.n_layer; ++l) {
    if (!lora.on_layer(l)) continue;
    if (m > 0) {
      std::vector<float> A(size_t(m * r * C)), B(size_t(full_qkv * m * r), 0.f);
      for (int64_t i = 0; i < m; ++i) {
        const std::vector<float> a = stored_values(model, lora_a_name(l, qkv.targets[size_t(i)]));  // [r, C]
        std::copy(a.begin(), a.end(), A.begin() + i * r * C);
        const std::vector<float> b = stored_values(model, lora_b_name(l, qkv.targets[size_t(i)]));  // [rows, r]
        for (int64_t row = 0; row < qkv.rows[size_t(i)]; ++row)
          for (int64_t k = 0; k < r; ++k) B[size_t((qkv.row0[size_t(i)] + row) * m * r + i * r + k)] = b[size_t(row * r + k)];
      }
      w.add(peft_name(cfg, l, LoraTarget::Q, "A"), DType::F32, {m * r, C}, A.data());
      w.add(peft_name(cfg, l, LoraTarget::Q, "B"), DType::F32, {full_qkv, m * r}, B.data());
    }
    if (lora.has(LoraTarget::O)) {
      const std::vector<float> a = stored_values(model, lora_a_name(l, LoraTarget::O));
      const std::vector<float> b = stored_values(model, lora_b_name(l, LoraTarget::O));
      w.add(peft_name(cfg, l, LoraTarget::O, "A"), DType::F32, {r, int64_t(cfg.n_head) * cfg.head_dim()}, a.data());
      w.add(peft_name(cfg, l, LoraTarget::O, "B"), DType::F32, {C, r}, b.data());
    }
  }
  w.write(dir + "/" + kAdapterWeightsFile);

  const std::string qkv_key = lora_module(family_of(cfg), 0, LoraTarget::Q).peft_key;
  nlohmann::json modules = nlohmann::json::array();
  if (m > 0) modules.push_back(qkv_key);
  if (lora.has(LoraTarget::O)) modules.push_back(lora_module(family_of(cfg), 0, LoraTarget::O).peft_key);
  nlohmann::json j = peft_config(cfg, modules);
  if (m > 1) {  // the fused module's packed adapter: rank m r, alpha m alpha (same scaling)
    j["rank_pattern"][qkv_key] = m * r;
    j["alpha_pattern"][qkv_key] = double(m) * lora.alpha;
  }
  io::write_file_atomic(dir + "/" + kAdapterConfigFile, j.dump(2) + "\n");
}

void load_adapter_files(Model<float>& model, const std::string& dir) {
  const ModelConfig& cfg = model.config();
  const LoraConfig& lora = cfg.lora;
  check(lora.enabled(), "internal: load_adapter_files on a model without adapters");
  const std::string path = dir + "/" + kAdapterWeightsFile;
  check(std::filesystem::exists(path), "checkpoint " + dir + ": missing " + kAdapterWeightsFile +
                                   " (its config.json declares LoRA adapters)");
  if (std::filesystem::exists(dir + "/" + kAdapterConfigFile)) return load_peft_adapters(model, dir);
  if (separate_projections(cfg)) return load_per_projection_adapters(model, dir);
  io::SafetensorsReader st(path);
  const int64_t C = cfg.n_embd, r = lora.rank, full_qkv = int64_t(cfg.n_head + 2 * cfg.kv_heads()) * cfg.head_dim();
  const QkvTargets qkv = qkv_targets(cfg);
  const int64_t m = int64_t(qkv.targets.size());
  size_t expected = 0;
  for (int l = 0; l < cfg.n_layer; ++l) {
    if (!lora.on_layer(l)) continue;
    if (m > 0) {
      expected += 2;
      std::vector<float> A(size_t(m * r * C)), B(size_t(full_qkv * m * r));
      st.read(peft_name(cfg, l, LoraTarget::Q, "A"), DType::F32, {m * r, C}, A.data());
      st.read(peft_name(cfg, l, LoraTarget::Q, "B"), DType::F32, {full_qkv, m * r}, B.data());
      for (int64_t i = 0; i < m; ++i) {
        write_stored(model, lora_a_name(l, qkv.targets[size_t(i)]),
                     std::vector<float>(A.begin() + i * r * C, A.begin() + (i + 1) * r * C));
        std::vector<float> b(size_t(qkv.rows[size_t(i)] * r));
        for (int64_t row = 0; row < qkv.rows[size_t(i)]; ++row)
          for (int64_t k = 0; k < r; ++k) b[size_t(row * r + k)] = B[size_t((qkv.row0[size_t(i)] + row) * m * r + i * r + k)];
        write_stored(model, lora_b_name(l, qkv.targets[size_t(i)]), b);
      }
      // Everything outside the diagonal blocks must be zero: headwise adapters are per projection.
      for (int64_t row = 0; row < full_qkv; ++row)
        for (int64_t col = 0; col < m * r; ++col) {
          const int64_t i = col / r;
          const bool inside = row >= qkv.row0[size_t(i)] && row < qkv.row0[size_t(i)] + qkv.rows[size_t(i)];
          check(inside || B[size_t(row * m * r + col)] == 0.f,
                path + ": " + peft_name(cfg, l, LoraTarget::Q, "B") +
                    " is not block-diagonal over the q, k, v targets (headwise adapters are per projection)");
        }
    }
    if (lora.has(LoraTarget::O)) {
      expected += 2;
      std::vector<float> a(size_t(r * cfg.n_head * cfg.head_dim())), b(size_t(C * r));
      st.read(peft_name(cfg, l, LoraTarget::O, "A"), DType::F32, {r, int64_t(cfg.n_head) * cfg.head_dim()}, a.data());
      st.read(peft_name(cfg, l, LoraTarget::O, "B"), DType::F32, {C, r}, b.data());
      write_stored(model, lora_a_name(l, LoraTarget::O), a);
      write_stored(model, lora_b_name(l, LoraTarget::O), b);
    }
  }
  check(st.names().size() == expected, path + ": holds " + std::to_string(st.names().size()) +
                                           " tensors, but config.json's model.lora describes " +
                                           std::to_string(expected));
}

}  // namespace hw
