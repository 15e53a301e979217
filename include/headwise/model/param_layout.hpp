#pragma once
// Names, shapes and storage mapping of every model tensor under a head plan.
//
// In memory, `h.{l}.attn.c_attn.*` and `h.{l}.attn.c_proj.weight` are compact: they hold only
// the Q/K/V columns and output rows the layer's plan uses (LayerLayout). On disk they keep the
// Hugging Face GPT-2 Conv1D shapes ([in, out]; c_attn columns q | k | v), with unused columns
// or rows stored as zeros. Every other tensor has the same shape in memory and on disk.
#include <cstdint>
#include <string>
#include <vector>

#include "headwise/attention/head_plan.hpp"
#include "headwise/core/arena.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/head_extras.hpp"
#include "headwise/model/model_config.hpp"

namespace hw {

// Param: trained (gradient, optimizer state). Buffer: not trained (head values, and the base
// weights frozen by model.lora.freeze_base, which keep ParamSpec::frozen).
enum class ParamRole : uint8_t { Param, Buffer };
// How the compact tensor maps to the stored one: along c_attn's q|k|v columns, c_proj's rows,
// or, for adapters, the rows of a q, k or v block (lora B of q/k/v) and c_proj's input columns
// (lora A of o).
enum class StorageMap : uint8_t { Same, QkvColumns, OutRows, QkvRows, OutColumns };
// Which block of the q|k|v columns a QkvRows tensor covers.
enum class QkvPart : uint8_t { All, Q, K, V };

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;         // in memory
  std::vector<int64_t> stored_shape;  // on disk (Hugging Face shape)
  ParamRole role = ParamRole::Param;
  StorageMap map = StorageMap::Same;
  bool is_int = false;   // int32 buffer (linear head groups)
  bool decay = false;    // AdamW weight decay: parameters of rank >= 2
  int layer = -1;
  float init_std = 0.f;  // normal init std; 0 = constant init_value
  float init_value = 0.f;
  QkvPart part = QkvPart::All;  // StorageMap::QkvRows only
  bool frozen = false;   // a model weight that model.lora.freeze_base keeps fixed (role Buffer)
  bool adapter = false;  // a LoRA matrix (saved in adapter_model.safetensors, not model.safetensors)
  float init_uniform = 0.f;  // adapters' A: uniform in [-bound, bound] from their own stream
  // A head kind's own values (static alpha/rho, linear L and groups, the tensors of the kinds
  // in src/model/kinds/), not a weight of the network: checkpoints keep them in
  // float32 (int32 for groups) whatever dtype the weights are written in.
  bool head_value = false;
};

// The names of the adapter matrices of layer l, target t: "h.<l>.attn.<t>.lora_A" / "lora_B".
// A layer's four matrices in the layer sequence's order (0 QKV, 1 attention output, 2 MLP in,
// 3 MLP out): the parameter name of one, and which one a name is with its layer (false for any
// other name, or a layer outside 0..n_layer-1).
std::string layer_matrix_name(int layer, int which);
bool layer_matrix_of(const std::string& name, int n_layer, int* layer, int* which);
std::string lora_a_name(int layer, LoraTarget t);
std::string lora_b_name(int layer, LoraTarget t);

std::vector<attn::LayerLayout> build_layouts(const ModelConfig& cfg);
// Every tensor of the model under cfg.head_plan, in a fixed order (the init RNG order).
std::vector<ParamSpec> param_specs(const ModelConfig& cfg, const HeadExtras& extras);

// Segments (stored offset, compact offset, width) along the mapped dimension.
struct Segment {
  int64_t stored = 0, compact = 0, width = 0;
  bool operator==(const Segment&) const = default;
};
std::vector<Segment> qkv_segments(const attn::LayerLayout& layout);
std::vector<Segment> out_segments(const attn::LayerLayout& layout);
// The segments of one block (q, k or v) of qkv_segments, with offsets from the block's start.
std::vector<Segment> part_segments(const attn::LayerLayout& layout, QkvPart part);

// Stored (HF-shaped) values -> compact memory tensor, and back (stored is zero-filled first).
template <class F, class S>
void compact_from_stored(const ParamSpec& spec, const attn::LayerLayout* layout, const S* stored, F* compact);
template <class F, class S>
void stored_from_compact(const ParamSpec& spec, const attn::LayerLayout* layout, const F* compact, S* stored);

// Move values between arenas of two layouts of the same model (a plan change): every tensor
// of `to` that `from` also has is filled through the stored shape; the rest is left as is.
// Used for parameters and for each AdamW moment, so rows that disappear take their moments along.
// Both arenas live in `ops`' memory; values are staged through host buffers one tensor at a time.
template <class F>
void remap_arena(const Backend<F>& ops, const Arena& from, const std::vector<ParamSpec>& from_specs,
                 const std::vector<attn::LayerLayout>& from_layouts, Arena& to,
                 const std::vector<ParamSpec>& to_specs, const std::vector<attn::LayerLayout>& to_layouts);

// remap_arena for a source that is not needed afterwards (a plan change's old block): on the
// CPU every tensor goes straight across (a tensor whose compact layout did not change is copied
// as it is, piece by piece), and the source's pages are given back as each piece is copied
// (Arena::discard_bytes), so that old and new block together never hold much more than one
// model. The source reads as zeros afterwards. Elsewhere it is remap_arena.
template <class F>
void move_arena_values(const Backend<F>& ops, Arena& from, const std::vector<ParamSpec>& from_specs,
                       const std::vector<attn::LayerLayout>& from_layouts, Arena& to,
                       const std::vector<ParamSpec>& to_specs, const std::vector<attn::LayerLayout>& to_layouts);

int64_t stored_numel(const ParamSpec& spec);

}  // namespace hw
