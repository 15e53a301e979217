#include "headwise/core/process_stats.hpp"
#include "headwise/train/trainer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/data/bpe_tokenizer.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/adapter_files.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/device_copy.hpp"
#include "headwise/train/run_folder.hpp"
#include "headwise/train/stop_signals.hpp"

namespace hw {

namespace fs = std::filesystem;

namespace {
// An arena's whole block as floats (tensors plus zero padding): what the collectives work on.
// It lives in the backend's memory: host code only hands it to ops, collectives and copies.
float* block_of(Arena& a) { return static_cast<float*>(a.base()); }
const float* block_of(const Arena& a) { return static_cast<const float*>(a.base()); }
int64_t floats_of(const Arena& a) { return int64_t(a.bytes() / sizeof(float)); }

// clip_grads restricted to [begin, end) of the gradient block (ZeRO-1: the own shard), with
// the same coefficient and the same float multiply, so it matches clip_grads element for element.
void clip_range(const Backend<float>& ops, float* g, dist::Range r, double norm, double max_norm) {
  const float c = clip_coefficient(norm, max_norm);
  if (c != 1.0f) ops.scale(g + r.begin, c, r.size());
}

// A named profiler range (NVTX on the GPU) around one phase of a step.
class PhaseRange {
 public:
  PhaseRange(const Backend<float>& ops, const char* name) : ops_(ops) { ops_.range_push(name); }
  ~PhaseRange() { ops_.range_pop(); }
  PhaseRange(const PhaseRange&) = delete;
  PhaseRange& operator=(const PhaseRange&) = delete;

