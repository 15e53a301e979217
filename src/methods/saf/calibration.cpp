#include "headwise/methods/saf/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/methods/saf/capture.hpp"

namespace hw::saf {

namespace {

// Offsets of the blocks of HeadStatsAccumulator::pack (layout documented in stats.hpp).
struct PackedLayout {
  int64_t cells = 0, mean = 5, cell_m2 = -1, logit_mean = -1, logit_m2 = -1;
  explicit PackedLayout(const HeadStatsAccumulator& a) : cells(a.cells()) {
    int64_t next = mean + cells;
    if (a.needs().cell_variance) {
      cell_m2 = next;
      next += cells;
    }
    if (a.needs().logit_mean) {
      logit_mean = next;
      next += cells;
    }
    if (a.needs().logit_variance) logit_m2 = next;
  }
};

// Fills rows [0, B) of a calibration batch from this rank's sequences [start, start + real);
// rows past `real` repeat the first row (they keep the batch shape and are never counted) and
// get targets -1.
void fill_batch(const CalibSource& source, const std::vector<int64_t>& mine, size_t start, int64_t real, int64_t B,
                int64_t T, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
  for (int64_t r = 0; r < real; ++r) source(mine[start + size_t(r)], in.data() + r * T, tg.data() + r * T);
  for (int64_t r = real; r < B; ++r) {
    std::memcpy(in.data() + r * T, in.data(), sizeof(int32_t) * size_t(T));
    std::fill(tg.begin() + r * T, tg.begin() + (r + 1) * T, -1);
  }
}

void check_options(const Model<float>& model, const CaptureOptions& opt) {
  const auto& cfg = model.config();
  check(opt.seq_len >= 1 && opt.seq_len <= cfg.block_size,
        "SAF calibration: sequence length " + std::to_string(opt.seq_len) + " must be in [1, model.block_size = " +
            std::to_string(cfg.block_size) + "]");
  check(opt.batch >= 1, "SAF calibration: batch must be positive");
  check(opt.n_seqs >= 1, "SAF calibration: no calibration sequences");
}

}  // namespace

CapturePath parse_capture_path(const std::string& name, const std::string& where) {
  if (name == "backend") return CapturePath::Backend;
  if (name == "reference") return CapturePath::Reference;
  fail(where + " must be \"backend\" or \"reference\", got \"" + text_brief(name) + "\"");
}

std::vector<int64_t> rank_indices(int64_t n, int rank, int world) {
  check(world >= 1 && rank >= 0 && rank < world, "SAF calibration: bad rank " + std::to_string(rank) + " of " +
                                                     std::to_string(world));
  std::vector<int64_t> out;
  for (int64_t i = rank; i < n; i += world) out.push_back(i);
  return out;
}

int64_t head_stats_bytes(int T, const StatsNeeds& needs) {
  const int64_t cells = int64_t(T) * (T + 1) / 2;
  const bool logit_mean = needs.logit_mean || needs.logit_variance;
  const int64_t blocks = 1 + (needs.cell_variance ? 1 : 0) + (logit_mean ? 1 : 0) + (needs.logit_variance ? 1 : 0);
  return int64_t(sizeof(double)) * (5 + blocks * cells + T);
}

int layers_per_group(int n_layer, int n_head, int T, const StatsNeeds& needs, double budget_mb) {
  const double per_layer = double(n_head) * double(head_stats_bytes(T, needs));
  const double budget = std::max(budget_mb, 0.0) * 1024.0 * 1024.0;
  const double fit = std::floor(budget / per_layer);
  return int(std::clamp(fit, 1.0, double(std::max(n_layer, 1))));
}

CaptureStream::CaptureStream(Model<float>& model, const CalibSource& source, const CaptureOptions& opt,
                             dist::Comm& comm)
    : model_(model), opt_(opt), comm_(comm) {
  check_options(model, opt);
  check(opt.path != CapturePath::Backend || model.ops().device() == Device::CPU,
        "SAF calibration: method.capture = \"backend\" needs the attention-probabilities op "
        "(attn::softmax_probabilities), which the CUDA backend lacks; set method.capture = \"reference\"");
  const int64_t T = opt.seq_len, B = opt.batch;
  const std::vector<int64_t> mine = rank_indices(opt.n_seqs, comm.rank(), comm.world());
  std::vector<std::vector<int32_t>> batches;
  std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T));
  for (size_t start = 0; start < mine.size(); start += size_t(B)) {
    const int64_t real = std::min<int64_t>(B, int64_t(mine.size() - start));
    fill_batch(source, mine, start, real, B, T, in, tg);
    batches.push_back(in);
    real_.push_back(real);
  }
  stream_ = std::make_unique<WindowStream>(model, B, T, std::move(batches));
}

