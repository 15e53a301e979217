#include "headwise/model/checkpoint.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "headwise/attention/attention.hpp"
#include "headwise/core/checked_math.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/gemv.hpp"
#include "headwise/model/adapter_files.hpp"
#include "headwise/model/device_copy.hpp"
#include "headwise/model/hf_family.hpp"
#include "headwise/model/peft_config.hpp"
#include "headwise/model/remote_code.hpp"

namespace hw {

namespace fs = std::filesystem;

namespace {

const attn::LayerLayout* layout_for(const Model<float>& model, const ParamSpec& s) {
  return s.layer >= 0 ? &model.layouts()[size_t(s.layer)] : nullptr;
}

const Tensor& tensor_of(const Model<float>& model, const ParamSpec& s) {
  const Tensor* t = s.role == ParamRole::Param ? model.params().find(s.name) : model.buffers().find(s.name);
  check(t != nullptr, "internal: model has no tensor '" + s.name + "'");
  return *t;
}

// HF checkpoints may prefix names with "transformer." and carry buffers we do not use.
std::string canonical_name(const std::string& name) {
  const std::string prefix = "transformer.";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

bool ignored_name(const std::string& n) {
  auto ends_with = [&](const std::string& suffix) {
    return n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".attn.bias") || ends_with(".attn.masked_bias") || ends_with(".rotary_emb.inv_freq");
}

// One file tensor of the plan save_model_files writes: spec `spec`'s piece `piece`.
struct FileTensor {
  size_t spec = 0, piece = 0;
  HfTensor t;
  DType dtype = DType::F32;
  uint64_t bytes = 0;
};

// Head-kind values (static alpha/rho, linear L/groups, performer W, dijiang log_w, taylorshift
// tau): h.{l}.attn.<kind>.{h}.<name>, kept float32 whatever the weights' dtype.
bool head_value(const ParamSpec& s) {
  for (const char* kind : {".attn.static.", ".attn.linear.", ".attn.performer.", ".attn.dijiang.", ".attn.taylorshift."})
    if (s.name.find(kind) != std::string::npos) return true;
  return false;
}

// Shards of at most max_bytes (a larger tensor gets one of its own), in spec order.
std::vector<std::vector<FileTensor>> shard_plan(const Model<float>& model, uint64_t max_bytes, DType float_dtype) {
  std::vector<std::vector<FileTensor>> shards(1);
  uint64_t in_shard = 0;
  const auto& specs = model.specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].adapter) continue;  // adapter_model.safetensors: model.safetensors stays the base model
    const auto pieces = hf_tensors(model.config(), specs[i]);
    const DType dt = specs[i].is_int ? DType::I32 : head_value(specs[i]) ? DType::F32 : float_dtype;
    for (size_t k = 0; k < pieces.size(); ++k) {
      FileTensor f{i, k, pieces[k], dt, dtype_size(dt)};
      for (int64_t d : f.t.shape) f.bytes *= uint64_t(d);
      if (in_shard > 0 && in_shard + f.bytes > max_bytes) {
        shards.emplace_back();
        in_shard = 0;
      }
      in_shard += f.bytes;
      shards.back().push_back(std::move(f));
    }
  }
  return shards;
}

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}


// The file's tensor names resolved once to canonical names. Two names of one tensor (both
// "h.0.x" and "transformer.h.0.x") are an error: validating one and loading the other would let
// unchecked values in.
class TensorNames {
 public:
  explicit TensorNames(const io::SafetensorsSet& st) : path_(st.path()) {
    for (const auto& n : st.names()) {
      if (ignored_name(n)) continue;
      const auto [it, fresh] = by_canonical_.emplace(canonical_name(n), n);
      check(fresh, path_ + ": tensors '" + text_brief(it->second, 96) + "' and '" + text_brief(n, 96) +
                       "' are the same tensor '" + text_brief(it->first, 96) + "' stored twice");
    }
  }
  // The file's name of a canonical tensor; throws "<path>: missing tensor '<name>'<why>".
  const std::string& get(const std::string& canonical, const std::string& why = "") const {
    const auto it = by_canonical_.find(canonical);
    check(it != by_canonical_.end(), path_ + ": missing tensor '" + canonical + "'" + why);
    return it->second;
  }
  const std::map<std::string, std::string>& all() const { return by_canonical_; }

 private:
  std::string path_;
  std::map<std::string, std::string> by_canonical_;  // canonical name -> name in the file
};