 private:
  const Backend<float>& ops_;
};

std::string shard_file(const std::string& dir, int rank) {
  return dir + "/optimizer.rank" + std::to_string(rank) + ".safetensors";
}

constexpr const char* kShardFormat = "headwise.zero1_shard.v1";
}  // namespace

EvalResult evaluate(Model<float>& model, const data::TokenLoader& loader, int64_t n_batches, int64_t B, int64_t T,
                    dist::Comm& comm) {
  std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
  double sums[2] = {0.0, 0.0};  // loss sum, token count
  for (int64_t i = comm.rank(); i < n_batches; i += comm.world()) {
    loader.fetch(i, x.data(), y.data());
    sums[0] += model.forward(x.data(), y.data(), B, T) * double(B * T);
    sums[1] += double(B * T);
  }
  comm.allreduce_sum(sums, 2);
  EvalResult r;
  r.tokens = int64_t(sums[1]);
  r.loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
  r.ppl = std::exp(r.loss);
  return r;
}

nlohmann::json TrainerState::to_json() const {
  nlohmann::json j = {{"step", step}, {"next_batch", next_batch}, {"tokens", tokens}};
  if (best_step >= 0) j["best"] = {{"step", best_step}, {"val_loss", best_val_loss}};
  return j;
}

TrainerState TrainerState::from_json(const nlohmann::json& j, const std::string& path) {
  TrainerState s;
  for (const char* k : {"step", "next_batch", "tokens"})
    check(j.contains(k) && j[k].is_number_integer(), path + ": missing integer '" + k + "'");
  // Counters, never negative (a negative step or data position would index before the start).
  s.step = json_int(j["step"], path + ": step", 0);
  s.next_batch = json_int(j["next_batch"], path + ": next_batch", 0);
  s.tokens = json_int(j["tokens"], path + ": tokens", 0);
  if (j.contains("best")) {  // train.keep_best: absent before the first evaluation
    const nlohmann::json& b = j["best"];
    check(b.is_object() && b.contains("step") && b["step"].is_number_integer() && b.contains("val_loss") &&
              b["val_loss"].is_number(),
          path + ": 'best' must hold an integer step and a number val_loss");
    s.best_step = json_int(b["step"], path + ": best.step", 0);
    s.best_val_loss = b["val_loss"].get<double>();
  }
  return s;
}

namespace {
Planners one_planner(std::unique_ptr<Planner> p) {
  Planners v;
  if (p) v.push_back(std::move(p));
  return v;
}
}  // namespace

Trainer::Trainer(const RunConfig& cfg, std::string out_dir, dist::Comm& comm, std::unique_ptr<Planner> planner,
                 bool synthetic_data, const Backend<float>* backend)
    : Trainer(cfg, std::move(out_dir), comm, one_planner(std::move(planner)), synthetic_data, backend) {}

Trainer::Trainer(const RunConfig& cfg, std::string out_dir, dist::Comm& comm, Planners planners, bool synthetic_data,
                 const Backend<float>* backend)
    : cfg_(cfg), out_dir_(std::move(out_dir)), comm_(comm), planners_(std::move(planners)), synthetic_(synthetic_data) {
  // The planners hold their own configuration (defaults filled in): the run records theirs.
  cfg_.methods.clear();
  for (const auto& p : planners_) cfg_.methods.push_back(p->config());
  const auto& t = cfg_.train;
  accum_ = cfg_.grad_accum(comm_.world());
  zero1_ = t.zero1 && comm_.world() > 1;  // one rank has nothing to shard: the plain path
  if (backend) {
    ops_ = backend;
  } else {
    backend_ = std::make_unique<TrainingBackend>(t.device, t.tf32, comm_.local_rank());
    ops_ = &backend_->ops();
  }
  // Collectives see the gradient block where the model keeps it.
  check(comm_.world() == 1 || comm_.device_buffers() == (ops_->device() == Device::CUDA),
        "train.device = \"" + t.device + "\" with " + std::to_string(comm_.world()) + " ranks needs a " +
            (ops_->device() == Device::CUDA ? "GPU communicator (train.comm = nccl)" : "CPU communicator") +
            ", not " + comm_.name());
  // A GPU communicator enqueues its collectives after the compute stream's work up to the call,
  // so buckets can start from backward's hook without the host waiting for the GPU.
  if (comm_.device_buffers()) comm_.bind_stream(ops_->native_stream());
  model_ = make_model(cfg_.model);
  model_->init_weights(uint64_t(t.seed));
  make_buckets();
  make_optimizer();
  if (!synthetic_) {
    check(!cfg_.data.train.empty(), "data.train is not set (a glob of token shards, e.g. data/kjv/train_*.bin)");
    train_loader_ = std::make_unique<data::TokenLoader>(cfg_.data.train, t.micro_batch, t.seq_len,
                                                        cfg_.data.shuffle, uint64_t(t.seed));
    find_tokenizer();
  }
  if (!cfg_.data.val.empty())
    val_loader_ = std::make_unique<data::TokenLoader>(
        cfg_.data.val, t.micro_batch, t.seq_len, false, 0,
        cfg_.data.val_split == "halves" ? data::Part::SecondHalf : data::Part::All);  // held out from calibration
  inputs_.resize(size_t(t.micro_batch * t.seq_len));
  targets_.resize(inputs_.size());
  model_->reserve_activations(t.micro_batch, t.seq_len);
  if (!out_dir_.empty() && comm_.rank() == 0) io::ensure_dir(out_dir_);
}

Trainer::~Trainer() = default;

// A padded vocabulary (GPT-2's 50257 as 50304) is fine; a smaller one could not embed the ids.
void Trainer::find_tokenizer() {
  const fs::path path = fs::path(train_loader_->files().front()).parent_path() / "tokenizer.json";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return;
  const data::BpeTokenizer tok = data::BpeTokenizer::load(path.string());
  check(cfg_.model.vocab_size >= tok.vocab_size(),
        "model.vocab_size = " + std::to_string(cfg_.model.vocab_size) + " is smaller than the vocabulary of " +
            path.string() + " (" + std::to_string(tok.vocab_size()) + " tokens)");
  tokenizer_json_ = path.string();
}

std::unique_ptr<Model<float>> Trainer::make_model(const ModelConfig& mc, const HeadExtras& extras) const {
  auto m = std::make_unique<Model<float>>(mc, *ops_, extras);
  m->set_classifier_chunk_rows(cfg_.train.classifier_chunk_rows);
  m->set_recompute_gelu(cfg_.train.recompute_gelu);
  m->set_precision(parse_precision(cfg_.train.precision, "train.precision"));
  return m;
}

// Per-layer gradient buckets for plain data parallelism on CPU and GPU ranks (a GPU
// communicator is bound to the compute stream, so a bucket started from the hook waits for
// exactly the kernels enqueued before it). ZeRO-1 keeps its one reduce-scatter.
void Trainer::make_buckets() {
  micro_sum_ = std::make_unique<MicroStepSum>(*ops_, model_->grads(), accum_);
  buckets_.reset();
  reduce_in_backward_ = false;
  model_->set_grad_ready_hook({});
  if (zero1_ || comm_.world() == 1) return;
  std::vector<dist::Range> layers;
  for (int l = 0; l < model_->config().n_layer; ++l) {
    const auto r = model_->grad_ready_ranges(l).front();
    layers.push_back({int64_t(r.begin / sizeof(float)), int64_t(r.end / sizeof(float))});
  }
  Arena& grads = model_->grads();
  buckets_ = std::make_unique<dist::GradBuckets>(comm_, block_of(grads), floats_of(grads), std::move(layers));
  model_->set_grad_ready_hook([this](int layer) {
    if (!reduce_in_backward_) return;
    // The earlier micro-steps' partial sums join this layer's gradients before they leave.
    for (const auto& r : model_->grad_ready_ranges(layer))
      micro_sum_->finish(block_of(model_->grads()), int64_t(r.begin / sizeof(float)), int64_t(r.end / sizeof(float)));
    buckets_->on_ready(layer);
  });
}

void Trainer::init_from(const std::string& dir, const attn::HeadPlan* plan) {
  const ModelConfig ck = read_checkpoint_config(dir);
  check(ck.n_layer == cfg_.model.n_layer && ck.n_head == cfg_.model.n_head && ck.n_embd == cfg_.model.n_embd &&
            ck.vocab_size == cfg_.model.vocab_size && ck.block_size == cfg_.model.block_size &&
            ck.kv_heads() == cfg_.model.kv_heads() && ck.pos == cfg_.model.pos && ck.bias == cfg_.model.bias,
        "--init-from " + dir + ": checkpoint shape (n_layer " + std::to_string(ck.n_layer) + ", n_head " +
            std::to_string(ck.n_head) + ", n_embd " + std::to_string(ck.n_embd) + ", vocab " +
            std::to_string(ck.vocab_size) + ", block " + std::to_string(ck.block_size) +
            ") does not match the config's model section");
  // Adapters: the checkpoint's own (read back), or the config's on a checkpoint without any
  // (fine-tuning a base model: fresh adapters, base weights as saved).
  // Their shape (rank, alpha, layers, targets) is the checkpoint's; dropout and freeze_base are the
  // run's to choose.
  const LoraConfig wanted = cfg_.model.lora;  // (a copy: cfg_.model becomes the checkpoint's)
  const bool same_shape = ck.lora.rank == wanted.rank && ck.lora.alpha == wanted.alpha &&
                          ck.lora.layers == wanted.layers && ck.lora.targets == wanted.targets;
  check(!ck.lora.enabled() || !wanted.enabled() || same_shape,
        "--init-from " + dir + ": the checkpoint's LoRA adapters (" + ck.lora.to_json().dump() +
            ") differ from the config's model.lora (" + wanted.to_json().dump() + "); merge them first (headwise merge)");
  io::SafetensorsSet st(dir);
  ModelConfig ck_run = ck;
  if (ck.lora.enabled() && wanted.enabled()) {
    ck_run.lora.dropout = wanted.dropout;
    ck_run.lora.freeze_base = wanted.freeze_base;
  }
  cfg_.model = ck_run;
  const HeadExtras extras = read_head_extras(st, ck);
  opt_.reset();  // free the fresh model's memory before the checkpoint's is allocated
  model_.reset();
  model_ = make_model(ck_run, extras);
  load_weights(*model_, st);
  // The run's own plan on the pretrained weights (new heads take their defaults).
  if (plan && *plan != model_->config().head_plan) model_->install_plan(*plan, model_->head_extras());
  if (ck.lora.enabled())
    load_adapter_files(*model_, dir);
  else if (wanted.enabled())
    model_->add_adapters(wanted, uint64_t(cfg_.train.seed));
  cfg_.model = model_->config();
  make_buckets();
  make_optimizer();
  model_->reserve_activations(cfg_.train.micro_batch, cfg_.train.seq_len);
}

void Trainer::make_optimizer() {
  const auto& t = cfg_.train;
  const AdamWConfig ac{t.beta1, t.beta2, t.adam_eps, t.weight_decay};
  opt_.reset();  // free the old moments before allocating new ones
  if (zero1_) {
    const dist::Range own = own_shard();
    opt_ = std::make_unique<AdamW>(ac, *ops_, model_->params(), BlockShard{own.begin, own.end});
  } else {
    opt_ = std::make_unique<AdamW>(ac, *ops_, model_->params());
  }
}

void Trainer::resume(const std::string& dir) {
  init_from(dir);
  const std::string path = dir + "/trainer.json";
  check(fs::exists(path), "checkpoint " + dir + ": missing trainer.json");
  const nlohmann::json j = read_json(path, path);
  check(j.is_object(), path + ": not a JSON object");
  state_ = TrainerState::from_json(j, path);
  // A full optimizer.safetensors resumes on any number of ranks, with or without ZeRO-1 (each
  // rank then uses its shard of it). Sharded state only fits the shards it was cut into.
  check(!j.contains("zero1") || j["zero1"].is_boolean(), path + ": 'zero1' must be true or false");
  if (j.value("zero1", false)) {
    check(j.contains("world"), path + ": missing integer 'world'");
    const int saved = int(json_int(j["world"], path + ": world", 1, INT32_MAX));
    check(saved == comm_.world(), path + ": the optimizer state is sharded over " + std::to_string(saved) +
                                      " ranks (train.zero1); resume on " + std::to_string(saved) + " ranks, not " +
                                      std::to_string(comm_.world()));
    check(zero1_, path + ": the optimizer state is sharded (train.zero1); resume with --set train.zero1=true");
    load_optimizer_shard(shard_file(dir, comm_.rank()));
  } else if (zero1_) {
    // A full optimizer.safetensors on ZeRO-1 ranks: load it laid out like the parameter block
    // (temporarily full size), then keep this rank's slice.
    auto full_m = arena_like(model_->params(), "adam.m.full");
    auto full_v = arena_like(model_->params(), "adam.v.full");
    load_moments(*model_, *full_m, *full_v, dir + "/optimizer.safetensors");
    keep_own_shard(*full_m, opt_->m());
    keep_own_shard(*full_v, opt_->v());
  } else {
    load_moments(*model_, opt_->m(), opt_->v(), dir + "/optimizer.safetensors");
  }
  restore_planners(j, path);
  // A stop right after the resume needs no new checkpoint when the one resumed is this run's own.
  std::error_code ec;
  const std::string own = out_dir_ + "/checkpoints/step_" + std::to_string(state_.step);
  resumed_step_ = !out_dir_.empty() && fs::exists(own, ec) && fs::equivalent(dir, own, ec) ? state_.step : -1;
  spdlog::info("resumed from {} at step {}", dir, state_.step);
  // The run's record continues from the checkpoint: what the earlier run logged past it (the
  // updates about to be redone) goes, so every step appears once.
  if (!out_dir_.empty() && comm_.rank() == 0) {
    const int64_t dropped = truncate_run_record(out_dir_, state_.step, cfg_.train.steps);
    if (dropped > 0)
      spdlog::info("{}/metrics.jsonl: kept the lines before step {}, dropped {} after it", out_dir_, state_.step,
                   dropped);
  }
}

// Every rank stops at the same update: a signal reaches the ranks at different moments (or only
// some of them), so the ranks take the largest signal number any of them got.
int Trainer::agreed_stop_signal() {
  if (!stop_signals_installed()) return 0;
  double sig = double(stop_signal_received());
  if (comm_.world() > 1) sig = comm_.allreduce_max(sig);
  return int(sig);
}

RunConfig Trainer::config() const {
  RunConfig c = cfg_;
  c.model = model_->config();  // the live head plan is the model's
  return c;
}

uint64_t adapter_init_seed(int64_t run_seed, int64_t step) {
  return data::derive_seed(uint64_t(run_seed), data::Stream::LoraInit, uint64_t(step) + 1);  // (+1: not the init's)
}

bool Trainer::install(const PlanChange& change) {
  if (!change.adapters && model_->keeps_layout(change.plan, change.extras)) {
    // Same tensors at the same places: parameters, gradients, AdamW moments (and their ZeRO-1
    // shards) and the gradient buckets stay as they are.
    check(model_->install_plan(change.plan, change.extras), "internal: a layout-keeping plan moved the layout");
    model_->reserve_activations(cfg_.train.micro_batch, cfg_.train.seq_len);
    return true;
  }
  const auto old_specs = model_->specs();
  const auto old_layouts = model_->layouts();
  auto apply = [&] {
    model_->install_plan(change.plan, change.extras);
    // New adapters draw from the run's seed and the step they arrive at.
    if (change.adapters)
      model_->add_adapters(*change.adapters, adapter_init_seed(cfg_.train.seed, state_.step));
  };
  if (zero1_) {
    // Each rank holds only its shard of the moments, and the new layout cuts the block into
    // different shards: gather the full moments (temporarily, laid out like the old parameter
    // block), remap them like the parameters, then keep only the new shard.
    auto old_m = gather_moments(opt_->m(), "adam.m.full");
    auto old_v = gather_moments(opt_->v(), "adam.v.full");
    apply();
    const dist::Range own = own_shard();
    opt_->rebuild(model_->params(), BlockShard{own.begin, own.end});
    for (auto [from, to] : {std::pair{old_m.get(), &opt_->m()}, std::pair{old_v.get(), &opt_->v()}}) {
      auto full = arena_like(model_->params(), "adam.full");
      remap_arena<float>(*ops_, *from, old_specs, old_layouts, *full, model_->specs(), model_->layouts());
      keep_own_shard(*full, *to);
    }
  } else {
    apply();
    auto [old_m, old_v] = opt_->rebuild(model_->params());
    remap_arena<float>(*ops_, *old_m, old_specs, old_layouts, opt_->m(), model_->specs(), model_->layouts());
    remap_arena<float>(*ops_, *old_v, old_specs, old_layouts, opt_->v(), model_->specs(), model_->layouts());
  }
  make_buckets();  // the gradient block moved
  model_->reserve_activations(cfg_.train.micro_batch, cfg_.train.seq_len);
  return false;
}

std::vector<nlohmann::json> Trainer::intervene_if_due() {
  std::vector<nlohmann::json> reports;
  for (size_t k = 0; k < planners_.size(); ++k) {
    Planner& planner = *planners_[k];
    if (!planner.acts_at(state_.step)) continue;
    const Stopwatch total;
    const RunConfig now = config();
    PlannerContext ctx{*model_, now, comm_, state_.step};
    std::optional<PlanChange> change = planner.act(ctx);
    if (!change) continue;  // looked, kept the plan
    const Stopwatch install_time;
    const bool kept = install(*change);
    nlohmann::json report = change->report;
    report["planner"] = planner.name();
    report["planner_index"] = k;
    report["step"] = state_.step;
    report["layout_kept"] = kept;
    report["install_ms"] = install_time.ms();
    report["total_seconds"] = total.ms() / 1000.0;
    report["head_plan"] = model_->config().head_plan.to_json();
    if (!out_dir_.empty() && comm_.rank() == 0) {
      io::ensure_dir(out_dir_ + "/interventions");
      io::write_file_atomic(intervention_file(out_dir_, state_.step, k, planner.name()), report.dump(2) + "\n");
    }
    spdlog::info("{}: installed a new head plan at step {} ({:.1f} s{})", planner.name(), state_.step,
                 total.ms() / 1000.0, kept ? ", layout kept" : "");
    if (!kept) log_optimizer_memory();  // the new layout's shard
    reports.push_back(std::move(report));
  }
  return reports;
}

std::string intervention_file(const std::string& run_dir, int64_t step, size_t index, const std::string& planner) {
  return run_dir + "/interventions/step_" + std::to_string(step) + "." + std::to_string(index) + "." + planner +
         ".json";
}

nlohmann::json Trainer::planner_states() const {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : planners_) a.push_back({{"name", p->name()}, {"state", p->state()}});
  return a;
}