CaptureStream::~CaptureStream() = default;

int CaptureStream::layer() const { return stream_->layer(); }
size_t CaptureStream::held_bytes() const { return stream_->held_bytes(); }

void CaptureStream::skip_to(int l0) {
  check(l0 >= layer() && l0 <= model_.config().n_layer, "SAF calibration: cannot skip to layer " + std::to_string(l0));
  stream_->advance(l0, {});
}

std::vector<HeadStatsAccumulator> CaptureStream::capture(int l1, CaptureTimes* times) {
  const auto& cfg = model_.config();
  const int l0 = layer();
  check(l0 < l1 && l1 <= cfg.n_layer, "SAF calibration: bad layer range [" + std::to_string(l0) + ", " +
                                          std::to_string(l1) + ")");
  const int H = cfg.n_head, hd = cfg.head_dim();
  const int T = int(opt_.seq_len);
  // Only softmax heads are measured (SAF replaces nothing else): the others' accumulators stay
  // empty, and a static head need not have Q/K columns at all.
  auto measured = [&](int l, int h) { return cfg.head_plan.layers[size_t(l)][size_t(h)].kind == attn::HeadKind::Softmax; };
  std::vector<HeadStatsAccumulator> acc;
  acc.reserve(size_t((l1 - l0) * H));
  for (int i = 0; i < (l1 - l0) * H; ++i) acc.emplace_back(T, opt_.needs);
  const bool logits_needed = acc.front().needs().logit_mean;
  const bool backend = opt_.path == CapturePath::Backend;
  // The reference path's float64 T x T buffers (one head at a time); the backend path computes
  // each head's attention band by band inside its accumulator (add_attention): no T x T at all.
  const size_t TT = size_t(T) * size_t(T);
  std::vector<double> probs(backend ? 0 : TT), logits(!backend && logits_needed ? TT : 0);
  double* lg = logits_needed && !backend ? logits.data() : nullptr;
  // Each batch passes layer l, and every head of l takes its samples (batches in order, rows in
  // order within a batch: the order a whole forward per batch gave).
  auto visit = [&](int l, size_t batch, const std::vector<float>& qkv) {
    const auto& lay = model_.layouts()[size_t(l)];
    const int64_t W = lay.qkv_width(), real = real_[batch];
    for (int h = 0; h < H; ++h)
      for (int64_t b = 0; b < real && measured(l, h); ++b) {
        const float* rows = qkv.data() + b * T * W;
        const float* q = rows + lay.q_col(h);
        const float* k = rows + lay.k_col(lay.kv_head_of(h));
        auto& a = acc[size_t((l - l0) * H + h)];
        if (backend) {
          a.add_attention(q, k, W, hd);
        } else {
          causal_attention(q, W, k, W, T, hd, lg, probs.data());
          a.add_sample(probs.data(), lg);
        }
      }
  };
  const double fwd0 = stream_->forward_seconds();
  const Stopwatch timer;
  stream_->advance(l1, visit);
  if (times) {
    const double fwd = stream_->forward_seconds() - fwd0;
    times->forward_seconds += fwd;
    times->host_seconds += timer.seconds() - fwd;
  }
  for (auto& a : acc) reduce_across_ranks(a, comm_);
  return acc;
}

