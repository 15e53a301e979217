// The training loop: construction, one update (micro-steps, reduction, update), evaluation,
// metrics and the run with its checkpoints and stop signals. Gradient reduction and ZeRO-1 are
// trainer_zero1.cpp, checkpoints and resume trainer_checkpoint.cpp, plan changes trainer_plan.cpp.
#include "headwise/train/trainer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/data/bpe_tokenizer.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/train/run_folder.hpp"
#include "headwise/train/stop_signals.hpp"
#include "train/trainer_blocks.hpp"

namespace hw {

namespace fs = std::filesystem;
using trainer_detail::block_of;
using trainer_detail::floats_of;

namespace {
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