void Trainer::restore_planners(const nlohmann::json& trainer_json, const std::string& path) {
  const nlohmann::json saved = trainer_json.value("planners", nlohmann::json::array());
  check(saved.is_array(), path + ": 'planners' must be a list, got " + json_brief(saved));
  auto entry = [&](size_t k) -> const nlohmann::json& {
    check(saved[k].is_object(), path + ": planners[" + std::to_string(k) + "] must be an object, got " +
                                    json_brief(saved[k]));
    return saved[k];
  };
  bool any_state = false;
  for (size_t k = 0; k < saved.size(); ++k) any_state = any_state || !entry(k).value("state", nlohmann::json()).is_null();
  if (!any_state && saved.size() != planners_.size()) return;  // nothing to carry over
  check(saved.size() == planners_.size(),
        path + ": the checkpoint holds the state of " + std::to_string(saved.size()) +
            " planners, this run has " + std::to_string(planners_.size()) + " (resume with the same method list)");
  for (size_t k = 0; k < planners_.size(); ++k) {
    const std::string where = path + ": planners[" + std::to_string(k) + "]";
    const nlohmann::json& e = entry(k);
    const std::string name = e.contains("name") ? json_string(e["name"], where + ".name") : "";
    check(name == planners_[k]->name(), path + ": planner " + std::to_string(k) + " is '" + text_brief(name) +
                                            "' in the checkpoint and '" + planners_[k]->name() + "' in this run");
    try {
      planners_[k]->restore(e.value("state", nlohmann::json()));
    } catch (const Error& err) {
      fail(where + ".state: " + err.what());
    }
  }
}