std::vector<HeadStatsAccumulator> capture_layers(Model<float>& model, const CalibSource& source,
                                                 const CaptureOptions& opt, int l0, int l1, dist::Comm& comm,
                                                 CaptureTimes* times) {
  const auto& cfg = model.config();
  check_options(model, opt);
  check(0 <= l0 && l0 < l1 && l1 <= cfg.n_layer, "SAF calibration: bad layer range [" + std::to_string(l0) + ", " +
                                                      std::to_string(l1) + ")");
  CaptureStream stream(model, source, opt, comm);
  const Stopwatch timer;
  stream.skip_to(l0);
  if (times) times->forward_seconds += timer.seconds();
  return stream.capture(l1, times);
}

void reduce_across_ranks(HeadStatsAccumulator& acc, dist::Comm& comm) {
  if (comm.world() == 1) return;
  const PackedLayout at(acc);
  std::vector<double> buf(size_t(acc.packed_size()));
  acc.pack(buf.data());
  const double n_r = buf[0];
  const int64_t C = at.cells;
  const bool lm = at.logit_mean >= 0;
  // Pass 1: count, sum of A log A, and the count-weighted means.
  std::vector<double> sums(size_t(2 + C * (lm ? 2 : 1)));
  sums[0] = n_r;
  sums[1] = buf[4];
  for (int64_t c = 0; c < C; ++c) sums[size_t(2 + c)] = n_r * buf[size_t(at.mean + c)];
  if (lm)
    for (int64_t c = 0; c < C; ++c) sums[size_t(2 + C + c)] = n_r * buf[size_t(at.logit_mean + c)];
  comm.allreduce_sum(sums.data(), int64_t(sums.size()));
  const double n = sums[0];
  if (n == 0.0) return;  // no rank saw a sample
  // Pass 2: each rank's M2 corrected to the global mean, summed over ranks.
  const bool cm2 = at.cell_m2 >= 0, lm2 = at.logit_m2 >= 0;
  std::vector<double> m2(size_t(1 + (cm2 ? C : 0) + (lm2 ? C : 0)), 0.0);
  double total_corr = 0.0;
  for (int64_t c = 0; c < C; ++c) {
    const double d = buf[size_t(at.mean + c)] - sums[size_t(2 + c)] / n;
    total_corr += d * d;
    if (cm2) m2[size_t(1 + c)] = buf[size_t(at.cell_m2 + c)] + n_r * d * d;
  }
  m2[0] = buf[3] + n_r * total_corr;
  if (lm2) {
    const int64_t off = 1 + (cm2 ? C : 0);
    for (int64_t c = 0; c < C; ++c) {
      const double d = buf[size_t(at.logit_mean + c)] - sums[size_t(2 + C + c)] / n;
      m2[size_t(off + c)] = buf[size_t(at.logit_m2 + c)] + n_r * d * d;
    }
  }
  comm.allreduce_sum(m2.data(), int64_t(m2.size()));
  // Write the global state back through the packed form.
  buf[0] = n;
  buf[3] = m2[0];
  buf[4] = sums[1];
  for (int64_t c = 0; c < C; ++c) buf[size_t(at.mean + c)] = sums[size_t(2 + c)] / n;
  if (lm)
    for (int64_t c = 0; c < C; ++c) buf[size_t(at.logit_mean + c)] = sums[size_t(2 + C + c)] / n;
  if (cm2)
    for (int64_t c = 0; c < C; ++c) buf[size_t(at.cell_m2 + c)] = m2[size_t(1 + c)];
  if (lm2) {
    const int64_t off = 1 + (cm2 ? C : 0);
    for (int64_t c = 0; c < C; ++c) buf[size_t(at.logit_m2 + c)] = m2[size_t(off + c)];
  }
  acc.unpack(buf.data(), int64_t(buf.size()));
}

