#include "headwise/methods/oal/planner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/dist/comm.hpp"

namespace hw {

namespace {

// A lazily opened calibration stream of T-token windows from `glob`.
oal::SequenceSource window_source(const std::string& glob, int64_t T, uint64_t seed, data::Part part) {
  auto sampler = std::make_shared<std::unique_ptr<data::CalibSampler>>();
  return [sampler, glob, T, seed, part](int64_t i, int32_t* x, int32_t* y) {
    check(!glob.empty(), "method.name = \"oal\" needs calibration data: set data.calib (or data.val), or pass "
                         "--calib GLOB to convert");
    if (!*sampler) *sampler = std::make_unique<data::CalibSampler>(glob, T, seed, part);
    (*sampler)->fetch(i, x, y);
  };
}

}  // namespace

OalPlanner::OalPlanner(const oal::OalConfig& cfg, const RunConfig& run) : cfg_(cfg) {
  cfg_.check_run(run);
  const std::string glob = !run.data.calib.empty() ? run.data.calib : run.data.val;
  const data::Part part =
      run.data.val_split == "halves" && glob == run.data.val ? data::Part::FirstHalf : data::Part::All;
  const uint64_t seed = cfg_.stream_seed(run);
  own_.stats_T = cfg_.stats_length(run);
  own_.calib_T = cfg_.calib_length(run);
  own_.stats = window_source(glob, own_.stats_T, data::derive_seed(seed, data::Stream::OalCalibration, 0), part);
  own_.calib = window_source(glob, own_.calib_T, data::derive_seed(seed, data::Stream::OalCalibration, 1), part);
}

std::optional<PlanChange> OalPlanner::act(PlannerContext& ctx) {
  Model<float>& model = ctx.model;
  const ModelConfig& mc = model.config();
  const std::vector<int> layers = cfg_.layers(mc.n_layer);
  // OAL converts the heads of its layers that are still softmax and leaves every other kind (an
  // earlier method's static, window, sink_window or linear heads) as it is.
  int n_softmax = 0;
  for (int l : layers)
    for (int h = 0; h < mc.n_head; ++h) n_softmax += mc.head_plan.layers[size_t(l)][size_t(h)].kind == attn::HeadKind::Softmax;
  // Adapters the model already has (an earlier OAL's) are kept when they are the ones asked for.
  const bool add_adapters = cfg_.adapters().enabled() && !(mc.lora.enabled() && mc.lora == cfg_.adapters());
  check(!add_adapters || !mc.lora.enabled(),
        cfg_.where + ".lora_rank: the model already has other LoRA adapters (" + mc.lora.to_json().dump() +
            "; merge them first, ask for the same ones, or set lora_rank = 0)");
  if (n_softmax == 0) {
    spdlog::info("OAL: no softmax head left in layers {}; the plan is kept", nlohmann::json(layers).dump());
    return std::nullopt;
  }

  if (cfg_.kernel_kind() != oal::KernelKind::Oal) return baseline_change(ctx, layers);

  // Sequences handed over by the caller replace the configured data: prompts first, then the
  // fit and validation sequences, all of the caller's length.
  oal::Sources src = own_;
  if (ctx.calibration) {
    const CalibrationSequences* cs = ctx.calibration;
    const int64_t P = cfg_.stats_prompts;
    src.stats = cs->fetch;
    src.calib = [cs, P](int64_t i, int32_t* x, int32_t* y) { cs->fetch(P + i, x, y); };
    src.stats_T = src.calib_T = cs->seq_len;
  }
  const uint64_t seed = cfg_.stream_seed(ctx.cfg);
  const int batch = int(std::max<int64_t>(1, ctx.cfg.train.micro_batch));
  const oal::PipelineResult res = oal::run_pipeline(model, cfg_, src, seed, batch);

  PlanChange change;
  change.plan = mc.head_plan;
  double sum_global = 0, sum_kernel = 0, sum_taylor = 0;
  std::vector<float> blob;
  for (const auto& r : res.heads) {
    change.plan.layers[size_t(r.layer)][size_t(r.head)] = attn::HeadSpec{attn::HeadKind::Linear};
    LinearHeadValues v;
    const oal::GroupedKernel& k = r.calibration.kernel.kernel;
    v.n_groups = k.G;
    v.L.assign(k.L.begin(), k.L.end());
    v.groups = k.groups;
    blob.insert(blob.end(), v.L.begin(), v.L.end());
    change.extras.linears[{r.layer, r.head}] = std::move(v);
    sum_global += r.calibration.global.val_mse;
    sum_kernel += r.calibration.kernel.val_mse;
    sum_taylor += r.calibration.taylor_val_mse;
  }
  check(ctx.comm.all_equal(blob.data(), int64_t(blob.size() * sizeof(float))),
        "OAL at step " + std::to_string(ctx.step) + ": data-parallel ranks disagree on the fitted L (rank " +
            std::to_string(ctx.comm.rank()) + " differs from rank 0)");
  if (add_adapters) change.adapters = cfg_.adapters();

  const double n = double(std::max<size_t>(1, res.heads.size()));
  change.report = res.to_json();
  change.report["method"] = "oal";
  change.report["grouping"] = cfg_.grouping;
  change.report["seed"] = seed;
  change.report["stats_seq_len"] = src.stats_T;
  change.report["calib_seq_len"] = src.calib_T;
  change.report["mean_val_mse"] = {{"taylor", sum_taylor / n}, {"global", sum_global / n}, {"oal", sum_kernel / n}};
  change.report["adapters"] = change.adapters ? change.adapters->to_json() : nlohmann::json(nullptr);
  // Where the time went, in order (convert prints these): the prompts' contribution statistics
  // and groupings, then L's fits on the fit and validation sequences (their forwards included).
  change.report["stages"] = nlohmann::json::array(
      {{{"stage", "statistics"}, {"seconds", res.stats_seconds}, {"windows", cfg_.stats_prompts}},
       {{"stage", "fit"}, {"seconds", res.calib_seconds}, {"windows", cfg_.fit_seqs + cfg_.val_seqs}}});
  spdlog::info("OAL ({} grouping): {} heads of layers {} linear; validation MSE taylor {:.4g}, global {:.4g}, oal {:.4g}; "
               "stats {:.2f} s, calibration {:.2f} s",
               cfg_.grouping, res.heads.size(), nlohmann::json(layers).dump(), sum_taylor / n, sum_global / n,
               sum_kernel / n, res.stats_seconds, res.calib_seconds);
  return change;
}

// A baseline kernel: the chosen heads become that kind with its starting values
// (baselines.hpp) and the same adapters; nothing is calibrated, so no data is read.
PlanChange OalPlanner::baseline_change(PlannerContext& ctx, const std::vector<int>& layers) const {
  const ModelConfig& mc = ctx.model.config();
  const oal::KernelKind kind = cfg_.kernel_kind();
  const uint64_t seed = cfg_.stream_seed(ctx.cfg);
  PlanChange change;
  change.plan = mc.head_plan;
  nlohmann::json heads = nlohmann::json::array();
  for (int l : layers)
    for (int h = 0; h < mc.n_head; ++h) {
      if (mc.head_plan.layers[size_t(l)][size_t(h)].kind != attn::HeadKind::Softmax) continue;  // kept
      const oal::BaselineHead b =
          oal::baseline_head(kind, mc.head_dim(), int(cfg_.performer_features), seed, l, h, mc.n_head);
      change.plan.layers[size_t(l)][size_t(h)] = b.spec();
      b.add_to(change.extras, l, h);
      heads.push_back({{"layer", l}, {"head", h}, {"kind", b.spec().str()}});
    }
  if (cfg_.adapters().enabled() && !(mc.lora.enabled() && mc.lora == cfg_.adapters())) change.adapters = cfg_.adapters();
  change.report = {{"method", "oal"},
                   {"kernel", oal::kernel_name(kind)},
                   {"layers", layers},
                   {"heads", heads},
                   {"seed", seed},
                   {"adapters", change.adapters ? change.adapters->to_json() : nlohmann::json(nullptr)}};
  spdlog::info("OAL (kernel {}): {} heads of layers {} converted, not calibrated", oal::kernel_name(kind), heads.size(),
               nlohmann::json(layers).dump());
  return change;
}

}  // namespace hw