namespace {
// The observers of the planners that observe one update, behind the one pointer the model
// takes (planners in method-list order).
class ObserverFanout : public AttentionObserver {
 public:
  void add(AttentionObserver* o) {
    if (o) list_.push_back(o);
  }
  bool empty() const { return list_.empty(); }
  void on_forward(const AttentionView& v) override {
    for (auto* o : list_) o->on_forward(v);
  }
  bool wants_backward() const override {
    for (auto* o : list_)
      if (o->wants_backward()) return true;
    return false;
  }
  void on_backward(const AttentionView& v) override {
    for (auto* o : list_)
      if (o->wants_backward()) o->on_backward(v);
  }

 private:
  std::vector<AttentionObserver*> list_;
};

// Sets the model's observer for one update and takes it away again, also on an exception.
class ObservedUpdate {
 public:
  ObservedUpdate(Model<float>& model, AttentionObserver* o) : model_(model) {
    if (o) model_.set_attention_observer(o);
    set_ = o != nullptr;
  }
  ~ObservedUpdate() {
    if (set_) model_.set_attention_observer(nullptr);
  }
  ObservedUpdate(const ObservedUpdate&) = delete;
  ObservedUpdate& operator=(const ObservedUpdate&) = delete;

 private:
  Model<float>& model_;
  bool set_ = false;
};
}  // namespace

