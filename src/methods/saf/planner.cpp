#include "headwise/methods/saf/planner.hpp"

#include <spdlog/spdlog.h>

#include <cmath>
#include <map>
#include <memory>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/methods/saf/fit.hpp"
#include "headwise/methods/saf/patterns.hpp"
#include "headwise/methods/saf/select.hpp"

namespace hw {

namespace {

// Independent streams derived from SAF's seed (calibration windows use the seed itself).
uint64_t derived_seed(uint64_t seed, data::Stream stream) { return data::derive_seed(seed, stream, 0); }

// What calibration leaves for one head once its T x T statistics are gone: its scores and
// the sufficient statistics of its target pattern (all the compact fit needs).
struct HeadSummary {
  double variance = 0.0, kl = 0.0;
  saf::Marginals target;
};

// Dense target pattern of one head from its statistics.
void target_pattern(const saf::HeadStatsAccumulator& acc, saf::PatternKind kind, uint64_t pattern_seed, int flat,
                    double* out) {
  Rng rng = saf::head_rng(pattern_seed, flat);
  switch (kind) {
    case saf::PatternKind::Mean: saf::mean_pattern(acc, out); return;
    case saf::PatternKind::SharpMean: saf::sharp_mean_pattern(acc, out); return;
    case saf::PatternKind::Gaussian: saf::gaussian_pattern(acc, rng, out); return;
    case saf::PatternKind::Dirichlet: saf::dirichlet_pattern(acc, rng, out); return;
    case saf::PatternKind::StructuredRandom: break;
  }
  fail("SAF: pattern '" + saf::pattern_name(kind) + "' has no dense target");
}

// (The fit's log_z is not kept: the model derives its own, for the rows a step reads.)
StaticHeadValues to_static(std::vector<double> alpha, std::vector<double> rho, int n_positions) {
  saf::pad_to_positions(alpha, rho, n_positions);
  StaticHeadValues v;
  v.alpha.assign(alpha.begin(), alpha.end());
  v.rho.assign(rho.begin(), rho.end());
  return v;
}

}  // namespace

SafPlanner::SafPlanner(const saf::SafConfig& cfg, const RunConfig& run, saf::CalibSource source)
    : cfg_(cfg), source_(std::move(source)), fire_step_(cfg.fire_step(run)) {
  calib_T_ = cfg_.calib_length(run);
  check(saf::parse_capture_path(cfg_.capture, cfg_.where + ".capture") == saf::CapturePath::Reference ||
            run.train.device != "cuda",
        cfg_.where + ".capture = \"backend\" needs the attention-probabilities op (attn::softmax_probabilities), "
                     "which the CUDA backend (train.device = \"cuda\") lacks; set " + cfg_.where +
            ".capture = \"reference\"");
  cfg_.check_fire_step(run);
  check(calib_T_ <= run.model.block_size, "method.calib_seq_len (" + std::to_string(calib_T_) +
                                               ") exceeds model.block_size (" +
                                               std::to_string(run.model.block_size) + ")");
  // Patterns fitted on T_c < train.seq_len positions would be extrapolated (extend_to_positions)
  // to positions the calibration never saw: an error, unless the planner has no data of its own
  // (convert, mqar: the caller hands sequences to act(), whose length counts).
  const bool has_data = source_ || !run.data.calib.empty() || !run.data.val.empty();
  check(!has_data || calib_T_ >= run.train.seq_len,
        cfg_.where + ".calib_seq_len (" + std::to_string(calib_T_) + ") is shorter than train.seq_len (" +
            std::to_string(run.train.seq_len) + "): the fixed patterns would be extrapolated to positions " +
            "calibration never saw; use calib_seq_len = 0 (train.seq_len) or >= train.seq_len");
  if (!source_) {
    // Opened at the first act: building a planner (config validation, experiments) reads no data.
    // A training run must name its calibration data up front; a caller without any data
    // (headwise mqar, convert) hands sequences to act() instead, or meets this error there.
    const std::string glob = !run.data.calib.empty() ? run.data.calib : run.data.val;
    // data.val_split = "halves": calibration on data.val reads its first half (evaluation the second).
    const data::Part part = run.data.val_split == "halves" && glob == run.data.val ? data::Part::FirstHalf
                                                                                   : data::Part::All;
    const std::string no_data = "method.name = \"saf\" needs calibration data: set data.calib (or data.val)";
    check(!glob.empty() || run.data.train.empty(), no_data);
    const int64_t T = calib_T_;
    const uint64_t seed = cfg_.stream_seed(run);
    auto sampler = std::make_shared<std::unique_ptr<data::CalibSampler>>();
    source_ = [sampler, glob, T, seed, part, no_data](int64_t i, int32_t* x, int32_t* y) {
      check(!glob.empty(), no_data);
      if (!*sampler) *sampler = std::make_unique<data::CalibSampler>(glob, T, seed, part);
      (*sampler)->fetch(i, x, y);
    };
  }
}

std::optional<PlanChange> SafPlanner::act(PlannerContext& ctx) {
  Model<float>& model = ctx.model;
  const ModelConfig& mc = model.config();
  const saf::SafConfig& m = cfg_;
  // Sequences the caller hands over replace the configured calibration data.
  const saf::CalibSource& source = ctx.calibration ? ctx.calibration->fetch : source_;
  const int L = mc.n_layer, H = mc.n_head, T = int(ctx.calibration ? ctx.calibration->seq_len : calib_T_);
  check(T >= 1 && T <= mc.block_size, "SAF: calibration length " + std::to_string(T) + " is outside [1, model.block_size = " +
                                          std::to_string(mc.block_size) + "]");
  const saf::Selector selector = saf::parse_selector(m.selector);
  const saf::PatternKind pattern = saf::parse_pattern(m.pattern);
  const bool freeze = m.mode == "freeze";
  const uint64_t seed = m.stream_seed(ctx.cfg), pattern_seed = derived_seed(seed, data::Stream::SafPattern);
  // SAF acts on the heads still softmax and leaves every other kind as it is (an earlier SAF's
  // static heads: progressive freezing; another method's heads). `ratio_of` says what the ratio counts.
  const saf::Candidates cand = saf::softmax_candidates(mc.head_plan, m.ratio, m.ratio_of);

  saf::CaptureOptions opt;
  opt.n_seqs = m.calib_seqs;
  opt.seq_len = T;
  opt.batch = ctx.cfg.train.micro_batch;  // the training shape: no activation re-allocation
  opt.needs = saf::needs_for(pattern);
  opt.needs.kl = true;
  opt.path = saf::parse_capture_path(m.capture, m.where + ".capture");  // the forward-KL score is reported for every head (one extra pass of A log A)
  const bool fitted = saf::pattern_is_fitted(pattern);
  // Gate-Taylor pruning needs no attention statistics; everything else ranks or fits with them.
  const bool need_stats = selector != saf::Selector::GateTaylor || freeze;

  // 1. Calibration: statistics per group of layers, reduced to scores and target marginals.
  const Stopwatch capture_time;
  std::vector<HeadSummary> summary(size_t(L * H));
  const int group = saf::layers_per_group(L, H, T, opt.needs, m.memory_budget_mb);
  int replays = 0;
  saf::CaptureTimes capture_times;
  size_t stream_bytes = 0;
  if (need_stats) {
    // A dense T x T target only for the patterns that are not the mean itself (the mean's
    // marginals come straight from the packed triangle).
    const bool dense_target = fitted && pattern != saf::PatternKind::Mean;
    std::vector<double> dense(dense_target ? size_t(T) * size_t(T) : 0);
    // One forward per batch in all: the batches stop at each group's end and go on from there.
    saf::CaptureStream stream(model, source, opt, ctx.comm);
    for (int l0 = 0; l0 < L; l0 += group) {
      const int l1 = std::min(L, l0 + group);
      stream_bytes = std::max(stream_bytes, stream.held_bytes());
      const auto acc = stream.capture(l1, &capture_times);
      ++replays;
      for (int l = l0; l < l1; ++l)
        for (int h = 0; h < H; ++h) {
          if (!cand.allows(l * H + h)) continue;  // not measured: scores 0, never selected
          const auto& a = acc[size_t((l - l0) * H + h)];
          HeadSummary& s = summary[size_t(l * H + h)];
          s.variance = a.variance_score();
          if (opt.needs.kl) s.kl = a.kl_score();
          if (dense_target) {
            target_pattern(a, pattern, pattern_seed, l * H + h, dense.data());
            s.target = saf::marginals(dense.data(), T);
          } else if (fitted) {
            s.target = saf::marginals_packed(a.mean_packed().data(), T);
          }
        }
    }
  }
  saf::ScoreGrid gate_raw;
  if (selector == saf::Selector::GateTaylor) gate_raw = saf::gate_taylor_scores(model, source, opt, ctx.comm);
  const double capture_seconds = capture_time.seconds();

  // 2. Selection through the KL-gated compact fit (fits cached: the random control reuses them).
  const Stopwatch select_time;
  double fit_seconds = 0.0;
  std::map<int, saf::CompactFit> fits;
  saf::FitOptions fo;
  fo.steps = int(m.fit_steps);
  fo.lr = m.fit_lr;
  auto fit_of = [&](int l, int h) -> const saf::CompactFit& {
    const int flat = l * H + h;
    auto it = fits.find(flat);
    if (it != fits.end()) return it->second;
    const Stopwatch fit_time;
    saf::CompactFit f = saf::fit_compact(summary[size_t(flat)].target, fo);
    fit_seconds += fit_time.seconds();
    return fits.emplace(flat, std::move(f)).first->second;
  };
  saf::FitGate gate;
  if (fitted) gate = [&](int l, int h) { return fit_of(l, h).kl; };
  saf::ScoreGrid var_grid(static_cast<size_t>(L), std::vector<double>(static_cast<size_t>(H)));
  saf::ScoreGrid kl_grid = var_grid;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      var_grid[size_t(l)][size_t(h)] = summary[size_t(l * H + h)].variance;
      kl_grid[size_t(l)][size_t(h)] = summary[size_t(l * H + h)].kl;
    }
  saf::Selection sel;
  nlohmann::json variance_selection;
  switch (selector) {
    case saf::Selector::Variance:
      sel = saf::select_by_score(selector, var_grid, m.ratio, gate, m.max_kl, cand);
      break;
    case saf::Selector::KL:
      sel = saf::select_by_score(selector, kl_grid, m.ratio, gate, m.max_kl, cand);
      break;
    case saf::Selector::Random: {
      const saf::Selection v = saf::select_by_score(saf::Selector::Variance, var_grid, m.ratio, gate, m.max_kl, cand);
      variance_selection = v.to_json()["selected"];
      sel = saf::select_random(v, derived_seed(seed, data::Stream::SafRandomSelect), gate, m.max_kl, cand);
      break;
    }
    case saf::Selector::GateTaylor:
      sel = saf::select_gate_taylor(gate_raw, m.ratio, cand);
      break;
  }
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      auto& scores = sel.record(l, h).scores;
      if (!cand.allows(l * H + h)) continue;  // another kind: not measured
      if (need_stats) scores.emplace("variance", summary[size_t(l * H + h)].variance);
      if (need_stats && opt.needs.kl) scores.emplace("kl", summary[size_t(l * H + h)].kl);
    }

  const double select_seconds = select_time.seconds() - fit_seconds;

  // 3. The new plan and the static heads' values.
  const Stopwatch values_time;
  const double fit_before_values = fit_seconds;
  PlanChange change;
  change.plan = mc.head_plan;
  saf::mark_in_plan(change.plan, sel, freeze ? attn::HeadKind::Static : attn::HeadKind::Pruned);
  if (freeze)
    for (const auto& [l, h] : sel.heads) {
      std::vector<double> alpha, rho;
      if (fitted) {
        const saf::CompactFit& f = fit_of(l, h);
        alpha = f.alpha;
        rho = f.rho;
        saf::HeadRecord& r = sel.record(l, h);
        if (!r.tried) {  // ungated selectors (gate_taylor): still report how well the pattern fits
          r.tried = true;
          r.fit_kl = f.kl;
        }
      } else {
        Rng rng = saf::head_rng(pattern_seed, l * H + h);
        saf::structured_random(T, rng, alpha, rho);
      }
      change.extras.statics[{l, h}] = to_static(std::move(alpha), std::move(rho), mc.block_size);
    }

  // Fits first met here (ungated selectors) count as fit time; the rest is the values' own.
  const double values_seconds = values_time.seconds() - (fit_seconds - fit_before_values);

  // 4. Every rank must install the same change.
  std::vector<float> blob;
  for (const auto& [l, h] : sel.heads) {
    blob.push_back(float(l));
    blob.push_back(float(h));
  }
  for (const auto& [key, v] : change.extras.statics) {
    blob.insert(blob.end(), v.alpha.begin(), v.alpha.end());
    blob.insert(blob.end(), v.rho.begin(), v.rho.end());
  }
  check(ctx.comm.all_equal(blob.data(), int64_t(blob.size() * sizeof(float))),
        "SAF at step " + std::to_string(ctx.step) + ": data-parallel ranks disagree on the selected heads or their "
        "fitted alpha/rho (rank " + std::to_string(ctx.comm.rank()) + " differs from rank 0)");

  change.report = sel.to_json();
  change.report["method"] = "saf";
  change.report["mode"] = m.mode;
  change.report["ratio_of"] = m.ratio_of;
  change.report["pattern"] = m.pattern;
  change.report["calib_seqs"] = m.calib_seqs;
  change.report["calib_seq_len"] = T;
  change.report["calib_batch"] = opt.batch;
  change.report["seed"] = seed;
  change.report["layers_per_group"] = need_stats ? nlohmann::json(group) : nlohmann::json(nullptr);
  change.report["calibration_replays"] = replays;
  change.report["fits"] = fits.size();
  change.report["capture_seconds"] = capture_seconds;
  change.report["fit_seconds"] = fit_seconds;
  // Of capture_seconds: the model's forwards, and each head's attention (method.capture's path) and moments.
  change.report["capture_forward_seconds"] = capture_times.forward_seconds;
  change.report["capture_host_seconds"] = capture_times.host_seconds;
  change.report["capture"] = m.capture;
  change.report["calibration_stream_bytes"] = stream_bytes;
  // Where the time went, in order (convert prints these).
  change.report["stages"] = nlohmann::json::array(
      {{{"stage", "calibration"}, {"seconds", capture_seconds}, {"windows", need_stats || selector == saf::Selector::GateTaylor ? m.calib_seqs : 0}},
       {{"stage", "selection"}, {"seconds", select_seconds}},
       {{"stage", "fit"}, {"seconds", fit_seconds + values_seconds}}});
  if (!variance_selection.is_null()) change.report["variance_selection"] = variance_selection;
  if (sel.shortfall() > 0)
    spdlog::warn("SAF: only {} of {} heads passed the KL gate (max_kl {})", sel.heads.size(), sel.requested, m.max_kl);
  spdlog::info("SAF ({} selector, {} pattern, {}): {} heads, capture {:.2f} s, fit {:.2f} s", m.selector, m.pattern,
               m.mode, sel.heads.size(), capture_seconds, fit_seconds);
  return change;
}

}  // namespace hw
