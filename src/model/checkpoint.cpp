#include "headwise/model/checkpoint.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
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
#include "model/kinds/valued_kind.hpp"

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
  std::string source;  // its name in SaveOptions::source ("" = none there)
};

// Shards of at most max_bytes (a larger tensor gets one of its own), in spec order.
std::vector<std::vector<FileTensor>> shard_plan(const Model<float>& model, const SaveOptions& opt) {
  std::vector<std::vector<FileTensor>> shards(1);
  uint64_t in_shard = 0;
  const auto& specs = model.specs();
  std::map<std::string, std::string> source_names;  // canonical -> name in the source file
  if (opt.source)
    for (const auto& n : opt.source->names())
      if (!ignored_name(n)) source_names.emplace(canonical_name(n), n);
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& s = specs[i];
    if (s.adapter) continue;  // adapter_model.safetensors: model.safetensors stays the base model
    const auto pieces = hf_tensors(model.config(), s);
    for (size_t k = 0; k < pieces.size(); ++k) {
      FileTensor f{i, k, pieces[k], DType::F32, 0, ""};
      const auto it = source_names.find(f.t.name);
      if (it != source_names.end()) f.source = it->second;
      if (s.is_int) {
        f.dtype = DType::I32;
      } else if (!s.head_value) {
        if (opt.dtype) {
          f.dtype = *opt.dtype;
        } else if (!f.source.empty()) {
          const DType d = opt.source->info(f.source).dtype;
          if (d == DType::F32 || d == DType::BF16 || d == DType::F16) f.dtype = d;
        }
      }
      f.bytes = dtype_size(f.dtype);
      for (int64_t d : f.t.shape) f.bytes *= uint64_t(d);
      if (in_shard > 0 && in_shard + f.bytes > opt.max_shard_bytes) {
        shards.emplace_back();
        in_shard = 0;
      }
      in_shard += f.bytes;
      shards.back().push_back(std::move(f));
    }
  }
  return shards;
}

// Float values in `dtype` (F32, BF16 or F16), handed to `sink` in blocks.
void encode_floats(const float* v, int64_t n, DType dtype, const io::ByteSink& sink, const std::string& name) {
  if (dtype == DType::F32) return sink(v, size_t(n) * 4);
  constexpr int64_t kBlock = int64_t(1) << 20;
  std::vector<uint16_t> buf(size_t(std::min(n, kBlock)));
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t k = std::min(kBlock, n - i0);
    if (dtype == DType::BF16) {
      for (int64_t i = 0; i < k; ++i) buf[size_t(i)] = cpu::float_to_bf16(v[i0 + i]);
    } else {
      for (int64_t i = 0; i < k; ++i) {
        const float x = v[i0 + i];
        buf[size_t(i)] = cpu::float_to_f16(x);
        // A finite value that rounds to F16's infinity would change the model silently.
        check(!std::isfinite(x) || (buf[size_t(i)] & 0x7c00u) != 0x7c00u,
              "checkpoint: tensor '" + name + "' has a value (" + std::to_string(x) +
                  ") beyond float16's range: write it as F32 or BF16");
      }
    }
    sink(buf.data(), size_t(k) * 2);
  }
}

// Whether n floats equal the source tensor's values [begin, begin + n) widened as the loader
// reads them (bit for bit, so that a NaN or a signed zero counts as itself).
bool same_as_source(const io::SafetensorsSet& src, const std::string& name, int64_t begin, const float* v, int64_t n) {
  constexpr int64_t kBlock = int64_t(1) << 20;
  std::vector<float> buf(size_t(std::min(n, kBlock)));
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t k = std::min(kBlock, n - i0);
    src.read_f32_range(name, begin + i0, k, buf.data());
    if (std::memcmp(buf.data(), v + i0, size_t(k) * 4) != 0) return false;
  }
  return true;
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

void save_model_files(const Model<float>& model, const std::string& dir, uint64_t max_shard_bytes) {
  SaveOptions opt;
  opt.max_shard_bytes = max_shard_bytes;
  save_model_files(model, dir, opt);
}

