#pragma once
// The decoder of every family (GPT-2, Llama, Qwen2, Qwen3): pre-norm blocks whose norm
// (LayerNorm | RMSNorm), MLP (GELU | SwiGLU), positions (learned | RoPE, Llama 3 scaling),
// biases, q/k norm and head tying are the config's choices, MHA or GQA, and a head plan per
// layer. One training step reads top to bottom in forward() and backward() (model.cpp; the
// layer's forward sequence in layer_forward.hpp, shared with cached decoding). F is float for
// training and double for the gradient tests.
//
// Device-clean: every arena lives on the backend's device (ops.device()), and the model itself
// touches that memory only through the backend: ops inside a step, copy_to_device /
// copy_to_host outside it (init, plan changes, read-backs). A step copies exactly two host
// arrays in (the micro-batch's input tokens and targets) and reads back only the scalars the
// ops return (the loss sum).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "headwise/attention/attention.hpp"
#include "headwise/core/arena.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/attention_observer.hpp"
#include "headwise/model/head_extras.hpp"
#include "headwise/model/model_config.hpp"
#include "headwise/model/param_layout.hpp"

namespace hw {

namespace model_detail {
template <class F>
struct Weights;  // the parameters by role (src/model/model_impl.hpp)
}  // namespace model_detail

// What a step stores activations and the GEMMs' copy of the weights in (train.precision):
//   Full: the model's own F ("fp32" for a float model);
//   Bf16: bf16, with fp32 arithmetic inside every op, and F for everything that accumulates or
//         is updated: parameters (the master weights the optimizer updates), gradients, LayerNorm
//         and head parameters, row statistics. Before each forward the parameters are rounded
//         (to nearest even) into a bf16 copy the GEMMs and the embedding read.
enum class Precision : uint8_t { Full, Bf16 };
// "fp32" / "bf16"; parse_precision throws hw::Error naming `what` for anything else.
Precision parse_precision(const std::string& name, const std::string& what);
const char* precision_name(Precision p);

template <class F>
class Model {
 public:
  // trainable = false: an inference model (generate, eval, bench-infer): no gradient arena (a
  // pretrained model's weights once, not twice); forward_backward then throws.
  Model(const ModelConfig& cfg, const Backend<F>& ops, const HeadExtras& extras = {}, bool trainable = true);
  ~Model();