// Elements of every tensor the weight files must hold for cfg (stored shapes). Each takes at
// least 2 bytes there (bf16/fp16; float32/int32 take 4).
int64_t stored_model_elements(const ModelConfig& cfg, const HeadExtras& extras) {
  int64_t elements = 0;
  for (const auto& s : param_specs(cfg, extras)) {
    if (s.adapter) continue;
    int64_t n = 1;
    for (int64_t d : s.stored_shape) n = checked_mul(n, d, "checkpoint size");
    elements = checked_add(elements, n, "checkpoint size");
  }
  return elements;
}

// The int tensors a checkpoint carries (linear heads' groups) are checked before they reach the
// model: G from the head's L, as the model declared it.
void check_int_tensor(const Model<float>& model, const ParamSpec& s, const std::vector<int32_t>& ints,
                      const std::string& where) {
  const std::string suffix = ".groups";
  check(s.name.size() > suffix.size() && s.name.ends_with(suffix), "internal: unknown int tensor '" + s.name + "'");
  const Tensor* L = model.params().find(s.name.substr(0, s.name.size() - suffix.size()) + ".L");
  check(L != nullptr && L->rank() == 2, "internal: int tensor '" + s.name + "' has no L beside it");
  check(int64_t(ints.size()) == model.config().head_dim(), where + ": tensor '" + s.name + "' must be head_dim long");
  attn::check_linear_groups(ints.data(), model.config().head_dim(), int(L->dim(0)) - 1,
                            where + ": tensor '" + s.name + "'");
}

// Each linear head's group count G (its L is (G+1)x(G+1)), 0 for the other heads: per layer, per head.
nlohmann::json linear_groups(const Model<float>& model) {
  const ModelConfig& c = model.config();
  nlohmann::json j = nlohmann::json::array();
  for (int l = 0; l < c.n_layer; ++l) {
    nlohmann::json row = nlohmann::json::array();
    for (int h = 0; h < c.n_head; ++h) {
      const std::string name = "h." + std::to_string(l) + ".attn.linear." + std::to_string(h) + ".L";
      const Tensor* L = model.params().find(name);
      if (!L) L = model.buffers().find(name);
      row.push_back(L ? L->dim(0) - 1 : 0);
    }
    j.push_back(std::move(row));
  }
  return j;
}

}  // namespace