double Trainer::train_step(double* grad_norm, double* update_ms) {
  const auto& t = cfg_.train;
  const int64_t B = t.micro_batch, T = t.seq_len;
  const int world = comm_.world(), rank = comm_.rank();
  double compute_ms = 0.0, loss_sum = 0.0;
  ObserverFanout observers;
  for (auto& p : planners_)
    if (p->observes_at(state_.step)) observers.add(p->observer());
  const ObservedUpdate observed(*model_, observers.empty() ? nullptr : &observers);
  Stopwatch phase;
  model_->zero_grads();
  compute_ms += phase.ms();
  const double loss_scale = 1.0 / double(accum_ * world);
  for (int64_t micro = 0; micro < accum_; ++micro) {
    const int64_t batch_index = state_.next_batch + rank * accum_ + micro;
    fetch_train(batch_index);
    // Dropout masks follow the global micro-batch, like its data (resume and any rank count draw
    // the same ones).
    model_->set_dropout_seed(
        data::derive_seed(uint64_t(cfg_.train.seed), data::Stream::LoraDropout, uint64_t(batch_index)));
    phase.restart();
    // Each micro-step's gradient is computed alone and summed in MicroStepSum's fixed tree; the
    // last one's backward adds the parked sums layer by layer and starts the buckets.
    const bool last = micro + 1 == accum_;
    reduce_in_backward_ = buckets_ != nullptr && last;
    loss_sum += model_->forward_backward(inputs_.data(), targets_.data(), B, T, loss_scale);
    reduce_in_backward_ = false;
    if (!last)
      micro_sum_->park(model_->grads(), micro);
    else if (!buckets_)
      micro_sum_->finish(block_of(model_->grads()), 0, floats_of(model_->grads()));
    compute_ms += phase.ms();
  }
  phase.restart();
  double norm = 0.0;
  {
    PhaseRange r(*ops_, "allreduce");
    norm = reduce_gradients();
  }
  double loss = loss_sum / double(accum_);
  if (world > 1) {
    comm_.allreduce_sum(&loss, 1);
    loss /= world;
  }
  check(std::isfinite(loss), "loss is " + std::to_string(loss) + " at step " + std::to_string(state_.step) +
                                 " (lower train.lr or check the data)");
  check(std::isfinite(norm), "gradient norm is not finite at step " + std::to_string(state_.step));
  const LrSchedule sched{t.lr, t.min_lr, t.warmup_steps, t.steps};
  {
    PhaseRange r(*ops_, "optimizer");
    apply_update(norm, sched.at(state_.step));
  }
  ops_->synchronize();  // the step's time includes its last kernels
  compute_ms += phase.ms();
  state_.next_batch += accum_ * world;
  state_.tokens += accum_ * world * B * T;
  state_.step += 1;
  if (grad_norm) *grad_norm = norm;
  if (update_ms) *update_ms = compute_ms;
  return loss;
}