void save_model_files(const Model<float>& model, const std::string& dir, const SaveOptions& opt) {
  check(opt.max_shard_bytes > 0, "checkpoint: the shard size must be positive");
  check(!opt.dtype || *opt.dtype == DType::F32 || *opt.dtype == DType::BF16 || *opt.dtype == DType::F16,
        "checkpoint: weights are written as F32, BF16 or F16");
  check(opt.unread.empty() || opt.source, "internal: unread tensors without the checkpoint they stay in");
  io::ensure_dir(dir);
  const auto shards = shard_plan(model, opt);
  const auto& specs = model.specs();
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  std::set<std::string> weight_files;
  // Model memory is read through the backend only (ops().copy_to_host), as on a GPU. A file
  // tensor that is a whole tensor of the model as it is in memory (every tensor but the split
  // or compacted attention ones and the transposed Llama matrices) is read a piece at a time;
  // the others are staged whole, one spec at a time as its producers run (in file order): the
  // compact tensor, its stored form when the two differ, and the file tensor's columns.
  struct Staged {
    size_t spec = SIZE_MAX;
    std::vector<float> compact, stored;
    const float* stored_ptr = nullptr;
  };
  auto staged = std::make_shared<Staged>();
  auto stage = [&model, &specs, staged](size_t i) {
    if (staged->spec == i) return;
    const ParamSpec& s = specs[i];
    const Tensor& t = tensor_of(model, s);
    read_device(model.ops(), t.as<float>(), t.numel(), staged->compact);
    if (s.map == StorageMap::Same) {
      std::vector<float>().swap(staged->stored);
      staged->stored_ptr = staged->compact.data();
    } else {
      staged->stored.assign(size_t(stored_numel(s)), 0.f);
      stored_from_compact(s, layout_for(model, s), staged->compact.data(), staged->stored.data());
      staged->stored_ptr = staged->stored.data();
    }
    staged->spec = i;
  };
  for (size_t sh = 0; sh < shards.size(); ++sh) {
    const std::string file = shards.size() == 1 ? io::kWeightsFile : shard_name(sh, shards.size());
    io::SafetensorsWriter w;
    w.set_metadata("format", "pt");
    w.set_metadata("producer", "headwise");
    for (const auto& f : shards[sh]) {
      const ParamSpec& s = specs[f.spec];
      const Tensor& t = tensor_of(model, s);
      weight_map[f.t.name] = file;
      total += f.bytes;
      if (s.is_int) {
        w.add(f.t.name, DType::I32, f.t.shape, read_device(model.ops(), t.i32(), t.numel()).data());
        continue;
      }
      const bool unread = opt.unread.count(s.name) > 0;
      const io::SafetensorsSet* src = f.source.empty() ? nullptr : opt.source;
      check(!unread || src, "internal: tensor '" + f.t.name + "' was not read and its checkpoint lacks it");
      w.add_stream(f.t.name, f.dtype, f.t.shape, [&model, &specs, &stage, staged, f, unread, src](const io::ByteSink& sink) {
        const ParamSpec& spec = specs[f.spec];
        int64_t n = 1;
        for (int64_t d : f.t.shape) n *= d;
        const bool same_dtype = src && src->info(f.source).dtype == f.dtype;
        if (unread) {  // never read: the source's values, as they are or converted
          if (same_dtype) return src->stream(f.source, sink);
          constexpr int64_t kBlock = int64_t(1) << 20;
          std::vector<float> buf(size_t(std::min(n, kBlock)));
          for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
            const int64_t k = std::min(kBlock, n - i0);
            src->read_f32_range(f.source, i0, k, buf.data());
            encode_floats(buf.data(), k, f.dtype, sink, f.t.name);
          }
          return;
        }
        const bool whole = spec.map == StorageMap::Same && !f.t.transpose &&
                           f.t.width == (spec.stored_shape.empty() ? 1 : spec.stored_shape.back());
        if (whole) {  // the model's tensor as it is: read a piece at a time
          const float* dev = tensor_of(model, spec).as<float>();
          constexpr int64_t kBlock = int64_t(1) << 22;
          std::vector<float> buf(size_t(std::min(n, kBlock)));
          bool same = same_dtype;
          for (int64_t i0 = 0; i0 < n && same; i0 += kBlock) {
            const int64_t k = std::min(kBlock, n - i0);
            model.ops().copy_to_host(buf.data(), dev + i0, size_t(k) * sizeof(float));
            same = same_as_source(*src, f.source, i0, buf.data(), k);
          }
          if (same) return src->stream(f.source, sink);
          for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
            const int64_t k = std::min(kBlock, n - i0);
            model.ops().copy_to_host(buf.data(), dev + i0, size_t(k) * sizeof(float));
            encode_floats(buf.data(), k, f.dtype, sink, f.t.name);
          }
          return;
        }
        stage(f.spec);
        // The file tensor's values: the stored tensor's columns (transposed for a Llama-family
        // [out, in] file tensor), or all of it.
        const float* v = staged->stored_ptr;
        std::vector<float> piece;
        if (f.t.transpose || f.t.width != (spec.stored_shape.empty() ? 1 : spec.stored_shape.back())) {
          piece.resize(size_t(n));
          hf_split(spec, f.t, staged->stored_ptr, piece.data());
          v = piece.data();
        }
        if (same_dtype && same_as_source(*src, f.source, 0, v, n)) return src->stream(f.source, sink);
        encode_floats(v, n, f.dtype, sink, f.t.name);
      });
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
  // torch_dtype: the weights' dtype (that of the first weight; convert keeps each source dtype,
  // and a checkpoint's weights share one).
  const DType weights_dtype = [&] {
    for (const auto& shard : shards)
      for (const FileTensor& f : shard)
        if (f.dtype != DType::I32 && !specs[f.spec].head_value) return f.dtype;
    return DType::F32;
  }();
  if (weights_dtype != DType::F32) config["torch_dtype"] = weights_dtype == DType::BF16 ? "bfloat16" : "float16";
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
      } else if (const ValuedKind* k = valued_kind(kind)) {
        KindHeadValues v;
        for (const KindTensor& t : k->tensors(cfg, cfg.head_plan.layers[size_t(l)][size_t(h)])) {
          v.emplace_back(size_t(kind_tensor_numel(t)));
          st.read(name_of(kind_tensor_name(*k, l, h, t)), DType::F32, t.shape, v.back().data());
        }
        k->store(cfg, ex, l, h, std::move(v));
      }
    }
  return ex;
}