void save_model_files(const Model<float>& model, const std::string& dir, uint64_t max_shard_bytes,
                      DType float_dtype) {
  check(max_shard_bytes > 0, "checkpoint: the shard size must be positive");
  check(float_dtype == DType::F32 || float_dtype == DType::BF16 || float_dtype == DType::F16,
        std::string("checkpoint: weights are written as F32, BF16 or F16, not ") + dtype_name(float_dtype));
  io::ensure_dir(dir);
  const auto shards = shard_plan(model, max_shard_bytes, float_dtype);
  const auto& specs = model.specs();
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  std::set<std::string> weight_files;
  std::vector<float> compact, stored, piece;  // each tensor staged through the host (the writer copies it)
  std::vector<uint16_t> half;
  for (size_t sh = 0; sh < shards.size(); ++sh) {
    const std::string file = shards.size() == 1 ? io::kWeightsFile : shard_name(sh, shards.size());
    io::SafetensorsWriter w;
    w.set_metadata("format", "pt");
    w.set_metadata("producer", "headwise");
    size_t staged = SIZE_MAX;  // the spec whose stored values `stored` holds
    for (const auto& f : shards[sh]) {
      const ParamSpec& s = specs[f.spec];
      const Tensor& t = tensor_of(model, s);
      weight_map[f.t.name] = file;
      total += f.bytes;
      if (s.is_int) {
        w.add(f.t.name, DType::I32, f.t.shape, read_device(model.ops(), t.i32(), t.numel()).data());
        continue;
      }
      if (staged != f.spec) {
        read_device(model.ops(), t.as<float>(), t.numel(), compact);
        stored.assign(size_t(stored_numel(s)), 0.f);
        stored_from_compact(s, layout_for(model, s), compact.data(), stored.data());
        staged = f.spec;
      }
      piece.resize(size_t(f.bytes / dtype_size(f.dtype)));
      hf_split(s, f.t, stored.data(), piece.data());
      if (f.dtype == DType::F32) {
        w.add(f.t.name, DType::F32, f.t.shape, piece.data());
      } else {
        half.resize(piece.size());
        for (size_t e = 0; e < piece.size(); ++e) {
          half[e] = f.dtype == DType::BF16 ? cpu::float_to_bf16(piece[e]) : cpu::float_to_f16(piece[e]);
          check(!std::isfinite(piece[e]) || (half[e] & 0x7c00u) != 0x7c00u || f.dtype != DType::F16,
                "checkpoint: tensor '" + f.t.name + "' has a value (" + std::to_string(piece[e]) +
                    ") beyond float16's range: write it as F32 or BF16");
        }
        w.add(f.t.name, f.dtype, f.t.shape, half.data());
      }
    }
    w.write(dir + "/" + file);
    weight_files.insert(file);
  }
  // No stale weights of the other layout (or of more shards) beside the new ones.
  const std::string index = dir + "/" + io::kWeightsIndexFile;
  if (shards.size() > 1) {
    fs::remove(dir + "/" + io::kWeightsFile);
    const nlohmann::ordered_json j = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    io::write_file_atomic(index, j.dump(2) + "\n");
  } else {
    fs::remove(index);
  }
  for (const auto& e : fs::directory_iterator(dir)) {  // shards of an earlier save with another count
    const std::string n = e.path().filename().string();
    const bool shard_file = n.rfind("model-", 0) == 0 && n.find("-of-") != std::string::npos &&
                            n.size() > 12 && n.substr(n.size() - 12) == ".safetensors";
    if (shard_file && !weight_files.count(n)) fs::remove(e.path());
  }
  if (model.config().lora.enabled()) {
    save_adapter_files(model, dir);
  } else {  // no stale adapters beside a model that has none (e.g. after a merge)
    fs::remove(dir + "/" + kAdapterWeightsFile);
    fs::remove(dir + "/" + kAdapterConfigFile);
  }
  nlohmann::json config = model.config().to_hf_config();
  if (float_dtype != DType::F32) config["torch_dtype"] = float_dtype == DType::BF16 ? "bfloat16" : "float16";
  if (model.config().head_plan.count(attn::HeadKind::Linear) > 0) config["headwise_linear_groups"] = linear_groups(model);
  if (model.config().head_plan.all_softmax()) {
    remove_remote_code(dir);
  } else {
    write_remote_code(dir);
  }
  io::write_file_atomic(dir + "/config.json", config.dump(2) + "\n");
}

std::vector<std::string> copy_side_files(const std::string& from_dir, const std::string& to_dir) {
  std::vector<std::string> copied;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"}) {
    const fs::path from = fs::path(from_dir) / f;
    std::error_code ec;
    if (!fs::is_regular_file(from, ec)) continue;
    io::copy_file_atomic(from.string(), to_dir + "/" + f);
    copied.push_back(f);
  }
  return copied;
}

ModelConfig read_checkpoint_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  check(fs::exists(path), "checkpoint " + dir + ": missing config.json");
  ModelConfig c = ModelConfig::from_hf_config(read_json(path, path), path);
  // PEFT's adapter_config.json beside the weights describes the adapters (those headwise wrote,
  // or an adapter directory's two files copied in): it decides the LoRA the model holds.
  if (fs::exists(dir + "/" + kAdapterConfigFile)) {
    const PeftAdapters pa = read_peft_adapters(dir, c);
    c.lora = pa.lora;
    try {
      c.lora.validate(c);
    } catch (const Error& e) {
      fail(pa.path + ": " + e.what());
    }
  }
  return c;
}