// Gradient reduction. The block stays the unit of the ZeRO-1 sharding and of checkpoints.
//
// Plain data parallelism on CPU ranks: the sum is split into per-layer buckets (contiguous
// ranges of the block: Model::grad_ready_ranges, see dist/grad_buckets.hpp) started from
// backward's grad-ready hook on the last micro-step, last layer first, then the embeddings, so
// communication overlaps the rest of backward; here only finish() remains. Earlier micro-steps
// accumulate locally without communication. The result equals one all-reduce of the block.
//
// GPU ranks (NCCL): the same buckets; the communicator is bound to the backend's compute
// stream, so its collectives follow backward's kernels and the optimizer's kernels follow the
// collectives without the host waiting. ZeRO-1: one reduce-scatter of the block.
double Trainer::reduce_gradients() {
  Arena& grads = model_->grads();
  if (!zero1_) {
    if (buckets_)
      buckets_->finish();  // started during the last backward
    else if (comm_.world() > 1)
      comm_.allreduce_sum(block_of(grads), floats_of(grads));
    // Every rank now holds the same summed gradient, so the local norm is the global one.
    return grad_global_norm(*ops_, grads);
  }
  comm_.reduce_scatter_sum(block_of(grads), floats_of(grads));
  // Only the own shard holds sums now: square it here (padding is zero), add over ranks.
  const dist::Range own = own_shard();
  double sq = ops_->sum_squares(block_of(grads) + own.begin, own.size());
  comm_.allreduce_sum(&sq, 1);
  return std::sqrt(sq);
}

void Trainer::apply_update(double norm, double lr) {
  Arena& grads = model_->grads();
  Arena& params = model_->params();
  const int64_t t = state_.step + 1;
  if (!zero1_) {  // every rank updates the whole (identical) model
    clip_grads(*ops_, grads, norm, cfg_.train.grad_clip);
    opt_->step(params, grads, lr, t);
    return;
  }
  const dist::Range own = own_shard();
  clip_range(*ops_, block_of(grads), own, norm, cfg_.train.grad_clip);
  opt_->step_range(params, grads, lr, t, own.begin, own.end);
  // The bound GPU communicator's all_gather waits for the shard's update on the compute stream.
  comm_.all_gather(block_of(params), floats_of(params));
}

dist::Range Trainer::own_shard() const {
  // Gradients are declared like the parameters, so one range fits both blocks (and the
  // sharded AdamW owns exactly this range of them).
  return dist::shard_range(floats_of(model_->params()), comm_.rank(), comm_.world());
}

std::unique_ptr<Arena> Trainer::gather_moments(Arena& shard, const std::string& role) {
  auto full = arena_like(model_->params(), role);
  const dist::Range own = own_shard();
  check(own.begin == opt_->shard().begin && own.end == opt_->shard().end, "internal: AdamW shard is not the own shard");
  // Device to device through the host (plan changes only): the backend copies host <-> device.
  write_device(*ops_, block_of(*full) + own.begin, read_device(*ops_, block_of(shard), own.size()));
  comm_.all_gather(block_of(*full), floats_of(model_->params()));
  return full;
}

void Trainer::keep_own_shard(const Arena& full, Arena& shard) {
  const dist::Range own = own_shard();
  check(full.bytes() == model_->params().bytes(), "internal: full moments are not laid out like the parameters");
  write_device(*ops_, block_of(shard), read_device(*ops_, block_of(full) + own.begin, own.size()));
}

// The optimizer's bytes per rank, so the ZeRO-1 saving is visible and testable. Only rank 0
// logs, so under ZeRO-1 the largest shard and the shards' total come by all-reduce (collective:
// every rank calls this at the same points).
void Trainer::log_optimizer_memory() {
  const int64_t n = floats_of(model_->params());
  if (!zero1_) {
    if (comm_.rank() == 0)
      spdlog::info("optimizer: {} AdamW bytes per rank (all {} parameter-block floats on each of {} ranks)",
                   opt_->bytes(), n, comm_.world());
    return;
  }
  const double max_bytes = comm_.allreduce_max(double(opt_->bytes()));
  double covered = double(opt_->shard().size());  // exact in a double up to 2^53 floats
  comm_.allreduce_sum(&covered, 1);
  if (comm_.rank() == 0)
    spdlog::info("optimizer: {} AdamW bytes on rank 0, at most {} per rank (ZeRO-1: shard of {} floats on rank 0, "
                 "the {} shards cover {} of {} parameter-block floats)",
                 opt_->bytes(), int64_t(max_bytes), opt_->shard().size(), comm_.world(), int64_t(covered), n);
}

void Trainer::fetch_train(int64_t index) {
  if (train_loader_) {
    train_loader_->fetch(index, inputs_.data(), targets_.data());
    return;
  }
  Rng rng(data::derive_seed(uint64_t(cfg_.train.seed), data::Stream::SyntheticTokens, uint64_t(index)));
  for (size_t i = 0; i < inputs_.size(); ++i) {
    inputs_[i] = int32_t(rng.below(uint64_t(cfg_.model.vocab_size)));
    targets_[i] = int32_t(rng.below(uint64_t(cfg_.model.vocab_size)));
  }
}

EvalResult Trainer::eval(int64_t n_batches) {
  check(val_loader_ != nullptr, "data.val is not set: nothing to evaluate on");
  if (n_batches < 0) n_batches = cfg_.train.eval_batches;
  n_batches = std::min(n_batches, val_loader_->batches_per_epoch());
  return evaluate(*model_, *val_loader_, n_batches, cfg_.train.micro_batch, cfg_.train.seq_len, comm_);
}

void Trainer::append_metrics(const nlohmann::json& line) {
  if (out_dir_.empty() || comm_.rank() != 0) return;
  io::AppendFile(out_dir_ + "/metrics.jsonl", /*truncate=*/false).write_line(line.dump());
}