  const ModelConfig& config() const { return cfg_; }
  const std::vector<attn::LayerLayout>& layouts() const { return layouts_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const Backend<F>& ops() const { return ops_; }
  bool trainable() const { return trainable_; }
  // Arenas in the backend's memory (host code reads them through ops().copy_to_host).
  Arena& params() { return params_; }
  Arena& grads() { return grads_; }
  Arena& buffers() { return buffers_; }
  Arena& activations() { return acts_; }
  const Arena& params() const { return params_; }
  const Arena& grads() const { return grads_; }
  const Arena& buffers() const { return buffers_; }
  const Arena& activations() const { return acts_; }
  size_t activation_bytes() const { return acts_.bytes(); }
  // The parameters by role (src/model/model_impl.hpp's Weights: each layer's matrices, biases
  // and norms, found once through the parameter layout) and layer l's head parameters (static
  // patterns, linear kernels), for code that runs the layer sequence outside the training step:
  // cached decoding.
  const model_detail::Weights<F>& weights() const;
  const attn::LayerHeadParams<F>& head_params(int l) const;
  int64_t num_parameters() const { return params_.numel(); }

  // GPT-2 init from `seed`: values are drawn in the stored (Hugging Face) shape and then
  // compacted, so the surviving weights do not depend on the plan.
  void init_weights(uint64_t seed);

  // Size the activation arena for micro-batches of B x T (allocates only when the shape grows
  // or changes; never inside a step that has the same shape).
  void reserve_activations(int64_t B, int64_t T);

  // The classifier (LM head, cross-entropy, its backward) runs over `rows` rows of the
  // micro-batch at a time, so only rows x vocab logits exist at once (train.classifier_chunk_rows).
  // 0 (the default) = every row at once, or above a 65,536 vocabulary as many as fit 2^24 logits
  // (chunk_rows_for). Takes effect at the next reserve_activations / step.
  void set_classifier_chunk_rows(int64_t rows);
  int64_t classifier_chunk_rows() const { return chunk_rows_; }

  // Activation recomputation (train.recompute_gelu): keep one shared GELU-output buffer instead
  // of one per layer and recompute GELU from the saved pre-activation in backward; saves
  // n_layer - 1 buffers of B x T x 4 n_embd floats for one extra GELU per layer. Results are
  // bit-identical. Takes effect at the next reserve_activations / step.
  void set_recompute_gelu(bool on);
  bool recompute_gelu() const { return recompute_gelu_; }

  // Forward-only activations (calibration): every layer writes the same one layer's tensors
  // (sized for the widest layer) and no backward scratch exists, so the activation arena does
  // not grow with n_layer; forward_backward then throws, and read_layer_qkv / read_layer_attn_out
  // see the layer that ran last. The numbers are those of the ordinary forward, bit for bit.
  // Takes effect at the next reserve_activations / step.
  void set_forward_only(bool on);
  bool forward_only() const { return forward_only_; }

  // Mixed precision (see Precision). Bf16 needs a float model and a backend with bf16_ops();
  // throws hw::Error naming the backend otherwise. Takes effect at the next step.
  void set_precision(Precision p);
  Precision precision() const { return precision_; }

  // Mean cross-entropy over the B*T targets (targets equal to cpu::kIgnoreTarget = -1 are left
  // out of the loss and the mean). With targets == nullptr only logits are computed (read them
  // with read_logits). inputs and targets are host arrays of B*T tokens; each is copied to the
  // backend once per call.
  double forward(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T);
  // The layer stack one layer at a time (forward() without the classifier is forward_start,
  // then forward_layer(l) for l = 0 .. n_layer-1): calibration streams windows layer by layer,
  // keeping each window's layer input (save_layer_input: the residual stream and its normalised
  // form, 2 x B*T x n_embd in the step's activation type) between layers instead of every
  // layer's activations. forward_layer(l) reads the input of layer l that forward_start,
  // forward_layer(l - 1) or load_layer_input(l, ...) left, and read_layer_qkv(l) is valid right
  // after it. load_layer_input needs the activations of the same B x T (a forward_start first).
  void forward_start(const int32_t* inputs, int64_t B, int64_t T);
  void forward_layer(int l);
  // Layer l up to its Q, K and V only (read_layer_qkv(l) valid after it, the same numbers as
  // after forward_layer(l)); the activations after them are not computed, so the next layer
  // needs forward_layer(l) first: for a stream that reads nothing beyond layer l.
  void forward_layer_qkv(int l);
  size_t layer_input_bytes() const;
  void save_layer_input(int l, std::vector<unsigned char>& host) const;
  void load_layer_input(int l, const std::vector<unsigned char>& host);
  // forward, then accumulate into grads() the gradient of loss_scale * (mean loss of this
  // micro-batch). Returns the mean loss.
  double forward_backward(const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T, double loss_scale);
  // Zero the whole gradient block (one backend op).
  void zero_grads();
  // Dropout (model.resid_pdrop, embd_pdrop, and LoRA's model.lora.dropout): the masks of the
  // following forward_backward calls are a pure function of this seed, the layer, the site and
  // the element (the trainer sets one per global micro-batch index, so a resumed run and any rank
  // count draw the same masks; backward regenerates them instead of storing them). forward()
  // never drops.
  void set_dropout_seed(uint64_t seed) { dropout_seed_ = seed; }

  // Read-backs into host vectors (resized), after forward: the logits [B*T, vocab] of the last
  // forward (computed chunk by chunk from the final LayerNorm output when they are not held
  // whole: chunked classifier, or after forward_backward overwrote them with their gradient),
  // the fused QKV activations of layer l [B*T, layouts()[l].qkv_width()] (after RoPE), which
  // calibration reads, and the attention output of layer l [B*T, layouts()[l].out_width()].
  void read_logits(std::vector<F>& host);
  void read_layer_qkv(int l, std::vector<F>& host) const;
  void read_layer_attn_out(int l, std::vector<F>& host) const;
  // The same tensors in the backend's memory (not host-readable on a GPU), full precision only
  // (they throw under Precision::Bf16: use the read_* functions). logits() holds all rows only
  // after forward(inputs, nullptr) without classifier chunks.
  const F* logits() const;
  const F* layer_qkv(int l) const;
  const F* layer_attn_out(int l) const;

  // Observation of every layer's attention in the following forwards (and backwards, when the
  // observer wants them): see attention_observer.hpp. nullptr (the default) = none, and then a
  // step does no extra work. The observer is not owned and must outlive its use.
  void set_attention_observer(AttentionObserver* observer) { observer_ = observer; }
  AttentionObserver* attention_observer() const { return observer_; }

  // Gradient-ready hook, for overlapping the gradient reduction with backward. Every backward
  // calls hook(l) for l = n_layer-1 .. 0, each right after the last op that writes layer l's
  // parameter gradients (its LayerNorms, c_attn, c_proj, MLP and linear-head L tensors: every
  // grads() tensor of layer l), then hook(-1) after the last op of backward, once the tensors
  // outside the layers (wte, wpe, ln_f) are final too. The ops are enqueued on the backend's
  // stream when the hook runs (a GPU caller records an event there). grad_ready_ranges(l) gives
  // the bytes each call covers. With gradient accumulation the hook runs on every micro-step;
  // the caller decides which one is the last. An empty function removes the hook.
  void set_grad_ready_hook(std::function<void(int layer)> hook) { grad_ready_hook_ = std::move(hook); }
  struct ByteRange {
    size_t begin = 0, end = 0;  // bytes [begin, end) of grads().base()
    size_t size() const { return end - begin; }
  };
  // Layer l >= 0: one range holding exactly layer l's gradient tensors (declaration order keeps
  // them contiguous; built and checked with the arena). l == -1: the tensors before layer 0
  // (wte, wpe) and after the last layer (ln_f), two ranges. Every range runs to the start of the
  // next one (alignment padding, which stays zero, goes with the tensor before it), so all
  // ranges together tile [0, grads().bytes()) and layer ranges follow each other in layer order.
  std::vector<ByteRange> grad_ready_ranges(int layer) const;

  // Current static/linear head values (for checkpoints and plan changes).
  HeadExtras head_extras() const;
  // Change the plan in place: parameters of surviving rows keep their values, rows that
  // disappear are dropped, new static/linear heads take values from `extras` (defaults if
  // absent); activations are re-sized on the next reserve_activations. Returns true when the
  // parameter layout was kept (same tensors, shapes and compact columns: e.g. a window or sink
  // size changed, or softmax <-> window): then no arena is rebuilt, the parameter and gradient
  // blocks stay where they are and optimizer state needs nothing. Otherwise the arenas are
  // rebuilt (gradients zeroed) and callers remap optimizer state with remap_arena() using the
  // old specs/layouts they saved before.
  bool install_plan(const attn::HeadPlan& plan, const HeadExtras& extras);
  // Whether install_plan(plan, extras) would keep the parameter layout (validates the plan).
  bool keeps_layout(const attn::HeadPlan& plan, const HeadExtras& extras) const;
  // Give a model without adapters the adapters `lora` describes (model.lora), in place: every
  // weight keeps its value (and moves to the buffers when lora.freeze_base), A matrices draw from
  // `seed`'s adapter stream, B matrices are zero, so the outputs do not change. The layout moves:
  // callers remap optimizer state (remap_arena) as for install_plan.
  void add_adapters(const LoraConfig& lora, uint64_t seed);
  // Fold the adapters into the weights they adapt (W += scaling * (B A)^T in W's layout) and
  // drop them; frozen weights train again. The outputs stay the same (up to rounding).
  void merge_adapters();
  // Recompute static heads' row normalisers after their alpha/rho buffers were written.
  void refresh_static_normalisers();
  // Static heads' row normalisers (log Z_i, derived from alpha and rho, O(i) each) are computed
  // only for the rows a step or a decoder reads: every step makes rows [0, T) valid
  // (reserve_activations), a decoder rows [0, its context). A model that is converted and
  // written without a step never computes them (84 static heads at block_size 32768: 84 x 32768^2 / 2
  // exponentials). A cache of alpha/rho, hence const.
  void ensure_static_normalisers(int64_t rows) const;

 private:
  struct Impl;
  template <class A>
  struct StepActs;
  void build(const HeadExtras& extras);
  // Rebuild the arenas for `next`, keeping every value that has a place in the new layout.
  void rebuild_keeping_values(const ModelConfig& next, const HeadExtras& extras);
  // Draw the adapters' A matrices (uniform, their own stream of `seed`) and zero their B.
  void init_adapters(uint64_t seed);
  // install_plan's cheap path: false (and nothing changed) when the layout would move.
  bool install_keeping_layout(const attn::HeadPlan& plan, const HeadExtras& extras);
  void drop_activations();
  void build_grad_ranges();
  void upload_static_head(const StaticHeadValues& v, F* alpha, F* rho, F* log_z);
  // The step, written once over the activation type A (F, or bf16 under Precision::Bf16) and
  // dispatched by the functions without a suffix through with_step_ops.
  template <class Fn>
  decltype(auto) with_step_ops(Fn&& fn);
  void forward_layers(const int32_t* inputs, int64_t B, int64_t T);
  template <class A>
  void forward_start_as(const ComputeOps<A, F>& o, const int32_t* inputs, int64_t B, int64_t T);
  template <class A>
  void forward_layer_as(const ComputeOps<A, F>& o, int l, bool qkv_only = false);
  // Uploads targets (packed, with the rows that have one, when at most half of the rows do) and
  // returns how many are not ignored (at least one).
  int64_t upload_targets(const int32_t* targets, int64_t N);
  // Classifier over row chunks: logits, loss sum (returned) and, when `backward`, dlogits and
  // the LM head's gradients (into grads and the final LayerNorm output's gradient).
  double classifier(bool backward, double dloss);
  template <class A>
  double classifier_as(const ComputeOps<A, F>& o, bool backward, double dloss);
  void backward();
  template <class A>
  void backward_as(const ComputeOps<A, F>& o);
  template <class A>
  void reserve_activations_as(const ComputeOps<A, F>& o, int64_t B, int64_t T);
  template <class A>
  void read_logits_as(const ComputeOps<A, F>& o, std::vector<F>& host);
  template <class A>
  void logits_rows_as(const ComputeOps<A, F>& o, int64_t r0, int64_t n);
  // Device rows of an activation tensor, widened to F on the host.
  template <class A>
  void read_rows(const A* src, int64_t n, std::vector<F>& host) const;
  // Hands layer l's attention tensors to the observer (dout: backward's gradient, or null).
  template <class A>
  void observe_layer(int l, const A* dout);
  // LoRA adapters in the step (model_lora.cpp), full precision: forward adds their outputs to
  // layer l's q|k|v columns (before RoPE) and to its attention projection output; backward
  // accumulates their input gradients and their A and B gradients.
  void lora_qkv_forward(int l);
  void lora_out_forward(int l);
  void lora_out_backward(int l, const F* dout);
  void lora_qkv_backward(int l);
  void lora_adapter_backward(int l, int target, const F* dout, int64_t width, const F* x, int64_t in, F* dx);
  const F* lora_input(const F* x, int64_t n, int l, int site);
  void lora_input_backward(F* dinp, int64_t n, int l, int site);
  uint64_t lora_dropout_seed(int l, int site) const;
  uint64_t dropout_site_seed(int l, int site) const;
  // `rate` inside forward_backward, 0 elsewhere (forward, generate, eval).
  double dropping(double rate) const;
  // The bf16 step's ops (throws unless the model is float and the backend has them).
  const ComputeOps<bf16, F>& bf16_ops() const;
  // Under Bf16: size the bf16 weight copy and round the parameters into it.
  void refresh_weight_copy();
  // Rows per classifier chunk for N rows: the set value, or (0) all of them, except for a
  // vocabulary above 65,536 (Llama 3's 128K, Qwen's 152K), where all rows' logits would be
  // gigabytes: then as many rows as fit kAutoChunkLogits logits.
  static constexpr int64_t kAutoChunkLogits = int64_t(1) << 24;
  int64_t chunk_rows_for(int64_t N) const {
    if (chunk_rows_ > 0) return chunk_rows_ < N ? chunk_rows_ : N;
    if (cfg_.vocab_size <= 65536) return N;
    return std::min<int64_t>(N, std::max<int64_t>(1, kAutoChunkLogits / cfg_.vocab_size));
  }

  // The choices of the block that differ between families (model.cpp).
  template <class A>
  void norm_backward(const ComputeOps<A, F>& o, A* dinp, F* dw, F* db, const A* dout, const A* inp, const F* w,
                     const F* mean, const F* rstd, int64_t N) const;
  template <class A>
  void rope(const ComputeOps<A, F>& o, A* x, int l, bool backward) const;

  ModelConfig cfg_;
  bool trainable_ = true;
  std::vector<double> rope_freqs_;  // rope_inv_freq(cfg_): rotary frequencies (scaled for Llama 3)
  const Backend<F>& ops_;
  std::vector<attn::LayerLayout> layouts_;
  std::vector<ParamSpec> specs_;
  Arena params_, grads_, buffers_, acts_;
  Arena weights16_;  // Precision::Bf16: the parameter block rounded to bf16, element for element
  std::unique_ptr<Impl> impl_;
  int64_t B_ = 0, T_ = 0;
  int64_t chunk_rows_ = 0;     // classifier rows per chunk; 0 = all
  bool recompute_gelu_ = false;
  bool forward_only_ = false;
  mutable int64_t log_z_rows_ = 0;  // rows of every static head's log_z that are valid
  Precision precision_ = Precision::Full;
  int64_t acts_chunk_ = 0;     // the logits rows the activation arena was sized for
  attn::HeadPlan acts_plan_;   // the plan the activation arena (attention workspace) was sized for
  bool logits_whole_ = false;  // the logits buffer holds the last forward's logits for all rows
  AttentionObserver* observer_ = nullptr;
  uint64_t dropout_seed_ = 0;
  bool dropout_on_ = false;  // inside forward_backward: dropout applies
  std::function<void(int)> grad_ready_hook_;
  std::vector<ByteRange> layer_ranges_, outer_ranges_;
  // Profiler range names, built once per layout: "layer <l> forward" / "layer <l> backward".
  std::vector<std::string> fwd_names_, bwd_names_;
};

}  // namespace hw