std::unique_ptr<Model<float>> load_model(const std::string& dir, const Backend<float>& ops, bool trainable) {
  return load_model(dir, read_checkpoint_config(dir), ops, trainable);
}

std::unique_ptr<Model<float>> load_model(const std::string& dir, const ModelConfig& cfg, const Backend<float>& ops,
                                         bool trainable, const std::set<std::string>* only) {
  io::SafetensorsSet st(dir);
  auto model = std::make_unique<Model<float>>(cfg, ops, read_head_extras(st, cfg), trainable);
  load_weights(*model, st, {}, only);
  if (cfg.lora.enabled()) load_adapter_files(*model, dir);
  return model;
}

void load_weights(Model<float>& model, const io::SafetensorsSet& st, const LoadedTensorHook& on_loaded,
                  const std::set<std::string>* only) {
  const TensorNames names(st);
  const auto& by_canonical = names.all();  // canonical name -> name in the file
  std::set<std::string> used;
  std::vector<float> piece, stored;
  // A tied checkpoint's lm_head.weight must equal wte: checked as soon as wte is in (before a
  // hook may discard it).
  auto check_tied_head = [&] {
    const auto it = by_canonical.find("lm_head.weight");
    if (it == by_canonical.end() || used.count("lm_head.weight")) return;
    used.insert("lm_head.weight");
    const Tensor& wte = model.params().get("wte.weight");
    const std::vector<float> w = read_device(model.ops(), wte.f32(), wte.numel());
    check(same_as_source(st, it->second, 0, w.data(), int64_t(w.size())),
          st.path() + ": lm_head.weight differs from wte.weight (headwise ties them)");
  };
  const bool on_cpu = model.ops().device() == Device::CPU;
  for (const auto& s : model.specs()) {
    if (s.adapter) continue;  // adapters come from adapter_model.safetensors (load_adapter_files)
    Tensor& t = s.role == ParamRole::Param ? model.params().get(s.name) : model.buffers().get(s.name);
    // The file's tensors of this spec (the family's names: a Llama q|k|v is three of them).
    const auto pieces = hf_tensors(model.config(), s);
    for (const auto& p : pieces) {
      names.get(p.name);  // throws naming a missing one
      used.insert(p.name);
    }
    if (only && !s.is_int && !s.head_value && !only->count(s.name)) {
      // Not read: only its presence and shape are checked; it keeps its zeros.
      for (const auto& p : pieces) {
        const io::TensorInfo& info = st.info(names.get(p.name));
        check(info.shape == p.shape, st.path() + ": tensor '" + p.name + "' has the wrong shape for this model config");
      }
      if (s.name == "wte.weight" && model.config().tie_word_embeddings && by_canonical.count("lm_head.weight"))
        used.insert("lm_head.weight");
      continue;
    }
    if (s.is_int) {
      std::vector<int32_t> ints(size_t(t.numel()));
      st.read(names.get(pieces.front().name), DType::I32, s.stored_shape, ints.data());
      check_int_tensor(model, s, ints, st.path());
      write_device(model.ops(), t.i32(), ints);
      continue;
    }
    // Straight into the model's memory on the CPU where the stored tensor is the compact one
    // (every tensor but the attention ones of a plan with non-softmax heads): no staging copies
    // of a 150K x 896 embedding. A file tensor that is the whole stored tensor is read in place.
    float* target = nullptr;
    if (on_cpu && s.map == StorageMap::Same) {
      target = t.as<float>();
    } else {
      stored.assign(size_t(stored_numel(s)), 0.f);
      target = stored.data();
    }
    for (const auto& p : pieces) {
      const int64_t cols = s.stored_shape.empty() ? 1 : s.stored_shape.back();
      if (!p.transpose && p.width == cols) {
        st.read_f32(names.get(p.name), p.shape, target);  // F32, BF16, F16 or F64 in the file
        continue;
      }
      int64_t n = 1;
      for (int64_t d : p.shape) n = checked_mul(n, d, "tensor size");
      piece.resize(size_t(n));
      st.read_f32(names.get(p.name), p.shape, piece.data());
      hf_join(s, p, piece.data(), target);
    }
    if (target == stored.data()) {
      if (on_cpu) {
        compact_from_stored(s, layout_for(model, s), stored.data(), t.as<float>());
      } else {
        std::vector<float> compact(size_t(t.numel()));
        compact_from_stored(s, layout_for(model, s), stored.data(), compact.data());
        write_device(model.ops(), t.as<float>(), compact);
      }
    }
    if (s.name == "wte.weight" && model.config().tie_word_embeddings) check_tied_head();
    if (on_loaded && s.role == ParamRole::Param) on_loaded(s.name, t);
  }
  std::vector<float>().swap(stored);
  std::vector<float>().swap(piece);
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