// Every rank writes into DIR.tmp, then rank 0 renames it to DIR once all have finished, so DIR
// is always either the previous complete checkpoint or the new complete one. Collective.
void Trainer::save_checkpoint(const std::string& dir) {
  const bool main_rank = comm_.rank() == 0;
  // Rank 0 speaks for every replica: make sure they really are replicas (a rank that drifted
  // would otherwise be lost silently).
  if (comm_.world() > 1) {
    const Arena& p = model_->params();
    const std::vector<float> host = read_device(*ops_, block_of(p), floats_of(p));
    check(comm_.all_equal(host.data(), int64_t(p.bytes())),
          "ranks hold different parameters at step " + std::to_string(state_.step) + " (checkpoint " + dir + ")");
  }
  const std::string tmp = dir + ".tmp";
  if (main_rank) {
    io::ensure_dir(fs::path(dir).parent_path().string());  // RUN/checkpoints: not a link to elsewhere
    io::fresh_dir(tmp);
  }
  comm_.barrier();
  if (main_rank) {
    save_model_files(*model_, tmp);
    if (!zero1_) save_moments(*model_, opt_->m(), opt_->v(), tmp + "/optimizer.safetensors");
    nlohmann::json tj = state_.to_json();
    tj["world"] = comm_.world();
    tj["zero1"] = zero1_;
    tj["run_config"] = config().to_json();
    tj["planners"] = planner_states();
    io::write_file_atomic(tmp + "/trainer.json", tj.dump(2) + "\n");
    if (!tokenizer_json_.empty()) {  // as save_pretrained does: generate and transformers find it
      io::copy_file_atomic(tokenizer_json_, tmp + "/tokenizer.json");
    }
  }
  if (zero1_) save_optimizer_shard(shard_file(tmp, comm_.rank()));
  comm_.barrier();
  if (main_rank) io::replace_dir_atomic(tmp, dir);
  comm_.barrier();
}

// A rank's ZeRO-1 optimizer state: tensors "m" and "v" hold the moments of floats [begin, end)
// of the parameter block (its in-memory layout: compact attention tensors and padding
// included), which is all the sharded AdamW holds, with the shard's coordinates in the metadata
// so a mismatch is caught on load.
void Trainer::save_optimizer_shard(const std::string& path) {
  const dist::Range own = own_shard();
  io::SafetensorsWriter w;
  check(own.begin == opt_->shard().begin && own.end == opt_->shard().end, "internal: AdamW shard is not the own shard");
  w.add("m", DType::F32, {own.size()}, read_device(*ops_, block_of(opt_->m()), own.size()).data());
  w.add("v", DType::F32, {own.size()}, read_device(*ops_, block_of(opt_->v()), own.size()).data());
  w.set_metadata("format", kShardFormat);
  w.set_metadata("rank", std::to_string(comm_.rank()));
  w.set_metadata("world", std::to_string(comm_.world()));
  w.set_metadata("begin", std::to_string(own.begin));
  w.set_metadata("end", std::to_string(own.end));
  w.set_metadata("block_floats", std::to_string(floats_of(model_->params())));
  w.write(path);
}

void Trainer::load_optimizer_shard(const std::string& path) {
  check(fs::exists(path), "checkpoint: missing " + path + " (ZeRO-1 optimizer shard of rank " +
                              std::to_string(comm_.rank()) + ")");
  io::SafetensorsReader st(path);
  const dist::Range own = own_shard();
  const std::pair<const char*, std::string> expected[] = {
      {"format", kShardFormat},
      {"rank", std::to_string(comm_.rank())},
      {"world", std::to_string(comm_.world())},
      {"begin", std::to_string(own.begin)},
      {"end", std::to_string(own.end)},
      {"block_floats", std::to_string(floats_of(model_->params()))}};
  for (const auto& [key, want] : expected) {
    const auto it = st.metadata().find(key);
    const std::string got = it == st.metadata().end() ? "(missing)" : it->second;
    check(got == want, path + ": metadata '" + key + "' is " + got + ", this run needs " + want);
  }
  std::vector<float> host(size_t(own.size()));
  for (auto [name, moment] : {std::pair{"m", &opt_->m()}, std::pair{"v", &opt_->v()}}) {
    st.read(name, DType::F32, {own.size()}, host.data());
    write_device(*ops_, block_of(*moment), host);
  }
}

