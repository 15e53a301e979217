// Gradient reduction across ranks and the ZeRO-1 sharded optimizer: per-layer buckets for plain
// data parallelism, the reduce-scatter / all-gather of ZeRO-1, its moments gathered for a plan
// change, its optimizer shard files, and the optimizer's memory per rank.
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>

#include "headwise/core/error.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/device_copy.hpp"
#include "headwise/train/trainer.hpp"
#include "train/trainer_blocks.hpp"

namespace hw {

namespace fs = std::filesystem;
using trainer_detail::block_of;
using trainer_detail::floats_of;

namespace {
// clip_grads restricted to [begin, end) of the gradient block (ZeRO-1: the own shard), with
// the same coefficient and the same float multiply, so it matches clip_grads element for element.
void clip_range(const Backend<float>& ops, float* g, dist::Range r, double norm, double max_norm) {
  const float c = clip_coefficient(norm, max_norm);
  if (c != 1.0f) ops.scale(g + r.begin, c, r.size());
}

constexpr const char* kShardFormat = "headwise.zero1_shard.v1";
}  // namespace

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

}  // namespace hw