HeadExtras read_head_extras(const io::SafetensorsSet& st, const ModelConfig& cfg) {
  const TensorNames names(st);
  auto name_of = [&](const std::string& n) -> const std::string& { return names.get(n, " (the head plan needs it)"); };
  auto linear_prefix = [](int l, int h) { return "h." + std::to_string(l) + ".attn.linear." + std::to_string(h) + "."; };
  // First the shapes: each linear head's G (from its L, 1..head_dim), then the bytes the whole
  // model needs against what the file holds, before anything of config size is allocated.
  HeadExtras shapes;
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head; ++h)
      if (cfg.head_plan.layers[size_t(l)][size_t(h)].kind == attn::HeadKind::Linear) {
        const std::string lp = linear_prefix(l, h);
        const auto& info = st.info(name_of(lp + "L"));
        check(info.shape.size() == 2 && info.shape[0] == info.shape[1] && info.shape[0] >= 2 &&
                  info.shape[0] <= int64_t(cfg.head_dim()) + 1,
              st.path() + ": tensor '" + lp + "L' must be (G+1)x(G+1) with G in 1..head_dim (" +
                  std::to_string(cfg.head_dim()) + ")");
        shapes.linears[{l, h}].n_groups = int(info.shape[0]) - 1;
      }
  const int64_t need = checked_mul(stored_model_elements(cfg, shapes), int64_t(2), "checkpoint size");
  check(uint64_t(need) <= st.data_bytes(), st.path() + ": config.json describes a model of at least " +
                                               std::to_string(need) + " bytes of tensors (2 per value), but the weight files hold " +
                                               std::to_string(st.data_bytes()));
  HeadExtras ex;
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head; ++h) {
      const auto kind = cfg.head_plan.layers[size_t(l)][size_t(h)].kind;
      const std::string p = "h." + std::to_string(l) + ".attn.";
      if (kind == attn::HeadKind::Static) {
        StaticHeadValues v;
        v.alpha.resize(size_t(cfg.block_size));
        v.rho.resize(size_t(cfg.block_size));
        const std::string sp = p + "static." + std::to_string(h) + ".";
        st.read(name_of(sp + "alpha"), DType::F32, {cfg.block_size}, v.alpha.data());
        st.read(name_of(sp + "rho"), DType::F32, {cfg.block_size}, v.rho.data());
        ex.statics[{l, h}] = std::move(v);
      } else if (kind == attn::HeadKind::Linear) {
        const std::string lp = linear_prefix(l, h);
        LinearHeadValues v;
        v.n_groups = shapes.linears[{l, h}].n_groups;
        const int64_t G1 = v.n_groups + 1;
        v.L.resize(size_t(G1 * G1));
        st.read(name_of(lp + "L"), DType::F32, {G1, G1}, v.L.data());
        v.groups.resize(size_t(cfg.head_dim()));
        st.read(name_of(lp + "groups"), DType::I32, {cfg.head_dim()}, v.groups.data());
        attn::check_linear_groups(v.groups.data(), cfg.head_dim(), v.n_groups,
                                  st.path() + ": tensor '" + lp + "groups'");
        ex.linears[{l, h}] = std::move(v);
      } else if (kind == attn::HeadKind::Performer) {
        PerformerHeadValues v;
        v.n_features = cfg.head_plan.layers[size_t(l)][size_t(h)].features;
        v.W.resize(size_t(v.n_features) * size_t(cfg.head_dim()));
        st.read(name_of(p + "performer." + std::to_string(h) + ".W"), DType::F32, {v.n_features, cfg.head_dim()},
                v.W.data());
        ex.performers[{l, h}] = std::move(v);
      } else if (kind == attn::HeadKind::DiJiang) {
        DiJiangHeadValues v;
        v.log_w.resize(size_t(cfg.head_dim()));
        st.read(name_of(p + "dijiang." + std::to_string(h) + ".log_w"), DType::F32, {cfg.head_dim()}, v.log_w.data());
        ex.dijiangs[{l, h}] = std::move(v);
      } else if (kind == attn::HeadKind::TaylorShift) {
        TaylorShiftHeadValues v;
        st.read(name_of(p + "taylorshift." + std::to_string(h) + ".tau"), DType::F32, {1}, &v.tau);
        ex.taylorshifts[{l, h}] = v;
      }
    }
  return ex;
}

std::unique_ptr<Model<float>> load_model(const std::string& dir, const Backend<float>& ops, bool trainable) {
  return load_model(dir, read_checkpoint_config(dir), ops, trainable);
}

std::unique_ptr<Model<float>> load_model(const std::string& dir, const ModelConfig& cfg, const Backend<float>& ops,
                                         bool trainable) {
  io::SafetensorsSet st(dir);
  auto model = std::make_unique<Model<float>>(cfg, ops, read_head_extras(st, cfg), trainable);
  load_weights(*model, st);
  if (cfg.lora.enabled()) load_adapter_files(*model, dir);
  return model;
}