namespace {

// d loss / d gate_h for a gate of 1 on each head's output, per sequence: the sum over the
// sequence of <head output, its gradient>, read in backward: [layer][b * n_head + h].
class GateGradients : public AttentionObserver {
 public:
  GateGradients(int n_layer, int n_head) : H_(n_head), grads_(size_t(n_layer)) {}
  bool wants_backward() const override { return true; }
  void on_backward(const AttentionView& v) override {
    const auto& lay = *v.layout;
    const int64_t ow = lay.out_width(), hd = lay.head_dim;
    auto& gg = grads_[size_t(v.layer)];
    gg.assign(size_t(v.B * H_), 0.0);
    for (int64_t b = 0; b < v.B; ++b)
      for (int h = 0; h < H_; ++h) {
        if (lay.o_slot[size_t(h)] < 0) continue;
        double s = 0.0;
        for (int64_t t = 0; t < v.T; ++t) {
          const size_t row = size_t((b * v.T + t) * ow + lay.out_col(h));
          for (int64_t d = 0; d < hd; ++d) s += (*v.out)[row + size_t(d)] * (*v.dout)[row + size_t(d)];
        }
        gg[size_t(b * H_ + h)] = s;
      }
  }
  const std::vector<double>& of_layer(int l) const { return grads_[size_t(l)]; }

 private:
  int H_;
  std::vector<std::vector<double>> grads_;
};

}  // namespace

ScoreGrid gate_taylor_scores(Model<float>& model, const CalibSource& source, const CaptureOptions& opt,
                             dist::Comm& comm) {
  const auto& cfg = model.config();
  check_options(model, opt);
  const int L = cfg.n_layer, H = cfg.n_head;
  const int64_t T = opt.seq_len, B = opt.batch;
  const std::vector<int64_t> mine = rank_indices(opt.n_seqs, comm.rank(), comm.world());
  std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T));
  std::vector<double> sums(size_t(L * H + 1), 0.0);  // |d loss_seq / d gate| sums, then the sequence count

  // forward_backward accumulates into the gradient arena: keep its contents (on the host) to
  // put back.
  Arena& grads = model.grads();
  std::vector<unsigned char> saved(grads.bytes());
  if (!saved.empty()) model.ops().copy_to_host(saved.data(), grads.base(), saved.size());
  GateGradients gates(L, H);
  AttentionObserver* before = model.attention_observer();
  auto restore = [&] {
    model.set_attention_observer(before);
    if (!saved.empty()) model.ops().copy_to_device(grads.base(), saved.data(), saved.size());
  };
  model.set_attention_observer(&gates);
  try {
    for (size_t start = 0; start < mine.size(); start += size_t(B)) {
      const int64_t real = std::min<int64_t>(B, int64_t(mine.size() - start));
      fill_batch(source, mine, start, real, B, T, in, tg);
      std::vector<int64_t> counted(size_t(B), 0);
      int64_t total = 0;
      for (int64_t b = 0; b < real; ++b) {
        for (int64_t t = 0; t < T; ++t) counted[size_t(b)] += tg[size_t(b * T + t)] != -1;
        total += counted[size_t(b)];
      }
      if (total == 0) continue;
      model.forward_backward(in.data(), tg.data(), B, T, 1.0);
      // The batch loss is the mean over all counted targets, so d(batch loss)/d gate_b is
      // (n_b / total) d(loss_seq_b)/d gate_b.
      for (int64_t b = 0; b < real; ++b) {
        if (counted[size_t(b)] == 0) continue;
        const double scale = double(total) / double(counted[size_t(b)]);
        for (int l = 0; l < L; ++l)
          for (int h = 0; h < H; ++h)
            sums[size_t(l * H + h)] += std::abs(gates.of_layer(l)[size_t(b * H + h)]) * scale;
        sums.back() += 1.0;
      }
    }
  } catch (...) {
    restore();
    throw;
  }
  restore();
  comm.allreduce_sum(sums.data(), int64_t(sums.size()));
  check(sums.back() > 0, "SAF gate_taylor: no calibration sequence has a target to take a loss on");
  ScoreGrid raw(static_cast<size_t>(L), std::vector<double>(static_cast<size_t>(H)));
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) raw[size_t(l)][size_t(h)] = sums[size_t(l * H + h)] / sums.back();
  return raw;
}

}  // namespace hw::saf
