#pragma once
// Model checkpoints in Hugging Face GPT-2 form: DIR/model.safetensors (HF tensor names and
// Conv1D layouts; compact attention tensors expanded to their stored shapes with zeros) and
// DIR/config.json (HF keys plus headwise's). A checkpoint of an all-softmax, learned-position
// model opens in transformers' GPT2LMHeadModel.from_pretrained. Tensors are staged between the
// model's device and the files through host buffers (model.ops()), so a GPU model saves and
// loads the same files as a CPU one.
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "headwise/io/safetensors.hpp"
#include "headwise/io/safetensors_set.hpp"
#include "headwise/model/model.hpp"

namespace hw {

// Write model.safetensors and config.json into dir (each file atomically), and the adapters,
// if the model has any, as adapter_model.safetensors + adapter_config.json (adapter_files.hpp).
// Tensors carry the family's Hugging Face names (hf_family.hpp). Weights above max_shard_bytes
// go into shards model-0000k-of-0000n.safetensors with model.safetensors.index.json, as
// transformers' save_pretrained writes them. A mixed plan (model_type "headwise") also gets
// the PyTorch model's two Python files (remote_code.hpp) and, with linear heads, config.json's
// headwise_linear_groups (each linear head's G, 0 for other heads: the Python model sizes L
// from it). SaveOptions::dtype (F32, BF16 or F16) is the weights' dtype in the files (rounded to
// nearest even; a value beyond F16's range is one error naming the tensor); head-kind values
// (static alpha/rho, L, W, log_w, tau) and adapters stay F32.
inline constexpr uint64_t kDefaultMaxShardBytes = uint64_t(2) << 30;
void save_model_files(const Model<float>& model, const std::string& dir,
                      uint64_t max_shard_bytes = kDefaultMaxShardBytes);
// How save_model_files writes the weights. Each file tensor is streamed into its file as it is
// written (one tensor's staging at most, never a copy of the model).
struct SaveOptions {
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;
  // The checkpoint the model was loaded from (convert): a weight whose values are still the ones
  // read from it (compared value for value) is copied from it byte for byte, in its dtype.
  const io::SafetensorsSet* source = nullptr;
  // Model tensors (spec names) the model never read from `source` (load_model's `only`): they
  // hold zeros and are copied from `source` as they are, converted only when `dtype` asks.
  std::set<std::string> unread;
  // The dtype of every weight (F32, BF16 or F16); unset: each weight in the dtype of its
  // tensor in `source` (F32 without one). Head values stay float32 (ParamSpec::head_value).
  std::optional<DType> dtype;
};
void save_model_files(const Model<float>& model, const std::string& dir, const SaveOptions& opt);
// The files beside the weights that tokenizers and generate read (tokenizer.json,
// tokenizer_config.json, special_tokens_map.json, generation_config.json): those in from_dir are
// copied into to_dir (atomically each), so a converted, merged or exported model keeps its
// tokenizer. Returns their names.
std::vector<std::string> copy_side_files(const std::string& from_dir, const std::string& to_dir);
// Model config and head values (static alpha/rho, linear L/groups) of a checkpoint directory.
ModelConfig read_checkpoint_config(const std::string& dir);
HeadExtras read_head_extras(const io::SafetensorsSet& st, const ModelConfig& cfg);
// Build a model from a checkpoint directory (with its adapters, if config.json declares any);
// trainable = false: for inference only, without a gradient arena (Model's constructor).
std::unique_ptr<Model<float>> load_model(const std::string& dir, const Backend<float>& ops, bool trainable = true);
// The same with `cfg` in place of the directory's config (read_checkpoint_config(dir) with
// training-only keys changed, such as its dropout).
std::unique_ptr<Model<float>> load_model(const std::string& dir, const ModelConfig& cfg, const Backend<float>& ops,
                                         bool trainable = true, const std::set<std::string>* only = nullptr);
// Copy a checkpoint's weights (one file or shards; F32, BF16, F16 or F64, widened to float) into
// an existing model of the same shape and plan. Accepts HF's variants: a "transformer." prefix,
// attn.bias / attn.masked_bias / rotary_emb.inv_freq buffers (ignored), a tied lm_head.weight
// (must equal wte). Unknown or missing tensors are errors naming them. Adapters are not read
// here (they are not in model.safetensors): they keep their values. on_loaded, when given, sees
// each float parameter (model name, tensor) right after it is written, in the model's order: a
// reader that keeps it elsewhere (the decoder's 16-bit copies) may discard it there, so the
// model never sits in memory twice.
// only, when given: the model tensors (spec names) to read; every other one is still checked
// (present, its shape) but not read, and keeps its zeros, which cost no memory (arena pages are
// mapped when first written): a method that reads a few tensors (the attention weights, say)
// loads a model of any size in the memory of those.
using LoadedTensorHook = std::function<void(const std::string& name, Tensor& t)>;
void load_weights(Model<float>& model, const io::SafetensorsSet& st, const LoadedTensorHook& on_loaded = {},
                  const std::set<std::string>* only = nullptr);

// Optimizer moments as DIR/optimizer.safetensors ("m.<name>", "v.<name>" in stored shapes).
// m and v live in the model backend's memory, like the parameters.
void save_moments(const Model<float>& model, const Arena& m, const Arena& v, const std::string& path);
void load_moments(const Model<float>& model, Arena& m, Arena& v, const std::string& path);

}  // namespace hw