void load_weights(Model<float>& model, const io::SafetensorsSet& st, const LoadedTensorHook& on_loaded) {
  const TensorNames names(st);
  const auto& by_canonical = names.all();  // canonical name -> name in the file
  std::set<std::string> used;
  std::vector<float> piece;
  // A tied checkpoint's lm_head.weight must equal wte: checked as soon as wte is in (before a
  // hook may discard it).
  auto check_tied_head = [&] {
    const auto it = by_canonical.find("lm_head.weight");
    if (it == by_canonical.end() || used.count("lm_head.weight")) return;
    used.insert("lm_head.weight");
    const Tensor& wte = model.params().get("wte.weight");
    std::vector<float> lm(size_t(wte.numel()));
    st.read_f32(it->second, wte.shape, lm.data());
    check(lm == read_device(model.ops(), wte.f32(), wte.numel()),
          st.path() + ": lm_head.weight differs from wte.weight (headwise ties them)");
  };
  for (const auto& s : model.specs()) {
    if (s.adapter) continue;  // adapters come from adapter_model.safetensors (load_adapter_files)
    Tensor& t = s.role == ParamRole::Param ? model.params().get(s.name) : model.buffers().get(s.name);
    // The file's tensors of this spec (the family's names: a Llama q|k|v is three of them).
    const auto pieces = hf_tensors(model.config(), s);
    for (const auto& p : pieces) {
      names.get(p.name);  // throws naming a missing one
      used.insert(p.name);
    }
    if (s.is_int) {
      std::vector<int32_t> ints(size_t(t.numel()));
      st.read(names.get(pieces.front().name), DType::I32, s.stored_shape, ints.data());
      check_int_tensor(model, s, ints, st.path());
      write_device(model.ops(), t.i32(), ints);
      continue;
    }
    if (model.ops().device() == Device::CPU && pieces.size() == 1 && !pieces[0].transpose &&
        s.map == StorageMap::Same && pieces[0].shape == s.shape) {
      // One file tensor of the same layout, on the CPU: straight into the model's memory (no
      // staging copies of a 150K x 896 embedding).
      st.read_f32(names.get(pieces[0].name), s.shape, t.as<float>());
    } else {
      std::vector<float> stored(size_t(stored_numel(s))), compact(size_t(t.numel()));
      for (const auto& p : pieces) {
        int64_t n = 1;
        for (int64_t d : p.shape) n = checked_mul(n, d, "tensor size");
        piece.resize(size_t(n));
        st.read_f32(names.get(p.name), p.shape, piece.data());  // F32, BF16, F16 or F64 in the file
        hf_join(s, p, piece.data(), stored.data());
      }
      compact_from_stored(s, layout_for(model, s), stored.data(), compact.data());
      write_device(model.ops(), t.as<float>(), compact);
    }
    if (s.name == "wte.weight" && model.config().tie_word_embeddings) check_tied_head();
    if (on_loaded && s.role == ParamRole::Param) on_loaded(s.name, t);
  }
  model.refresh_static_normalisers();  // log Z follows the alpha/rho just read
  for (const auto& [canon, name] : by_canonical)
    check(used.count(canon) > 0, st.path() + ": unexpected tensor '" + text_brief(name, 96) + "' for this model config");
}

void save_moments(const Model<float>& model, const Arena& m, const Arena& v, const std::string& path) {
  io::SafetensorsWriter w;
  std::vector<float> compact;  // each moment staged through the host (the writer copies it)
  for (const auto* arena : {&m, &v}) {
    const std::string prefix = arena == &m ? "m." : "v.";
    for (const auto& s : model.specs()) {
      if (s.role != ParamRole::Param) continue;
      const Tensor* t = arena->find(s.name);
      check(t != nullptr, "internal: optimizer has no moment for '" + s.name + "'");
      read_device(model.ops(), t->as<float>(), t->numel(), compact);
      std::vector<float> stored(size_t(stored_numel(s)));
      stored_from_compact(s, layout_for(model, s), compact.data(), stored.data());
      w.add(prefix + s.name, DType::F32, s.stored_shape, stored.data());
    }
  }
  w.write(path);
}

void load_moments(const Model<float>& model, Arena& m, Arena& v, const std::string& path) {
  check(fs::exists(path), "checkpoint: missing " + path);
  io::SafetensorsReader st(path);
  for (auto* arena : {&m, &v}) {
    const std::string prefix = arena == &m ? "m." : "v.";
    for (const auto& s : model.specs()) {
      if (s.role != ParamRole::Param) continue;
      Tensor& t = arena->get(s.name);
      std::vector<float> stored(size_t(stored_numel(s))), compact(size_t(t.numel()));
      st.read(prefix + s.name, DType::F32, s.stored_shape, stored.data());
      compact_from_stored(s, layout_for(model, s), stored.data(), compact.data());
      write_device(model.ops(), t.as<float>(), compact);
    }
  }
}

}  // namespace hw