nlohmann::json Trainer::run(int64_t stop_step) {
  const auto& t = cfg_.train;
  if (stop_step < 0) stop_step = t.steps;
  const bool main_rank = comm_.rank() == 0;
  if (!out_dir_.empty() && main_rank) {
    if (state_.step == 0) io::AppendFile(out_dir_ + "/metrics.jsonl", /*truncate=*/true);
    io::write_file_atomic(out_dir_ + "/config.json", config().to_json().dump(2) + "\n");
  }
  if (main_rank) {
    const LoraConfig& lora = model_->config().lora;
    int64_t frozen = 0;
    for (const auto& s : model_->specs())
      if (s.frozen) frozen += model_->buffers().get(s.name).numel();
    const std::string adapters =
        lora.enabled() ? fmt::format(" (LoRA rank {} on {} layers{}, {} frozen)", lora.rank,
                                     lora.layers.empty() ? cfg_.model.n_layer : int(lora.layers.size()),
                                     lora.dropout > 0 ? fmt::format(", dropout {}", lora.dropout) : "", frozen)
                       : "";
    spdlog::info("model: {} layers, {} heads, width {}, {} trained parameters{}; batch {} x {} x {} accum x {} ranks",
                 cfg_.model.n_layer, cfg_.model.n_head, cfg_.model.n_embd, model_->num_parameters(), adapters,
                 t.micro_batch, t.seq_len, accum_, comm_.world());
  }
  if (main_rank)
    spdlog::info("device: {}, precision {}; memory: params {:.1f} MB, grads {:.1f} MB, AdamW {:.1f} MB, "
                 "activations {:.1f} MB (peak {:.1f} MB)",
                 backend_ ? backend_->describe() : std::string(ops_->name()), precision_name(model_->precision()),
                 model_->params().bytes() / 1e6,
                 model_->grads().bytes() / 1e6, opt_->bytes() / 1e6, model_->activation_bytes() / 1e6,
                 arena_peak_bytes(ops_->device()) / 1e6);
  log_optimizer_memory();
  const Stopwatch run_time;
  EvalResult last_eval;
  bool have_eval = false;
  double loss = 0.0;
  // A planner that acts at step == train.steps acts after the last update: when this call makes
  // the last update, the hook runs right after it, before the final evaluation, the final
  // checkpoint and summary.json, which therefore hold the changed model. (A run resumed at
  // train.steps made no update here: its checkpoint already holds that change.) Without such a
  // planner nothing moves.
  bool acts_after_last = false;
  for (const auto& p : planners_) acts_after_last = acts_after_last || p->acts_at(t.steps);
  bool acted_after_last = false;
  int64_t saved_at = resumed_step_;  // the step of the newest step_N checkpoint this process wrote or resumed
  int stop_signal = 0;
  while (state_.step < stop_step) {
    // A stop signal (stop_signals.hpp) is honoured between updates, after the previous one's
    // evaluation and checkpoint.
    if ((stop_signal = agreed_stop_signal()) != 0) break;
    if (!(acted_after_last && state_.step == t.steps)) intervene_if_due();  // not twice at train.steps
    const Stopwatch update_time;
    double norm = 0.0, upd_ms = 0.0;
    const int64_t step = state_.step;
    const double lr = LrSchedule{t.lr, t.min_lr, t.warmup_steps, t.steps}.at(step);
    loss = train_step(&norm, &upd_ms);
    const double ms = update_time.ms();
    update_ms_sum_ += upd_ms;
    update_ms_count_ += 1;
    const double tok_per_s = double(accum_ * comm_.world() * t.micro_batch * t.seq_len) / (ms / 1000.0);
    append_metrics({{"step", step}, {"loss", loss}, {"lr", lr}, {"grad_norm", norm}, {"ms", ms},
                    {"update_ms", upd_ms}, {"tok_per_s", tok_per_s}});
    if (main_rank && (step % t.log_every == 0 || state_.step == stop_step))
      spdlog::info("step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.1f} ms | {:.0f} tok/s", step + 1, t.steps,
                   loss, lr, norm, ms, tok_per_s);
    const bool last = state_.step == t.steps;
    if (last && acts_after_last) {
      intervene_if_due();
      acted_after_last = true;
    }
    if (val_loader_ && ((t.eval_every > 0 && state_.step % t.eval_every == 0) || last)) {
      last_eval = eval();
      have_eval = true;
      append_metrics({{"step", step}, {"val_loss", last_eval.loss}, {"val_ppl", last_eval.ppl}});
      if (main_rank) spdlog::info("step {:>5} | val loss {:.4f} | val ppl {:.3f}", step + 1, last_eval.loss, last_eval.ppl);
      if (t.keep_best && !out_dir_.empty() && (state_.best_step < 0 || last_eval.loss < state_.best_val_loss)) {
        state_.best_step = state_.step;
        state_.best_val_loss = last_eval.loss;
        save_checkpoint(out_dir_ + "/checkpoints/best");
        if (main_rank) spdlog::info("step {:>5} | best so far: checkpoints/best", step + 1);
      }
    }
    if (!out_dir_.empty() && ((t.checkpoint_every > 0 && state_.step % t.checkpoint_every == 0) || last)) {
      save_checkpoint(out_dir_ + "/checkpoints/step_" + std::to_string(state_.step));
      saved_at = state_.step;
    }
  }
  if (stop_signal != 0 && !out_dir_.empty() && state_.step > 0 && saved_at != state_.step) {
    save_checkpoint(out_dir_ + "/checkpoints/step_" + std::to_string(state_.step));
    saved_at = state_.step;
  }
  nlohmann::json summary = {{"steps", state_.step},
                            {"tokens", state_.tokens},
                            {"train_loss", loss},
                            {"wall_s", run_time.ms() / 1000.0},
                            {"mean_update_ms", update_ms_count_ ? update_ms_sum_ / double(update_ms_count_) : 0.0},
                            {"peak_bytes", arena_peak_bytes(ops_->device())},
                            {"device", cfg_.train.device},
                            {"parameters", model_->num_parameters()},
                            {"world", comm_.world()}};
  if (have_eval) {
    summary["val_loss"] = last_eval.loss;
    summary["val_ppl"] = last_eval.ppl;
  }
  if (stop_signal != 0) {
    summary["interrupted"] = signal_name(stop_signal);
    summary["checkpoint"] = saved_at > 0 ? out_dir_ + "/checkpoints/step_" + std::to_string(saved_at) : "";
  }
  if (state_.best_step >= 0)
    summary["best"] = {{"step", state_.best_step}, {"val_loss", state_.best_val_loss},
                       {"checkpoint", out_dir_ + "/checkpoints/best"}};
  if (!out_dir_.empty() && main_rank && state_.step == t.steps)
    io::write_file_atomic(out_dir_ + "/summary.json", summary.dump(2) + "\n");
  return summary;
}

}  // namespace hw
